//! Block files on disk.
//!
//! A block with hash `h` (hex `abcd…`) lives in `<data_dir>/ab/cd/abcd…`, or
//! `…/abcd….zst` when stored compressed; see `doc/block-files.md`. Files are
//! written to a temporary name and renamed into place, so a reader never sees
//! a partial block and a crash leaves at worst a stray temporary file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use hangar_util::Hash;

use crate::tally::StoreTally;
use crate::{BlockError, Result};

/// How a block was found or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlock {
    /// Bytes the block occupies on disk.
    pub stored_len: u64,
    /// Bytes of the block's plain content, when this call wrote it (0 for
    /// a block found already there).
    pub plain_len: u64,
    /// Whether the file is zstd-compressed.
    pub compressed: bool,
    /// Whether this call wrote the file (false: it was already there).
    pub written: bool,
}

/// A block in the form it is stored on disk and sent between nodes: one
/// zstd frame, or the plain bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBlock {
    /// The bytes as stored.
    pub data: Bytes,
    /// Whether `data` is a zstd frame.
    pub compressed: bool,
    /// Length of the plain content.
    pub plain_len: u64,
}

impl EncodedBlock {
    /// The plain content, after checking that it is what `hash` names:
    /// decompressed (never beyond `plain_len`, so a frame cannot make us
    /// allocate more than announced), of exactly `plain_len` bytes, and
    /// hashing to `hash`. CPU-bound: call it off the async workers.
    pub fn decode(&self, hash: &Hash) -> Result<Bytes> {
        let corrupt = |reason: String| BlockError::Corrupt {
            hash: *hash,
            reason,
        };
        let plain = if self.compressed {
            let cap = usize::try_from(self.plain_len)
                .map_err(|_| corrupt(format!("plain length {} too large", self.plain_len)))?;
            Bytes::from(
                zstd::bulk::decompress(&self.data, cap)
                    .map_err(|e| corrupt(format!("cannot decompress: {e}")))?,
            )
        } else {
            self.data.clone()
        };
        if plain.len() as u64 != self.plain_len {
            return Err(corrupt(format!(
                "{} plain bytes where {} were announced",
                plain.len(),
                self.plain_len
            )));
        }
        let got = Hash::of(&plain);
        if got != *hash {
            return Err(corrupt(format!("content hashes to {got}")));
        }
        Ok(plain)
    }
}

