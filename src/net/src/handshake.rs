//! Bounds on incoming handshakes: what a host that is not (yet) a cluster member
//! can make a node hold.
//!
//! Anyone who can send UDP to the RPC port can start a QUIC handshake, and a
//! handshake costs the node connection state and retransmissions until it
//! completes or times out. A peer that never completes its handshake must not be
//! able to pin that state for long, nor to crowd out real peers:
//! - every handshake has a deadline (the ping timeout: a node that cannot finish
//!   a handshake in that time would be counted down anyway);
//! - at most [`MAX_PENDING`] handshakes are in progress at once, at most
//!   [`MAX_PENDING_PER_IP`] from one IP address, so one attacking host cannot take
//!   every slot from the cluster's nodes;
//! - once half the slots are taken, a source whose address QUIC has not
//!   validated is sent a stateless Retry first, so spoofed source addresses
//!   (which would escape the per-address bound) cost the node nothing.
//!
//! Refusals are counted (`hangar_rpc_handshakes_refused_total`) and logged at most once
//! a second, so a flood cannot fill the log either.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Handshakes in progress at once, from all sources.
pub(crate) const MAX_PENDING: usize = 256;
/// Handshakes in progress at once from one IP address.
pub(crate) const MAX_PENDING_PER_IP: usize = 16;

/// What to do with a new incoming handshake.
pub(crate) enum Admission {
    /// Go on with it, holding this slot until it ends.
    Admit(Slot),
    /// Ask the source to prove its address with a stateless Retry first.
    Retry,
    /// Refuse it at once; the reason is for the log and metrics.
    Refuse(&'static str),
}

#[derive(Default)]
struct Pending {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The handshakes in progress, with their bounds.
#[derive(Default)]
pub(crate) struct HandshakeLimits {
    pending: Mutex<Pending>,
}

impl HandshakeLimits {
    /// Decides about a handshake from `ip`; `validated` says whether QUIC has
    /// already checked that the source owns that address (a Retry token).
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr, validated: bool) -> Admission {
        let mut p = self.pending.lock().expect("handshake limits lock");
        let from_ip = p.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= MAX_PENDING_PER_IP {
            return Admission::Refuse("too many handshakes from this address");
        }
        if p.total >= MAX_PENDING {
            return Admission::Refuse("too many handshakes in progress");
        }
        if !validated && p.total >= MAX_PENDING / 2 {
            return Admission::Retry;
        }
        p.total += 1;
        *p.per_ip.entry(ip).or_default() += 1;
        Admission::Admit(Slot {
            limits: self.clone(),
            ip,
        })
    }

    /// Handshakes in progress now.
    pub(crate) fn pending(&self) -> usize {
        self.pending.lock().expect("handshake limits lock").total
    }
}

/// A handshake's place among those in progress; freed when dropped.
pub(crate) struct Slot {
    limits: Arc<HandshakeLimits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut p = self.limits.pending.lock().expect("handshake limits lock");
        p.total -= 1;
        if let Some(n) = p.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                p.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Lets one warning through per second; the others are for the debug log.
#[derive(Default)]
pub(crate) struct LogThrottle {
    last_ms: AtomicU64,
}

impl LogThrottle {
    /// True when a warning may be logged now.
    pub(crate) fn allow(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        let last = self.last_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= 1000
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn one_address_cannot_take_every_slot() {
        let limits = Arc::new(HandshakeLimits::default());
        let mut held = Vec::new();
        for _ in 0..MAX_PENDING_PER_IP {
            match limits.admit(ip(1), true) {
                Admission::Admit(slot) => held.push(slot),
                _ => panic!("refused below the per-address bound"),
            }
        }
        assert!(matches!(limits.admit(ip(1), true), Admission::Refuse(_)));
        assert!(matches!(limits.admit(ip(2), true), Admission::Admit(_)));
        held.pop();
        assert!(matches!(limits.admit(ip(1), true), Admission::Admit(_)));
    }

    #[test]
    fn unvalidated_sources_retry_past_half_and_all_refused_when_full() {
        let limits = Arc::new(HandshakeLimits::default());
        let mut held = Vec::new();
        let mut next = 0u32;
        let mut fresh = || {
            next += 1;
            IpAddr::from(next.to_be_bytes())
        };
        while held.len() < MAX_PENDING / 2 {
            match limits.admit(fresh(), false) {
                Admission::Admit(slot) => held.push(slot),
                _ => panic!("refused below half"),
            }
        }
        assert!(matches!(limits.admit(fresh(), false), Admission::Retry));
        while held.len() < MAX_PENDING {
            match limits.admit(fresh(), true) {
                Admission::Admit(slot) => held.push(slot),
                _ => panic!("validated source refused below the bound"),
            }
        }
        assert!(matches!(limits.admit(fresh(), true), Admission::Refuse(_)));
        assert_eq!(limits.pending(), MAX_PENDING);
        held.clear();
        assert_eq!(limits.pending(), 0);
        assert!(limits.pending.lock().unwrap().per_ip.is_empty());
    }

    #[test]
    fn throttle_lets_one_warning_a_second() {
        let t = LogThrottle::default();
        assert!(t.allow());
        assert!(!t.allow());
    }
}
