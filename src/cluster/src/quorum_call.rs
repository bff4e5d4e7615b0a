//! Quorum calls: one message sent to several nodes at once, done as soon as
//! enough of them succeeded.
//!
//! What they promise:
//! - every target is called in parallel, this node included (the mesh runs
//!   a call to itself directly, without the network) — except by
//!   [`call_quorum_hedged`], the read's call, which calls the first
//!   `quorum` targets in the caller's order (closest first) and the others
//!   only when one of those fails or the quorum has not answered within a
//!   hedge delay;
//! - the call returns as soon as the quorum succeeded, with those
//!   responses; the calls still running go on in their own tasks, so slow
//!   replicas still get the message (dropping the returned future does not
//!   cancel them either);
//! - it fails at once, calling nobody, when fewer targets than the quorum
//!   are up per the mesh's failure detector ([`QuorumError::NotEnoughNodes`]);
//!   nodes known down are not called, so they never cost a timeout;
//! - it fails as soon as so many calls failed that the quorum is out of
//!   reach ([`QuorumError::Failed`]), without waiting for the others;
//! - otherwise it lasts at most the call deadline (`CallOpts::timeout`, else
//!   the mesh's `rpc_timeout`): every call ends by then.
//!
//! [`call_quorum_per_version`] is the write of a layout transition: the
//! nodes of every active layout version are called once each, and the call
//! succeeds when every version's set has its quorum.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hangar_layout::{NodeId, WriteSet};
use hangar_net::{CallOpts, Endpoint, Mesh, Message, NetError};
use tokio::sync::mpsc;
use tracing::debug;

/// Why a quorum call failed.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// Fewer targets are up than the quorum needs (per the mesh's failure
    /// detector); nothing was sent.
    #[error(
        "a quorum of {needed} needs {needed} live nodes, but only {up} of the {targets} target nodes are up{}",
        in_version(.version)
    )]
    NotEnoughNodes {
        needed: usize,
        up: usize,
        targets: usize,
        /// The layout version whose set lacks nodes (per-version calls).
        version: Option<u64>,
    },
    /// So many calls failed (or their nodes are down) that the quorum can no
    /// longer be reached.
    #[error(
        "a quorum of {needed} is out of reach{}: {ok} of {targets} nodes succeeded, {down} are down, {} failed ({})",
        in_version(.version),
        .errors.len(),
        list_errors(.errors)
    )]
    Failed {
        needed: usize,
        ok: usize,
        down: usize,
        targets: usize,
        version: Option<u64>,
        /// Every failed call so far, by node.
        errors: Vec<(NodeId, NetError)>,
    },
    /// A per-version call with no version to write to: no layout assigns
    /// the data to nodes yet.
    #[error("no layout version assigns this data to nodes yet (apply a cluster layout first)")]
    NoLayout,
}

impl QuorumError {
    /// True when a target refused the call as overloaded: the quorum failed
    /// because the cluster is busy, so the client should back off and retry
    /// rather than treat the cluster as broken.
    pub fn overloaded(&self) -> bool {
        matches!(self, QuorumError::Failed { errors, .. }
            if errors.iter().any(|(_, e)| matches!(e, NetError::Overloaded(_))))
    }
}

fn in_version(v: &Option<u64>) -> String {
    v.map(|v| format!(" in layout version {v}"))
        .unwrap_or_default()
}

