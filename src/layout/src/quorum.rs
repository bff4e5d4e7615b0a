//! Read and write quorums from the replication factor and the consistency
//! mode, with Garage's rules (so a Garage operator's expectations hold).

use hangar_util::config::ConsistencyMode;

/// How many replicas of a partition must answer a read, and acknowledge a
/// write, for the operation to succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quorums {
    pub read: usize,
    pub write: usize,
}

impl Quorums {
    /// Garage's rules:
    /// - `consistent`: read `ceil(rf/2)`, write `rf + 1 - read`, so every
    ///   read quorum meets every write quorum;
    /// - `degraded`: read 1, write as in `consistent` (reads may be stale);
    /// - `dangerous`: read 1, write 1 (no guarantee at all).
    pub fn new(rf: usize, mode: ConsistencyMode) -> Quorums {
        let consistent_read = rf.div_ceil(2);
        let consistent_write = rf + 1 - consistent_read;
        match mode {
            ConsistencyMode::Consistent => Quorums {
                read: consistent_read,
                write: consistent_write,
            },
            ConsistencyMode::Degraded => Quorums {
                read: 1,
                write: consistent_write,
            },
            ConsistencyMode::Dangerous => Quorums { read: 1, write: 1 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garage_quorums() {
        let q = |rf, m| {
            let q = Quorums::new(rf, m);
            (q.read, q.write)
        };
        use ConsistencyMode::*;
        assert_eq!(q(1, Consistent), (1, 1));
        assert_eq!(q(2, Consistent), (1, 2));
        assert_eq!(q(3, Consistent), (2, 2));
        assert_eq!(q(5, Consistent), (3, 3));
        assert_eq!(q(3, Degraded), (1, 2));
        assert_eq!(q(3, Dangerous), (1, 1));
        // Consistent quorums always intersect.
        for rf in 1..=7 {
            let Quorums { read, write } = Quorums::new(rf, Consistent);
            assert!(read + write > rf, "rf {rf}");
        }
    }
}
