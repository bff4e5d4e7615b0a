//! The proposer: one conditional write, decided by as many Paxos rounds as
//! it takes (module documentation of [`super`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hangar_layout::WriteSet;
use hangar_net::NetError;
use hangar_util::NodeId;
use rand::Rng;

use super::decided::{self, DecidedLog, ValueId, Verdict};
use super::messages::{
    Accept, AcceptReply, Accepted, Commit, PaxosKey, Prepare, PrepareReply, Proposal,
};
use super::{Ballot, BallotClock};
use crate::{ModelError, Result};

/// Rounds one write tries before it gives up (`503 SlowDown`).
pub const MAX_ROUNDS: usize = 12;
/// Longest a conditional write keeps trying.
pub const ROUND_DEADLINE: Duration = Duration::from_secs(20);
/// How long into a write the acceptors' logs of decided values still hold
/// every decision since its first accept: well inside
/// [`super::decided::DECIDED_KEEP_MSEC`], whatever a slow phase adds to
/// [`ROUND_DEADLINE`].
const LOGS_TRUSTED_FOR: Duration = Duration::from_secs(60);
/// First backoff after a refused round; doubled each time, up to
/// [`MAX_BACKOFF`], with random jitter.
const BACKOFF: Duration = Duration::from_millis(4);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// How a proposer reaches the acceptors of one key.
#[async_trait]
pub trait Link: Send + Sync + 'static {
    /// This node.
    fn me(&self) -> NodeId;
    /// The key's acceptors: one set per active layout version.
    fn sets(&self) -> Vec<WriteSet>;
    /// Whether `n` is up per the failure detector.
    fn is_up(&self, n: NodeId) -> bool;
    async fn prepare(&self, to: NodeId, m: Prepare) -> std::result::Result<PrepareReply, NetError>;
    async fn accept(&self, to: NodeId, m: Accept) -> std::result::Result<AcceptReply, NetError>;
    async fn commit(&self, to: NodeId, m: Commit) -> std::result::Result<(), NetError>;
}

/// The register the rounds decide about: reading it, and publishing a
/// decided value.
#[async_trait]
pub trait Register: Send + Sync {
    /// Read after a promise (at the read quorum): this proposer's value if
    /// its condition holds on what is stored now, `None` if it does not.
    async fn propose(&self) -> Result<Option<Proposal>>;
    /// Publishes a decided value (the normal write at quorum); idempotent.
    async fn publish(&self, value: &Proposal) -> Result<()>;
    /// Whether `value`, one of this proposer's, is published (a later
    /// round completed it).
    async fn is_published(&self, value: &Proposal) -> Result<bool>;
    /// Whether `value`, one of this proposer's sent in an earlier accept
    /// and not published now, is still newer than everything stored (read
    /// at the read quorum): nothing was written at or past its timestamp,
    /// so it was never published (a published value is kept until a newer
    /// write replaces it). Only then may it be proposed again.
    async fn still_newest(&self, value: &Proposal) -> Result<bool>;
}

/// How a conditional write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// This value was decided and published.
    Published(Proposal),
    /// The condition does not hold; nothing of this write can ever be
    /// published.
    PreconditionFailed,
}

/// Why a quorum phase did not succeed.
enum PhaseError {
    /// An acceptor promised a higher ballot: retry.
    Refused,
    /// Too few acceptors are up or answered.
    Unavailable(String),
}

/// Sends one message to every acceptor and waits for a majority of each
/// set; a refusal counts as a failure and its ballot is observed.
async fn phase<R, F, Fut>(
    link: &Arc<dyn Link>,
    clock: &BallotClock,
    call: F,
    refused: impl Fn(&R) -> Option<Ballot> + Send + Sync + 'static,
) -> std::result::Result<Vec<(NodeId, R)>, PhaseError>
where
    R: Send + 'static,
    F: Fn(Arc<dyn Link>, NodeId) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<R, NetError>> + Send + 'static,
{
    let sets = link.sets();
    let quorum = majority(&sets);
    let refusals = Arc::new(AtomicUsize::new(0));
    let highest = Arc::new(std::sync::Mutex::new(Ballot::ZERO));
    // A refusal ends the phase at once: the ballot is beaten, and waiting
    // for the other answers could mean waiting for a paused node's timeout.
    let refused_now = Arc::new(tokio::sync::Notify::new());
    let refused = Arc::new(refused);
    let l = link.clone();
    let quorum_call = hangar_cluster::call_quorum_per_version_with(
        &sets,
        quorum,
        |n| l.is_up(n),
        |n| {
            let fut = call(link.clone(), n);
            let (refusals, highest, refused, refused_now) = (
                refusals.clone(),
                highest.clone(),
                refused.clone(),
                refused_now.clone(),
            );
            async move {
                let r = fut.await?;
                if let Some(b) = refused(&r) {
                    refusals.fetch_add(1, Ordering::Relaxed);
                    {
                        let mut h = highest.lock().expect("not poisoned");
                        *h = (*h).max(b);
                    }
                    refused_now.notify_one();
                    return Err(NetError::Remote {
                        endpoint: "paxos".into(),
                        message: format!("refused: promised {b}"),
                    });
                }
                Ok(r)
            }
        },
    );
    let result = tokio::select! {
        r = quorum_call => r,
        _ = refused_now.notified() => {
            clock.observe(*highest.lock().expect("not poisoned"));
            return Err(PhaseError::Refused);
        }
    };
    clock.observe(*highest.lock().expect("not poisoned"));
    match result {
        Ok(r) => Ok(r),
        Err(_) if refusals.load(Ordering::Relaxed) > 0 => Err(PhaseError::Refused),
        Err(e) => Err(PhaseError::Unavailable(e.to_string())),
    }
}

