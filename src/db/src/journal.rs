//! The journal: what makes `metadata_fsync = false` survive a process crash.
//!
//! Without fsync, an engine keeps a batch it applied in its own memory until
//! its next durable commit (redb's `Durability::None`, sled's log buffer), so
//! `kill -9` loses every write acknowledged since then. [`Journaled`] wraps an
//! engine so that each batch applied without sync is first appended to a
//! journal file with one `write(2)` — no fsync — and only then applied. A
//! process crash leaves the appended bytes in the kernel's page cache, which
//! writes them out whether or not the process lives, and the next open
//! replays them (as LMDB without fsync and SQLite's WAL survive a process
//! crash). A kernel crash or power cut may still lose what was appended since
//! the last durable commit: that is what `metadata_fsync = false` trades.
//!
//! Files: `<engine path>.journal.<seq>` (`db.redb.journal.00000000000000000001`
//! beside `db.redb`), `seq` a zero-padded decimal counter. Every
//! [`SYNC_EVERY`], and on [`Engine::sync`], the journal rotates to a new file,
//! the engine commits durably, and only then are the older files deleted: a
//! file is removed only once everything it holds is durable in the engine.
//! So the journal holds about [`SYNC_EVERY`] of writes.
//!
//! Format (doc/metadata-engines.md, "The journal", byte by byte): a file is
//! the 8-byte magic [`MAGIC`] followed by records; a record is its payload's
//! length (u32 LE), the CRC-32 (IEEE) of the payload (u32 LE), then the
//! payload: the number of writes (u32 LE), then each write as the tree name's
//! length (u8) and bytes, the key's length (u32 LE) and bytes, and a tag
//! byte, 0 for a delete, 1 for a put followed by the value's length (u32 LE)
//! and bytes.
//!
//! Replay ([`replay`], run by [`crate::open_engine`] whatever the fsync
//! setting) applies every whole record of every file in order and stops at
//! the first torn or corrupt record, or at a gap in the sequence, ignoring
//! everything after it, so the store always opens at a prefix of what was
//! written. Replaying writes that the engine already made durable is
//! harmless: the records are blind puts and deletes, so replaying a suffix
//! of the history that includes everything after the engine's durable state
//! leads to the same state.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::{DbError, Engine, Result, WriteOp};

/// The first bytes of every journal file.
pub const MAGIC: [u8; 8] = *b"HGRJNL\x00\x01";

/// How often the journal rotates and its engine commits durably.
pub const SYNC_EVERY: Duration = Duration::from_millis(500);

/// A record larger than this is taken as corrupt on replay (a group-commit
/// batch is at most `metadata_commit_batch` rows).
const MAX_RECORD: u32 = 1 << 30;

fn jerr(what: &str, path: &Path, e: impl std::fmt::Display) -> DbError {
    DbError::engine("journal", format!("{what} {}: {e}", path.display()))
}

/// The journal files of the engine stored at `engine_path`, by sequence.
fn journal_files(engine_path: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let dir = engine_path.parent().unwrap_or(Path::new("."));
    let Some(stem) = engine_path.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{stem}.journal.");
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(jerr("listing", dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| jerr("listing", dir, e))?;
        let name = entry.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        files.push((seq, entry.path()));
    }
    files.sort();
    Ok(files)
}

fn file_path(engine_path: &Path, seq: u64) -> PathBuf {
    let mut name = engine_path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".journal.{seq:020}"));
    engine_path.with_file_name(name)
}

