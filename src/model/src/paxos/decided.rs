//! What acceptors remember of the values decided for a key, so that a
//! proposer can tell whether a value it sent for acceptance was ever
//! published — also when a later write has replaced it since.
//!
//! The question: a proposer's value was accepted by some acceptors, its
//! round was beaten, and its condition now fails on what is stored. Either
//! no round ever decided its value (the answer is `412`), or another round
//! completed and published it and a later write replaced it (the write
//! happened: `200`); the register alone cannot tell the two apart, and
//! answering `412` for the second is a lie (doc/chaos.md, "Anomalies found
//! by the history check").
//!
//! So each acceptor logs, when it learns that a ballot's value was
//! published (a [`super::messages::Commit`]), the value's id
//! ([`ValueId`]) beside the ballot, for [`DECIDED_KEEP_MSEC`] by its own
//! clock and at most [`MAX_DECIDED`] entries; a ballot it drops, or learns
//! committed without the value's id, raises its `forgotten` ballot. A
//! proposer starts a new decision only once the last one known is in the
//! log of every acceptor of its quorum (it re-sends the commit otherwise and
//! waits for a majority), so a decided value is logged by a majority before
//! any later value is decided. A value first sent in ballot `b` can only be
//! decided in a ballot at or above `b`; so, from one quorum's logs
//! ([`verdict`]):
//!
//! - a log names the value: it was published;
//! - no log names it and none has forgotten a ballot at or above `b`: it
//!   was never published, unless it is still accepted somewhere newer than
//!   every commit (the round completes such a value first);
//! - otherwise: unknown (`503`, the outcome is unknown).

use serde::{Deserialize, Serialize};

use super::Ballot;
use super::messages::Proposal;

/// How long an acceptor keeps a decided value's entry, by its own clock:
/// far past [`super::ROUND_DEADLINE`], the longest a proposer keeps asking.
pub const DECIDED_KEEP_MSEC: u64 = 5 * 60 * 1000;
/// Entries an acceptor keeps per key, at most (the oldest go first).
pub const MAX_DECIDED: usize = 16;

/// A proposed value's short name: the first 16 bytes of the BLAKE3 hash of
/// its MessagePack encoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueId(pub [u8; 16]);

impl ValueId {
    pub fn of(p: &Proposal) -> ValueId {
        let bytes = rmp_serde::to_vec(p).expect("a proposal encodes");
        let mut id = [0; 16];
        id.copy_from_slice(&blake3::hash(&bytes).as_bytes()[..16]);
        ValueId(id)
    }
}

impl std::fmt::Debug for ValueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// One value known decided, in `ballot`, and published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    pub ballot: Ballot,
    pub value: ValueId,
}

/// An acceptor's log of decided values, as it answers a prepare.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedLog {
    /// By ascending ballot.
    pub entries: Vec<Decided>,
    /// Decisions in this ballot or below may be missing from `entries`.
    pub forgotten: Ballot,
}

impl DecidedLog {
    /// Whether this log settles ballot `b`: names its value, or admits
    /// not knowing it.
    fn settles(&self, b: Ballot) -> bool {
        self.forgotten >= b || self.entries.iter().any(|d| d.ballot == b)
    }

    fn names(&self, v: ValueId) -> bool {
        self.entries.iter().any(|d| d.value == v)
    }

    fn value_of(&self, b: Ballot) -> Option<ValueId> {
        self.entries.iter().find(|d| d.ballot == b).map(|d| d.value)
    }
}

/// A logged entry with when this acceptor logged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Logged {
    ballot: Ballot,
    value: ValueId,
    at_msec: u64,
}

/// An acceptor's stored memory of decided values for one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedMemory {
    entries: Vec<Logged>,
    forgotten: Ballot,
}

impl DecidedMemory {
    /// The value of ballot `b` is published; `value` is its id when known.
    pub fn record(&mut self, b: Ballot, value: Option<ValueId>, now: u64) {
        match value {
            Some(value) => {
                if !self.entries.iter().any(|e| e.ballot == b) {
                    let at = self.entries.partition_point(|e| e.ballot < b);
                    self.entries.insert(
                        at,
                        Logged {
                            ballot: b,
                            value,
                            at_msec: now,
                        },
                    );
                }
            }
            None => {
                if !self.entries.iter().any(|e| e.ballot == b) {
                    self.forgotten = self.forgotten.max(b);
                }
            }
        }
        self.trim(now);
    }

