//! The spool of a node's access log lines: every line the node keeps for
//! its next flush ([`crate::access_log::AccessLogs`]) is also appended to
//! a file of `<metadata_dir>/access-log-spool/`, so that a process that
//! dies (`kill -9`, the OOM killer, a panic) loses none of them: the next
//! start reads them back and the next flush writes them.
//!
//! Files are `spool-<n>.jsonl`, one JSON [`Entry`] per line. Lines are
//! appended with one `write` each, unbuffered, so they are in the
//! kernel's hands (and survive the process) as soon as they are recorded;
//! the active file is `fdatasync`ed every second, so a power cut loses at
//! most the last second. A flush seals the active file and starts
//! `spool-<n+1>`; once the sealed files' lines are written into their
//! target buckets, the files are removed. A crash in the middle of a
//! flush writes the lines of that flush again at the next start: delivery
//! is at least once. A torn last line (a crash in the middle of a write)
//! is skipped.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use hangar_model::bucket::BucketLogging;
use serde::{Deserialize, Serialize};

/// One spooled line, with what names the log object it goes into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub target: BucketLogging,
    /// For a partitioned prefix: the logged bucket and its owner's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<(String, String)>,
    /// For `EventTime`: the Julian day of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<i32>,
    pub line: String,
}

/// The spool files of one node.
pub(crate) struct Spool {
    dir: PathBuf,
    active: File,
    active_seq: u64,
    /// Files whose lines are in memory, waiting for a flush: the ones read
    /// at the start, then each one a flush seals.
    sealed: Vec<PathBuf>,
}

fn file_name(seq: u64) -> String {
    format!("spool-{seq}.jsonl")
}

fn seq_of(name: &str) -> Option<u64> {
    name.strip_prefix("spool-")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

impl Spool {
    /// Opens the spool in `dir` (made if need be): the entries its files
    /// hold, in the order they were recorded, and a new active file.
    pub(crate) fn open(dir: &Path) -> std::io::Result<(Spool, Vec<Entry>)> {
        std::fs::create_dir_all(dir)?;
        let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                Some((seq_of(&name)?, e.path()))
            })
            .collect();
        found.sort();
        let mut entries = Vec::new();
        for (_, path) in &found {
            read_entries(path, &mut entries)?;
        }
        let active_seq = found.last().map_or(0, |(s, _)| s + 1);
        let active = open_active(dir, active_seq)?;
        let spool = Spool {
            dir: dir.to_owned(),
            active,
            active_seq,
            sealed: found.into_iter().map(|(_, p)| p).collect(),
        };
        Ok((spool, entries))
    }

    /// Appends `entry` to the active file, in one `write`.
    pub(crate) fn append(&mut self, entry: &Entry) -> std::io::Result<()> {
        let mut text = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        text.push(b'\n');
        self.active.write_all(&text)
    }

    /// Seals the active file (synced) and starts the next; returns every
    /// sealed file, to remove once their lines are written.
    pub(crate) fn rotate(&mut self) -> std::io::Result<Vec<PathBuf>> {
        self.active.sync_data()?;
        let next = open_active(&self.dir, self.active_seq + 1)?;
        self.sealed.push(self.dir.join(file_name(self.active_seq)));
        self.active = next;
        self.active_seq += 1;
        Ok(std::mem::take(&mut self.sealed))
    }

    /// A handle on the active file, to sync off the lock.
    pub(crate) fn active(&self) -> std::io::Result<File> {
        self.active.try_clone()
    }
}

fn open_active(dir: &Path, seq: u64) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(file_name(seq)))?;
    // The new file's name must survive a power cut too.
    File::open(dir)?.sync_all()?;
    Ok(f)
}

/// Appends the entries of file `path` to `out`, skipping lines that do not
/// parse (a torn last line).
fn read_entries(path: &Path, out: &mut Vec<Entry>) -> std::io::Result<()> {
    for line in BufReader::new(File::open(path)?).split(b'\n') {
        if let Ok(e) = serde_json::from_slice::<Entry>(&line?) {
            out.push(e);
        }
    }
    Ok(())
}

/// Removes `files`, the spool files whose lines a flush has written.
pub(crate) fn remove(files: &[PathBuf]) {
    for f in files {
        if let Err(e) = std::fs::remove_file(f) {
            tracing::warn!("cannot remove the access log spool file {f:?}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(line: &str) -> Entry {
        Entry {
            target: BucketLogging {
                target_bucket: "logs".into(),
                target_prefix: "p/".into(),
                partitioned: None,
                object_acl: None,
                object_grants: Vec::new(),
            },
            source: Some(("site".into(), "owner".into())),
            day: Some(2_461_000),
            line: line.into(),
        }
    }

    #[test]
    fn lines_come_back_after_a_restart_until_a_flush_has_written_them() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, got) = Spool::open(d.path()).unwrap();
        assert!(got.is_empty());
        s.append(&entry("one \"quoted\"\nline")).unwrap();
        s.append(&entry("two")).unwrap();
        // The process dies: nothing was synced or closed by hand.
        drop(s);
        let (mut s, got) = Spool::open(d.path()).unwrap();
        assert_eq!(got, vec![entry("one \"quoted\"\nline"), entry("two")]);
        s.append(&entry("three")).unwrap();
        // A flush seals both files; until they are removed, a restart
        // reads their lines again (at least once).
        let sealed = s.rotate().unwrap();
        assert_eq!(sealed.len(), 2);
        s.append(&entry("four")).unwrap();
        drop(s);
        let (s, got) = Spool::open(d.path()).unwrap();
        assert_eq!(got.len(), 4);
        drop(s);
        remove(&sealed);
        let (_s, got) = Spool::open(d.path()).unwrap();
        assert_eq!(got, vec![entry("four")]);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(d.path()).unwrap();
        s.append(&entry("whole")).unwrap();
        s.active.write_all(b"{\"target\":{\"target_bu").unwrap();
        drop(s);
        let (_s, got) = Spool::open(d.path()).unwrap();
        assert_eq!(got, vec![entry("whole")]);
    }
}
