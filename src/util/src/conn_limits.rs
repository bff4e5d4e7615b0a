//! The bounds an HTTP endpoint (S3, admin) keeps on its connections, so
//! that slow or idle clients cannot take it from everyone else.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Most bytes of a request head (request line and headers) an endpoint
/// reads before answering `431` and closing. Without it hyper's bound is
/// its read buffer, about 400 KiB, which a client holding every permitted
/// connection with a slowly sent head could make the node keep per
/// connection. 96 KiB holds hyper's 64 KiB bound on a URI (past it `414`)
/// and S3's 16 KiB on the header section (past it
/// `RequestHeaderSectionTooLarge` with S3's XML) with room to spare.
pub const MAX_HEAD_BYTES: usize = 96 * 1024;

/// Most header lines of a request. hyper's default is 100, which refused
/// requests S3 serves (a few hundred short headers fit in S3's 16 KiB)
/// with a bare `431`; 1024 lines cost a transient 32 KiB index per parsed
/// head, and any more cannot fit in 16 KiB at S3's usual header sizes.
pub const MAX_HEAD_LINES: usize = 1024;

/// The bounds a client cannot stretch.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once. At the limit a new connection takes the
    /// place of the one that has waited longest for a request head (a
    /// stalled head, or an idle keep-alive connection) where the gate
    /// makes room ([`ConnGate::making_room`]); when every connection is
    /// inside a request, or the gate does not make room, it is answered
    /// `503` at once and closed.
    pub max_connections: usize,
    /// Connections from one client address at once (0: no bound of its
    /// own). Past it a new connection from that address takes the place of
    /// the address's own longest-waiting one, or is refused as above.
    pub max_per_address: usize,
    /// Longest time to receive a request's head, counted from the first
    /// wait for it: a slow header, and an idle keep-alive connection.
    pub header_timeout: Duration,
    /// Longest time without a byte read or written while the connection
    /// waits on the client: a stalled body or a client that stopped
    /// reading (`idle_io::IdleTimeout`).
    pub idle_timeout: Duration,
}

/// The gate in front of an HTTP endpoint's connections: it accepts them,
/// serves at most `max_connections` at once (and `max_per_address` from
/// one address), and answers one more with the endpoint's `refusal` (a
/// whole HTTP response, e.g. `503 SlowDown`) at once, then closes it,
/// rather than leaving it in the backlog, where a flood of idle
/// connections would keep everyone waiting. A gate that makes room closes
/// the longest-waiting connection that is not inside a request instead,
/// so that clients holding connections with half-sent heads cannot lock
/// every other client out until the header timeout.
pub struct ConnGate {
    table: Arc<Mutex<Table>>,
    refusal: Arc<[u8]>,
    max: usize,
    per_address: usize,
    makes_room: bool,
}

/// The connections a gate serves.
#[derive(Default)]
struct Table {
    next_id: u64,
    conns: HashMap<u64, Entry>,
    per_ip: HashMap<IpAddr, usize>,
}

struct Entry {
    ip: IpAddr,
    /// Requests of the connection being answered (head read, answer not
    /// yet sent whole).
    busy: usize,
    /// Since when it waits for a request head (while `busy` is 0).
    waiting_since: Instant,
    /// Told when the gate closes the connection to make room.
    evict: Option<oneshot::Sender<()>>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.conns.remove(&id)?;
        if let Some(n) = self.per_ip.get_mut(&e.ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&e.ip);
            }
        }
        Some(e)
    }

    /// Closes the connection (of `ip`, if given) that has waited longest
    /// for a request head; whether there was one.
    fn evict_oldest_waiting(&mut self, ip: Option<IpAddr>) -> bool {
        let oldest = self
            .conns
            .iter()
            .filter(|(_, e)| e.busy == 0 && ip.is_none_or(|ip| e.ip == ip))
            .min_by_key(|(_, e)| e.waiting_since)
            .map(|(id, _)| *id);
        let Some(id) = oldest else {
            return false;
        };
        if let Some(e) = self.remove(id)
            && let Some(tx) = e.evict
        {
            let _ = tx.send(());
        }
        true
    }
}

