//! Key expiry on the command line: `--expires-in 30d` or `--expires
//! 2027-01-31T12:00:00Z` as an absolute time (ms since the epoch, what the
//! admin operations carry), and how `key info` shows it.

use clap::Args;

use crate::cli::error::CliError;

/// Longest `--expires-in`: a hundred years.
const MAX_SECS: u64 = 100 * 365 * 86_400;

/// When a key stops working.
#[derive(Args, Debug, Clone, Default)]
pub struct ExpiryArgs {
    /// The key stops working this long from now: a number with a unit,
    /// s, m, h, d or w (`90m`, `30d`, `2w`).
    #[arg(long, value_parser = parse_duration_secs, conflicts_with = "expires")]
    pub expires_in: Option<u64>,
    /// The key stops working at this time (RFC 3339, `2027-01-31T12:00:00Z`).
    #[arg(long, value_parser = hangar_util::time::parse_rfc3339)]
    pub expires: Option<u64>,
}

impl ExpiryArgs {
    /// The expiry as ms since the epoch, counted from `now_msec` for
    /// `--expires-in`; `None` when neither flag is given.
    pub fn at(&self, now_msec: u64) -> Option<u64> {
        match (self.expires_in, self.expires) {
            (Some(secs), _) => Some(now_msec.saturating_add(secs * 1000)),
            (None, t) => t,
        }
    }
}

/// Parses `30d`, `12h`, `90m`, `45s`, `2w` into seconds (1 to 100 years).
pub fn parse_duration_secs(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let bad = || format!("{s:?} is not a duration like 90m, 12h, 30d or 2w");
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    match n.checked_mul(mult) {
        Some(0) => Err(format!("{s:?}: a key must live at least one second")),
        Some(secs) if secs <= MAX_SECS => Ok(secs),
        _ => Err(format!("{s:?}: at most 100 years")),
    }
}

/// `key info`'s line about an expiry (ms since the epoch; `None`: never).
pub fn describe(expires_msec: Option<u64>, now_msec: u64) -> String {
    let Some(t) = expires_msec else {
        return "never".into();
    };
    let at = hangar_util::time::rfc3339(t);
    if now_msec >= t {
        format!(
            "EXPIRED at {at}: S3 requests signed with it are refused (`hangar key set KEY --expires-in 30d` renews it)"
        )
    } else {
        format!("{at} (in {})", human_secs((t - now_msec) / 1000))
    }
}

fn human_secs(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

/// The expiry a `key set` asks for: a time, or with `--never-expires` none.
pub fn set_value(args: &ExpiryArgs, never: bool, now_msec: u64) -> Result<Option<u64>, CliError> {
    match (args.at(now_msec), never) {
        (Some(_), true) => Err("give --expires-in, --expires or --never-expires, not two".into()),
        (None, false) => {
            Err("nothing to change: give --expires-in, --expires or --never-expires".into())
        }
        (t, _) => Ok(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs("30d"), Ok(30 * 86_400));
        assert_eq!(parse_duration_secs("90m"), Ok(5400));
        assert_eq!(parse_duration_secs("2w"), Ok(14 * 86_400));
        assert_eq!(parse_duration_secs("45s"), Ok(45));
        for bad in ["", "d", "30", "30x", "-1d", "0s", "101000000000d", "1.5h"] {
            assert!(parse_duration_secs(bad).is_err(), "{bad}");
        }
        let a = ExpiryArgs {
            expires_in: Some(60),
            expires: None,
        };
        assert_eq!(a.at(1000), Some(61_000));
        assert_eq!(ExpiryArgs::default().at(1000), None);
    }

    #[test]
    fn descriptions() {
        assert!(describe(Some(10_000), 20_000).starts_with("EXPIRED at 1970-01-01T00:00:10Z"));
        assert_eq!(
            describe(Some(10_000), 5_000),
            "1970-01-01T00:00:10Z (in 5 s)"
        );
        assert_eq!(describe(None, 0), "never");
    }
}