fn list_errors(errors: &[(NodeId, NetError)]) -> String {
    errors
        .iter()
        .map(|(n, e)| format!("{}: {e}", n.short()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Sends `msg` to every node of `targets` (duplicates called once) and
/// returns the responses of the first `quorum` that succeed. See the module
/// documentation for what it promises.
pub async fn call_quorum<Req, Resp>(
    mesh: &Mesh,
    endpoint: &Arc<Endpoint<Req, Resp>>,
    targets: &[NodeId],
    msg: Req,
    quorum: usize,
    opts: CallOpts,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Req: Message + Clone,
    Resp: Message,
{
    let sets = vec![Set {
        version: None,
        nodes: targets.to_vec(),
    }];
    run(
        sets,
        quorum,
        |n| mesh.is_up(n),
        mesh_call(endpoint, msg, opts),
    )
    .await
}

/// How a hedged quorum call ([`call_quorum_hedged`]) goes: how many answers
/// it needs, how many of its targets it calls at once, and how long it
/// waits for the quorum before calling the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedging {
    /// Answers needed.
    pub quorum: usize,
    /// Targets called at once (at least `quorum`): those beyond the quorum
    /// are probes, whose answers count if they come first.
    pub at_once: usize,
    /// How long the quorum may take before every other target is called.
    pub hedge: Duration,
}

/// Sends `msg` to the first `how.at_once` nodes of `targets` (at least
/// `how.quorum`), which the caller gives in its order of preference
/// (closest first), and to the others only when needed: the next one as
/// soon as a call fails, and every other one once `how.hedge` has passed
/// without the quorum. Returns the responses of the first `quorum` that
/// succeed; fails like [`call_quorum`] (nodes known down are skipped, and
/// [`QuorumError::NotEnoughNodes`] is answered at once).
///
/// For reads: any `quorum` answers meet every write quorum, whichever nodes
/// give them, so the read sees what [`call_quorum`] would; but a read that
/// its closest replicas answer in time costs the other replicas nothing,
/// and a silent replica delays it by `hedge`, not by the call's timeout.
pub async fn call_quorum_hedged<Req, Resp>(
    mesh: &Mesh,
    endpoint: &Arc<Endpoint<Req, Resp>>,
    targets: &[NodeId],
    msg: Req,
    how: Hedging,
    opts: CallOpts,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Req: Message + Clone,
    Resp: Message,
{
    run_hedged(
        targets.to_vec(),
        how,
        |n| mesh.is_up(n),
        mesh_call(endpoint, msg, opts),
    )
    .await
}

/// Sends `msg` once to every node of every set and returns when, in every
/// set, `quorum` of its nodes succeeded (a node in several sets counts in
/// each), with every response received until then. Fails fast, naming the
/// version, as soon as one set cannot reach its quorum; fails with
/// [`QuorumError::NoLayout`] when `sets` is empty.
pub async fn call_quorum_per_version<Req, Resp>(
    mesh: &Mesh,
    endpoint: &Arc<Endpoint<Req, Resp>>,
    sets: &[WriteSet],
    msg: Req,
    quorum: usize,
    opts: CallOpts,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Req: Message + Clone,
    Resp: Message,
{
    if sets.is_empty() {
        return Err(QuorumError::NoLayout);
    }
    let sets = sets
        .iter()
        .map(|s| Set {
            version: Some(s.version),
            nodes: s.nodes.clone(),
        })
        .collect();
    run(
        sets,
        quorum,
        |n| mesh.is_up(n),
        mesh_call(endpoint, msg, opts),
    )
    .await
}

/// [`call_quorum_per_version`] over any per-node call instead of one
/// endpoint's `call`: for calls that need something per node (a streamed
/// body, which cannot be cloned) or that must do more when their call ends
/// (record a failure that comes after the quorum). `call(node)` is invoked
/// once for every node of the sets that `is_up` reports up, and its future
/// runs in its own task, so it completes even after this returns; nodes
/// reported down are not called (the caller can tell which they are from
/// `is_up`). Same promises as [`call_quorum_per_version`].
pub async fn call_quorum_per_version_with<Resp, F, Fut>(
    sets: &[WriteSet],
    quorum: usize,
    is_up: impl Fn(NodeId) -> bool,
    call: F,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Resp: Send + 'static,
    F: Fn(NodeId) -> Fut,
    Fut: Future<Output = Result<Resp, NetError>> + Send + 'static,
{
    if sets.is_empty() {
        return Err(QuorumError::NoLayout);
    }
    let sets = sets
        .iter()
        .map(|s| Set {
            version: Some(s.version),
            nodes: s.nodes.clone(),
        })
        .collect();
    run(sets, quorum, is_up, call).await
}

/// The call to one node, as a future that owns what it needs so that it can
/// outlive the quorum call in its own task.
fn mesh_call<Req, Resp>(
    endpoint: &Arc<Endpoint<Req, Resp>>,
    msg: Req,
    opts: CallOpts,
) -> impl Fn(NodeId) -> std::pin::Pin<Box<dyn Future<Output = Result<Resp, NetError>> + Send>>
where
    Req: Message + Clone,
    Resp: Message,
{
    let endpoint = endpoint.clone();
    move |node| {
        let (endpoint, msg) = (endpoint.clone(), msg.clone());
        Box::pin(async move { endpoint.call(node, msg, opts).await })
    }
}

/// One set of nodes that must reach the quorum.
#[derive(Debug, Clone)]
pub(crate) struct Set {
    pub version: Option<u64>,
    pub nodes: Vec<NodeId>,
}

/// Where a quorum call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Some set still waits for answers that may come.
    Pending,
    /// Every set has its quorum.
    Reached,
    /// Set `i` can no longer reach its quorum.
    OutOfReach(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Waiting,
    Ok,
    Failed,
    Down,
}

/// The bookkeeping of a quorum call, without the calls: each node's outcome
/// and, per set, whether its quorum is reached or out of reach.
pub(crate) struct Tracker {
    sets: Vec<Set>,
    quorum: usize,
    /// Every distinct node of the sets, sorted, with its outcome.
    outcomes: Vec<(NodeId, Outcome)>,
}

impl Tracker {
    pub fn new(mut sets: Vec<Set>, quorum: usize) -> Tracker {
        for s in &mut sets {
            s.nodes.sort();
            s.nodes.dedup();
        }
        let mut nodes: Vec<NodeId> = sets.iter().flat_map(|s| s.nodes.clone()).collect();
        nodes.sort();
        nodes.dedup();
        Tracker {
            sets,
            quorum,
            outcomes: nodes.into_iter().map(|n| (n, Outcome::Waiting)).collect(),
        }
    }

    /// Marks the nodes that `is_up` says are down, and fails when some set
    /// then has fewer live nodes than the quorum (the first such set).
    pub fn mark_down(&mut self, is_up: impl Fn(NodeId) -> bool) -> Result<(), QuorumError> {
        for (n, o) in &mut self.outcomes {
            if !is_up(*n) {
                *o = Outcome::Down;
            }
        }
        for s in &self.sets {
            let up = s
                .nodes
                .iter()
                .filter(|n| self.outcome(n) != Outcome::Down)
                .count();
            if up < self.quorum {
                return Err(QuorumError::NotEnoughNodes {
                    needed: self.quorum,
                    up,
                    targets: s.nodes.len(),
                    version: s.version,
                });
            }
        }
        Ok(())
    }

    /// The nodes to call: every node not known down.
    pub fn to_call(&self) -> Vec<NodeId> {
        self.outcomes
            .iter()
            .filter(|(_, o)| *o == Outcome::Waiting)
            .map(|(n, _)| *n)
            .collect()
    }

    fn outcome(&self, n: &NodeId) -> Outcome {
        self.outcomes
            .binary_search_by_key(n, |(id, _)| *id)
            .map_or(Outcome::Waiting, |i| self.outcomes[i].1)
    }

    /// Records the answer of `node`; returns where the call stands.
    pub fn record(&mut self, node: NodeId, ok: bool) -> Progress {
        if let Ok(i) = self.outcomes.binary_search_by_key(&node, |(id, _)| *id) {
            self.outcomes[i].1 = if ok { Outcome::Ok } else { Outcome::Failed };
        }
        self.progress()
    }

    pub fn progress(&self) -> Progress {
        let mut reached = true;
        for (i, s) in self.sets.iter().enumerate() {
            let (ok, open) = self.counts(s);
            if ok >= self.quorum {
                continue;
            }
            reached = false;
            if ok + open < self.quorum {
                return Progress::OutOfReach(i);
            }
        }
        if reached {
            Progress::Reached
        } else {
            Progress::Pending
        }
    }

    /// Successes and answers still awaited in `s`.
    fn counts(&self, s: &Set) -> (usize, usize) {
        let mut ok = 0;
        let mut open = 0;
        for n in &s.nodes {
            match self.outcome(n) {
                Outcome::Ok => ok += 1,
                Outcome::Waiting => open += 1,
                Outcome::Failed | Outcome::Down => {}
            }
        }
        (ok, open)
    }

    /// The error for set `i` being out of reach.
    fn out_of_reach(&self, i: usize, errors: Vec<(NodeId, NetError)>) -> QuorumError {
        let s = &self.sets[i];
        let (ok, _) = self.counts(s);
        let down = s
            .nodes
            .iter()
            .filter(|n| self.outcome(n) == Outcome::Down)
            .count();
        QuorumError::Failed {
            needed: self.quorum,
            ok,
            down,
            targets: s.nodes.len(),
            version: s.version,
            errors: errors
                .into_iter()
                .filter(|(n, _)| s.nodes.contains(n))
                .collect(),
        }
    }
}

/// The quorum call over any per-node call (the mesh's in production, fakes
/// in the unit tests).
pub(crate) async fn run<Resp, F, Fut>(
    sets: Vec<Set>,
    quorum: usize,
    is_up: impl Fn(NodeId) -> bool,
    call: F,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Resp: Send + 'static,
    F: Fn(NodeId) -> Fut,
    Fut: Future<Output = Result<Resp, NetError>> + Send + 'static,
{
    let mut tracker = Tracker::new(sets, quorum);
    tracker.mark_down(is_up)?;
    let targets = tracker.to_call();
    // Unbounded, so a call that ends after the quorum call returned never
    // waits on a full channel: its send fails and it just ends.
    let (tx, mut rx) = mpsc::unbounded_channel();
    for node in targets.iter().copied() {
        let tx = tx.clone();
        let fut = call(node);
        // A task per call, not a JoinSet: the calls must go on after the
        // quorum is reached or the caller gives up.
        tokio::spawn(async move {
            let _ = tx.send((node, fut.await));
        });
    }
    drop(tx);
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    let mut progress = tracker.progress();
    while progress == Progress::Pending {
        let Some((node, result)) = rx.recv().await else {
            break;
        };
        progress = record(&mut tracker, &mut ok, &mut errors, node, result);
    }
    conclude(&tracker, progress, ok, errors, targets.len())
}

/// Records one call's answer in `ok` or `errors` and in the tracker.
fn record<Resp>(
    tracker: &mut Tracker,
    ok: &mut Vec<(NodeId, Resp)>,
    errors: &mut Vec<(NodeId, NetError)>,
    node: NodeId,
    result: Result<Resp, NetError>,
) -> Progress {
    match result {
        Ok(resp) => {
            ok.push((node, resp));
            tracker.record(node, true)
        }
        Err(e) => {
            debug!(node = %node.short(), error = %e, "quorum call: one call failed");
            errors.push((node, e));
            tracker.record(node, false)
        }
    }
}

/// The result of a quorum call that stopped at `progress` after `called`
/// calls, with the answers `ok` and `errors`.
fn conclude<Resp>(
    tracker: &Tracker,
    progress: Progress,
    ok: Vec<(NodeId, Resp)>,
    errors: Vec<(NodeId, NetError)>,
    called: usize,
) -> Result<Vec<(NodeId, Resp)>, QuorumError> {
    match progress {
        Progress::Reached => {
            let answered = ok.len() + errors.len();
            if answered < called {
                debug!(
                    "quorum call: quorum reached, {} calls go on in the background",
                    called - answered
                );
            }
            Ok(ok)
        }
        Progress::OutOfReach(i) => Err(tracker.out_of_reach(i, errors)),
        // Every call answered and yet the tracker waits: cannot happen, as
        // each answer is recorded (and a hedged call calls every node before
        // giving up); report it as out of reach.
        Progress::Pending => Err(tracker.out_of_reach(0, errors)),
    }
}

/// The hedged quorum call ([`call_quorum_hedged`]) over any per-node call:
/// one set, `targets` in the order they are to be called.
pub(crate) async fn run_hedged<Resp, F, Fut>(
    targets: Vec<NodeId>,
    how: Hedging,
    is_up: impl Fn(NodeId) -> bool,
    call: F,
) -> Result<Vec<(NodeId, Resp)>, QuorumError>
where
    Resp: Send + 'static,
    F: Fn(NodeId) -> Fut,
    Fut: Future<Output = Result<Resp, NetError>> + Send + 'static,
{
    let Hedging {
        quorum,
        at_once,
        hedge,
    } = how;
    let mut tracker = Tracker::new(
        vec![Set {
            version: None,
            nodes: targets.clone(),
        }],
        quorum,
    );
    tracker.mark_down(is_up)?;
    // The caller's order, each node once, without the nodes known down.
    let callable = tracker.to_call();
    let mut order: Vec<NodeId> = Vec::with_capacity(callable.len());
    for n in targets {
        if callable.contains(&n) && !order.contains(&n) {
            order.push(n);
        }
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    // As in `run`, a task per call, so that it goes on after the quorum.
    let launch = |node: NodeId| {
        let tx = tx.clone();
        let fut = call(node);
        tokio::spawn(async move {
            let _ = tx.send((node, fut.await));
        });
    };
    let mut next = at_once.max(quorum).min(order.len());
    order[..next].iter().for_each(|n| launch(*n));
    let mut in_flight = next;
    let hedge_at = tokio::time::Instant::now() + hedge;
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    let mut progress = tracker.progress();
    while progress == Progress::Pending {
        if in_flight == 0 {
            // Nothing more can answer.
            if next == order.len() {
                break;
            }
            launch(order[next]);
            next += 1;
            in_flight += 1;
        }
        tokio::select! {
            Some((node, result)) = rx.recv() => {
                in_flight -= 1;
                let failed = result.is_err();
                progress = record(&mut tracker, &mut ok, &mut errors, node, result);
                // A failed call's answer is owed by the next node.
                if failed && progress == Progress::Pending && next < order.len() {
                    launch(order[next]);
                    next += 1;
                    in_flight += 1;
                }
            }
            () = tokio::time::sleep_until(hedge_at), if next < order.len() => {
                debug!(
                    "quorum call: no quorum after {hedge:?}, calling {} more nodes",
                    order.len() - next
                );
                order[next..].iter().for_each(|n| launch(*n));
                in_flight += order.len() - next;
                next = order.len();
            }
            else => break,
        }
    }
    conclude(&tracker, progress, ok, errors, next)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::*;

    fn node(i: u8) -> NodeId {
        NodeId([i; 32])
    }

    fn set(version: Option<u64>, nodes: &[u8]) -> Set {
        Set {
            version,
            nodes: nodes.iter().map(|&i| node(i)).collect(),
        }
    }

    #[test]
    fn tracker_reaches_or_loses_one_quorum() {
        let mut t = Tracker::new(vec![set(None, &[1, 2, 3])], 2);
        assert_eq!(t.progress(), Progress::Pending);
        assert_eq!(t.record(node(1), true), Progress::Pending);
        assert_eq!(t.record(node(3), true), Progress::Reached);

        let mut t = Tracker::new(vec![set(None, &[1, 2, 3])], 2);
        assert_eq!(t.record(node(1), false), Progress::Pending);
        assert_eq!(t.record(node(2), true), Progress::Pending);
        assert_eq!(t.record(node(3), false), Progress::OutOfReach(0));

        // Two failures of three make a quorum of 2 impossible at once.
        let mut t = Tracker::new(vec![set(None, &[1, 2, 3])], 2);
        t.record(node(1), false);
        assert_eq!(t.record(node(2), false), Progress::OutOfReach(0));

        // Answers from nodes that are not targets change nothing.
        let mut t = Tracker::new(vec![set(None, &[1, 2, 3])], 1);
        assert_eq!(t.record(node(9), true), Progress::Pending);
        // A quorum of 0 is reached without answers.
        assert_eq!(
            Tracker::new(vec![set(None, &[1])], 0).progress(),
            Progress::Reached
        );
    }

    #[test]
    fn tracker_counts_down_nodes_and_duplicates() {
        let mut t = Tracker::new(vec![set(None, &[1, 2, 2, 3])], 2);
        assert_eq!(t.to_call(), vec![node(1), node(2), node(3)]);
        t.mark_down(|n| n != node(3)).unwrap();
        assert_eq!(t.to_call(), vec![node(1), node(2)]);
        // With 3 down, one failure is enough to lose the quorum.
        assert_eq!(t.record(node(1), false), Progress::OutOfReach(0));

        let mut t = Tracker::new(vec![set(None, &[1, 2, 3])], 2);
        let e = t.mark_down(|n| n == node(1)).unwrap_err();
        assert!(
            matches!(
                e,
                QuorumError::NotEnoughNodes {
                    needed: 2,
                    up: 1,
                    targets: 3,
                    version: None
                }
            ),
            "{e}"
        );
        // A quorum above the number of targets can never be reached.
        let mut t = Tracker::new(vec![set(None, &[1, 2])], 3);
        assert!(matches!(
            t.mark_down(|_| true),
            Err(QuorumError::NotEnoughNodes {
                needed: 3,
                up: 2,
                ..
            })
        ));
    }

    #[test]
    fn tracker_needs_the_quorum_of_every_version() {
        // Version 1 on nodes 1-3, version 2 on nodes 2-4.
        let sets = || vec![set(Some(1), &[1, 2, 3]), set(Some(2), &[2, 3, 4])];
        let mut t = Tracker::new(sets(), 2);
        assert_eq!(t.to_call().len(), 4);
        assert_eq!(t.record(node(1), true), Progress::Pending);
        // Node 2 counts in both sets: version 1 reached, version 2 not.
        assert_eq!(t.record(node(2), true), Progress::Pending);
        assert_eq!(t.record(node(4), true), Progress::Reached);

        let mut t = Tracker::new(sets(), 2);
        t.record(node(1), true);
        t.record(node(2), true);
        t.record(node(3), false);
        // Version 1 has its quorum; version 2 has lost it.
        assert_eq!(t.record(node(4), false), Progress::OutOfReach(1));

        // Down nodes are checked per version, and the error says which.
        let mut t = Tracker::new(sets(), 2);
        let e = t.mark_down(|n| n != node(3) && n != node(4)).unwrap_err();
        assert!(
            matches!(
                e,
                QuorumError::NotEnoughNodes {
                    up: 1,
                    version: Some(2),
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("in layout version 2"), "{e}");
    }

    /// How each fake node answers.
    #[derive(Clone, Copy)]
    enum Fake {
        Ok,
        Fail,
        /// Answers after this long.
        Slow(Duration),
        Never,
    }

    /// A fake call that behaves per `fakes` and records which nodes were
    /// called and which finished.
    fn fake(
        fakes: BTreeMap<NodeId, Fake>,
        log: Arc<Mutex<(Vec<NodeId>, Vec<NodeId>)>>,
    ) -> impl Fn(NodeId) -> std::pin::Pin<Box<dyn Future<Output = Result<u8, NetError>> + Send>>
    {
        move |n| {
            log.lock().unwrap().0.push(n);
            let how = fakes[&n];
            let log = log.clone();
            Box::pin(async move {
                let r = match how {
                    Fake::Ok => Ok(n.0[0]),
                    Fake::Fail => Err(NetError::NotConnected(n)),
                    Fake::Slow(d) => {
                        tokio::time::sleep(d).await;
                        Ok(n.0[0])
                    }
                    Fake::Never => std::future::pending().await,
                };
                log.lock().unwrap().1.push(n);
                r
            })
        }
    }

    type Log = Arc<Mutex<(Vec<NodeId>, Vec<NodeId>)>>;

    fn fakes(f: &[(u8, Fake)]) -> (BTreeMap<NodeId, Fake>, Log) {
        (
            f.iter().map(|&(i, h)| (node(i), h)).collect(),
            Arc::new(Mutex::new((Vec::new(), Vec::new()))),
        )
    }

    #[tokio::test]
    async fn returns_at_quorum_and_lets_slow_calls_finish() {
        let slow = Duration::from_millis(300);
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Slow(slow)), (3, Fake::Ok)]);
        let start = Instant::now();
        let r = run(
            vec![set(None, &[1, 2, 3])],
            2,
            |_| true,
            fake(f, log.clone()),
        )
        .await
        .unwrap();
        assert!(start.elapsed() < slow, "took {:?}", start.elapsed());
        let mut got: Vec<u8> = r.iter().map(|(_, v)| *v).collect();
        got.sort();
        assert_eq!(got, vec![1, 3]);
        assert_eq!(log.lock().unwrap().0.len(), 3);
        // The slow call was not cancelled: it still finishes.
        tokio::time::sleep(slow + Duration::from_millis(200)).await;
        assert!(log.lock().unwrap().1.contains(&node(2)));
    }

    #[tokio::test]
    async fn fails_fast_when_the_quorum_is_lost() {
        let (f, log) = fakes(&[(1, Fake::Fail), (2, Fake::Never), (3, Fake::Fail)]);
        let start = Instant::now();
        let e = run(vec![set(None, &[1, 2, 3])], 2, |_| true, fake(f, log))
            .await
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_millis(200));
        match &e {
            QuorumError::Failed {
                needed: 2,
                ok: 0,
                down: 0,
                targets: 3,
                errors,
                ..
            } => assert_eq!(errors.len(), 2),
            other => panic!("got {other}"),
        }
        assert!(e.to_string().contains("out of reach"), "{e}");
    }

    #[tokio::test]
    async fn does_not_call_down_nodes() {
        // Node 2 is down: it is not called, and the quorum of 2 is lost as
        // soon as node 3 fails, while node 1 never answers.
        let (f, log) = fakes(&[(1, Fake::Never), (2, Fake::Never), (3, Fake::Fail)]);
        let e = run(
            vec![set(None, &[1, 2, 3])],
            2,
            |n| n != node(2),
            fake(f.clone(), log.clone()),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, QuorumError::Failed { down: 1, .. }), "{e}");
        assert!(!log.lock().unwrap().0.contains(&node(2)));

        // Two down of three: nobody is called at all.
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Ok)]);
        let e = run(
            vec![set(None, &[1, 2, 3])],
            2,
            |n| n == node(1),
            fake(f, log.clone()),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, QuorumError::NotEnoughNodes { up: 1, .. }),
            "{e}"
        );
        assert!(log.lock().unwrap().0.is_empty());
    }

    fn nodes(of: &[u8]) -> Vec<NodeId> {
        of.iter().map(|&i| node(i)).collect()
    }

    fn how(quorum: usize, at_once: usize, hedge: Duration) -> Hedging {
        Hedging {
            quorum,
            at_once,
            hedge,
        }
    }

    /// `run_hedged` over `order` with every node up and the fakes `f`.
    async fn all_up(
        order: &[u8],
        how: Hedging,
        f: BTreeMap<NodeId, Fake>,
        log: &Log,
    ) -> Result<Vec<(NodeId, u8)>, QuorumError> {
        run_hedged(nodes(order), how, |_| true, fake(f, log.clone())).await
    }

    fn answered(r: &[(NodeId, u8)]) -> Vec<u8> {
        let mut got: Vec<u8> = r.iter().map(|(_, v)| *v).collect();
        got.sort();
        got
    }

    #[tokio::test]
    async fn hedged_calls_only_the_first_quorum_when_they_answer() {
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Ok)]);
        let hedge = Duration::from_millis(200);
        let r = all_up(&[2, 1, 3], how(2, 2, hedge), f, &log).await.unwrap();
        assert_eq!(answered(&r), vec![1, 2]);
        // Past the hedge delay, node 3 has still not been called.
        tokio::time::sleep(hedge * 2).await;
        assert_eq!(log.lock().unwrap().0, nodes(&[2, 1]));
    }

    #[tokio::test]
    async fn hedged_calls_a_probe_at_once_without_waiting_for_it() {
        // Node 3 (a probe: called beside the quorum) is slow; the read
        // returns with the quorum of the others, and the probe's call goes
        // on to its end.
        let slow = Duration::from_millis(300);
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Slow(slow))]);
        let start = Instant::now();
        let r = all_up(&[1, 2, 3], how(2, 3, slow * 10), f, &log)
            .await
            .unwrap();
        assert!(start.elapsed() < slow, "took {:?}", start.elapsed());
        assert_eq!(answered(&r), vec![1, 2]);
        assert_eq!(
            log.lock().unwrap().0,
            nodes(&[1, 2, 3]),
            "all three called at once"
        );
        tokio::time::sleep(slow * 2).await;
        assert!(
            log.lock().unwrap().1.contains(&node(3)),
            "the probe finished"
        );
        // Its answer counts when it comes first.
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Slow(slow)), (3, Fake::Ok)]);
        let r = all_up(&[1, 2, 3], how(2, 3, slow * 10), f, &log)
            .await
            .unwrap();
        assert_eq!(answered(&r), vec![1, 3]);
    }

    #[tokio::test]
    async fn hedged_calls_the_next_node_at_once_when_one_fails() {
        let (f, log) = fakes(&[(1, Fake::Fail), (2, Fake::Ok), (3, Fake::Ok)]);
        let hedge = Duration::from_secs(30);
        let start = Instant::now();
        let r = all_up(&[1, 2, 3], how(2, 2, hedge), f, &log).await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(answered(&r), vec![2, 3]);
        assert_eq!(log.lock().unwrap().0, nodes(&[1, 2, 3]));
    }

    #[tokio::test]
    async fn hedged_calls_the_others_when_the_hedge_delay_passes() {
        // Node 2 is silent (a paused process): the read waits for the hedge
        // delay, not for the call's timeout.
        let (f, log) = fakes(&[
            (1, Fake::Ok),
            (2, Fake::Never),
            (3, Fake::Ok),
            (4, Fake::Ok),
        ]);
        let hedge = Duration::from_millis(150);
        let start = Instant::now();
        let r = all_up(&[1, 2, 3, 4], how(2, 2, hedge), f, &log)
            .await
            .unwrap();
        let took = start.elapsed();
        assert!(took >= hedge && took < hedge * 4, "took {took:?}");
        assert_eq!(answered(&r)[0], 1);
        assert_eq!(r.len(), 2);
        // Every node not called yet was called at the hedge delay.
        assert_eq!(log.lock().unwrap().0.len(), 4);
    }

    #[tokio::test]
    async fn hedged_fails_fast_and_skips_down_nodes() {
        // 1 and 2 fail, 3 never answers: out of reach after the second
        // failure, without waiting for the hedge delay.
        let (f, log) = fakes(&[(1, Fake::Fail), (2, Fake::Fail), (3, Fake::Never)]);
        let start = Instant::now();
        let e = all_up(&[1, 2, 3], how(2, 2, Duration::from_secs(30)), f, &log)
            .await
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(
            matches!(e, QuorumError::Failed { ok: 0, ref errors, .. } if errors.len() == 2),
            "{e}"
        );

        // Node 1, first in order, is down: 2 and 3 are called at once.
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Ok)]);
        let r = run_hedged(
            nodes(&[1, 2, 3, 2]),
            how(2, 2, Duration::from_secs(30)),
            |n| n != node(1),
            fake(f.clone(), log.clone()),
        )
        .await
        .unwrap();
        assert_eq!(answered(&r), vec![2, 3]);
        assert_eq!(log.lock().unwrap().0, nodes(&[2, 3]));

        // Two down of three: nobody is called.
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Ok)]);
        let e = run_hedged(
            nodes(&[1, 2, 3]),
            how(2, 2, Duration::from_secs(30)),
            |n| n == node(3),
            fake(f, log.clone()),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, QuorumError::NotEnoughNodes { up: 1, .. }),
            "{e}"
        );
        assert!(log.lock().unwrap().0.is_empty());
    }

    #[tokio::test]
    async fn per_version_with_any_call_needs_a_layout_and_skips_down_nodes() {
        let (f, log) = fakes(&[(1, Fake::Ok), (2, Fake::Ok), (3, Fake::Ok)]);
        let e = call_quorum_per_version_with(&[], 1, |_| true, fake(f.clone(), log.clone()))
            .await
            .unwrap_err();
        assert!(matches!(e, QuorumError::NoLayout), "{e}");
        let sets = [WriteSet {
            version: 3,
            nodes: vec![node(1), node(2), node(3)],
        }];
        let got = call_quorum_per_version_with(&sets, 2, |n| n != node(2), fake(f, log.clone()))
            .await
            .unwrap();
        assert_eq!(got.len(), 2);
        assert!(!log.lock().unwrap().0.contains(&node(2)));
    }

    #[tokio::test]
    async fn per_version_waits_for_every_version() {
        // Version 1 on 1-3 has its quorum from 1 and 2 at once; version 2
        // on 2-4 needs the slow node 4 as well (3 never answers).
        let slow = Duration::from_millis(150);
        let (f, log) = fakes(&[
            (1, Fake::Ok),
            (2, Fake::Ok),
            (3, Fake::Never),
            (4, Fake::Slow(slow)),
        ]);
        let start = Instant::now();
        let r = run(
            vec![set(Some(1), &[1, 2, 3]), set(Some(2), &[2, 3, 4])],
            2,
            |_| true,
            fake(f, log.clone()),
        )
        .await
        .unwrap();
        assert!(start.elapsed() >= slow);
        assert!(start.elapsed() < slow * 4, "took {:?}", start.elapsed());
        let mut got: Vec<u8> = r.iter().map(|(_, v)| *v).collect();
        got.sort();
        assert_eq!(got, vec![1, 2, 4]);
        // Each node is called once, even when it is in both versions.
        assert_eq!(log.lock().unwrap().0.len(), 4);
    }
}