/// The block files of one node.
#[derive(Debug, Clone)]
pub struct BlockFiles {
    dirs: Vec<PathBuf>,
    compression_level: Option<i32>,
    fsync: bool,
    verify_on_read: bool,
    tally: Arc<StoreTally>,
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
            tally: Arc::default(),
        })
    }

    /// How many block files are stored and their bytes (for metrics).
    pub fn tally(&self) -> &StoreTally {
        &self.tally
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

    /// The size of block `hash`'s file as stored, if it is there.
    pub fn stored_len(&self, hash: &Hash) -> Option<u64> {
        let (raw, zst) = self.paths(hash);
        std::fs::metadata(&zst)
            .or_else(|_| std::fs::metadata(&raw))
            .ok()
            .map(|m| m.len())
    }

    /// The zstd level blocks are compressed at (`None`: never).
    pub fn compression_level(&self) -> Option<i32> {
        self.compression_level
    }

    /// `data` in the form it is stored and sent in: a zstd frame at the
    /// configured level when that saves at least 1/8 of the size, else the
    /// plain bytes. CPU-bound: call it off the async workers.
    pub fn encode(&self, data: Bytes) -> EncodedBlock {
        self.encode_as(data, true)
    }

    /// Like [`Self::encode`], but never compressed when `compress` is false
    /// (data known not to compress: sealed SSE-C blocks, whose
    /// compression would cost CPU for nothing).
    pub fn encode_as(&self, data: Bytes, compress: bool) -> EncodedBlock {
        let plain_len = data.len() as u64;
        match compress.then(|| self.compress(&data)).flatten() {
            Some(c) => EncodedBlock {
                data: Bytes::from(c),
                compressed: true,
                plain_len,
            },
            None => EncodedBlock {
                data,
                compressed: false,
                plain_len,
            },
        }
    }

    /// The zstd frame of `data`, if it is worth keeping.
    fn compress(&self, data: &[u8]) -> Option<Vec<u8>> {
        self.compression_level.and_then(|level| {
            let c = compress_with_level(data, level)?;
            // Keep the compressed form only when it saves at least 1/8
            // (RocksDB's rule): reading a zstd frame costs CPU on every GET.
            (c.len() <= data.len() - data.len() / 8).then_some(c)
        })
    }

    /// Writes `data` as block `hash` unless it is already there, compressing
    /// it per the settings. Blocking.
    pub fn write(&self, hash: &Hash, data: &[u8]) -> Result<StoredBlock> {
        self.write_as(hash, data, true)
    }

    /// Like [`Self::write`], never compressing when `compress` is false.
    pub fn write_as(&self, hash: &Hash, data: &[u8], compress: bool) -> Result<StoredBlock> {
        if let Some(found) = self.stored_form(hash) {
            return Ok(found);
        }
        match compress.then(|| self.compress(data)).flatten() {
            Some(c) => self.write_stored(hash, &c, true, data.len() as u64),
            None => self.write_stored(hash, data, false, data.len() as u64),
        }
    }

    /// How block `hash` is on disk, if it is.
    fn stored_form(&self, hash: &Hash) -> Option<StoredBlock> {
        let (raw, zst) = self.paths(hash);
        [(&zst, true), (&raw, false)]
            .into_iter()
            .find_map(|(p, compressed)| {
                std::fs::metadata(p).ok().map(|m| StoredBlock {
                    stored_len: m.len(),
                    plain_len: 0,
                    compressed,
                    written: false,
                })
            })
    }

    /// Writes an already encoded block (as received from another node) as
    /// block `hash` unless it is already there, as it is: never recompressed.
    /// The caller has checked it ([`EncodedBlock::decode`]). Written to a
    /// temporary name, then renamed into place. Blocking.
    pub fn write_encoded(&self, hash: &Hash, enc: &EncodedBlock) -> Result<StoredBlock> {
        if let Some(found) = self.stored_form(hash) {
            return Ok(found);
        }
        self.write_stored(hash, &enc.data, enc.compressed, enc.plain_len)
    }

    /// Writes `bytes` as the `.zst` (`compressed`) or plain file of `hash`:
    /// temporary name, then rename.
    fn write_stored(
        &self,
        hash: &Hash,
        bytes: &[u8],
        compressed: bool,
        plain_len: u64,
    ) -> Result<StoredBlock> {
        let (raw, zst) = self.paths(hash);
        let path = if compressed { &zst } else { &raw };
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
            self.tally.change(hash, || {
                // A file already there (the other form, or a copy written
                // meanwhile) is replaced or kept, not added.
                let new = !raw.exists() && !zst.exists();
                let r = std::fs::rename(&tmp, path);
                let added = i64::from(new && r.is_ok());
                (r, added, added * bytes.len() as i64)
            })?;
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
            plain_len,
            compressed,
            written: true,
        })
    }

    /// Reads block `hash` as stored, without decompressing or checking it
    /// (what is sent to another node, which checks it). `plain_len` is
    /// read from the zstd frame header, or is the file's length. Blocking.
    pub fn read_encoded(&self, hash: &Hash) -> Result<EncodedBlock> {
        let (raw, zst) = self.paths(hash);
        match std::fs::read(&zst) {
            Ok(c) => {
                let plain_len = match zstd::zstd_safe::get_frame_content_size(&c) {
                    Ok(Some(n)) => n,
                    // Frames written by `zstd::bulk` carry their size; any
                    // other is measured by decompressing it.
                    _ => zstd::stream::decode_all(c.as_slice())
                        .map_err(|e| BlockError::Corrupt {
                            hash: *hash,
                            reason: format!("cannot decompress {}: {e}", zst.display()),
                        })?
                        .len() as u64,
                };
                Ok(EncodedBlock {
                    data: Bytes::from(c),
                    compressed: true,
                    plain_len,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read(&raw) {
                Ok(d) => Ok(EncodedBlock {
                    plain_len: d.len() as u64,
                    data: Bytes::from(d),
                    compressed: false,
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Err(BlockError::Missing(*hash))
                }
                Err(e) => Err(BlockError::io(&raw, e)),
            },
            Err(e) => Err(BlockError::io(&zst, e)),
        }
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
            let r = self.tally.change(hash, || {
                let len = std::fs::metadata(p).map_or(0, |m| m.len() as i64);
                match std::fs::remove_file(p) {
                    Ok(()) => (Ok(()), -1, -len),
                    Err(e) => (Err(e), 0, 0),
                }
            });
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BlockError::io(p, e)),
            }
        }
        Ok(())
    }

    /// Moves block `hash` (both forms) out of the way into the
    /// `quarantine` directory of its data directory, as
    /// `<name>.<unix ms>`, for an operator to look at; it is never read
    /// again. Returns the paths it was moved to (none when the block was
    /// not there). Blocking.
    pub fn quarantine(&self, hash: &Hash) -> Result<Vec<PathBuf>> {
        let (raw, zst) = self.paths(hash);
        let b = hash.as_bytes();
        let root = &self.dirs[(u16::from_be_bytes([b[2], b[3]]) as usize) % self.dirs.len()];
        let qdir = root.join("quarantine");
        let stamp = hangar_util::time::now_msec();
        let mut moved = Vec::new();
        for p in [&raw, &zst] {
            if !p.exists() {
                continue;
            }
            std::fs::create_dir_all(&qdir).map_err(|e| BlockError::io(&qdir, e))?;
            let name = p
                .file_name()
                .expect("block files have names")
                .to_string_lossy();
            let to = qdir.join(format!("{name}.{stamp}"));
            self.tally
                .change(hash, || {
                    let len = std::fs::metadata(p).map_or(0, |m| m.len() as i64);
                    match std::fs::rename(p, &to) {
                        Ok(()) => (Ok(()), -1, -len),
                        Err(e) => (Err(e), 0, 0),
                    }
                })
                .map_err(|e| BlockError::io(p, e))?;
            moved.push(to);
        }
        Ok(moved)
    }

    /// The data directories.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

/// `data` compressed at `level` by this thread's zstd context: creating a
/// context for each block (`zstd::bulk::compress`) was about 1 % of a
/// 4 KiB PUT's CPU (its tables are allocated and zeroed each time).
fn compress_with_level(data: &[u8], level: i32) -> Option<Vec<u8>> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with_borrow_mut(|ctx| {
        if ctx.as_ref().is_none_or(|(l, _)| *l != level) {
            *ctx = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, c) = ctx.as_mut()?;
        c.compress(data).ok()
    })
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
    fn blocks_written_without_compression_stay_plain() {
        let (_d, f) = files(Some(1));
        let data = vec![7u8; 100_000];
        let h = Hash::of(&data);
        let s = f.write_as(&h, &data, false).unwrap();
        assert!(!s.compressed && s.written);
        assert_eq!(s.stored_len, data.len() as u64);
        assert_eq!(f.read(&h).unwrap(), data);
        let enc = f.encode_as(Bytes::from(data.clone()), false);
        assert!(!enc.compressed);
        assert!(f.encode(Bytes::from(data)).compressed);
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
