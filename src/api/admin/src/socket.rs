//! The local admin socket, `<metadata_dir>/admin.sock` (mode 0600: whoever
//! can use it could read the node's files anyway): one JSON [`Request`]
//! line in, one JSON [`Response`] line out, run by the same [`AdminOps`]
//! as the HTTP API.

use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;

use crate::http_api::MAX_BODY;
use crate::ops::AdminOps;
use crate::proto::{AdminError, Request, Response};

/// Serves the admin socket at `path` until the returned task is dropped
/// with the runtime.
pub async fn serve<H: AdminOps>(
    path: &Path,
    ops: Arc<H>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    // A socket left by a previous run (kill -9) would make bind fail.
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("admin socket accept: {e}");
                    continue;
                }
            };
            let ops = ops.clone();
            tokio::spawn(async move {
                let (r, mut w) = stream.into_split();
                let mut line = String::new();
                let mut reader = BufReader::new(r).take(MAX_BODY as u64);
                if reader.read_line(&mut line).await.is_err() {
                    return;
                }
                let resp = match serde_json::from_str::<Request>(&line) {
                    Ok(req) => match ops.call(req).await {
                        Ok(v) => Response::Ok(v),
                        Err(e) => Response::Error(e),
                    },
                    Err(e) => {
                        Response::Error(AdminError::bad(format!("malformed admin request: {e}")))
                    }
                };
                let mut out = serde_json::to_vec(&resp).expect("responses encode");
                out.push(b'\n');
                let _ = w.write_all(&out).await;
            });
        }
    }))
}
