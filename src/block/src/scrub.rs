//! The scrub worker: re-reads every block this node counts, slowly, and
//! checks it against its blake3 name. A corrupt copy is quarantined (moved
//! aside, not deleted) and queued for resync, which fetches a good copy
//! from another node ([`BlockManager::verify`]).
//!
//! Blocks are visited in hash order (the `block_rc` tree); the state —
//! running, paused, idle — and the cursor (the last hash checked) are
//! persisted in the tree `scrub_state` after every page, so a scrub
//! survives restarts and resumes where it was. After each block the worker
//! idles `tranquility ×` the time the block took (runtime setting
//! `scrub-tranquility`), so a scrub uses a bounded share of the disk. A
//! finished pass starts again after [`SCRUB_INTERVAL`] unless
//! `disable_scrub` is set; `hangar repair scrub start|pause|resume|cancel`
//! drives it by hand.
//!
//! `scrub_state`, key `b"state"`: MessagePack [`ScrubState`] (a map).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use hangar_db::DbError;
use hangar_util::Hash;
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerHandle, WorkerState};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::manager::BlockManager;
use crate::messages::CheckReply;
use crate::refcount::RC_TREE;
use crate::{BlockError, Result};

const STATE_TREE: &str = "scrub_state";
const STATE_KEY: &[u8] = b"state";
/// Time between the end of a pass and the start of the next.
pub const SCRUB_INTERVAL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default tranquility.
pub const DEFAULT_TRANQUILITY: u32 = 4;
/// Blocks read between two saves of the cursor.
const PAGE: usize = 64;

/// Where a scrub is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScrubStatus {
    /// No pass running; the next starts `SCRUB_INTERVAL` after the last.
    #[default]
    Idle,
    Running,
    Paused,
}

/// The persisted state of the scrub, which the admin operations also
/// answer (`hangar worker info block-scrub`, `hangar repair scrub …`). A
/// field missing from what was stored or sent reads as its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScrubState {
    pub status: ScrubStatus,
    /// The last block checked in this pass (hex), if any.
    pub cursor: Option<String>,
    /// When this pass started (ms since the epoch).
    pub pass_started_msec: Option<u64>,
    /// When the last pass finished.
    pub last_pass_done_msec: Option<u64>,
    /// Blocks checked in this pass.
    pub checked: u64,
    /// Corrupt copies found (and quarantined) in this pass.
    pub corrupt: u64,
    /// Bytes read in this pass.
    pub bytes: u64,
}

impl ScrubState {
    /// How much of the hash space the pass under way has covered, from 0
    /// to 1 (0 when no pass is running or paused).
    pub fn progress(&self) -> f64 {
        match (self.status, self.cursor.as_deref()) {
            (ScrubStatus::Idle, _) | (_, None) => 0.0,
            (_, Some(c)) => position(c) / 100.0,
        }
    }
}

/// An operator's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrubCommand {
    Start,
    Pause,
    Resume,
    Cancel,
}

/// The scrub of one node.
pub struct Scrub {
    mgr: Arc<BlockManager>,
    tranquility: AtomicU32,
    /// `disable_scrub`: no pass starts by itself.
    automatic: bool,
    wake: Notify,
}

impl Scrub {
    pub fn new(mgr: Arc<BlockManager>, tranquility: u32, automatic: bool) -> Arc<Scrub> {
        Arc::new(Scrub {
            mgr,
            tranquility: AtomicU32::new(tranquility),
            automatic,
            wake: Notify::new(),
        })
    }

    pub fn tranquility(&self) -> u32 {
        self.tranquility.load(Ordering::Relaxed)
    }