    /// Drops entries older than [`DECIDED_KEEP_MSEC`], and the lowest
    /// ballots past [`MAX_DECIDED`], raising `forgotten` to what it drops.
    fn trim(&mut self, now: u64) {
        let excess = self.entries.len().saturating_sub(MAX_DECIDED);
        let mut forgotten = self.forgotten;
        let mut i = 0;
        self.entries.retain(|e| {
            i += 1;
            let keep = i > excess && e.at_msec.saturating_add(DECIDED_KEEP_MSEC) >= now;
            if !keep {
                forgotten = forgotten.max(e.ballot);
            }
            keep
        });
        self.forgotten = forgotten;
    }

    /// The log a prepare answers at `now` (entries past their age dropped
    /// first), `committed` being the highest ballot the acceptor knows
    /// committed: a commit it did not log counts as forgotten (a commit
    /// from a binary that sends no value id, or one dropped from this log).
    pub fn log(&mut self, committed: Option<Ballot>, now: u64) -> DecidedLog {
        self.trim(now);
        let mut forgotten = self.forgotten;
        if let Some(c) = committed
            && !self.entries.iter().any(|e| e.ballot == c)
        {
            forgotten = forgotten.max(c);
        }
        DecidedLog {
            entries: self
                .entries
                .iter()
                .map(|e| Decided {
                    ballot: e.ballot,
                    value: e.value,
                })
                .collect(),
            forgotten,
        }
    }
}

/// A commit a proposer must see logged by a majority before it decides
/// anything new: the highest committed ballot, when some log of its quorum
/// neither names its value nor admits not knowing it, with its value's id
/// where another log names it.
pub fn unlogged_commit(
    logs: &[DecidedLog],
    committed: Option<Ballot>,
) -> Option<(Ballot, Option<ValueId>)> {
    let c = committed?;
    if logs.iter().all(|l| l.settles(c)) {
        return None;
    }
    Some((c, logs.iter().find_map(|l| l.value_of(c))))
}

/// What one quorum's logs say of a proposer's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `sent[i]` was published.
    Published(usize),
    /// None of them was ever published (unless still accepted somewhere
    /// newer than every commit: the round completes such a value first).
    NeverPublished,
    /// The logs do not say.
    Unknown,
}

