//! How many block files a node stores and their bytes on disk, kept exact
//! without walking the data directories on every scrape.
//!
//! One walk at start (the orphan scan's, [`crate::scan`]) counts the files
//! already there; from then on every file this node creates, deletes or
//! quarantines moves the totals. The walk and the file operations share a
//! lock per first hash byte (the `ab/` directory of every data directory):
//! the walk lists a directory under its lock and marks it walked, and an
//! operation changes a file and, if its directory was walked already,
//! the totals, under the same lock. So each file is counted once, by the
//! walk or by its operation, whatever runs concurrently.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hangar_util::Hash;

const STRIPES: usize = 256;

/// The totals of one node's block files.
#[derive(Debug)]
pub struct StoreTally {
    /// Per first hash byte: whether the walk counted that directory yet.
    walked: Vec<Mutex<bool>>,
    walked_count: AtomicUsize,
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Default for StoreTally {
    fn default() -> Self {
        StoreTally {
            walked: (0..STRIPES).map(|_| Mutex::new(false)).collect(),
            walked_count: AtomicUsize::new(0),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }
}

/// Files and bytes stored, once the start walk has counted every directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub blocks: u64,
    pub bytes: u64,
}

impl StoreTally {
    /// The totals; `None` until the start walk has finished.
    pub fn stored(&self) -> Option<Stored> {
        (self.walked_count.load(Ordering::Acquire) == STRIPES).then(|| Stored {
            blocks: self.files.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        })
    }

    /// Runs `op`, a change to block `hash`'s files, under its directory's
    /// lock; `op` returns how many files (and bytes) it added (positive)
    /// or removed (negative), which count once that directory was walked.
    pub(crate) fn change<T>(&self, hash: &Hash, op: impl FnOnce() -> (T, i64, i64)) -> T {
        let walked = self.walked[hash.as_bytes()[0] as usize]
            .lock()
            .expect("tally lock");
        let (r, files, bytes) = op();
        if *walked {
            add(&self.files, files);
            add(&self.bytes, bytes);
        }
        r
    }

    /// Walks `dirs` (`ab/cd/<hex>[.zst]`), counting every block file and
    /// returning their hashes. Run once, at start.
    pub(crate) fn walk(&self, dirs: &[PathBuf]) -> Vec<Hash> {
        let mut out = Vec::new();
        for (stripe, lock) in self.walked.iter().enumerate() {
            let mut walked = lock.lock().expect("tally lock");
            let (mut files, mut bytes) = (0u64, 0u64);
            for d in dirs {
                for l2 in entries(&d.join(format!("{stripe:02x}"))) {
                    for f in entries(&l2.path()) {
                        let name = f.file_name();
                        let name = name.to_string_lossy();
                        let Some(h) = Hash::from_hex(name.strip_suffix(".zst").unwrap_or(&name))
                        else {
                            continue;
                        };
                        out.push(h);
                        files += 1;
                        bytes += f.metadata().map_or(0, |m| m.len());
                    }
                }
            }
            if !*walked {
                *walked = true;
                self.files.fetch_add(files, Ordering::Relaxed);
                self.bytes.fetch_add(bytes, Ordering::Relaxed);
                self.walked_count.fetch_add(1, Ordering::Release);
            }
        }
        out
    }
}

fn entries(p: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(p).into_iter().flatten().flatten()
}

fn add(a: &AtomicU64, d: i64) {
    if d >= 0 {
        a.fetch_add(d as u64, Ordering::Relaxed);
    } else {
        // Never below zero, even if a file vanished behind our back.
        let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(d.unsigned_abs()))
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::BlockFiles;
    use hangar_util::Hash;

    #[test]
    fn counts_each_file_once_whether_the_walk_or_an_operation_saw_it() {
        let d = tempfile::tempdir().unwrap();
        let files = BlockFiles::new(vec![d.path().to_owned()], Some(1), false, true).unwrap();
        let old = vec![7u8; 10_000];
        let old_h = Hash::of(&old);
        let stored_old = files.write(&old_h, &old).unwrap().stored_len;
        assert_eq!(files.tally().stored(), None, "unknown until the walk");
        assert_eq!(files.tally().walk(files.dirs()), vec![old_h]);
        let s = files.tally().stored().unwrap();
        assert_eq!((s.blocks, s.bytes), (1, stored_old));
        // A second walk counts nothing twice.
        files.tally().walk(files.dirs());
        assert_eq!(files.tally().stored().unwrap().blocks, 1);

        let new: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let new_h = Hash::of(&new);
        let stored_new = files.write(&new_h, &new).unwrap().stored_len;
        files.write(&new_h, &new).unwrap(); // already there: not added
        let s = files.tally().stored().unwrap();
        assert_eq!((s.blocks, s.bytes), (2, stored_old + stored_new));
        files.quarantine(&old_h).unwrap();
        files.delete(&new_h).unwrap();
        files.delete(&new_h).unwrap(); // gone already: not removed twice
        let s = files.tally().stored().unwrap();
        assert_eq!((s.blocks, s.bytes), (0, 0));
    }
}
