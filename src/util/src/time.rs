//! Wall-clock helpers. Timestamps in tables are milliseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_msec() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `msec` (ms since the epoch) as RFC 3339 in UTC, to the second
/// (`2027-01-31T12:00:00Z`).
pub fn rfc3339(msec: u64) -> String {
    let secs = (msec / 1000).min(253_402_300_799); // 9999-12-31T23:59:59Z
    time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{msec} ms since the epoch"))
}

/// Parses an RFC 3339 time (`2027-01-31T12:00:00Z`, an offset instead of
/// `Z` allowed) into ms since the epoch; times before the epoch are refused.
pub fn parse_rfc3339(s: &str) -> Result<u64, String> {
    let t = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("{s:?} is not an RFC 3339 time like 2027-01-31T12:00:00Z: {e}"))?;
    let ms = t.unix_timestamp_nanos() / 1_000_000;
    u64::try_from(ms).map_err(|_| format!("{s:?} is before 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_801_396_800_123), "2027-01-31T12:00:00Z");
        assert_eq!(parse_rfc3339("2027-01-31T12:00:00Z"), Ok(1_801_396_800_000));
        assert_eq!(
            parse_rfc3339("2027-01-31T13:00:00+01:00"),
            Ok(1_801_396_800_000)
        );
        assert!(parse_rfc3339("1969-12-31T23:59:59Z").is_err());
        assert!(parse_rfc3339("tomorrow").is_err());
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
    }
}
