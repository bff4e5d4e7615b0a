//! `hangar-netdelay`: the delay line of `script/netlab`.
//!
//! The kernels this project is tested on may be built without `sch_netem`
//! (the CI machines' is), so a link's delay, jitter and loss are made in
//! user space: an `iptables -t mangle -A POSTROUTING -d PEER -j NFQUEUE
//! --queue-num Q` rule in a node's network namespace hands every packet
//! for PEER to queue Q, and this process, started in the same namespace,
//! lets each go after its link's delay (or drops it). The kernel keeps the
//! packets; only their ids cross into this process. Rates are left to the
//! kernel's `htb` (see `k2v-style-tests/python/netlab.py`).
//!
//! Usage: `hangar-netdelay --link Q:DELAY_MS:JITTER_MS:LOSS_PCT ...`; it
//! prints `ready` once every queue is bound, then a line of counts every
//! ten seconds in which packets moved.

mod error;
mod line;
mod nfqueue;

use std::time::{Duration, Instant};

use clap::Parser;

use error::DelayError;
use line::{Fate, Line, Shape};
use nfqueue::NfQueue;

#[derive(Parser)]
#[command(
    name = "hangar-netdelay",
    about = "Delay, jitter and loss for NFQUEUE'd packets (script/netlab)"
)]
struct Cli {
    /// A link: `QUEUE:DELAY_MS:JITTER_MS:LOSS_PCT` (e.g. `2:20:0:0.1`).
    #[arg(long = "link", required = true)]
    links: Vec<String>,
    /// Packets held per queue at most; the kernel drops beyond (a full
    /// link buffer). Bounds the kernel memory the lab holds.
    #[arg(long, default_value_t = 16384)]
    max_held: u32,
    /// Seed of jitter and loss draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_link(s: &str) -> Result<(u16, Shape), DelayError> {
    let bad = |why: &str| DelayError::Link(s.to_string(), why.to_string());
    let parts: Vec<&str> = s.split(':').collect();
    let [q, d, j, l] = parts[..] else {
        return Err(bad("expected QUEUE:DELAY_MS:JITTER_MS:LOSS_PCT"));
    };
    let q: u16 = q
        .parse()
        .map_err(|_| bad("queue is not a number 0-65535"))?;
    let ms = |v: &str, what: &str| -> Result<Duration, DelayError> {
        let f: f64 = v.parse().map_err(|_| bad(what))?;
        if !(0.0..=60_000.0).contains(&f) {
            return Err(bad(what));
        }
        Ok(Duration::from_secs_f64(f / 1000.0))
    };
    let delay = ms(d, "delay must be 0-60000 ms")?;
    let jitter = ms(j, "jitter must be 0-60000 ms")?;
    let loss: f64 = l.parse().map_err(|_| bad("loss is a percentage"))?;
    if !(0.0..=100.0).contains(&loss) {
        return Err(bad("loss must be 0-100 %"));
    }
    Ok((
        q,
        Shape {
            delay,
            jitter,
            loss: loss / 100.0,
        },
    ))
}

/// Waits until the socket is readable or `timeout` passes.
fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> Result<(), DelayError> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
        return Err(DelayError::os("ppoll"));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), DelayError> {
    let mut lines: Vec<(u16, Line)> = Vec::new();
    for (i, s) in cli.links.iter().enumerate() {
        let (q, shape) = parse_link(s)?;
        if lines.iter().any(|(other, _)| *other == q) {
            return Err(DelayError::Link(
                s.clone(),
                format!("queue {q} given twice"),
            ));
        }
        lines.push((
            q,
            Line::new(
                shape,
                cli.seed
                    .wrapping_add((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ),
        ));
    }
    let mut nfq = NfQueue::open()?;
    for (q, line) in &lines {
        // A loss must be one wire packet, so lossy links take GSO packets
        // segmented; lossless ones take them whole (far fewer per second).
        nfq.bind(*q, cli.max_held, line.shape().loss == 0.0)?;
    }
    println!("ready");
    let mut buf = vec![0u8; 256 * 1024];
    let mut arrived = Vec::with_capacity(1024);
    let mut last_report = Instant::now();
    let mut reported = [0u64; 3];
    loop {
        let now = Instant::now();
        for (q, line) in lines.iter_mut() {
            if let Some(id) = line.due(now) {
                nfq.accept_upto(*q, id);
            }
        }
        nfq.flush()?;
        let next = lines.iter().filter_map(|(_, l)| l.next_deadline()).min();
        let timeout = next.map_or(Duration::from_secs(1), |d| d.saturating_duration_since(now));
        if !timeout.is_zero() {
            wait_readable(nfq.raw_fd(), timeout)?;
        }
        arrived.clear();
        nfq.drain(&mut buf, |p| arrived.push(p))?;
        let now = Instant::now();
        for p in &arrived {
            match lines.iter_mut().find(|(q, _)| *q == p.queue) {
                Some((_, line)) => {
                    if line.arrive(now, p.id) == Fate::Lost {
                        nfq.drop_one(p.queue, p.id);
                    }
                }
                // Not a queue of ours: let it through at once.
                None => nfq.accept_upto(p.queue, p.id),
            }
        }
        if now.duration_since(last_report) >= Duration::from_secs(10) {
            let mut total = [0u64; 3];
            for (_, l) in &lines {
                for (t, c) in total.iter_mut().zip(l.counts) {
                    *t += c;
                }
            }
            if total != reported {
                let held: usize = lines.iter().map(|(_, l)| l.held()).sum();
                eprintln!(
                    "hangar-netdelay: {} packets delayed, {} lost, {} released, {held} held now",
                    total[0], total[1], total[2]
                );
                reported = total;
            }
            last_report = now;
        }
    }
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("hangar-netdelay: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_parse_and_bad_ones_are_refused() {
        let (q, s) = parse_link("2:20:0.5:0.1").unwrap();
        assert_eq!(q, 2);
        assert_eq!(s.delay, Duration::from_millis(20));
        assert_eq!(s.jitter, Duration::from_micros(500));
        assert!((s.loss - 0.001).abs() < 1e-12);
        for bad in [
            "2:20:0",
            "x:1:0:0",
            "1:-1:0:0",
            "1:1:0:101",
            "70000:1:0:0",
            "1:1e9:0:0",
        ] {
            assert!(parse_link(bad).is_err(), "{bad} was accepted");
        }
    }
}
