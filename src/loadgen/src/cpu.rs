//! CPU time of processes, so that a report can say how much of the (shared, small)
//! machine the client and the server each used during the measured phase.

use std::time::Duration;

/// Linux reports `/proc/<pid>/stat` times in USER_HZ ticks, fixed at 100 per second by the
/// userspace ABI on the architectures this runs on.
const TICKS_PER_SECOND: u64 = 100;

/// User + system CPU time used so far by process `pid` (`None` for this process), or
/// `None` if `/proc` cannot tell (not Linux, or the process is gone).
pub fn process_cpu(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// Reads utime and stime (fields 14 and 15) from a `/proc/<pid>/stat` line. The command
/// name (field 2) is in parentheses and may itself contain spaces and parentheses, so
/// fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime() {
        let stat =
            "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(stat), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_cpu_grows() {
        let before = process_cpu(None).expect("/proc/self/stat");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        // Spin until the kernel has accounted at least one more tick to us.
        while process_cpu(None).unwrap() == before {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "CPU time never advanced"
            );
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        }
    }
}
