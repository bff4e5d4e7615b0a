//! One link's delay line: which held packets may leave, and when.
//!
//! A packet that arrives at `t` leaves at `t + delay ± jitter`, never
//! before the packet ahead of it (as netem with a rate: jitter without
//! reordering, since a reordered QUIC or TCP packet reads as a loss), or is
//! lost with probability `loss`. Pure logic over `Instant`s, so that the
//! tests can run time themselves.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A link's shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub delay: Duration,
    pub jitter: Duration,
    /// Probability that a packet is lost, in [0, 1].
    pub loss: f64,
}

/// What becomes of an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Held,
    Lost,
}

/// The packets of one link that wait for their time, oldest first.
pub struct Line {
    shape: Shape,
    rng: u64,
    held: VecDeque<(Instant, u32)>,
    last_deadline: Option<Instant>,
    /// Packets held, lost and released since the start.
    pub counts: [u64; 3],
}

impl Line {
    /// An empty line; `seed` drives jitter and loss.
    pub fn new(shape: Shape, seed: u64) -> Line {
        Line {
            shape,
            rng: seed | 1,
            held: VecDeque::new(),
            last_deadline: None,
            counts: [0; 3],
        }
    }

    /// A uniform draw in [0, 1) (xorshift64*: enough for jitter and loss).
    fn draw(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Packet `id` arrives at `now`.
    pub fn arrive(&mut self, now: Instant, id: u32) -> Fate {
        if self.shape.loss > 0.0 && self.draw() < self.shape.loss {
            self.counts[1] += 1;
            return Fate::Lost;
        }
        let mut deadline = now + self.shape.delay;
        if !self.shape.jitter.is_zero() {
            let j = self.shape.jitter.as_secs_f64() * (2.0 * self.draw() - 1.0);
            deadline = if j >= 0.0 {
                deadline + Duration::from_secs_f64(j)
            } else {
                deadline
                    .checked_sub(Duration::from_secs_f64(-j))
                    .unwrap_or(now)
                    .max(now)
            };
        }
        if let Some(last) = self.last_deadline {
            deadline = deadline.max(last);
        }
        self.last_deadline = Some(deadline);
        self.held.push_back((deadline, id));
        self.counts[0] += 1;
        Fate::Held
    }

    /// The id of the newest packet whose time has come at `now`, after
    /// taking it and every older one off the line; `None` if none has.
    pub fn due(&mut self, now: Instant) -> Option<u32> {
        let mut newest = None;
        while let Some(&(deadline, id)) = self.held.front() {
            if deadline > now {
                break;
            }
            self.held.pop_front();
            self.counts[2] += 1;
            newest = Some(id);
        }
        newest
    }

    /// When the oldest held packet may leave.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.front().map(|&(d, _)| d)
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shape(delay_us: u64, jitter_us: u64, loss: f64) -> Shape {
        Shape {
            delay: Duration::from_micros(delay_us),
            jitter: Duration::from_micros(jitter_us),
            loss,
        }
    }

    #[test]
    fn a_packet_leaves_exactly_after_the_delay() {
        let t0 = Instant::now();
        let mut l = Line::new(shape(20_000, 0, 0.0), 7);
        assert_eq!(l.arrive(t0, 1), Fate::Held);
        assert_eq!(l.next_deadline(), Some(t0 + Duration::from_millis(20)));
        assert_eq!(l.due(t0 + Duration::from_micros(19_999)), None);
        assert_eq!(l.due(t0 + Duration::from_millis(20)), Some(1));
        assert_eq!(l.held(), 0);
    }

    #[test]
    fn the_loss_rate_is_the_one_asked_for() {
        let t0 = Instant::now();
        let mut l = Line::new(shape(0, 0, 0.01), 42);
        let lost = (0..200_000)
            .filter(|&i| l.arrive(t0, i) == Fate::Lost)
            .count();
        assert!(
            (1_700..2_300).contains(&lost),
            "{lost} of 200000 lost at 1 %"
        );
    }

    proptest! {
        /// Whatever the arrivals, jitter and polling: no packet leaves
        /// before its delay less the jitter, none overtakes another, and
        /// every held packet leaves by its delay plus the jitter after the
        /// last arrival.
        #[test]
        fn never_early_never_reordered_never_stuck(
            delay_us in 0u64..50_000,
            jitter_us in 0u64..5_000,
            gaps in proptest::collection::vec(0u64..3_000, 1..200),
            polls in proptest::collection::vec(0u64..10_000, 1..200),
            seed in any::<u64>(),
        ) {
            let t0 = Instant::now();
            let mut l = Line::new(shape(delay_us, jitter_us, 0.0), seed);
            let mut arrivals = vec![];
            let mut t = t0;
            for (i, g) in gaps.iter().enumerate() {
                t += Duration::from_micros(*g);
                prop_assert_eq!(l.arrive(t, i as u32), Fate::Held);
                arrivals.push(t);
            }
            let mut released = 0usize;
            let mut now = t0;
            for p in &polls {
                now += Duration::from_micros(*p);
                if let Some(id) = l.due(now) {
                    let id = id as usize;
                    prop_assert!(id + 1 > released, "released {} after {}", id, released);
                    // Every packet up to `id` leaves now: none is early.
                    for a in &arrivals[released..=id] {
                        let earliest = *a + Duration::from_micros(delay_us.saturating_sub(jitter_us));
                        prop_assert!(now >= earliest);
                    }
                    released = id + 1;
                }
            }
            let end = *arrivals.last().unwrap() + Duration::from_micros(delay_us + jitter_us);
            if let Some(id) = l.due(end.max(now)) {
                released = id as usize + 1;
            }
            prop_assert_eq!(released, arrivals.len());
            prop_assert_eq!(l.held(), 0);
        }
    }
}
