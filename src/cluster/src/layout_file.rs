//! The layout history on disk: `metadata_dir/cluster_layout`, the
//! MessagePack encoding of `hangar_layout::LayoutHistory` (doc/layout.md §6),
//! replaced atomically on every change.

use std::io::Write;
use std::path::{Path, PathBuf};

use hangar_layout::LayoutHistory;

/// File name of the layout history inside `metadata_dir`.
pub const LAYOUT_FILE: &str = "cluster_layout";

/// Why the stored layout cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LayoutFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid layout history: {source}")]
    Decode {
        path: PathBuf,
        source: hangar_layout::LayoutError,
    },
    #[error(
        "{path} holds a cluster layout with replication factor {stored}, but this node's config says replication_factor = {configured}; a node cannot change the cluster's replication factor (put the old value back, or give this node a new metadata_dir to join another cluster)"
    )]
    ReplicationFactor {
        path: PathBuf,
        stored: usize,
        configured: usize,
    },
}

/// Loads the history from `metadata_dir`, or creates (and writes) an empty
/// one with `replication_factor` on first start. Refuses a stored history
/// whose replication factor is not the configured one.
pub fn load_or_create(
    metadata_dir: &Path,
    replication_factor: usize,
) -> Result<LayoutHistory, LayoutFileError> {
    let path = metadata_dir.join(LAYOUT_FILE);
    let io = |source| LayoutFileError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read(&path) {
        Ok(bytes) => {
            let h = LayoutHistory::decode(&bytes).map_err(|source| LayoutFileError::Decode {
                path: path.clone(),
                source,
            })?;
            if h.check_replication_factor(replication_factor).is_err() {
                return Err(LayoutFileError::ReplicationFactor {
                    path,
                    stored: h.replication_factor,
                    configured: replication_factor,
                });
            }
            Ok(h)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let h = LayoutHistory::new(replication_factor);
            save(metadata_dir, &h)?;
            tracing::info!(
                "new cluster layout history (replication factor {replication_factor}) in {}",
                path.display()
            );
            Ok(h)
        }
        Err(e) => Err(io(e)),
    }
}

/// Writes the history durably: a temporary file, fsync, rename over the old
/// file, fsync of the directory. A crash leaves the old or the new file.
pub fn save(metadata_dir: &Path, history: &LayoutHistory) -> Result<(), LayoutFileError> {
    let path = metadata_dir.join(LAYOUT_FILE);
    let tmp = metadata_dir.join(format!("{LAYOUT_FILE}.tmp"));
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| LayoutFileError::Io { path: p, source }
    };
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(&history.encode()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    std::fs::File::open(metadata_dir)
        .and_then(|d| d.sync_all())
        .map_err(io(metadata_dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_then_reloaded_and_other_rf_refused() {
        let dir = std::env::temp_dir().join(format!("hangar-layout-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let h = load_or_create(&dir, 3).unwrap();
        assert_eq!(h, LayoutHistory::new(3));
        assert_eq!(load_or_create(&dir, 3).unwrap(), h);
        let err = load_or_create(&dir, 2).unwrap_err().to_string();
        assert!(err.contains("replication factor 3"), "{err}");
        assert!(err.contains("replication_factor = 2"), "{err}");
        std::fs::write(dir.join(LAYOUT_FILE), b"garbage").unwrap();
        assert!(matches!(
            load_or_create(&dir, 3),
            Err(LayoutFileError::Decode { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
