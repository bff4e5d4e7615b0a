//! Progress of a long CLI operation (`layout apply --wait`, `repair blocks
//! --wait`, `repair tables`, `convert-db`), on stderr so that stdout (and
//! `--json`) stays the command's result: on a terminal one line redrawn in
//! place, a bar when the total is known; piped, plain lines, one when the
//! text changes but at most one every [`PLAIN_EVERY`], so a log stays short.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Least time between two plain lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(1);
/// Width of the bar, in cells.
const BAR: usize = 30;
const SPIN: [char; 4] = ['|', '/', '-', '\\'];

/// One operation's progress display.
pub struct Progress {
    tty: bool,
    started: Instant,
    last_plain: Option<(Instant, String)>,
    ticks: usize,
    drawn: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    /// A display on stderr: redrawn when stderr is a terminal (and `TERM`
    /// is not `dumb`), plain lines otherwise.
    pub fn new() -> Self {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Progress {
            tty: std::io::stderr().is_terminal() && !dumb,
            started: Instant::now(),
            last_plain: None,
            ticks: 0,
            drawn: false,
        }
    }

    /// Shows that `done` of `total` (if known) are done, with `msg`.
    pub fn update(&mut self, done: u64, total: Option<u64>, msg: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let line = bar_line(done, total, msg, self.ticks, self.started.elapsed());
            self.ticks += 1;
            let _ = write!(err, "\r\x1b[K{line}");
            let _ = err.flush();
            self.drawn = true;
            return;
        }
        let line = plain_line(done, total, msg);
        let due = match &self.last_plain {
            None => true,
            Some((t, last)) => *last != line && t.elapsed() >= PLAIN_EVERY,
        };
        if due {
            let _ = writeln!(err, "{line}");
            self.last_plain = Some((Instant::now(), line));
        }
    }

    /// Ends the display with a last line, always printed.
    pub fn finish(&mut self, msg: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty && self.drawn {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "{msg}");
        self.drawn = false;
    }
}

/// The redrawn line: `[#####.....]  45%  msg  12s`, or a spinner when the
/// total is unknown.
pub fn bar_line(done: u64, total: Option<u64>, msg: &str, tick: usize, t: Duration) -> String {
    let secs = t.as_secs();
    match total {
        Some(total) if total > 0 => {
            let frac = (done.min(total) as f64) / (total as f64);
            let full = ((frac * BAR as f64).round() as usize).min(BAR);
            format!(
                "[{}{}] {:>3}%  {msg}  {secs}s",
                "#".repeat(full),
                ".".repeat(BAR - full),
                (frac * 100.0).floor() as u64
            )
        }
        _ => format!("{} {msg}  {secs}s", SPIN[tick % SPIN.len()]),
    }
}

/// The plain line: `msg (done/total, 45%)`, or `msg` alone.
pub fn plain_line(done: u64, total: Option<u64>, msg: &str) -> String {
    match total {
        Some(total) if total > 0 => {
            format!("{msg} ({done}/{total}, {}%)", done.min(total) * 100 / total)
        }
        _ => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let l = bar_line(5, Some(10), "x", 0, Duration::from_secs(3));
        assert_eq!(
            l,
            format!("[{}{}]  50%  x  3s", "#".repeat(15), ".".repeat(15))
        );
        assert!(bar_line(20, Some(10), "x", 0, Duration::ZERO).contains("100%"));
        assert!(bar_line(0, None, "x", 1, Duration::ZERO).starts_with("/ x"));
        assert_eq!(plain_line(1, Some(4), "m"), "m (1/4, 25%)");
        assert_eq!(plain_line(1, None, "m"), "m");
        assert_eq!(plain_line(1, Some(0), "m"), "m");
    }
}
