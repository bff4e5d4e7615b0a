//! Block files on disk.
//!
//! A block with hash `h` (hex `abcd…`) lives in `<data_dir>/ab/cd/abcd…`, or
//! `…/abcd….zst` when stored compressed; see `doc/block-files.md`. Files are
//! written to a temporary name and renamed into place, so a reader never sees
//! a partial block and a crash leaves at worst a stray temporary file.

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use hangar_util::Hash;

use crate::{BlockError, Result};

/// How a block was found or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlock {
    /// Bytes the block occupies on disk.
    pub stored_len: u64,
    /// Whether the file is zstd-compressed.
    pub compressed: bool,
    /// Whether this call wrote the file (false: it was already there).
    pub written: bool,
}

/// The block files of one node.
#[derive(Debug, Clone)]
pub struct BlockFiles {
    dirs: Vec<PathBuf>,
    compression_level: Option<i32>,
    fsync: bool,
    verify_on_read: bool,
}

impl BlockFiles {
    /// Block files in `dirs` (the first writable directories listed in
    /// `data_dir`), compressed at `compression_level` (`None`: never).
    pub fn new(
        dirs: Vec<PathBuf>,
        compression_level: Option<i32>,
        fsync: bool,
        verify_on_read: bool,
    ) -> Result<Self> {
        assert!(!dirs.is_empty(), "at least one data directory");
        for d in &dirs {
            std::fs::create_dir_all(d).map_err(|e| BlockError::io(d, e))?;
        }
        Ok(BlockFiles {
            dirs,
            compression_level,
            fsync,
            verify_on_read,
        })
    }

    fn dir_of(&self, hash: &Hash) -> PathBuf {
        // Spread blocks over the data directories by hash; the hash is uniform.
        let b = hash.as_bytes();
        let d = &self.dirs[(u16::from_be_bytes([b[2], b[3]]) as usize) % self.dirs.len()];
        d.join(format!("{:02x}", b[0]))
            .join(format!("{:02x}", b[1]))
    }

    fn paths(&self, hash: &Hash) -> (PathBuf, PathBuf) {
        let dir = self.dir_of(hash);
        let hex = hash.to_hex();
        (dir.join(&hex), dir.join(format!("{hex}.zst")))
    }

    /// Whether the block is on disk, in either form.
    pub fn exists(&self, hash: &Hash) -> bool {
        let (raw, zst) = self.paths(hash);
        zst.exists() || raw.exists()
    }

    /// Writes `data` as block `hash` unless it is already there. Blocking.
    pub fn write(&self, hash: &Hash, data: &[u8]) -> Result<StoredBlock> {
        let (raw, zst) = self.paths(hash);
        for (p, compressed) in [(&zst, true), (&raw, false)] {
            if let Ok(m) = std::fs::metadata(p) {
                return Ok(StoredBlock {
                    stored_len: m.len(),
                    compressed,
                    written: false,
                });
            }
        }
        let compressed = self.compression_level.and_then(|level| {
            let c = zstd::bulk::compress(data, level).ok()?;
            // Keep the compressed form only when it saves at least 1/8
            // (RocksDB's rule): reading a zstd frame costs CPU on every GET.
            (c.len() <= data.len() - data.len() / 8).then_some(c)
        });
        let (path, bytes, is_compressed) = match &compressed {
            Some(c) => (&zst, c.as_slice(), true),
            None => (&raw, data, false),
        };
        let dir = path.parent().expect("block path has a parent");
        std::fs::create_dir_all(dir).map_err(|e| BlockError::io(dir, e))?;
        let tmp = dir.join(format!(
            ".{}.tmp{:08x}",
            hash.to_hex(),
            rand::random::<u32>()
        ));
        let res = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            if self.fsync {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, path)?;
            if self.fsync {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        if let Err(e) = res {
            let _ = std::fs::remove_file(&tmp);
            return Err(BlockError::io(path, e));
        }
        Ok(StoredBlock {
            stored_len: bytes.len() as u64,
            compressed: is_compressed,
            written: true,
        })
    }

    /// Reads block `hash`, decompressing it and (when configured) checking
    /// that its content still hashes to its name. Blocking.
    pub fn read(&self, hash: &Hash) -> Result<Bytes> {
        let (raw, zst) = self.paths(hash);
        let data = match std::fs::read(&zst) {
            Ok(c) => zstd::stream::decode_all(c.as_slice()).map_err(|e| BlockError::Corrupt {
                hash: *hash,
                reason: format!("cannot decompress {}: {e}", zst.display()),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read(&raw) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(BlockError::Missing(*hash));
                }
                Err(e) => return Err(BlockError::io(&raw, e)),
            },
            Err(e) => return Err(BlockError::io(&zst, e)),
        };
        if self.verify_on_read && Hash::of(&data) != *hash {
            return Err(BlockError::Corrupt {
                hash: *hash,
                reason: "content does not match its blake3 name".into(),
            });
        }
        Ok(Bytes::from(data))
    }

    /// Deletes block `hash` in both forms. Blocking.
    pub fn delete(&self, hash: &Hash) -> Result<()> {
        let (raw, zst) = self.paths(hash);
        for p in [&raw, &zst] {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BlockError::io(p, e)),
            }
        }
        Ok(())
    }

    /// The data directories.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(level: Option<i32>) -> (tempfile::TempDir, BlockFiles) {
        let d = tempfile::tempdir().unwrap();
        let f = BlockFiles::new(vec![d.path().to_owned()], level, false, true).unwrap();
        (d, f)
    }

    #[test]
    fn compressible_blocks_are_stored_compressed_and_read_back() {
        let (_d, f) = files(Some(1));
        let data = vec![7u8; 100_000];
        let h = Hash::of(&data);
        let s = f.write(&h, &data).unwrap();
        assert!(s.compressed && s.written && s.stored_len < 1000);
        assert_eq!(f.read(&h).unwrap(), data);
        let again = f.write(&h, &data).unwrap();
        assert!(!again.written);
    }

    #[test]
    fn incompressible_blocks_are_stored_raw() {
        let (_d, f) = files(Some(3));
        let data: Vec<u8> = (0..65536).map(|_| rand::random::<u8>()).collect();
        let h = Hash::of(&data);
        let s = f.write(&h, &data).unwrap();
        assert!(!s.compressed);
        assert_eq!(s.stored_len, data.len() as u64);
        assert_eq!(f.read(&h).unwrap(), data);
    }

    #[test]
    fn corruption_and_absence_are_reported() {
        let (_d, f) = files(None);
        let data = b"some block".to_vec();
        let h = Hash::of(&data);
        f.write(&h, &data).unwrap();
        let (raw, _) = f.paths(&h);
        std::fs::write(&raw, b"some blocK").unwrap();
        assert!(matches!(f.read(&h), Err(BlockError::Corrupt { .. })));
        f.delete(&h).unwrap();
        assert!(matches!(f.read(&h), Err(BlockError::Missing(_))));
        assert!(!f.exists(&h));
    }
}
