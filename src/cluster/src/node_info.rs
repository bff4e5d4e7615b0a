//! What a node tells its peers about itself for `hangar status`: its
//! hostname and how much room is left on its data and metadata disks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Free and total bytes of the file systems under some directories.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSpace {
    /// Bytes an unprivileged process can still write (`f_bavail`).
    pub avail: u64,
    pub total: u64,
}

/// A node's self-description, sent with every layout exchange.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub hostname: String,
    /// Summed over the writable data directories, each file system once;
    /// `None` when none of them could be measured.
    pub data_disk: Option<DiskSpace>,
    pub metadata_disk: Option<DiskSpace>,
}

/// Measures this node: hostname from `uname`, disks with `statvfs`.
pub fn local_info(data_dirs: &[PathBuf], metadata_dir: &Path) -> NodeInfo {
    let uname = rustix::system::uname();
    NodeInfo {
        hostname: uname.nodename().to_string_lossy().into_owned(),
        data_disk: space_of(data_dirs),
        metadata_disk: space_of(std::slice::from_ref(&metadata_dir.to_path_buf())),
    }
}

fn space_of(dirs: &[PathBuf]) -> Option<DiskSpace> {
    let mut seen = BTreeSet::new();
    let mut sum: Option<DiskSpace> = None;
    for d in dirs {
        let Ok(st) = rustix::fs::statvfs(d) else {
            continue;
        };
        // Several directories on one file system share its free space.
        if !seen.insert(st.f_fsid) {
            continue;
        }
        let s = sum.get_or_insert_default();
        s.avail += st.f_bavail * st.f_frsize;
        s.total += st.f_blocks * st.f_frsize;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_this_machine() {
        let tmp = std::env::temp_dir();
        let info = local_info(&[tmp.clone(), tmp.clone()], &tmp);
        assert!(!info.hostname.is_empty());
        let d = info.data_disk.expect("temp dir measured");
        assert!(d.total > 0 && d.avail <= d.total);
        // The same file system twice counts once. Only its size is
        // compared: other processes (tests run in parallel) write to the
        // temp dir between the two readings, so the free space may move.
        let m = info.metadata_disk.expect("temp dir measured");
        assert_eq!(d.total, m.total);
        assert_eq!(space_of(&[tmp.join("does-not-exist")]), None);
    }
}