/// Encodes `batch` as one record (length, CRC, payload).
fn encode(batch: &[WriteOp]) -> Vec<u8> {
    let mut p = Vec::with_capacity(
        4 + batch
            .iter()
            .map(|w| 10 + w.tree.len() + w.key.len() + w.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>(),
    );
    p.extend_from_slice(&(batch.len() as u32).to_le_bytes());
    for w in batch {
        // Tree names are the model's short identifiers (`object`, …).
        p.push(w.tree.len() as u8);
        p.extend_from_slice(w.tree.as_bytes());
        p.extend_from_slice(&(w.key.len() as u32).to_le_bytes());
        p.extend_from_slice(&w.key);
        match &w.value {
            None => p.push(0),
            Some(v) => {
                p.push(1);
                p.extend_from_slice(&(v.len() as u32).to_le_bytes());
                p.extend_from_slice(v);
            }
        }
    }
    let mut rec = Vec::with_capacity(8 + p.len());
    rec.extend_from_slice(&(p.len() as u32).to_le_bytes());
    rec.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    rec.extend_from_slice(&p);
    rec
}

/// Reads a record's payload back into writes; None if it does not parse.
/// Tree names are interned in `names` (a store has a handful of trees).
fn decode(mut p: &[u8], names: &mut HashMap<Vec<u8>, &'static str>) -> Option<Vec<WriteOp>> {
    fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if p.len() < n {
            return None;
        }
        let (a, b) = p.split_at(n);
        *p = b;
        Some(a)
    }
    fn u32le(p: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(p, 4)?.try_into().ok()?) as usize)
    }
    let count = u32le(&mut p)?;
    let mut ops = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let tl = *take(&mut p, 1)?.first()? as usize;
        let tree = take(&mut p, tl)?;
        let tree = match names.get(tree) {
            Some(t) => *t,
            None => {
                let name = std::str::from_utf8(tree).ok()?;
                // Leaked once per tree name and process: trees are few.
                let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
                names.insert(tree.to_vec(), leaked);
                leaked
            }
        };
        let kl = u32le(&mut p)?;
        let key = take(&mut p, kl)?.to_vec();
        let value = match *take(&mut p, 1)?.first()? {
            0 => None,
            1 => {
                let vl = u32le(&mut p)?;
                Some(take(&mut p, vl)?.to_vec())
            }
            _ => return None,
        };
        ops.push(WriteOp { tree, key, value });
    }
    p.is_empty().then_some(ops)
}

/// What [`replay`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub files: usize,
    pub records: usize,
    pub writes: usize,
    /// Bytes after the last whole record that were ignored (a torn tail).
    pub ignored_bytes: u64,
}

/// Applies the journal of the engine at `engine_path` to `engine`, makes it
/// durable, and deletes the journal files. Called when the store opens,
/// before anything else reads or writes it.
pub fn replay(engine: &dyn Engine, engine_path: &Path) -> Result<Replayed> {
    let files = journal_files(engine_path)?;
    let mut out = Replayed::default();
    if files.is_empty() {
        return Ok(out);
    }
    let mut names = HashMap::new();
    let mut stopped = false;
    let mut expected = files[0].0;
    for (seq, path) in &files {
        if stopped || *seq != expected {
            // A gap: a later file may hold writes after a lost one.
            stopped = true;
            out.ignored_bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            continue;
        }
        expected += 1;
        out.files += 1;
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| jerr("reading", path, e))?;
        let mut rest: &[u8] = &bytes;
        if rest.len() >= MAGIC.len() && rest[..MAGIC.len()] == MAGIC {
            rest = &rest[MAGIC.len()..];
        } else if !rest.is_empty() {
            // Not a journal (or a torn header): nothing in it was appended.
            stopped = true;
            out.ignored_bytes += bytes.len() as u64;
            continue;
        }
        while !rest.is_empty() {
            let Some(ops) = next_record(&mut rest, &mut names) else {
                stopped = true;
                out.ignored_bytes += rest.len() as u64;
                break;
            };
            out.records += 1;
            out.writes += ops.len();
            engine.apply(ops, false)?;
        }
    }
    engine.sync()?;
    for (_, path) in &files {
        std::fs::remove_file(path).map_err(|e| jerr("removing", path, e))?;
    }
    if out.ignored_bytes > 0 {
        tracing::warn!(
            "metadata journal: ignored {} bytes after the last whole record \
             (a write torn by a crash, never acknowledged)",
            out.ignored_bytes
        );
    }
    tracing::info!(
        "metadata journal: replayed {} writes in {} records from {} files",
        out.writes,
        out.records,
        out.files
    );
    Ok(out)
}