    pub fn set_tranquility(&self, t: u32) {
        self.tranquility.store(t, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// The persisted state.
    pub async fn state(&self) -> Result<ScrubState> {
        Ok(self
            .mgr
            .metadata()
            .get_async(STATE_TREE, STATE_KEY.to_vec())
            .await?
            .and_then(|v| rmp_serde::from_slice(&v).ok())
            .unwrap_or_default())
    }

    async fn save(&self, st: &ScrubState) -> Result<()> {
        let v = rmp_serde::to_vec_named(st).expect("ScrubState encodes");
        self.mgr
            .metadata()
            .write(move |tx| {
                tx.put(STATE_TREE, STATE_KEY.to_vec(), v);
                Ok::<_, DbError>(())
            })
            .await?;
        Ok(())
    }

    /// Applies an operator's command; returns the new state, or why the
    /// command does not apply now.
    pub async fn command(&self, cmd: ScrubCommand) -> std::result::Result<ScrubState, String> {
        let mut st = self.state().await.map_err(|e| e.to_string())?;
        match (cmd, st.status) {
            (ScrubCommand::Start, ScrubStatus::Running | ScrubStatus::Paused) => {
                return Err(format!(
                    "a scrub is already {}: pause, resume or cancel it",
                    if st.status == ScrubStatus::Running {
                        "running"
                    } else {
                        "paused"
                    }
                ));
            }
            (ScrubCommand::Start, ScrubStatus::Idle) => st = new_pass(st.last_pass_done_msec),
            (ScrubCommand::Pause, ScrubStatus::Running) => st.status = ScrubStatus::Paused,
            (ScrubCommand::Resume, ScrubStatus::Paused) => st.status = ScrubStatus::Running,
            (ScrubCommand::Cancel, ScrubStatus::Running | ScrubStatus::Paused) => {
                st.status = ScrubStatus::Idle;
                st.cursor = None;
            }
            (c, s) => return Err(format!("cannot {c:?} a scrub that is {s:?}").to_lowercase()),
        }
        self.save(&st).await.map_err(|e| e.to_string())?;
        self.wake.notify_one();
        Ok(st)
    }

    /// Runs the worker forever, reporting as `w`.
    pub async fn run(self: Arc<Self>, w: WorkerHandle) {
        loop {
            let st = match self.state().await {
                Ok(s) => s,
                Err(e) => {
                    w.record_error(&e);
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    continue;
                }
            };
            report(&w, &st);
            match st.status {
                ScrubStatus::Running => {
                    w.set_state(WorkerState::Busy);
                    if let Err(e) = self.page(st, &w).await {
                        w.record_error(&e);
                        tracing::warn!("scrub: {e}");
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                }
                ScrubStatus::Idle
                    if self.automatic
                        && st.last_pass_done_msec.is_none_or(|t| {
                            now_msec() >= t + SCRUB_INTERVAL.as_millis() as u64
                        }) =>
                {
                    let next = new_pass(st.last_pass_done_msec);
                    if let Err(e) = self.save(&next).await {
                        w.record_error(&e);
                    }
                }
                _ => {
                    w.set_state(WorkerState::Idle);
                    let _ =
                        tokio::time::timeout(Duration::from_secs(60), self.wake.notified()).await;
                }
            }
        }
    }

    /// Checks one page of blocks after the cursor and saves the state.
    async fn page(&self, mut st: ScrubState, w: &WorkerHandle) -> Result<()> {
        let start = match st.cursor.as_deref().and_then(Hash::from_hex) {
            Some(h) => Bound::Excluded(h.as_bytes().to_vec()),
            None => Bound::Unbounded,
        };
        let keys = self
            .mgr
            .metadata()
            .range_async(RC_TREE, start, Bound::Unbounded, false, PAGE)
            .await?;
        if keys.is_empty() {
            st.status = ScrubStatus::Idle;
            st.cursor = None;
            st.last_pass_done_msec = Some(now_msec());
            tracing::info!(
                "scrub: pass done: {} blocks checked ({} MiB), {} corrupt",
                st.checked,
                st.bytes >> 20,
                st.corrupt
            );
            w.add_processed(0);
            return self.save(&st).await;
        }
        for (k, _) in keys {
            let Some(h) = Hash::from_slice(&k) else {
                continue;
            };
            // A pause or cancel takes effect within one block.
            if self.state().await?.status != ScrubStatus::Running {
                return Ok(());
            }
            let t0 = Instant::now();
            if self.mgr.has_file(&h) {
                match self.mgr.verify(h).await {
                    Ok(CheckReply::Good) => {}
                    Ok(CheckReply::Quarantined) => st.corrupt += 1,
                    Ok(CheckReply::Missing) => {}
                    Err(BlockError::Missing(_)) => {}
                    Err(e) => {
                        w.record_error(format!("block {h}: {e}"));
                    }
                }
                st.checked += 1;
                st.bytes += self.mgr.stored_len(&h).unwrap_or(0);
                w.add_processed(1);
            }
            st.cursor = Some(h.to_hex());
            let t = self.tranquility();
            if t > 0 {
                tokio::time::sleep(t0.elapsed().saturating_mul(t)).await;
            }
        }
        self.save(&st).await?;
        report(w, &st);
        Ok(())
    }
}

fn new_pass(last_done: Option<u64>) -> ScrubState {
    ScrubState {
        status: ScrubStatus::Running,
        pass_started_msec: Some(now_msec()),
        last_pass_done_msec: last_done,
        ..ScrubState::default()
    }
}

fn report(w: &WorkerHandle, st: &ScrubState) {
    let at = st
        .cursor
        .as_deref()
        .map(|c| format!(", at {:.1} % of the hash space", position(c)))
        .unwrap_or_default();
    w.set_progress(
        format!(
            "{:?}: {} blocks checked ({} MiB), {} corrupt this pass{at}",
            st.status,
            st.checked,
            st.bytes >> 20,
            st.corrupt
        )
        .to_lowercase(),
        None,
    );
}

/// How far into the hash space a cursor is, in percent (hashes are
/// uniform, so this is the share of blocks checked).
fn position(cursor_hex: &str) -> f64 {
    let top = u32::from_str_radix(cursor_hex.get(..8).unwrap_or("0"), 16).unwrap_or(0);
    top as f64 / u32::MAX as f64 * 100.0
}
