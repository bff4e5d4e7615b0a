//! The Paxos round of conditional writes (`hangar_model::paxos`) over
//! several in-process acceptors, each a real [`Acceptor`] on its own store,
//! under random schedules: random message delays, lost messages and lost
//! answers, and proposers that each believe a different node is down (the
//! case where the old coordinator design let two coordinators act at
//! once). The register is a small replicated last-writer-wins cell with
//! quorum reads and writes, as the object table is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hangar_db::{Db, DbOptions, RedbEngine};
use hangar_layout::WriteSet;
use hangar_model::ModelError;
use hangar_model::paxos::acceptor::{KEEP_MSEC, VALUE_DEAD_AFTER_MSEC};
use hangar_model::paxos::messages::{
    Accept, AcceptReply, Commit, PaxosKey, Prepare, PrepareReply, Proposal,
};
use hangar_model::paxos::proposer::{self, Link, Register};
use hangar_model::paxos::{Acceptor, AcceptorState, Ballot, BallotClock, Outcome};
use hangar_net::NetError;
use hangar_util::NodeId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

fn node(i: usize) -> NodeId {
    NodeId([i as u8 + 1; 32])
}

fn open_db(path: &std::path::Path) -> Db {
    let engine = RedbEngine::open(path, 4 << 20).unwrap();
    Db::new(Arc::new(engine), DbOptions::default())
}

/// `n` acceptors, each on its own store, and the replicas of the cell.
struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    acceptors: Vec<Arc<Acceptor>>,
    cells: Vec<Mutex<BTreeMap<String, Cell>>>,
    /// Every (key, writer) whose value a round published, ever.
    ever: Mutex<std::collections::BTreeSet<(String, u32)>>,
}

/// The replicated register's row: last writer (by timestamp) wins. A
/// cell without an ETag is a tombstone (the key was deleted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Cell {
    ts: u64,
    writer: u32,
    etag: String,
}

impl Cell {
    fn is_tombstone(&self) -> bool {
        self.etag.is_empty()
    }
}

impl Cluster {
    fn new(n: usize) -> Arc<Cluster> {
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let acceptors = dirs
            .iter()
            .map(|d| Acceptor::new(open_db(&d.path().join("db"))))
            .collect();
        Arc::new(Cluster {
            _dirs: dirs,
            acceptors,
            cells: (0..n).map(|_| Mutex::new(BTreeMap::new())).collect(),
            ever: Mutex::new(Default::default()),
        })
    }

    fn n(&self) -> usize {
        self.acceptors.len()
    }

    /// The merge of every replica's cell of `key`: what the register
    /// converges to.
    fn converged(&self, key: &str) -> Option<Cell> {
        self.cells
            .iter()
            .filter_map(|c| c.lock().unwrap().get(key).cloned())
            .max()
    }

    fn write(&self, i: usize, key: &str, cell: &Cell) {
        let mut c = self.cells[i].lock().unwrap();
        match c.get(key) {
            Some(old) if old >= cell => {}
            _ => {
                c.insert(key.to_owned(), cell.clone());
            }
        }
    }
}

/// How a simulated network behaves for one proposer.
#[derive(Clone)]
struct Net {
    seed: u64,
    max_delay_us: u64,
    /// Chance (in 1000) that a message is lost, and that an answer is.
    lose: u32,
    /// The node this proposer's failure detector reports down (it is not).
    believed_down: Option<usize>,
    /// Hangs every call once an accept of a value (not `Nothing`) was
    /// delivered to a majority: the proposer "crashes" there.
    crash_after_accept: Option<Arc<AtomicBool>>,
}

struct SimLink {
    me: usize,
    cluster: Arc<Cluster>,
    net: Net,
    rng: Mutex<StdRng>,
    accepted_by: Mutex<usize>,
}

impl SimLink {
    fn new(me: usize, cluster: Arc<Cluster>, net: Net) -> Arc<SimLink> {
        Arc::new(SimLink {
            me,
            rng: Mutex::new(StdRng::seed_from_u64(net.seed)),
            cluster,
            net,
            accepted_by: Mutex::new(0),
        })
    }

    fn roll(&self) -> (Duration, bool, bool) {
        let mut r = self.rng.lock().unwrap();
        let d = Duration::from_micros(r.random_range(0..=self.net.max_delay_us));
        let lost = r.random_range(0..1000) < self.net.lose;
        let answer_lost = r.random_range(0..1000) < self.net.lose;
        (d, lost, answer_lost)
    }

    fn crashed(&self) -> bool {
        self.net
            .crash_after_accept
            .as_ref()
            .is_some_and(|c| c.load(Ordering::SeqCst))
    }

    async fn deliver<R>(
        &self,
        to: NodeId,
        f: impl std::future::Future<Output = R>,
    ) -> Result<R, NetError> {
        if self.crashed() {
            return std::future::pending().await;
        }
        let (d, lost, answer_lost) = self.roll();
        tokio::time::sleep(d).await;
        if lost {
            return Err(NetError::NotConnected(to));
        }
        let r = f.await;
        if answer_lost {
            return Err(NetError::NotConnected(to));
        }
        Ok(r)
    }

    fn index(&self, n: NodeId) -> usize {
        (0..self.cluster.n()).find(|i| node(*i) == n).unwrap()
    }
}