/// An admitted connection's place among those served; given back when the
/// last of its [`Slot`] and [`SlotUse`] is dropped.
pub struct Slot {
    shared: Arc<SlotShared>,
    evicted: Option<oneshot::Receiver<()>>,
}

struct SlotShared {
    table: Arc<Mutex<Table>>,
    id: u64,
}

impl Drop for SlotShared {
    fn drop(&mut self) {
        lock(&self.table).remove(self.id);
    }
}

/// A handle on a connection's slot for its request handler: marks the
/// connection busy for as long as a request is answered.
#[derive(Clone)]
pub struct SlotUse(Arc<SlotShared>);

/// A request being answered on its connection; the connection counts as
/// waiting for a head again once it is dropped (when the answer is sent).
pub struct InRequest(Arc<SlotShared>);

impl SlotUse {
    /// Marks the connection inside a request until the guard is dropped:
    /// it is then never closed to make room.
    pub fn request(&self) -> InRequest {
        if let Some(e) = lock(&self.0.table).conns.get_mut(&self.0.id) {
            e.busy += 1;
        }
        InRequest(self.0.clone())
    }
}

impl Drop for InRequest {
    fn drop(&mut self) {
        if let Some(e) = lock(&self.0.table).conns.get_mut(&self.0.id) {
            e.busy = e.busy.saturating_sub(1);
            if e.busy == 0 {
                e.waiting_since = Instant::now();
            }
        }
    }
}

impl Slot {
    /// The handle for the connection's request handler.
    pub fn user(&self) -> SlotUse {
        SlotUse(self.shared.clone())
    }