/// A strict majority of the replication factor (each set has that many
/// nodes): any two meet in every set.
fn majority(sets: &[WriteSet]) -> usize {
    let rf = sets.iter().map(|s| s.nodes.len()).max().unwrap_or(1);
    rf / 2 + 1
}

/// One conditional write: proposes `register`'s value for `key` until it
/// is decided, or the condition fails, or it gives up.
///
/// Errors: [`ModelError::ConditionalWrite`] when too few acceptors answer
/// (at once when the failure detector already knows) or after
/// [`MAX_ROUNDS`] refused rounds; its `outcome_unknown` is set when a
/// value of this write may have been accepted somewhere, so it may still
/// be published by a later round (the caller must keep its data).
pub async fn run(
    link: Arc<dyn Link>,
    clock: &BallotClock,
    key: &PaxosKey,
    register: &dyn Register,
) -> Result<Outcome> {
    rounds(link, clock, key, register, false).await
}

/// Settles `key`: completes a value an earlier round may have decided,
/// then decides `Nothing`, so that no value accepted before can ever be
/// completed later. After it returns `Ok`, whether a write's value is
/// published is final (the start-up scan asks it before releasing the
/// blocks of an interrupted upload). `register` proposes nothing of its
/// own.
pub async fn settle(
    link: Arc<dyn Link>,
    clock: &BallotClock,
    key: &PaxosKey,
    register: &dyn Register,
) -> Result<()> {
    rounds(link, clock, key, register, true).await.map(|_| ())
}

