//! Helpers shared by the mesh integration tests: nodes on 127.0.0.1 with
//! ephemeral ports, short timings, and a few test endpoints.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hangar_net::{
    Body, Handler, HandlerError, Mesh, MeshConfig, NodeId, PeerStatus, Request, Response,
};
use tokio::sync::Notify;

pub const SECRET: [u8; 32] = [42; 32];

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hangar_net=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Test settings: pings every 200 ms with a 1 s deadline.
pub fn test_config(dir: &Path, secret: [u8; 32], bind: SocketAddr) -> MeshConfig {
    let mut cfg = MeshConfig::new(secret, bind, dir.to_path_buf());
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    cfg
}

pub async fn start_node(dir: &Path) -> Mesh {
    Mesh::start(test_config(dir, SECRET, "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap()
}

/// Polls `f` every 20 ms until it holds or `limit` passes; returns how long
/// it took, or None.
pub async fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

pub fn status_of(mesh: &Mesh, id: NodeId) -> Option<PeerStatus> {
    mesh.peer_status().into_iter().find(|p| p.id == id)
}

pub fn is_up(mesh: &Mesh, id: NodeId) -> bool {
    status_of(mesh, id).is_some_and(|p| p.is_up && p.connected)
}

/// Echoes the message and streams the request body back.
pub struct Echo;

#[async_trait]
impl Handler<String, String> for Echo {
    async fn handle(&self, req: Request<String>) -> Result<Response<String>, HandlerError> {
        Ok(match req.body {
            Some(body) => Response::with_body(req.msg, body),
            None => Response::new(req.msg),
        })
    }
}

/// Never answers until released.
pub struct Stall(pub Arc<Notify>);

#[async_trait]
impl Handler<u32, u32> for Stall {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u32>, HandlerError> {
        self.0.notified().await;
        Ok(Response::new(req.msg))
    }
}

/// Reads the whole body and answers with its length.
pub struct Sink;

#[async_trait]
impl Handler<u32, u64> for Sink {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u64>, HandlerError> {
        let len = match req.body {
            Some(body) => body
                .collect(usize::MAX)
                .await
                .map_err(HandlerError::new)?
                .len(),
            None => 0,
        };
        Ok(Response::new(len as u64))
    }
}

/// A body of `chunks` chunks of `chunk` bytes, generated lazily.
pub fn lazy_body(chunks: usize, chunk: usize) -> Body {
    let data = bytes::Bytes::from(vec![7u8; chunk]);
    Body::from_stream(futures::stream::iter(
        (0..chunks).map(move |_| Ok(data.clone())),
    ))
}