/// Judges `sent`, the values a proposer sent for acceptance, the first in
/// ballot `first_sent`, from the logs of one quorum's promises (`None`
/// where some acceptor keeps no log).
pub fn verdict(logs: Option<&[DecidedLog]>, sent: &[Proposal], first_sent: Ballot) -> Verdict {
    let Some(logs) = logs else {
        return Verdict::Unknown;
    };
    for (i, v) in sent.iter().enumerate() {
        let id = v.id();
        if logs.iter().any(|l| l.names(id)) {
            return Verdict::Published(i);
        }
    }
    if logs.iter().all(|l| l.forgotten < first_sent) {
        Verdict::NeverPublished
    } else {
        Verdict::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_util::NodeId;
    use proptest::prelude::*;
    use serde_bytes::ByteBuf;

    fn ballot(counter: u64) -> Ballot {
        Ballot {
            counter,
            node: NodeId([1; 32]),
        }
    }

    fn value(n: u8) -> Proposal {
        Proposal::Publish {
            sort: ByteBuf::from(b"k".to_vec()),
            row: ByteBuf::from(vec![n]),
        }
    }

    #[test]
    fn ids_name_values() {
        assert_eq!(value(1).id(), value(1).id());
        assert_ne!(value(1).id(), value(2).id());
        assert_ne!(value(1).id(), Proposal::Nothing.id());
    }

    #[test]
    fn a_commit_without_its_value_counts_as_forgotten() {
        let mut m = DecidedMemory::default();
        m.record(ballot(5), Some(value(1).id()), 0);
        m.record(ballot(7), None, 0);
        let log = m.log(Some(ballot(7)), 0);
        assert_eq!(log.forgotten, ballot(7));
        assert!(log.names(value(1).id()));
        // A commit known only as `committed` (an older binary's state).
        let log = DecidedMemory::default().log(Some(ballot(9)), 0);
        assert_eq!(log.forgotten, ballot(9));
        assert!(log.entries.is_empty());
    }

    #[test]
    fn old_entries_are_forgotten_by_age() {
        let mut m = DecidedMemory::default();
        m.record(ballot(5), Some(value(1).id()), 1_000);
        m.record(ballot(6), Some(value(2).id()), 1_000 + DECIDED_KEEP_MSEC);
        let log = m.log(Some(ballot(6)), 2_000 + DECIDED_KEEP_MSEC);
        assert_eq!(log.forgotten, ballot(5));
        assert_eq!(log.entries.len(), 1);
        m.record(ballot(7), Some(value(3).id()), 2_000 + DECIDED_KEEP_MSEC);
        assert_eq!(m.entries.len(), 2, "the old entry was dropped");
        assert_eq!(m.forgotten, ballot(5));
    }

    #[test]
    fn verdicts() {
        let log = |entries: &[(u64, u8)], forgotten: u64| DecidedLog {
            entries: entries
                .iter()
                .map(|&(b, v)| Decided {
                    ballot: ballot(b),
                    value: value(v).id(),
                })
                .collect(),
            forgotten: ballot(forgotten),
        };
        let sent = [value(1)];
        let logs = [log(&[(10, 2)], 0), log(&[(10, 2), (12, 1)], 0)];
        assert_eq!(
            verdict(Some(&logs), &sent, ballot(9)),
            Verdict::Published(0)
        );
        let logs = [log(&[(10, 2)], 0), log(&[(11, 3)], 0)];
        assert_eq!(
            verdict(Some(&logs), &sent, ballot(9)),
            Verdict::NeverPublished
        );
        let logs = [log(&[(10, 2)], 0), log(&[(11, 3)], 9)];
        assert_eq!(verdict(Some(&logs), &sent, ballot(9)), Verdict::Unknown);
        assert_eq!(verdict(None, &sent, ballot(9)), Verdict::Unknown);
    }

    #[test]
    fn a_commit_some_log_lacks_is_to_be_sent_again() {
        let named = DecidedLog {
            entries: vec![Decided {
                ballot: ballot(4),
                value: value(1).id(),
            }],
            forgotten: Ballot::ZERO,
        };
        let empty = DecidedLog::default();
        let admits = DecidedLog {
            entries: vec![],
            forgotten: ballot(4),
        };
        assert_eq!(
            unlogged_commit(&[named.clone(), admits.clone()], Some(ballot(4))),
            None
        );
        assert_eq!(
            unlogged_commit(&[named, empty.clone()], Some(ballot(4))),
            Some((ballot(4), Some(value(1).id())))
        );
        assert_eq!(
            unlogged_commit(&[admits, empty], Some(ballot(4))),
            Some((ballot(4), None))
        );
        assert_eq!(unlogged_commit(&[DecidedLog::default()], None), None);
    }

    /// What doc/replication.md says of mixed versions: a new node reads an
    /// older node's `Commit` (no value id), and an older node cannot read
    /// the new one.
    #[test]
    fn commits_across_versions() {
        use crate::paxos::messages::{Commit, PaxosKey};
        #[derive(Serialize, Deserialize)]
        struct OlderCommit {
            key: PaxosKey,
            ballot: Ballot,
        }
        let key = PaxosKey::new(&[3; 32], "k");
        let old = rmp_serde::to_vec(&OlderCommit {
            key: key.clone(),
            ballot: ballot(4),
        })
        .unwrap();
        let read: Commit = rmp_serde::from_slice(&old).unwrap();
        assert_eq!((read.ballot, read.value), (ballot(4), None));
        let new = rmp_serde::to_vec(&Commit {
            key,
            ballot: ballot(4),
            value: Some(value(1).id()),
        })
        .unwrap();
        assert!(rmp_serde::from_slice::<OlderCommit>(&new).is_err());
    }

    proptest! {
        /// Whatever the commits, their order and timing: the memory stays
        /// bounded and sorted, and every ballot it was told of is either
        /// named with its value or at or below `forgotten` — never silently
        /// lost (the promise `verdict` rests on).
        #[test]
        fn nothing_told_is_lost_silently(
            commits in proptest::collection::vec((0u64..40, proptest::option::of(0u8..4), 0u64..3_000), 0..60)
        ) {
            let mut m = DecidedMemory::default();
            let mut now = 0;
            let mut told: Vec<(Ballot, Option<ValueId>)> = Vec::new();
            for (b, v, step) in commits {
                now += step * 1_000;
                let id = v.map(|v| value(v).id());
                m.record(ballot(b), id, now);
                told.push((ballot(b), id));
                prop_assert!(m.entries.len() <= MAX_DECIDED);
                prop_assert!(m.entries.windows(2).all(|w| w[0].ballot < w[1].ballot));
                let log = m.log(None, now);
                for &(b, _) in &told {
                    let named = log.entries.iter().find(|d| d.ballot == b);
                    match named {
                        Some(d) => prop_assert!(
                            told.iter().any(|&(tb, tid)| tb == b && tid == Some(d.value)),
                            "ballot {b} named with a value never told: {log:?}"
                        ),
                        None => prop_assert!(
                            log.forgotten >= b,
                            "ballot {b} lost: {log:?}"
                        ),
                    }
                }
            }
        }
    }
}
