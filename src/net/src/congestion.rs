//! The congestion controller of the mesh's QUIC connections, chosen per
//! connection by the round trip of its link ([`Congestion::Auto`]).
//!
//! Neither of quinn's controllers suits every link a cluster has. BBR keeps
//! a long or lossy link full where Cubic, which backs off at every loss,
//! moves a few MiB/s (doc/netlab.md: 20 ms with 0.1 % loss, 110 against 3
//! MiB/s). On a short link between busy processes, BBR's bursts overflow
//! the receiver's socket buffer: three nodes on one host with BBR lost a
//! third of their datagrams in a 1 MiB PUT run (the kernel's
//! `RcvbufErrors`: 65 000 to 94 000), against 1 000 to 2 500 with Cubic,
//! and moved a tenth less (doc/put-cost.md). So a connection whose
//! smallest round trip is under [`NEAR_RTT`] is paced by Cubic, and any
//! other by BBR.
//!
//! Both controllers see every event of the connection, so the one that
//! takes over has followed the connection all along. The smallest round
//! trip only falls (quinn's `RttEstimator::min`, which starts at the
//! configured initial round trip, 100 ms), so a connection moves at most
//! once, from BBR to Cubic, on its first samples: during its handshake.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{
    Bbr, BbrConfig, Controller, ControllerFactory, ControllerMetrics, Cubic, CubicConfig,
};
use quinn_proto::RttEstimator;

use crate::config::Congestion;

/// The smallest round trip under which a connection is paced by Cubic:
/// one data centre's (the test bed's `lan` is 0.2 ms, its `racks` 1 ms,
/// its `wan` 20 ms and more).
pub const NEAR_RTT: Duration = Duration::from_millis(2);

/// The controller [`Congestion::Auto`] builds: Cubic and BBR side by side,
/// the window of the one the link's smallest round trip picks.
pub struct ByRoundTrip {
    cubic: Box<dyn Controller>,
    bbr: Box<dyn Controller>,
    near: bool,
}

impl ByRoundTrip {
    fn active(&self) -> &dyn Controller {
        if self.near {
            self.cubic.as_ref()
        } else {
            self.bbr.as_ref()
        }
    }

    /// Which controller paces the connection now: `"cubic"` or `"bbr"`.
    pub fn name(&self) -> &'static str {
        if self.near { "cubic" } else { "bbr" }
    }
}

impl Controller for ByRoundTrip {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.cubic.on_sent(now, bytes, last_packet_number);
        self.bbr.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.near = rtt.min() < NEAR_RTT;
        self.cubic.on_ack(now, sent, bytes, app_limited, rtt);
        self.bbr.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.cubic
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
        self.bbr
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.cubic
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
        self.bbr
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.cubic.on_mtu_update(new_mtu);
        self.bbr.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        self.active().window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.active().metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(ByRoundTrip {
            cubic: self.cubic.clone_box(),
            bbr: self.bbr.clone_box(),
            near: self.near,
        })
    }

    fn initial_window(&self) -> u64 {
        self.active().initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds a [`ByRoundTrip`] per connection.
#[derive(Default)]
pub struct ByRoundTripConfig {
    cubic: Arc<CubicConfig>,
    bbr: Arc<BbrConfig>,
}

impl ControllerFactory for ByRoundTripConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(ByRoundTrip {
            cubic: self.cubic.clone().build(now, current_mtu),
            bbr: self.bbr.clone().build(now, current_mtu),
            near: false,
        })
    }
}

/// The factory of `congestion`'s controllers, for quinn's transport config.
pub(crate) fn factory(congestion: Congestion) -> Arc<dyn ControllerFactory + Send + Sync> {
    match congestion {
        Congestion::Auto => Arc::new(ByRoundTripConfig::default()),
        Congestion::Cubic => Arc::new(CubicConfig::default()),
        Congestion::NewReno => Arc::new(quinn::congestion::NewRenoConfig::default()),
        Congestion::Bbr => Arc::new(BbrConfig::default()),
    }
}

/// The name of the controller pacing a connection now (`"cubic"`, `"bbr"`
/// or `"newreno"`; for [`Congestion::Auto`], the one it picked).
pub(crate) fn name_of(conn: &quinn::Connection) -> &'static str {
    let any = conn.congestion_state().into_any();
    let any = match any.downcast::<ByRoundTrip>() {
        Ok(c) => return c.name(),
        Err(any) => any,
    };
    if any.is::<Cubic>() {
        "cubic"
    } else if any.is::<Bbr>() {
        "bbr"
    } else {
        "newreno"
    }
}