/// Takes one whole, checksummed record off the front of `rest`.
fn next_record(
    rest: &mut &[u8],
    names: &mut HashMap<Vec<u8>, &'static str>,
) -> Option<Vec<WriteOp>> {
    if rest.len() < 8 {
        return None;
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().ok()?);
    let crc = u32::from_le_bytes(rest[4..8].try_into().ok()?);
    if len > MAX_RECORD || rest.len() - 8 < len as usize {
        return None;
    }
    let payload = &rest[8..8 + len as usize];
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let ops = decode(payload, names)?;
    *rest = &rest[8 + len as usize..];
    Some(ops)
}

/// The file being appended to, and the oldest file not yet known durable.
struct Current {
    file: File,
    path: PathBuf,
    seq: u64,
    /// Bytes written to `file` (to cut a record whose apply failed).
    len: u64,
    oldest: u64,
    dirty: bool,
}

impl Current {
    fn create(engine_path: &Path, seq: u64, oldest: u64) -> Result<Current> {
        let path = file_path(engine_path, seq);
        let mut file = File::create(&path).map_err(|e| jerr("creating", &path, e))?;
        file.write_all(&MAGIC)
            .map_err(|e| jerr("writing", &path, e))?;
        Ok(Current {
            file,
            path,
            seq,
            len: MAGIC.len() as u64,
            oldest,
            dirty: false,
        })
    }
}

/// An engine whose batches applied without sync are journalled first; see
/// the module documentation. Batches applied with sync go straight to the
/// engine, durable on return.
pub struct Journaled {
    inner: Arc<dyn Engine>,
    engine_path: PathBuf,
    current: Mutex<Current>,
    /// One rotation and durable commit at a time.
    syncing: Mutex<()>,
}

impl Journaled {
    /// Wraps `inner`, stored at `engine_path`, whose journal must already have
    /// been replayed ([`replay`]), and starts the thread that rotates the
    /// journal and commits durably every [`SYNC_EVERY`].
    pub fn start(inner: Arc<dyn Engine>, engine_path: &Path) -> Result<Arc<Journaled>> {
        let next = journal_files(engine_path)?.last().map_or(1, |(s, _)| s + 1);
        let j = Arc::new(Journaled {
            inner,
            engine_path: engine_path.to_path_buf(),
            current: Mutex::new(Current::create(engine_path, next, next)?),
            syncing: Mutex::new(()),
        });
        let weak = Arc::downgrade(&j);
        std::thread::Builder::new()
            .name("db-journal".into())
            .spawn(move || sync_loop(weak))
            .map_err(|e| DbError::engine("journal", e))?;
        Ok(j)
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rotates to a new file, commits the engine durably, then deletes the
    /// files that commit covers.
    fn checkpoint(&self, only_if_dirty: bool) -> Result<()> {
        let _one = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let (covered_from, covered_to) = {
            let mut cur = self.current();
            if only_if_dirty && !cur.dirty {
                return Ok(());
            }
            // Every record of the files up to `cur.seq` was applied to the
            // engine under this lock, so the durable commit below covers them.
            let next = Current::create(&self.engine_path, cur.seq + 1, cur.oldest)?;
            let old = std::mem::replace(&mut *cur, next);
            (old.oldest, old.seq)
        };
        self.inner.sync()?;
        for seq in covered_from..=covered_to {
            let path = file_path(&self.engine_path, seq);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(jerr("removing", &path, e)),
            }
        }
        self.current().oldest = covered_to + 1;
        Ok(())
    }
}

fn sync_loop(j: Weak<Journaled>) {
    loop {
        std::thread::sleep(SYNC_EVERY);
        let Some(j) = j.upgrade() else { return };
        if let Err(e) = j.checkpoint(true) {
            // The files stay: the next checkpoint or the next open covers them.
            tracing::error!("metadata journal checkpoint failed: {e}");
        }
    }
}

impl Drop for Journaled {
    fn drop(&mut self) {
        if let Err(e) = self.checkpoint(false) {
            tracing::error!("metadata journal: final checkpoint failed: {e}");
        }
        let cur = self.current();
        let _ = std::fs::remove_file(&cur.path);
    }
}