async fn rounds(
    link: Arc<dyn Link>,
    clock: &BallotClock,
    key: &PaxosKey,
    register: &dyn Register,
    settling: bool,
) -> Result<Outcome> {
    let start = Instant::now();
    // Values of this write sent in an accept: one of them may be completed
    // by a later round, whatever this proposer answers.
    let mut sent: Vec<Proposal> = Vec::new();
    // The ballot of this write's first accept: every decision of one of
    // its values is in this ballot or a later one (decided.rs).
    let mut first_sent: Option<Ballot> = None;
    let mut refused_rounds = 0;
    let mut backoff = BACKOFF;
    let fail = |reason: String, sent: &[Proposal], contended: bool| ModelError::ConditionalWrite {
        reason,
        contended,
        outcome_unknown: !sent.is_empty(),
    };
    loop {
        if refused_rounds >= MAX_ROUNDS || start.elapsed() > ROUND_DEADLINE {
            return Err(fail(
                format!(
                    "conditional write of {:?}: {refused_rounds} Paxos rounds were refused by concurrent writers of the key in {:?}; retry later",
                    key.key,
                    start.elapsed()
                ),
                &sent,
                true,
            ));
        }
        if refused_rounds > 0 {
            let jitter = rand::rng().random_range(0..=backoff.as_micros() as u64);
            tokio::time::sleep(backoff / 2 + Duration::from_micros(jitter / 2)).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let b = clock.next(link.me());
        // Phase 1.
        let k = key.clone();
        let promises = match phase(
            &link,
            clock,
            move |l, n| {
                let m = Prepare {
                    key: k.clone(),
                    ballot: b,
                };
                async move { l.prepare(n, m).await }
            },
            |r: &PrepareReply| match r {
                PrepareReply::Rejected { promised } => Some(*promised),
                PrepareReply::Promise { .. } => None,
            },
        )
        .await
        {
            Ok(p) => p,
            Err(PhaseError::Refused) => {
                refused_rounds += 1;
                continue;
            }
            Err(PhaseError::Unavailable(e)) => {
                return Err(fail(
                    format!(
                        "conditional write of {:?}: no quorum of the key's nodes promised: {e}",
                        key.key
                    ),
                    &sent,
                    false,
                ));
            }
        };
        let mut highest: Option<Accepted> = None;
        let mut committed: Option<Ballot> = None;
        // `None` when an acceptor of an older binary keeps no log.
        let mut logs: Option<Vec<DecidedLog>> = Some(Vec::new());
        for (_, r) in promises {
            if let PrepareReply::Promise {
                accepted,
                committed: c,
                decided,
            } = r
            {
                committed = committed.max(c);
                match (decided, logs.as_mut()) {
                    (Some(d), Some(l)) => l.push(d),
                    _ => logs = None,
                }
                if let Some(a) = accepted
                    && highest.as_ref().is_none_or(|h| a.ballot > h.ballot)
                {
                    highest = Some(a);
                }
            }
        }
        // An earlier round's value, accepted and maybe decided but not
        // known published: complete it first, in this ballot.
        if let Some(a) = highest.filter(|a| Some(a.ballot) > committed) {
            // Debug, not info: a concurrent writer's round in flight looks
            // the same, and contended keys would fill the log.
            tracing::debug!(
                "conditional write of {:?}{}: completing the value accepted in {} ({}), last commit {committed:?}, in {b}",
                key.key,
                if settling { " (settling)" } else { "" },
                a.ballot,
                match &a.value {
                    Proposal::Nothing => "nothing",
                    Proposal::Publish { .. } => "a row",
                }
            );
            match decide(&link, clock, key, b, a.value.clone()).await {
                Ok(()) => {}
                Err(PhaseError::Refused) => {
                    refused_rounds += 1;
                    continue;
                }
                Err(PhaseError::Unavailable(e)) => {
                    return Err(fail(
                        format!(
                            "conditional write of {:?}: completing an earlier round: {e}",
                            key.key
                        ),
                        &sent,
                        false,
                    ));
                }
            }
            if let Err(e) = register.publish(&a.value).await {
                return Err(fail(
                    format!(
                        "conditional write of {:?}: publishing an earlier round's value: {e}",
                        key.key
                    ),
                    &sent,
                    false,
                ));
            }
            // The commit reaches a majority before the next round: a
            // prepare that overtook it would find this ballot's value
            // accepted and not committed and complete it again, and with
            // commits slower than prepares, again until the deadline
            // (tests/paxos.rs, slow commits).
            if log_commit(&link, clock, key, b, Some(a.value.id()))
                .await
                .is_err()
            {
                committed_everywhere(&link, key, b, Some(a.value.id())).await;
            }
            if sent.contains(&a.value) {
                return Ok(Outcome::Published(a.value));
            }
            continue;
        }
        // Nothing new is decided before the last decision is in the log of
        // a majority (decided.rs): re-send its commit if a log lacks it.
        if let Some(l) = &logs
            && let Some((c, id)) = decided::unlogged_commit(l, committed)
            && let Err(e) = log_commit(&link, clock, key, c, id).await
        {
            let e = match e {
                PhaseError::Refused => "refused".to_owned(),
                PhaseError::Unavailable(e) => e,
            };
            return Err(fail(
                format!(
                    "conditional write of {:?}: logging the last decision: {e}",
                    key.key
                ),
                &sent,
                false,
            ));
        }
        let verdict = match first_sent {
            None => Verdict::NeverPublished,
            // Past this, an acceptor may have dropped the log entry of one
            // of our values: ask no more of the logs.
            Some(_) if start.elapsed() > LOGS_TRUSTED_FOR => Verdict::Unknown,
            Some(first) => decided::verdict(logs.as_deref(), &sent, first),
        };
        if let Verdict::Published(i) = verdict {
            return Ok(Outcome::Published(sent[i].clone()));
        }
        for v in &sent {
            if register.is_published(v).await? {
                return Ok(Outcome::Published(v.clone()));
            }
        }
        let value = match register.propose().await? {
            Some(v) => match sent.last() {
                None => v,
                // Our value again, as it was sent (never re-stamped): a
                // new value would be a second publication of this write.
                Some(ours) if all_newest(register, &sent).await? => ours.clone(),
                // None of ours was ever published (the logs say so): a new
                // value, stamped past what is stored now, is the only one
                // of this write that can be.
                Some(_) if verdict == Verdict::NeverPublished => v,
                // The key was written at or past our value's timestamp:
                // a later round may have published our value, and a
                // write replaced it since (a DELETE). Publishing it again,
                // re-stamped past that write, would bring back a row whose
                // blocks its replacement released. Which happened cannot
                // be told here: the outcome is unknown.
                Some(_) => {
                    return Err(fail(
                        format!(
                            "conditional write of {:?}: the key was written after this write's value was sent for acceptance; a concurrent round may have published it meanwhile: outcome unknown",
                            key.key
                        ),
                        &sent,
                        false,
                    ));
                }
            },
            None if sent.is_empty() && !settling => return Ok(Outcome::PreconditionFailed),
            // A value of ours may sit accepted somewhere: decide "nothing"
            // in this ballot, so that no later round can complete it.
            None => Proposal::Nothing,
        };
        if value != Proposal::Nothing {
            sent.push(value.clone());
            first_sent.get_or_insert(b);
        }
        match decide(&link, clock, key, b, value.clone()).await {
            Ok(()) => {}
            Err(PhaseError::Refused) => {
                refused_rounds += 1;
                continue;
            }
            Err(PhaseError::Unavailable(e)) => {
                return Err(fail(
                    format!(
                        "conditional write of {:?}: no quorum of the key's nodes accepted: {e}",
                        key.key
                    ),
                    &sent,
                    false,
                ));
            }
        }
        if value == Proposal::Nothing {
            committed_everywhere(&link, key, b, Some(value.id())).await;
            // A value of ours may have been published by another round
            // and replaced since by a write past it: then this write
            // happened, and 412 would be a lie. Unless the logs or the
            // register rule that out, the outcome is unknown.
            if verdict != Verdict::NeverPublished && !all_newest(register, &sent).await? {
                return Err(fail(
                    format!(
                        "conditional write of {:?}: its condition fails now, but the key was written after this write's value was sent for acceptance, and whether a concurrent round published that value meanwhile cannot be told: outcome unknown",
                        key.key
                    ),
                    &sent,
                    false,
                ));
            }
            return Ok(Outcome::PreconditionFailed);
        }
        if let Err(e) = register.publish(&value).await {
            // Decided: a later round publishes it if this one cannot.
            return Err(fail(
                format!(
                    "conditional write of {:?}: decided, but publishing failed (a later write of the key completes it): {e}",
                    key.key
                ),
                &sent,
                false,
            ));
        }
        committed_everywhere(&link, key, b, Some(value.id())).await;
        return Ok(Outcome::Published(value));
    }
}

/// Phase 2: `value` accepted in `b` by a majority of every set.
async fn decide(
    link: &Arc<dyn Link>,
    clock: &BallotClock,
    key: &PaxosKey,
    b: Ballot,
    value: Proposal,
) -> std::result::Result<(), PhaseError> {
    let k = key.clone();
    phase(
        link,
        clock,
        move |l, n| {
            let m = Accept {
                key: k.clone(),
                ballot: b,
                value: value.clone(),
            };
            async move { l.accept(n, m).await }
        },
        |r: &AcceptReply| match r {
            AcceptReply::Rejected { promised } => Some(*promised),
            AcceptReply::Accepted => None,
        },
    )
    .await
    .map(|_| ())
}

/// Whether every value of `sent` is newer than everything stored
/// ([`Register::still_newest`]): then none of them was ever published.
async fn all_newest(register: &dyn Register, sent: &[Proposal]) -> Result<bool> {
    for v in sent {
        if !register.still_newest(v).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Tells the acceptors that the value of `b` (`value`, when known) is
/// published, and waits until a majority of every set has logged it.
async fn log_commit(
    link: &Arc<dyn Link>,
    clock: &BallotClock,
    key: &PaxosKey,
    b: Ballot,
    value: Option<ValueId>,
) -> std::result::Result<(), PhaseError> {
    let k = key.clone();
    phase(
        link,
        clock,
        move |l, n| {
            let m = Commit {
                key: k.clone(),
                ballot: b,
                value,
            };
            async move { l.commit(n, m).await }
        },
        |_: &()| None,
    )
    .await
    .map(|_| ())
}

/// Tells every acceptor, in the background, that the value of `b` (named
/// `value`) is published. A commit that does not arrive only costs a later
/// round a repeated, idempotent publish, or the commit sent again.
async fn committed_everywhere(
    link: &Arc<dyn Link>,
    key: &PaxosKey,
    b: Ballot,
    value: Option<ValueId>,
) {
    let (link, key) = (link.clone(), key.clone());
    tokio::spawn(async move {
        // The commit's ballot is not drawn from a clock: any clock serves.
        let r = log_commit(&link, &BallotClock::new(), &key, b, value).await;
        if let Err(PhaseError::Unavailable(e)) = r {
            tracing::debug!("paxos commit of {:?} in {b}: {e}", key.key);
        }
    });
}