    /// Resolves when the gate closed this connection to make room for
    /// another (never, for a gate that does not make room): the
    /// connection is to be dropped then.
    pub async fn evicted(&mut self) {
        match self.evicted.as_mut() {
            Some(rx) => {
                if rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// An admitted connection and its place among those served.
pub type Admitted = (tokio::net::TcpStream, std::net::SocketAddr, Slot);

fn lock(t: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

impl ConnGate {
    /// A gate for `limits` (at least 1 connection) that answers `refusal`
    /// past them.
    pub fn new(limits: &ConnLimits, refusal: Vec<u8>) -> Self {
        ConnGate {
            table: Arc::default(),
            refusal: refusal.into(),
            max: limits.max_connections.max(1),
            per_address: limits.max_per_address,
            makes_room: false,
        }
    }

    /// [`ConnGate::new`], making room at the limits by closing the
    /// longest-waiting connection that is not inside a request. The
    /// endpoint marks its requests ([`SlotUse::request`]) and drops a
    /// connection whose [`Slot::evicted`] resolves.
    pub fn making_room(limits: &ConnLimits, refusal: Vec<u8>) -> Self {
        ConnGate {
            makes_room: true,
            ..ConnGate::new(limits, refusal)
        }
    }

    /// The slot of a new connection from `peer`, if it may be served.
    fn admit(&self, peer: IpAddr) -> Option<Slot> {
        let mut t = lock(&self.table);
        if self.per_address > 0
            && t.per_ip.get(&peer).copied().unwrap_or(0) >= self.per_address
            && !(self.makes_room && t.evict_oldest_waiting(Some(peer)))
        {
            return None;
        }
        if t.conns.len() >= self.max && !(self.makes_room && t.evict_oldest_waiting(None)) {
            return None;
        }
        let id = t.next_id;
        t.next_id += 1;
        let (tx, rx) = if self.makes_room {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        t.conns.insert(
            id,
            Entry {
                ip: peer,
                busy: 0,
                waiting_since: Instant::now(),
                evict: tx,
            },
        );
        *t.per_ip.entry(peer).or_default() += 1;
        Some(Slot {
            shared: Arc::new(SlotShared {
                table: self.table.clone(),
                id,
            }),
            evicted: rx,
        })
    }

    /// The next connection on `listener` that may be served: accept errors
    /// (e.g. out of file descriptors) are logged and retried after a pause,
    /// connections past the limits are refused in the background and
    /// `on_refused` is called for each.
    pub async fn next(
        &self,
        listener: &tokio::net::TcpListener,
        on_refused: impl Fn(),
    ) -> Admitted {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Small responses must not wait for the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            match self.admit(peer.ip().to_canonical()) {
                Some(slot) => return (stream, peer, slot),
                None => {
                    on_refused();
                    let refusal = self.refusal.clone();
                    tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let mut stream = stream;
                        let _ = tokio::time::timeout(Duration::from_secs(1), async {
                            stream.write_all(&refusal).await?;
                            stream.shutdown().await
                        })
                        .await;
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_address: usize) -> ConnLimits {
        ConnLimits {
            max_connections: max,
            max_per_address: per_address,
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn evicted(slot: &mut Slot) -> bool {
        slot.evicted
            .as_mut()
            .is_some_and(|rx| rx.try_recv().is_ok())
    }

    #[test]
    fn at_the_limit_the_longest_waiting_idle_connection_makes_room() {
        let gate = ConnGate::making_room(&limits(3, 0), vec![]);
        let mut first = gate.admit(ip(1)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let mut second = gate.admit(ip(2)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let mut third = gate.admit(ip(3)).unwrap();
        // The oldest is inside a request: the second goes.
        let busy = first.user().request();
        let mut fourth = gate.admit(ip(4)).unwrap();
        assert!(!evicted(&mut first));
        assert!(evicted(&mut second));
        assert!(!evicted(&mut third));
        // The first's request ended after the others started waiting: it
        // is now the newest waiter, so the third goes next.
        drop(busy);
        let _fifth = gate.admit(ip(5)).unwrap();
        assert!(evicted(&mut third));
        assert!(!evicted(&mut first));
        assert!(!evicted(&mut fourth));
        assert_eq!(lock(&gate.table).conns.len(), 3);
    }

    #[test]
    fn every_connection_busy_means_refusal() {
        let gate = ConnGate::making_room(&limits(2, 0), vec![]);
        let a = gate.admit(ip(1)).unwrap();
        let b = gate.admit(ip(1)).unwrap();
        let ra = a.user().request();
        let _rb = b.user().request();
        assert!(gate.admit(ip(2)).is_none());
        // The connection ends: its request's guard goes with it.
        drop(ra);
        drop(a);
        assert!(gate.admit(ip(2)).is_some());
    }

    #[test]
    fn one_address_makes_room_among_its_own_connections_only() {
        let gate = ConnGate::making_room(&limits(10, 2), vec![]);
        let mut other = gate.admit(ip(9)).unwrap();
        let mut a = gate.admit(ip(1)).unwrap();
        let b = gate.admit(ip(1)).unwrap();
        let _c = gate.admit(ip(1)).unwrap();
        assert!(evicted(&mut a));
        assert!(!evicted(&mut other));
        assert_eq!(lock(&gate.table).per_ip[&ip(1)], 2);
        // Both of its connections busy: the address is refused.
        let _rb = b.user().request();
        let _rc = _c.user().request();
        assert!(gate.admit(ip(1)).is_none());
        assert!(gate.admit(ip(2)).is_some());
    }

    #[test]
    fn a_gate_that_does_not_make_room_refuses_at_the_limit() {
        let gate = ConnGate::new(&limits(1, 0), vec![]);
        let mut a = gate.admit(ip(1)).unwrap();
        assert!(gate.admit(ip(2)).is_none());
        assert!(!evicted(&mut a));
        drop(a);
        assert!(gate.admit(ip(2)).is_some());
    }
}
