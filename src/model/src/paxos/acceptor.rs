//! The acceptor: one node's durable Paxos state per object key, in its own
//! store (tree [`PAXOS_TREE`], never replicated).
//!
//! Every answer is given after the state it depends on is written (one
//! group commit: synced when `metadata_fsync` is on, the default, else
//! journalled), so a node that restarts after a crash keeps its promises
//! and accepted values (after a power cut only with `metadata_fsync`).
//!
//! Bounded: nothing is held in memory per key. An entry whose value was
//! committed (or is dead) is removed [`KEEP_MSEC`] after its last change,
//! by a sweep that runs at most once a minute from the handlers; the
//! highest ballot promised by a removed entry is kept in one floor entry,
//! and every key's promise is at least that floor, so a removal never lets
//! an old round's accept through. An accepted value is dead once this
//! node accepted it [`VALUE_DEAD_AFTER_MSEC`] ago, by its own clock: a
//! proposer completes an unfinished round long before (the next round on
//! the key does), and a proposer gives up on its own round within
//! [`super::ROUND_DEADLINE`]. The ballot's counter is the proposer's clock,
//! not this node's: comparing it with this node's clock made a value
//! accepted a moment ago dead at once when the two clocks were 10 minutes
//! apart, and two conditional writers could both win.
//!
//! Each entry also logs the ids of the values this node learnt decided for
//! its key lately ([`super::decided`]), which a prepare answers, so that a
//! proposer can tell whether its value was ever published.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hangar_db::{Db, DbError, Tx};
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};

use super::Ballot;
use super::decided::{DecidedMemory, ValueId};
use super::messages::{AcceptReply, Accepted, PaxosKey, PrepareReply, Proposal};

/// The acceptor's tree in the node's store.
pub const PAXOS_TREE: &str = "paxos_object";
/// The entry of the floor (shorter than any key's entry, which starts with
/// a 32-byte bucket id).
const FLOOR_KEY: &[u8] = b"floor";
/// An accepted value that this node accepted longer ago than this (by its
/// own clock) is ignored.
pub const VALUE_DEAD_AFTER_MSEC: u64 = 10 * 60 * 1000;
/// How long an entry without a live value is kept after its last change:
/// past [`VALUE_DEAD_AFTER_MSEC`], so that every value that a round may
/// still complete meets the entries that know it was superseded.
pub const KEEP_MSEC: u64 = 30 * 60 * 1000;
/// Least time between two sweeps.
const SWEEP_EVERY_MSEC: u64 = 60 * 1000;
/// Entries one sweep looks at, at most.
const SWEEP_LIMIT: usize = 10_000;
const SWEEP_PAGE: usize = 500;

/// One key's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptorState {
    /// No ballot below this one is promised or accepted.
    pub promised: Ballot,
    /// The last value accepted, until a commit of its ballot or a later one.
    pub accepted: Option<Accepted>,
    /// The highest ballot known committed for this key.
    pub committed: Option<Ballot>,
    /// When this node last changed the entry (its clock).
    pub touched_msec: u64,
    /// When this node accepted `accepted` (its clock; 0 in the entries of
    /// older binaries, whose age is then taken from `touched_msec`, which
    /// is never earlier).
    #[serde(default)]
    pub accepted_msec: u64,
    /// The values this node learnt decided lately (`decided.rs`; empty in
    /// the entries of older binaries, whose commits count as forgotten).
    #[serde(default)]
    pub decided: DecidedMemory,
}

impl AcceptorState {
    /// The accepted value, unless it is dead at `now` (this node's clock).
    /// Its age is measured on this node's clock alone: never the ballot's
    /// counter, which is the proposer's clock.
    fn live_accepted(&self, now: u64) -> Option<&Accepted> {
        let since = match self.accepted_msec {
            0 => self.touched_msec,
            t => t,
        };
        self.accepted
            .as_ref()
            .filter(|_| since.saturating_add(VALUE_DEAD_AFTER_MSEC) >= now)
    }