impl Engine for Journaled {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(tree, key)
    }

    fn range(
        &self,
        tree: &str,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.range(tree, start, end, reverse, limit)
    }

    fn apply(&self, batch: Vec<WriteOp>, sync: bool) -> Result<()> {
        if sync {
            return self.inner.apply(batch, true);
        }
        let rec = encode(&batch);
        let mut cur = self.current();
        let start = cur.len;
        let path = cur.path.clone();
        cur.file
            .write_all(&rec)
            .map_err(|e| jerr("appending to", &path, e))?;
        cur.len += rec.len() as u64;
        if let Err(e) = self.inner.apply(batch, false) {
            // Not applied, so not to be replayed either.
            cur.file
                .set_len(start)
                .and_then(|_| cur.file.seek(SeekFrom::Start(start)))
                .map_err(|e| jerr("truncating", &path, e))?;
            cur.len = start;
            return Err(e);
        }
        cur.dirty = true;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.checkpoint(false)
    }

    fn close(&self) -> Result<()> {
        self.checkpoint(false)?;
        self.inner.close()
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.inner.size_on_disk()
    }

    fn trees(&self) -> Result<Vec<String>> {
        self.inner.trees()
    }

    fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        self.inner.load(tree, entries)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::RedbEngine;

    const TREES: [&str; 3] = ["object", "block_rc", "o"];

    fn op(tree: usize, key: u8, value: Option<u8>) -> WriteOp {
        WriteOp {
            tree: TREES[tree % TREES.len()],
            key: vec![key],
            value: value.map(|v| vec![v; 1 + v as usize % 5]),
        }
    }

    fn batches() -> impl Strategy<Value = Vec<Vec<WriteOp>>> {
        let one = (0..3usize, 0..8u8, proptest::option::of(any::<u8>()))
            .prop_map(|(t, k, v)| op(t, k, v));
        proptest::collection::vec(proptest::collection::vec(one, 0..6), 1..12)
    }

    /// The state a sequence of batches leads to, tree by tree.
    fn model(batches: &[Vec<WriteOp>]) -> BTreeMap<(&'static str, Vec<u8>), Vec<u8>> {
        let mut m = BTreeMap::new();
        for w in batches.iter().flatten() {
            match &w.value {
                Some(v) => m.insert((w.tree, w.key.clone()), v.clone()),
                None => m.remove(&(w.tree, w.key.clone())),
            };
        }
        m
    }

    fn contents(e: &dyn Engine) -> BTreeMap<(&'static str, Vec<u8>), Vec<u8>> {
        let mut m = BTreeMap::new();
        for t in TREES {
            for (k, v) in e
                .range(t, Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
                .unwrap()
            {
                m.insert((t, k), v);
            }
        }
        m
    }

    /// Writes `batches` as journal files of `per_file` records each.
    fn write_files(engine_path: &Path, batches: &[Vec<WriteOp>], per_file: usize) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (i, chunk) in batches.chunks(per_file.max(1)).enumerate() {
            let path = file_path(engine_path, 7 + i as u64);
            let mut bytes = MAGIC.to_vec();
            for b in chunk {
                bytes.extend(encode(b));
            }
            std::fs::write(&path, bytes).unwrap();
            paths.push(path);
        }
        paths
    }

    fn store() -> (tempfile::TempDir, PathBuf, RedbEngine) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        let e = RedbEngine::open(&path, 1 << 20).unwrap();
        (dir, path, e)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every record reads back as the batch it encodes.
        #[test]
        fn records_round_trip(batches in batches()) {
            let mut names = HashMap::new();
            for b in &batches {
                let rec = encode(b);
                let mut rest: &[u8] = &rec;
                let back = next_record(&mut rest, &mut names).unwrap();
                prop_assert!(rest.is_empty());
                prop_assert_eq!(&back, b);
            }
        }

        /// Replay over a store that already holds any prefix of the history
        /// (what it made durable before the crash) ends at the whole history.
        #[test]
        fn replay_over_any_durable_prefix_ends_at_the_whole_history(
            batches in batches(), durable in 0..12usize, per_file in 1..4usize,
        ) {
            let (_d, path, e) = store();
            let durable = durable.min(batches.len());
            for b in &batches[..durable] {
                e.apply(b.clone(), false).unwrap();
            }
            write_files(&path, &batches, per_file);
            let r = replay(&e, &path).unwrap();
            prop_assert_eq!(r.records, batches.len());
            prop_assert_eq!(contents(&e), model(&batches));
            prop_assert!(journal_files(&path).unwrap().is_empty());
        }

        /// A torn or corrupted record, and everything after it, is ignored:
        /// the store opens at a prefix of the history, never past a hole.
        #[test]
        fn replay_stops_at_the_first_damaged_record(
            batches in batches(), cut in any::<proptest::sample::Index>(), flip in any::<bool>(),
        ) {
            let (_d, path, e) = store();
            let paths = write_files(&path, &batches, 2);
            // Damage one record: the file holding record `n` is cut inside it,
            // or one byte of the record's payload is flipped.
            let n = cut.index(batches.len());
            let file = &paths[n / 2];
            let mut bytes = std::fs::read(file).unwrap();
            let mut start = MAGIC.len();
            if n % 2 == 1 {
                start += encode(&batches[n - 1]).len();
            }
            let len = encode(&batches[n]).len();
            if flip {
                bytes[start + len - 1] ^= 0x40;
            } else {
                bytes.truncate(start + len - 1);
            }
            std::fs::write(file, bytes).unwrap();
            let r = replay(&e, &path).unwrap();
            prop_assert_eq!(r.records, n);
            prop_assert_eq!(contents(&e), model(&batches[..n]));
        }
    }

    /// The example of doc/metadata-engines.md, "The journal".
    #[test]
    fn the_documented_example_encodes_as_written() {
        let rec = encode(&[WriteOp {
            tree: "o",
            key: b"k".to_vec(),
            value: Some(b"v".to_vec()),
        }]);
        let payload = [1, 0, 0, 0, 1, b'o', 1, 0, 0, 0, b'k', 1, 1, 0, 0, 0, b'v'];
        assert_eq!(rec[..4], [0x11, 0, 0, 0]);
        assert_eq!(rec[4..8], crc32fast::hash(&payload).to_le_bytes());
        assert_eq!(rec[8..], payload);
        assert_eq!(MAGIC, [0x48, 0x47, 0x52, 0x4a, 0x4e, 0x4c, 0x00, 0x01]);
    }

    #[test]
    fn a_gap_in_the_sequence_stops_replay() {
        let (_d, path, e) = store();
        let batches: Vec<_> = (0..4u8).map(|i| vec![op(0, i, Some(i))]).collect();
        let paths = write_files(&path, &batches, 1);
        std::fs::remove_file(&paths[2]).unwrap();
        let r = replay(&e, &path).unwrap();
        assert_eq!(r.records, 2);
        assert_eq!(contents(&e), model(&batches[..2]));
        assert!(journal_files(&path).unwrap().is_empty());
    }

    /// What is applied through a live journal is replayed after a crash
    /// (here: the process forgets the engine instead of closing it), and a
    /// clean close leaves no journal behind.
    #[test]
    fn applied_batches_survive_until_replayed_and_a_clean_close_leaves_nothing() {
        let (_d, path, e) = store();
        let j = Journaled::start(Arc::new(e), &path).unwrap();
        let batches: Vec<_> = (0..20u8).map(|i| vec![op(1, i % 7, Some(i))]).collect();
        for b in &batches {
            j.apply(b.clone(), false).unwrap();
        }
        // The journal holds everything not yet durable. (Holding `syncing`
        // keeps the background checkpoint from rotating meanwhile.)
        let one = j.syncing.lock().unwrap();
        let mut names = HashMap::new();
        let mut seen = Vec::new();
        for (_, p) in journal_files(&path).unwrap() {
            let bytes = std::fs::read(p).unwrap();
            let mut rest = &bytes[MAGIC.len()..];
            while let Some(ops) = next_record(&mut rest, &mut names) {
                seen.push(ops);
            }
        }
        assert!(!seen.is_empty());
        assert_eq!(seen[..], batches[batches.len() - seen.len()..]);
        drop(one);
        j.sync().unwrap();
        let one = j.syncing.lock().unwrap();
        assert_eq!(
            journal_files(&path).unwrap().len(),
            1,
            "only the new, empty file"
        );
        drop(one);
        drop(j);
        assert!(journal_files(&path).unwrap().is_empty());
    }
}