#[async_trait]
impl Link for SimLink {
    fn me(&self) -> NodeId {
        node(self.me)
    }
    fn sets(&self) -> Vec<WriteSet> {
        vec![WriteSet {
            version: 1,
            nodes: (0..self.cluster.n()).map(node).collect(),
        }]
    }
    fn is_up(&self, n: NodeId) -> bool {
        self.net.believed_down != Some(self.index(n))
    }
    async fn prepare(&self, to: NodeId, m: Prepare) -> Result<PrepareReply, NetError> {
        let a = self.cluster.acceptors[self.index(to)].clone();
        self.deliver(
            to,
            async move { a.prepare(&m.key, m.ballot).await.unwrap() },
        )
        .await
    }
    async fn accept(&self, to: NodeId, m: Accept) -> Result<AcceptReply, NetError> {
        let a = self.cluster.acceptors[self.index(to)].clone();
        let is_value = m.value != Proposal::Nothing;
        let r = self
            .deliver(to, async move {
                a.accept(&m.key, m.ballot, m.value).await.unwrap()
            })
            .await;
        if is_value
            && matches!(r, Ok(AcceptReply::Accepted))
            && let Some(c) = &self.net.crash_after_accept
        {
            let mut n = self.accepted_by.lock().unwrap();
            *n += 1;
            if *n > self.cluster.n() / 2 {
                c.store(true, Ordering::SeqCst);
            }
        }
        r
    }
    async fn commit(&self, to: NodeId, m: Commit) -> Result<(), NetError> {
        let a = self.cluster.acceptors[self.index(to)].clone();
        self.deliver(to, async move {
            a.commit(&m.key, m.ballot, m.value).await.unwrap()
        })
        .await
    }
}

#[derive(Clone)]
enum Cond {
    IfNoneMatch,
    IfMatch(String),
    /// A settling round: no value of its own.
    Settle,
}

/// One writer's view of the replicated cell: quorum reads and writes on
/// replicas picked at random.
struct SimRegister {
    cluster: Arc<Cluster>,
    key: String,
    writer: u32,
    cond: Cond,
    rng: Mutex<StdRng>,
    /// Set once the proposer "crashed": it publishes nothing more.
    crash: Option<Arc<AtomicBool>>,
}

impl SimRegister {
    fn majority(&self) -> Vec<usize> {
        let n = self.cluster.n();
        let mut all: Vec<usize> = (0..n).collect();
        let mut r = self.rng.lock().unwrap();
        for i in (1..n).rev() {
            let j = r.random_range(0..=i);
            all.swap(i, j);
        }
        all.truncate(n / 2 + 1);
        all
    }

    fn read(&self) -> Option<Cell> {
        self.majority()
            .into_iter()
            .filter_map(|i| {
                self.cluster.cells[i]
                    .lock()
                    .unwrap()
                    .get(&self.key)
                    .cloned()
            })
            .max()
    }
}

fn decode(v: &Proposal) -> Option<Cell> {
    match v {
        Proposal::Publish { row, .. } => Some(rmp_serde::from_slice(row).unwrap()),
        Proposal::Nothing => None,
    }
}

#[async_trait]
impl Register for SimRegister {
    async fn propose(&self) -> hangar_model::Result<Option<Proposal>> {
        let cur = self.read();
        let live = cur.as_ref().filter(|c| !c.is_tombstone());
        let holds = match (&self.cond, live) {
            (Cond::IfNoneMatch, None) => true,
            (Cond::IfNoneMatch, Some(_)) => false,
            (Cond::IfMatch(e), Some(c)) => *e == c.etag,
            (Cond::IfMatch(_), None) => false,
            (Cond::Settle, _) => false,
        };
        if !holds {
            return Ok(None);
        }
        let cell = Cell {
            ts: cur.map_or(1, |c| c.ts + 1),
            writer: self.writer,
            etag: format!("etag-{}", self.writer),
        };
        Ok(Some(Proposal::Publish {
            sort: ByteBuf::from(self.key.as_bytes().to_vec()),
            row: ByteBuf::from(rmp_serde::to_vec(&cell).unwrap()),
        }))
    }

    async fn publish(&self, value: &Proposal) -> hangar_model::Result<()> {
        if self
            .crash
            .as_ref()
            .is_some_and(|c| c.load(Ordering::SeqCst))
        {
            return std::future::pending().await;
        }
        if let Some(cell) = decode(value) {
            self.cluster
                .ever
                .lock()
                .unwrap()
                .insert((self.key.clone(), cell.writer));
            for i in self.majority() {
                self.cluster.write(i, &self.key, &cell);
            }
        }
        Ok(())
    }

    async fn is_published(&self, value: &Proposal) -> hangar_model::Result<bool> {
        let ours = decode(value);
        Ok(self.read().is_some_and(|c| Some(c) == ours))
    }

    async fn still_newest(&self, value: &Proposal) -> hangar_model::Result<bool> {
        let ours = decode(value).map_or(0, |c| c.ts);
        Ok(self.read().is_none_or(|c| c.ts < ours))
    }
}

/// A writer's outcome: its own cell if it succeeded.
#[derive(Debug, Clone)]
enum Result_ {
    Won(Cell),
    Failed412,
    Unavailable { unknown: bool },
}