    /// Phase 1 on this state.
    pub fn prepare(&mut self, b: Ballot, floor: Ballot, now: u64) -> PrepareReply {
        let promised = self.promised.max(floor);
        if b <= promised {
            return PrepareReply::Rejected { promised };
        }
        self.promised = b;
        self.touched_msec = now;
        PrepareReply::Promise {
            accepted: self.live_accepted(now).cloned(),
            committed: self.committed,
            decided: Some(self.decided.log(self.committed, now)),
        }
    }

    /// Phase 2 on this state.
    pub fn accept(&mut self, b: Ballot, value: Proposal, floor: Ballot, now: u64) -> AcceptReply {
        let promised = self.promised.max(floor);
        if b < promised {
            return AcceptReply::Rejected { promised };
        }
        self.promised = b;
        self.accepted = Some(Accepted { ballot: b, value });
        self.accepted_msec = now;
        self.touched_msec = now;
        AcceptReply::Accepted
    }

    /// The value of ballot `b` is published; `value` is its id if the
    /// sender knows it (else this node's, if it accepted that value).
    pub fn commit(&mut self, b: Ballot, value: Option<ValueId>, now: u64) {
        let value = value.or_else(|| {
            self.accepted
                .as_ref()
                .filter(|a| a.ballot == b)
                .map(|a| a.value.id())
        });
        self.decided.record(b, value, now);
        if self.committed.is_none_or(|c| c < b) {
            self.committed = Some(b);
        }
        if self.accepted.as_ref().is_some_and(|a| a.ballot <= b) {
            self.accepted = None;
            self.accepted_msec = 0;
        }
        self.touched_msec = now;
    }

    /// Whether the entry can be removed at `now`.
    fn collectable(&self, now: u64) -> bool {
        self.live_accepted(now).is_none() && self.touched_msec.saturating_add(KEEP_MSEC) < now
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub looked_at: usize,
    pub removed: usize,
}

/// One node's acceptor over its store.
pub struct Acceptor {
    db: Db,
    last_sweep_msec: AtomicU64,
}

fn decode_state(v: &[u8]) -> Result<AcceptorState, DbError> {
    rmp_serde::from_slice(v).map_err(|e| DbError::Engine {
        engine: "paxos acceptor",
        message: format!("undecodable acceptor state: {e}"),
    })
}

fn encode_state(s: &AcceptorState) -> Vec<u8> {
    rmp_serde::to_vec_named(s).expect("acceptor state encodes")
}

fn read_floor(tx: &Tx<'_>) -> Result<Ballot, DbError> {
    Ok(match tx.get(PAXOS_TREE, FLOOR_KEY)? {
        Some(v) => rmp_serde::from_slice(&v).map_err(|e| DbError::Engine {
            engine: "paxos acceptor",
            message: format!("undecodable floor: {e}"),
        })?,
        None => Ballot::ZERO,
    })
}

impl Acceptor {
    pub fn new(db: Db) -> Arc<Acceptor> {
        Arc::new(Acceptor {
            db,
            last_sweep_msec: AtomicU64::new(now_msec()),
        })
    }

    /// Reads, changes and writes one key's state in one transaction;
    /// returns what `f` returns once the change is durable.
    async fn update<R: Send + 'static>(
        &self,
        key: &PaxosKey,
        f: impl FnOnce(&mut AcceptorState, Ballot, u64) -> R + Send + 'static,
    ) -> Result<R, DbError> {
        let k = key.storage_key();
        let r = self
            .db
            .write(move |tx| {
                let floor = read_floor(tx)?;
                let mut s = match tx.get(PAXOS_TREE, &k)? {
                    Some(v) => decode_state(&v)?,
                    None => AcceptorState::default(),
                };
                let before = s.clone();
                let r = f(&mut s, floor, now_msec());
                if s != before {
                    tx.put(PAXOS_TREE, k, encode_state(&s));
                }
                Ok::<_, DbError>(r)
            })
            .await?;
        self.maybe_sweep();
        Ok(r)
    }

