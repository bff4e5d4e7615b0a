//! The weights of a mixed run's operations, warp's by default, and the
//! pick of each operation by them.

use crate::stats::OpKind;

/// Relative weights of the operations of a mixed run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// GetObject of a live object.
    pub get: f64,
    /// HeadObject of a live object.
    pub stat: f64,
    /// PutObject of a new object.
    pub put: f64,
    /// DeleteObject of a live object nobody is reading.
    pub delete: f64,
}

impl Mix {
    /// Warp's default mix: 45 % GET, 30 % STAT, 15 % PUT, 10 % DELETE.
    pub const WARP: Mix = Mix {
        get: 45.0,
        stat: 30.0,
        put: 15.0,
        delete: 10.0,
    };

    /// Whether the weights make a run that cannot run out of objects.
    pub fn check(&self) -> Result<(), String> {
        let all = [self.get, self.stat, self.put, self.delete];
        if all.iter().any(|w| !w.is_finite() || *w < 0.0) || all.iter().sum::<f64>() <= 0.0 {
            return Err("weights must be non-negative and not all 0".into());
        }
        if self.delete > self.put {
            return Err("--delete-distrib must not exceed --put-distrib".into());
        }
        Ok(())
    }

    /// The operation a uniform `random` picks.
    pub fn pick(&self, random: u64) -> OpKind {
        let total = self.get + self.stat + self.put + self.delete;
        // The top 53 bits as a fraction in [0, 1).
        let x = (random >> 11) as f64 / (1u64 << 53) as f64 * total;
        if x < self.get {
            OpKind::Get
        } else if x < self.get + self.put {
            OpKind::Put
        } else if x < self.get + self.put + self.stat {
            OpKind::Stat
        } else {
            OpKind::Delete
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_picks_by_weight() {
        let mut counts = [0u32; 5];
        let steps = 10_000u64;
        for i in 0..steps {
            // Evenly spread over the u64 range.
            let random = i * (u64::MAX / steps);
            counts[Mix::WARP.pick(random) as usize] += 1;
        }
        // Within one pick of the weights (a pick on a boundary may go either way).
        for (op, want) in [
            (OpKind::Get, 4500),
            (OpKind::Put, 1500),
            (OpKind::Stat, 3000),
            (OpKind::Delete, 1000),
        ] {
            let got = counts[op as usize];
            assert!(got.abs_diff(want) <= 1, "{op:?}: {got}");
        }
    }

    #[test]
    fn mix_is_checked() {
        assert!(Mix::WARP.check().is_ok());
        let more_deletes = Mix {
            delete: 20.0,
            ..Mix::WARP
        };
        assert!(more_deletes.check().is_err());
        let nothing = Mix {
            get: 0.0,
            stat: 0.0,
            put: 0.0,
            delete: 0.0,
        };
        assert!(nothing.check().is_err());
        let only_get = Mix {
            get: 1.0,
            ..nothing
        };
        assert!(only_get.check().is_ok());
        assert_eq!(only_get.pick(u64::MAX), OpKind::Get);
    }
}