async fn write(
    cluster: Arc<Cluster>,
    from: usize,
    writer: u32,
    key: &str,
    cond: Cond,
    net: Net,
    clock: Arc<BallotClock>,
) -> Result_ {
    let link: Arc<dyn Link> = SimLink::new(from, cluster.clone(), net.clone());
    let reg = SimRegister {
        cluster,
        key: key.to_owned(),
        writer,
        cond,
        rng: Mutex::new(StdRng::seed_from_u64(net.seed ^ 0x5eed)),
        crash: net.crash_after_accept.clone(),
    };
    let k = PaxosKey::new(&[7; 32], key);
    match proposer::run(link, &clock, &k, &reg).await {
        Ok(Outcome::Published(v)) => Result_::Won(decode(&v).unwrap()),
        Ok(Outcome::PreconditionFailed) => Result_::Failed412,
        Err(ModelError::ConditionalWrite {
            outcome_unknown, ..
        }) => Result_::Unavailable {
            unknown: outcome_unknown,
        },
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Races `writers` conditional writes of one key from random nodes under
/// the network of `seed`, and checks the outcome.
async fn race(
    cluster: &Arc<Cluster>,
    clocks: &[Arc<BallotClock>],
    seed: u64,
    lose: u32,
    if_match: bool,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = format!("key-{seed}-{lose}-{if_match}");
    let writers = rng.random_range(2..=6u32);
    if if_match {
        // The object exists with ETag "e0" on every replica.
        let base = Cell {
            ts: 1,
            writer: 0,
            etag: "e0".into(),
        };
        for i in 0..cluster.n() {
            cluster.write(i, &key, &base);
        }
    }
    let mut tasks = Vec::new();
    for w in 1..=writers {
        let from = rng.random_range(0..cluster.n());
        let net = Net {
            seed: rng.random(),
            max_delay_us: rng.random_range(0..3000),
            lose,
            believed_down: if rng.random_bool(0.5) {
                Some(rng.random_range(0..cluster.n()))
            } else {
                None
            },
            crash_after_accept: None,
        };
        let cond = if if_match {
            Cond::IfMatch("e0".into())
        } else {
            Cond::IfNoneMatch
        };
        let (c, k, clock) = (cluster.clone(), key.clone(), clocks[from].clone());
        // Writers start a little apart, or at once.
        let start = Duration::from_micros(rng.random_range(0..2000));
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(start).await;
            write(c, from, w, &k, cond, net, clock).await
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let won: Vec<&Cell> = results
        .iter()
        .filter_map(|r| match r {
            Result_::Won(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        won.len() <= 1,
        "seed {seed}: {} writers succeeded: {results:?}",
        won.len()
    );
    let failed: Vec<u32> = (1..=writers)
        .zip(&results)
        .filter(|(_, r)| matches!(r, Result_::Failed412))
        .map(|(w, _)| w)
        .collect();
    let converged = cluster.converged(&key);
    if let Some(w) = won.first() {
        assert_eq!(
            converged.as_ref(),
            Some(*w),
            "seed {seed}: the winner is kept"
        );
    }
    if let Some(c) = &converged {
        assert!(
            !failed.contains(&c.writer),
            "seed {seed}: a writer told 412 was published: {results:?}"
        );
    }
    if lose == 0 {
        assert_eq!(
            won.len(),
            1,
            "seed {seed}: no loss, one winner: {results:?}"
        );
        assert_eq!(
            failed.len() as u32,
            writers - 1,
            "seed {seed}: the others get 412: {results:?}"
        );
    } else {
        // An unknown outcome may still become the value; any other
        // writer's cell never does.
        if let Some(c) = &converged
            && c.writer != 0
        {
            let r = &results[c.writer as usize - 1];
            assert!(
                matches!(r, Result_::Won(_) | Result_::Unavailable { unknown: true }),
                "seed {seed}: writer {} was published after {r:?}",
                c.writer
            );
        }
    }
}

fn clocks(n: usize) -> Vec<Arc<BallotClock>> {
    (0..n).map(|_| Arc::new(BallotClock::new())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_if_none_match_wins_per_key_under_random_schedules() {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    for seed in 0..120 {
        race(&cluster, &clocks, seed, 0, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_one_if_match_of_one_etag_wins_under_random_schedules() {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    for seed in 0..120 {
        race(&cluster, &clocks, seed, 0, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_messages_never_make_two_winners_with_five_acceptors() {
    let cluster = Cluster::new(5);
    let clocks = clocks(5);
    for seed in 0..120 {
        race(&cluster, &clocks, seed, 80, seed % 2 == 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_accepted_by_a_crashed_proposer_is_completed_by_the_next_round() {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    let crash = Arc::new(AtomicBool::new(false));
    let net = Net {
        seed: 1,
        max_delay_us: 0,
        lose: 0,
        believed_down: None,
        crash_after_accept: Some(crash.clone()),
    };
    let (c, clock) = (cluster.clone(), clocks[0].clone());
    let crashed =
        tokio::spawn(async move { write(c, 0, 1, "k", Cond::IfNoneMatch, net, clock).await });
    tokio::time::timeout(Duration::from_secs(5), async {
        while !crash.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap();
    crashed.abort();
    assert_eq!(cluster.converged("k"), None, "crashed before publishing");

    // The next writer, through another node, completes writer 1's value
    // first, and then finds the key taken.
    let net = Net {
        seed: 2,
        max_delay_us: 100,
        lose: 0,
        believed_down: None,
        crash_after_accept: None,
    };
    let r = write(
        cluster.clone(),
        2,
        2,
        "k",
        Cond::IfNoneMatch,
        net,
        clocks[2].clone(),
    )
    .await;
    assert!(matches!(r, Result_::Failed412), "{r:?}");
    let kept = cluster
        .converged("k")
        .expect("writer 1's value was completed");
    assert_eq!(kept.writer, 1);
    // Published on a majority: a quorum read sees it.
    let on = cluster
        .cells
        .iter()
        .filter(|c| c.lock().unwrap().get("k") == Some(&kept))
        .count();
    assert!(on >= 2, "on {on} replicas");
}

/// Conditional writes of one key race while unconditional writes replace
/// its value now and then (some keeping the ETag the writers expect, some
/// not): many rounds decide, values are published and replaced, and a
/// loser's next round often finds its condition failing on a key written
/// past its value. Whatever the schedule, a writer told 412 was never
/// published (it would be a write that happened, answered as one that did
/// not: doc/chaos.md, "Anomalies found by the history check"), and a
/// writer told 200 was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_told_412_was_never_published_under_random_schedules_with_overwrites() {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    let mut told_412 = 0;
    for seed in 0..80u64 {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0be7);
        let key = format!("over-{seed}");
        let base = Cell {
            ts: 1,
            writer: 0,
            etag: "e0".into(),
        };
        for i in 0..cluster.n() {
            cluster.write(i, &key, &base);
        }
        let mut tasks = Vec::new();
        for w in 1..=rng.random_range(2..=5u32) {
            let from = rng.random_range(0..cluster.n());
            let net = Net {
                seed: rng.random(),
                max_delay_us: rng.random_range(0..3000),
                lose: if rng.random_bool(0.3) { 50 } else { 0 },
                believed_down: None,
                crash_after_accept: None,
            };
            let (c, k, clock) = (cluster.clone(), key.clone(), clocks[from].clone());
            let start = Duration::from_micros(rng.random_range(0..3000));
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(start).await;
                (
                    w,
                    write(c, from, w, &k, Cond::IfMatch("e0".into()), net, clock).await,
                )
            }));
        }
        // The unconditional writer: straight to every replica, past what
        // is there, with the expected ETag or another.
        let (c, k) = (cluster.clone(), key.clone());
        let overwrites: Vec<(u64, bool)> = (0..rng.random_range(1..=3))
            .map(|_| (rng.random_range(0..6000), rng.random_bool(0.5)))
            .collect();
        let over = tokio::spawn(async move {
            for (i, (after_us, keep_etag)) in overwrites.into_iter().enumerate() {
                tokio::time::sleep(Duration::from_micros(after_us)).await;
                let ts = c.converged(&k).map_or(1, |x| x.ts + 1);
                let cell = Cell {
                    ts,
                    writer: 1000 + i as u32,
                    etag: if keep_etag {
                        "e0".into()
                    } else {
                        "other".into()
                    },
                };
                for r in 0..c.n() {
                    c.write(r, &k, &cell);
                }
            }
        });
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        over.await.unwrap();
        let ever = cluster.ever.lock().unwrap().clone();
        for (w, r) in &results {
            let published = ever.contains(&(key.clone(), *w));
            match r {
                Result_::Failed412 => {
                    told_412 += 1;
                    assert!(
                        !published,
                        "seed {seed}: writer {w} was told 412 but its value was published: {results:?}"
                    );
                }
                Result_::Won(_) => assert!(published, "seed {seed}: writer {w} won unpublished"),
                Result_::Unavailable { .. } => {}
            }
        }
    }
    assert!(
        told_412 > 0,
        "the schedules made no loser: they test nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposer_whose_accept_failed_and_whose_condition_then_failed_cannot_be_completed() {
    // Writer 1's value is accepted by one acceptor only (its other accepts
    // are refused); writer 2 wins; writer 1 then gets 412, and no later
    // round may complete writer 1's value.
    let cluster = Cluster::new(3);
    let key = PaxosKey::new(&[7; 32], "k");
    let b1 = Ballot {
        counter: 10,
        node: node(0),
    };
    for a in &cluster.acceptors {
        assert!(matches!(
            a.prepare(&key, b1).await.unwrap(),
            PrepareReply::Promise { .. }
        ));
    }
    let stale = Proposal::Publish {
        sort: ByteBuf::from(b"k".to_vec()),
        row: ByteBuf::from(
            rmp_serde::to_vec(&Cell {
                ts: 99,
                writer: 1,
                etag: "etag-1".into(),
            })
            .unwrap(),
        ),
    };
    assert!(matches!(
        cluster.acceptors[0].accept(&key, b1, stale).await.unwrap(),
        AcceptReply::Accepted
    ));
    // A later round through nodes 1 and 2 only (node 0 believed down)
    // decides writer 2.
    let net = |seed, down| Net {
        seed,
        max_delay_us: 50,
        lose: 0,
        believed_down: down,
        crash_after_accept: None,
    };
    let clocks = clocks(3);
    let r = write(
        cluster.clone(),
        1,
        2,
        "k",
        Cond::IfNoneMatch,
        net(3, Some(0)),
        clocks[1].clone(),
    )
    .await;
    assert!(matches!(r, Result_::Won(_)), "{r:?}");
    // Node 0's stale value, at ballot 10, must never win over writer 2.
    for seed in 0..20 {
        let r = write(
            cluster.clone(),
            0,
            10 + seed as u32,
            "k",
            Cond::IfNoneMatch,
            net(seed, None),
            clocks[0].clone(),
        )
        .await;
        assert!(matches!(r, Result_::Failed412), "{r:?}");
        assert_eq!(cluster.converged("k").unwrap().writer, 2);
    }
}

#[tokio::test]
async fn acceptor_state_survives_a_reopen_and_is_collected_after_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let key = PaxosKey::new(&[1; 32], "photos/cat.jpg");
    let b = Ballot {
        counter: hangar_util::time::now_msec(),
        node: node(3),
    };
    let value = Proposal::Publish {
        sort: ByteBuf::from(b"photos/cat.jpg".to_vec()),
        row: ByteBuf::from(vec![1, 2, 3]),
    };
    {
        let a = Acceptor::new(open_db(&path));
        assert!(matches!(
            a.prepare(&key, b).await.unwrap(),
            PrepareReply::Promise {
                accepted: None,
                committed: None,
                ..
            }
        ));
        assert!(matches!(
            a.accept(&key, b, value.clone()).await.unwrap(),
            AcceptReply::Accepted
        ));
    }
    // The old store closes once its committer thread has ended.
    let mut reopened = None;
    for _ in 0..250 {
        match RedbEngine::open(&path, 4 << 20) {
            Ok(e) => {
                reopened = Some(Db::new(Arc::new(e), DbOptions::default()));
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let a = Acceptor::new(reopened.expect("the store reopens"));
    let lower = Ballot {
        counter: b.counter - 1,
        node: node(9),
    };
    assert!(
        matches!(a.prepare(&key, lower).await.unwrap(), PrepareReply::Rejected { promised } if promised == b),
        "the promise survived"
    );
    let higher = Ballot {
        counter: b.counter + 1,
        node: node(1),
    };
    match a.prepare(&key, higher).await.unwrap() {
        PrepareReply::Promise {
            accepted: Some(acc),
            committed: None,
            ..
        } => {
            assert_eq!(acc.ballot, b);
            assert_eq!(acc.value, value, "the accepted value survived");
        }
        other => panic!("{other:?}"),
    }
    // Not collectable while its value is live and not committed.
    let far = hangar_util::time::now_msec() + KEEP_MSEC + 1000;
    assert_eq!(a.sweep(b.counter + 1000, 100).await.unwrap().removed, 0);
    a.commit(&key, higher, None).await.unwrap();
    let s = a.state(&key).await.unwrap().unwrap();
    assert_eq!(s.accepted, None, "the commit forgets the value");
    assert_eq!(s.committed, Some(higher));
    assert_eq!(
        a.sweep(hangar_util::time::now_msec(), 100)
            .await
            .unwrap()
            .removed,
        0,
        "kept a while"
    );
    assert_eq!(a.sweep(far, 100).await.unwrap().removed, 1);
    assert_eq!(a.state(&key).await.unwrap(), None);
    assert_eq!(a.entries().await.unwrap(), 1, "only the floor is left");
    // The floor keeps the promise of the removed entry, for every key.
    assert!(matches!(
        a.prepare(&key, b).await.unwrap(),
        PrepareReply::Rejected { .. }
    ));
    let other = PaxosKey::new(&[2; 32], "x");
    assert!(matches!(
        a.accept(&other, b, Proposal::Nothing).await.unwrap(),
        AcceptReply::Rejected { promised } if promised == higher
    ));
    let next = Ballot {
        counter: higher.counter + 1,
        node: node(1),
    };
    assert!(matches!(
        a.prepare(&key, next).await.unwrap(),
        PrepareReply::Promise {
            accepted: None,
            committed: None,
            ..
        }
    ));
}

#[tokio::test]
async fn a_dead_value_is_not_reported_and_its_entry_is_collected() {
    // Dead once the acceptor accepted it VALUE_DEAD_AFTER_MSEC ago by its
    // own clock (the state's methods take that clock as `now`).
    let t = 1_000_000_000u64;
    let mut s = AcceptorState::default();
    let b1 = Ballot {
        counter: 5,
        node: node(1),
    };
    s.prepare(b1, Ballot::ZERO, t);
    s.accept(b1, Proposal::Nothing, Ballot::ZERO, t);
    let b2 = Ballot {
        counter: 6,
        node: node(2),
    };
    assert!(matches!(
        s.prepare(b2, Ballot::ZERO, t + VALUE_DEAD_AFTER_MSEC),
        PrepareReply::Promise {
            accepted: Some(_),
            ..
        }
    ));
    let b3 = Ballot {
        counter: 7,
        node: node(2),
    };
    assert!(matches!(
        s.prepare(b3, Ballot::ZERO, t + VALUE_DEAD_AFTER_MSEC + 1),
        PrepareReply::Promise { accepted: None, .. }
    ));

    // On a store: collected once dead and past the keeping delay.
    let dir = tempfile::tempdir().unwrap();
    let a = Acceptor::new(open_db(&dir.path().join("db")));
    let key = PaxosKey::new(&[1; 32], "k");
    let b = Ballot {
        counter: hangar_util::time::now_msec(),
        node: node(1),
    };
    a.prepare(&key, b).await.unwrap();
    a.accept(&key, b, Proposal::Nothing).await.unwrap();
    let now = hangar_util::time::now_msec();
    // Live: kept, however old its last change would be.
    assert_eq!(
        a.sweep(now + VALUE_DEAD_AFTER_MSEC - 1000, 100)
            .await
            .unwrap()
            .removed,
        0
    );
    let far = now + KEEP_MSEC + 1000;
    assert_eq!(a.sweep(far, 100).await.unwrap().removed, 1);
}

/// A proposer whose clock is 11 minutes behind the acceptors' (or, the
/// same for the comparison, acceptors whose clocks are 11 minutes ahead):
/// its ballots' counters are 11 minutes old by the acceptors' clocks.
fn skewed_ballot(i: usize) -> Ballot {
    Ballot {
        counter: hangar_util::time::now_msec() - VALUE_DEAD_AFTER_MSEC - 60_000,
        node: node(i),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_accepted_from_a_proposer_with_a_slow_clock_is_not_dead() {
    // Writer 1, through node 0 whose clock is 11 minutes behind, had its
    // `If-None-Match: *` value accepted by acceptors 0 and 1 — decided —
    // and is publishing it. Writer 2 runs a round through nodes 1 and 2
    // (it believes node 0 down): acceptor 1's promise must report writer
    // 1's value, so writer 2 completes it and gets 412. Judged by the
    // ballot's counter against acceptor 1's clock, the value was dead the
    // moment it was accepted: writer 2 saw no value, read the key absent,
    // and won too.
    let cluster = Cluster::new(3);
    let key = PaxosKey::new(&[7; 32], "k");
    let b1 = skewed_ballot(0);
    let v1 = Proposal::Publish {
        sort: ByteBuf::from(b"k".to_vec()),
        row: ByteBuf::from(
            rmp_serde::to_vec(&Cell {
                ts: 1,
                writer: 1,
                etag: "etag-1".into(),
            })
            .unwrap(),
        ),
    };
    for a in &cluster.acceptors[..2] {
        assert!(matches!(
            a.prepare(&key, b1).await.unwrap(),
            PrepareReply::Promise { .. }
        ));
        assert!(matches!(
            a.accept(&key, b1, v1.clone()).await.unwrap(),
            AcceptReply::Accepted
        ));
    }
    let clocks = clocks(3);
    let net = Net {
        seed: 5,
        max_delay_us: 100,
        lose: 0,
        believed_down: Some(0),
        crash_after_accept: None,
    };
    let r2 = write(
        cluster.clone(),
        2,
        2,
        "k",
        Cond::IfNoneMatch,
        net,
        clocks[2].clone(),
    )
    .await;
    // Writer 1's own publish lands (idempotent if writer 2 completed it).
    let w1 = decode(&v1).unwrap();
    for i in 0..2 {
        cluster.write(i, "k", &w1);
    }
    assert!(
        matches!(r2, Result_::Failed412),
        "writer 1's value was decided, yet writer 2 got {r2:?}: two If-None-Match writers won"
    );
    assert_eq!(cluster.converged("k"), Some(w1));
}

async fn settle(cluster: Arc<Cluster>, from: usize, key: &str, seed: u64, clock: Arc<BallotClock>) {
    let net = Net {
        seed,
        max_delay_us: 200,
        lose: 0,
        believed_down: None,
        crash_after_accept: None,
    };
    let link: Arc<dyn Link> = SimLink::new(from, cluster.clone(), net);
    let reg = SimRegister {
        cluster,
        key: key.to_owned(),
        writer: 0,
        cond: Cond::Settle,
        rng: Mutex::new(StdRng::seed_from_u64(seed)),
        crash: None,
    };
    proposer::settle(link, &clock, &PaxosKey::new(&[7; 32], key), &reg)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_settling_round_an_undecided_value_is_never_published() {
    let clocks = clocks(3);
    for seed in 0..30u64 {
        let cluster = Cluster::new(3);
        let key = PaxosKey::new(&[7; 32], "k");
        let b1 = Ballot {
            counter: hangar_util::time::now_msec(),
            node: node(0),
        };
        let stale = Proposal::Publish {
            sort: ByteBuf::from(b"k".to_vec()),
            row: ByteBuf::from(
                rmp_serde::to_vec(&Cell {
                    ts: 5,
                    writer: 1,
                    etag: "etag-1".into(),
                })
                .unwrap(),
            ),
        };
        // Writer 1's value accepted by one acceptor (seed even) or by a
        // majority (seed odd: decided), never published.
        let holders = if seed % 2 == 0 { 1 } else { 2 };
        for a in &cluster.acceptors[..holders] {
            a.prepare(&key, b1).await.unwrap();
            a.accept(&key, b1, stale.clone()).await.unwrap();
        }
        settle(
            cluster.clone(),
            (seed % 3) as usize,
            "k",
            seed,
            clocks[(seed % 3) as usize].clone(),
        )
        .await;
        let after_settle = cluster.converged("k");
        if holders == 2 {
            assert_eq!(
                after_settle.as_ref().map(|c| c.writer),
                Some(1),
                "seed {seed}: a decided value is completed"
            );
        }
        // Whatever the settling round found is final: later rounds from
        // every node never publish writer 1's value if it was not.
        for w in 0..6u32 {
            let net = Net {
                seed: seed * 100 + u64::from(w),
                max_delay_us: 500,
                lose: 0,
                believed_down: None,
                crash_after_accept: None,
            };
            let from = (w % 3) as usize;
            write(
                cluster.clone(),
                from,
                10 + w,
                "k",
                Cond::IfNoneMatch,
                net,
                clocks[from].clone(),
            )
            .await;
            let now = cluster.converged("k").unwrap();
            if after_settle.is_none() {
                assert_ne!(
                    now.writer, 1,
                    "seed {seed}: the settled-away value was published"
                );
            } else {
                assert_eq!(Some(now), after_settle.clone(), "seed {seed}");
            }
        }
    }
}

/// A proposer's link that, in its first accept, finds acceptors 1 and 2
/// promised to a concurrent round (acceptor 0 alone accepts), and that
/// holds its next round's prepares until the test lets them go.
struct PausingLink {
    inner: Arc<SimLink>,
    cluster: Arc<Cluster>,
    first_accept: Mutex<Option<Ballot>>,
    paused: Arc<AtomicBool>,
    resume: tokio::sync::watch::Receiver<bool>,
}

#[async_trait]
impl Link for PausingLink {
    fn me(&self) -> NodeId {
        self.inner.me()
    }
    fn sets(&self) -> Vec<WriteSet> {
        self.inner.sets()
    }
    fn is_up(&self, n: NodeId) -> bool {
        self.inner.is_up(n)
    }
    async fn prepare(&self, to: NodeId, m: Prepare) -> Result<PrepareReply, NetError> {
        let first = *self.first_accept.lock().unwrap();
        if first.is_some_and(|b| m.ballot > b) {
            self.paused.store(true, Ordering::SeqCst);
            let mut resume = self.resume.clone();
            resume.wait_for(|r| *r).await.unwrap();
        }
        self.inner.prepare(to, m).await
    }
    async fn accept(&self, to: NodeId, m: Accept) -> Result<AcceptReply, NetError> {
        let first = *self.first_accept.lock().unwrap().get_or_insert(m.ballot);
        if m.ballot == first && to != node(0) {
            let i = self.inner.index(to);
            let higher = Ballot {
                counter: m.ballot.counter + 1,
                node: node(2),
            };
            self.cluster.acceptors[i]
                .prepare(&m.key, higher)
                .await
                .unwrap();
        }
        self.inner.accept(to, m).await
    }
    async fn commit(&self, to: NodeId, m: Commit) -> Result<(), NetError> {
        self.inner.commit(to, m).await
    }
}

/// Writer 1 (`If-None-Match: *`, node 0) sends its value v1 to accept:
/// acceptor 0 accepts it, 1 and 2 refuse (a concurrent round promised
/// higher), and writer 1 backs off. Writer 2 (node 2, believing node 1
/// down) finds v1 accepted on acceptor 0, completes it — v1 is published —
/// and gets 412. Then `after(v1's cell)` is written on every node, and
/// writer 1 goes on. Returns the cluster, v1, and writer 1's answer.
async fn writer_1_resumes_after_its_value_was_completed_and(
    after: impl FnOnce(&Cell) -> Cell,
) -> (Arc<Cluster>, Proposal, hangar_model::Result<Outcome>) {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    let (go, resume) = tokio::sync::watch::channel(false);
    let paused = Arc::new(AtomicBool::new(false));
    let net = |seed, believed_down| Net {
        seed,
        max_delay_us: 100,
        lose: 0,
        believed_down,
        crash_after_accept: None,
    };
    let link = Arc::new(PausingLink {
        inner: SimLink::new(0, cluster.clone(), net(1, None)),
        cluster: cluster.clone(),
        first_accept: Mutex::new(None),
        paused: paused.clone(),
        resume,
    });
    let reg = SimRegister {
        cluster: cluster.clone(),
        key: "k".into(),
        writer: 1,
        cond: Cond::IfNoneMatch,
        rng: Mutex::new(StdRng::seed_from_u64(11)),
        crash: None,
    };
    let clock1 = clocks[0].clone();
    let writer1 = tokio::spawn(async move {
        proposer::run(link, &clock1, &PaxosKey::new(&[7; 32], "k"), &reg).await
    });
    tokio::time::timeout(Duration::from_secs(10), async {
        while !paused.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("writer 1 backed off after its refused accept");
    let key = PaxosKey::new(&[7; 32], "k");
    let v1 = cluster.acceptors[0]
        .state(&key)
        .await
        .unwrap()
        .and_then(|s| s.accepted)
        .expect("acceptor 0 accepted writer 1's value")
        .value;
    let w1 = decode(&v1).unwrap();
    assert_eq!(cluster.converged("k"), None);

    let r2 = write(
        cluster.clone(),
        2,
        2,
        "k",
        Cond::IfNoneMatch,
        net(2, Some(1)),
        clocks[2].clone(),
    )
    .await;
    assert!(matches!(r2, Result_::Failed412), "{r2:?}");
    assert_eq!(
        cluster.converged("k"),
        Some(w1.clone()),
        "writer 2 completed v1"
    );

    let next = after(&w1);
    for i in 0..cluster.n() {
        cluster.write(i, "k", &next);
    }
    go.send(true).unwrap();
    let r1 = tokio::time::timeout(Duration::from_secs(20), writer1)
        .await
        .expect("writer 1 ends")
        .unwrap();
    (cluster, v1, r1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_published_by_another_round_and_then_deleted_is_not_published_again() {
    // After v1 was completed and published by writer 2, the key is deleted
    // (an unconditional DELETE: a tombstone past v1). Writer 1's next round
    // finds v1 not published (the row is a tombstone) and the condition
    // holding on the deleted key: it must not publish v1 again. Re-stamped
    // past the tombstone, v1 (same version id, blocks the DELETE's
    // collection was releasing) came back after its deletion and writer 1
    // answered 200.
    let (cluster, v1, r1) = writer_1_resumes_after_its_value_was_completed_and(|w1| Cell {
        ts: w1.ts + 1,
        writer: 99,
        etag: String::new(),
    })
    .await;
    let after = cluster.converged("k").unwrap();
    assert!(
        after.is_tombstone(),
        "the deleted key came back as {after:?} (writer 1 answered {r1:?}): v1 was published again after its deletion"
    );
    // Its value was published once: 200 with it, or 503 (outcome unknown).
    match r1 {
        Ok(Outcome::Published(v)) => assert_eq!(v, v1),
        Err(ModelError::ConditionalWrite {
            outcome_unknown: true,
            ..
        }) => {}
        other => panic!("writer 1: {other:?}"),
    }
}

/// The deterministic reproduction of the anomaly the history check found
/// (doc/chaos.md, "Anomalies found by the history check"): writer 1 was
/// answered 412 although its value had been published. The acceptors'
/// logs of decided values (src/model/src/paxos/decided.rs) name it now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_published_by_another_round_and_then_overwritten_is_not_answered_412() {
    // As above, but the key is then overwritten (an unconditional PUT past
    // v1) instead of deleted: writer 1's next round finds v1 not published
    // (it is no longer the current row) and its condition false on the
    // existing key, decides nothing, and answered 412 — although its value
    // had been published. The logs of decided values say it was: 200.
    let over = |w1: &Cell| Cell {
        ts: w1.ts + 1,
        writer: 99,
        etag: "overwrite".into(),
    };
    let (cluster, v1, r1) = writer_1_resumes_after_its_value_was_completed_and(over).await;
    assert_eq!(
        cluster.converged("k").map(|c| c.writer),
        Some(99),
        "the overwrite stays"
    );
    match r1 {
        Ok(Outcome::Published(v)) => assert_eq!(v, v1),
        other => panic!("writer 1, whose value was published, answered {other:?}"),
    }
}

/// A link whose commits arrive `delay` late, as a busy acceptor's would:
/// the proposer's next prepare overtakes the commit it sent in the
/// background.
struct SlowCommits {
    inner: Arc<SimLink>,
    delay: Duration,
}

#[async_trait]
impl Link for SlowCommits {
    fn me(&self) -> NodeId {
        self.inner.me()
    }
    fn sets(&self) -> Vec<WriteSet> {
        self.inner.sets()
    }
    fn is_up(&self, n: NodeId) -> bool {
        self.inner.is_up(n)
    }
    async fn prepare(&self, to: NodeId, m: Prepare) -> Result<PrepareReply, NetError> {
        self.inner.prepare(to, m).await
    }
    async fn accept(&self, to: NodeId, m: Accept) -> Result<AcceptReply, NetError> {
        self.inner.accept(to, m).await
    }
    async fn commit(&self, to: NodeId, m: Commit) -> Result<(), NetError> {
        tokio::time::sleep(self.delay).await;
        self.inner.commit(to, m).await
    }
}

/// A value accepted by a crashed proposer is completed by a settling
/// round whose commits are slower than its next prepare: the round does
/// not take its own completion, not yet committed, for another earlier
/// value to complete again and again until its deadline (the livelock
/// that `publish_races`' restart test hit about once in eight runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_value_whose_commit_is_slow_is_not_completed_again() {
    let cluster = Cluster::new(3);
    let clocks = clocks(3);
    let crash = Arc::new(AtomicBool::new(false));
    let net = |seed, crash_after_accept| Net {
        seed,
        max_delay_us: 0,
        lose: 0,
        believed_down: None,
        crash_after_accept,
    };
    let (c, clock) = (cluster.clone(), clocks[0].clone());
    let n = net(1, Some(crash.clone()));
    let crashed =
        tokio::spawn(async move { write(c, 0, 1, "k", Cond::IfNoneMatch, n, clock).await });
    tokio::time::timeout(Duration::from_secs(5), async {
        while !crash.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap();
    crashed.abort();

    let link: Arc<dyn Link> = Arc::new(SlowCommits {
        inner: SimLink::new(2, cluster.clone(), net(2, None)),
        delay: Duration::from_millis(30),
    });
    let reg = SimRegister {
        cluster: cluster.clone(),
        key: "k".to_owned(),
        writer: 0,
        cond: Cond::Settle,
        rng: Mutex::new(StdRng::seed_from_u64(2)),
        crash: None,
    };
    let t = std::time::Instant::now();
    let settled = tokio::time::timeout(
        Duration::from_secs(5),
        proposer::settle(link, &clocks[2], &PaxosKey::new(&[7; 32], "k"), &reg),
    )
    .await;
    assert!(
        matches!(settled, Ok(Ok(()))),
        "settled in {:?}: {settled:?}",
        t.elapsed()
    );
    assert_eq!(
        cluster.converged("k").map(|c| c.writer),
        Some(1),
        "writer 1's value was completed"
    );
}