    pub async fn prepare(&self, key: &PaxosKey, b: Ballot) -> Result<PrepareReply, DbError> {
        self.update(key, move |s, floor, now| s.prepare(b, floor, now))
            .await
    }

    pub async fn accept(
        &self,
        key: &PaxosKey,
        b: Ballot,
        value: Proposal,
    ) -> Result<AcceptReply, DbError> {
        self.update(key, move |s, floor, now| s.accept(b, value, floor, now))
            .await
    }

    pub async fn commit(
        &self,
        key: &PaxosKey,
        b: Ballot,
        value: Option<ValueId>,
    ) -> Result<(), DbError> {
        self.update(key, move |s, _, now| s.commit(b, value, now))
            .await
    }

    /// This node's state of `key` (tests, tools).
    pub async fn state(&self, key: &PaxosKey) -> Result<Option<AcceptorState>, DbError> {
        self.db
            .get_async(PAXOS_TREE, key.storage_key())
            .await?
            .map(|v| decode_state(&v))
            .transpose()
    }

    /// How many entries the tree holds (the floor included; tests, tools).
    pub async fn entries(&self) -> Result<usize, DbError> {
        let mut n = 0;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.clone().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self
                .db
                .range_async(PAXOS_TREE, start, Bound::Unbounded, false, SWEEP_PAGE)
                .await?;
            let Some((last, _)) = page.last() else {
                return Ok(n);
            };
            n += page.len();
            after = Some(last.clone());
        }
    }

    /// Starts a sweep in the background if the last one is a minute old.
    fn maybe_sweep(self: &Acceptor) {
        let now = now_msec();
        let last = self.last_sweep_msec.load(Ordering::Relaxed);
        if now < last.saturating_add(SWEEP_EVERY_MSEC)
            || self
                .last_sweep_msec
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let db = self.db.clone();
        tokio::spawn(async move {
            if let Err(e) = sweep(&db, now_msec(), SWEEP_LIMIT).await {
                tracing::warn!("paxos acceptor sweep: {e}");
            }
        });
    }

    /// Removes the entries collectable at `now` (at most `limit` looked
    /// at), raising the floor to their promises.
    pub async fn sweep(&self, now: u64, limit: usize) -> Result<SweepReport, DbError> {
        sweep(&self.db, now, limit).await
    }
}

async fn sweep(db: &Db, now: u64, limit: usize) -> Result<SweepReport, DbError> {
    let mut report = SweepReport::default();
    let mut after: Option<Vec<u8>> = None;
    while report.looked_at < limit {
        let start = after.clone().map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(PAXOS_TREE, start, Bound::Unbounded, false, SWEEP_PAGE)
            .await?;
        let Some((last, _)) = page.last() else {
            break;
        };
        after = Some(last.clone());
        report.looked_at += page.len();
        let candidates: Vec<Vec<u8>> = page
            .into_iter()
            .filter(|(k, v)| {
                k.as_slice() != FLOOR_KEY && decode_state(v).is_ok_and(|s| s.collectable(now))
            })
            .map(|(k, _)| k)
            .collect();
        if candidates.is_empty() {
            continue;
        }
        // Checked again inside the transaction: a round may have touched
        // the entry since it was read.
        report.removed += db
            .write(move |tx| {
                let mut floor = read_floor(tx)?;
                let mut removed = 0;
                for k in candidates {
                    let Some(v) = tx.get(PAXOS_TREE, &k)? else {
                        continue;
                    };
                    let s = decode_state(&v)?;
                    if s.collectable(now) {
                        floor = floor.max(s.promised);
                        tx.delete(PAXOS_TREE, k);
                        removed += 1;
                    }
                }
                if removed > 0 {
                    tx.put(
                        PAXOS_TREE,
                        FLOOR_KEY.to_vec(),
                        rmp_serde::to_vec(&floor).expect("ballot encodes"),
                    );
                }
                Ok::<_, DbError>(removed)
            })
            .await?;
    }
    Ok(report)
}
