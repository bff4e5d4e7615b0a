//! Whether this node is serving its clients right now.
//!
//! Background work that should give way to clients (a node serving blocks
//! to another node's resync) asks [`Foreground::busy`]. The answer comes
//! from the S3 layer (its RAM budget in use, or asked for within
//! [`RECENT`]), which sits above the layers that ask; the binary, which
//! holds both, sets the probe once the S3 layer exists. Until then the node
//! counts as idle.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long after a client request a node still counts as serving clients:
/// one client's back-to-back requests leave gaps of a few milliseconds,
/// which are not idleness.
pub const RECENT: Duration = Duration::from_millis(250);

type Probe = Box<dyn Fn() -> bool + Send + Sync>;

/// Cheap to clone; every clone sees the same probe.
#[derive(Clone, Default)]
pub struct Foreground(Arc<OnceLock<Probe>>);

impl Foreground {
    /// Sets where the answer comes from; only the first call takes effect
    /// (returns whether this one did).
    pub fn set(&self, probe: impl Fn() -> bool + Send + Sync + 'static) -> bool {
        self.0.set(Box::new(probe)).is_ok()
    }

    /// Whether clients are being served now (false before a probe is set).
    pub fn busy(&self) -> bool {
        self.0.get().is_some_and(|p| p())
    }
}

impl fmt::Debug for Foreground {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Foreground(busy: {})", self.busy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn idle_until_a_probe_is_set_then_the_first_probe_answers() {
        let fg = Foreground::default();
        let clone = fg.clone();
        assert!(!fg.busy());
        let flag = Arc::new(AtomicBool::new(true));
        let f = flag.clone();
        assert!(fg.set(move || f.load(Ordering::Relaxed)));
        assert!(clone.busy());
        flag.store(false, Ordering::Relaxed);
        assert!(!clone.busy());
        assert!(!fg.set(|| true), "a second probe is refused");
        assert!(!fg.busy());
    }
}
