//! The long tasks under way on a node — resync, scrub, rebalancing, and
//! each worker with a queue — with how far along they are, how fast they
//! move and the time left, read from the history's points.
//!
//! A backlog's progress is measured against the largest backlog of the
//! window: a resync that started with 10 000 blocks queued and has 2 500
//! left is 75 % done. Rates are the mean over the last [`RATE_WINDOW_SECS`],
//! but a scrub's, which moves a page of blocks at a time, is measured
//! between the pages seen in the window.

use crate::history_answers::{NodePoint, TaskProgress};

/// The span rates are averaged over.
pub const RATE_WINDOW_SECS: u64 = 60;

/// The tasks of `points` (oldest first) worth showing: those with work
/// left or done in the window.
pub fn tasks(points: &[NodePoint]) -> Vec<TaskProgress> {
    let Some(last) = points.last() else {
        return Vec::new();
    };
    let recent: Vec<&NodePoint> = points
        .iter()
        .filter(|p| p.t + RATE_WINDOW_SECS > last.t)
        .collect();
    let mean = |f: &dyn Fn(&NodePoint) -> f64| {
        recent.iter().map(|p| f(p)).sum::<f64>() / recent.len().max(1) as f64
    };
    let mut out = Vec::new();
    let mut backlog =
        |name: &str, unit: &str, queue: &dyn Fn(&NodePoint) -> Option<u64>, rate: f64| {
            let Some(left) = queue(last) else {
                return;
            };
            let most = points.iter().filter_map(queue).max().unwrap_or(0);
            if most == 0 && rate == 0.0 {
                return;
            }
            out.push(TaskProgress {
                name: name.to_owned(),
                unit: unit.to_owned(),
                done: (most > 0).then(|| (most - left.min(most)) as f64 / most as f64),
                rate,
                remaining: Some(left as f64),
                eta_secs: eta(left as f64, rate),
            });
        };
    backlog(
        "resync",
        "blocks",
        &|p| p.resync_queue,
        mean(&|p| p.resync_checked),
    );
    // Partitions come back to zero in steps, not at a rate: the rate is
    // the mean fall of the pending count.
    let first_recent = recent.first().copied().unwrap_or(last);
    let fall = first_recent
        .partitions_pending
        .zip(last.partitions_pending)
        .map_or(0.0, |(a, b)| {
            a.saturating_sub(b) as f64 / (last.t - first_recent.t).max(1) as f64
        });
    backlog("rebalance", "partitions", &|p| p.partitions_pending, fall);
    // The resync worker's queue is the resync's, shown above.
    let names: Vec<String> = last
        .workers
        .iter()
        .filter(|w| w.queue.is_some() && w.name != "block-resync")
        .map(|w| w.name.clone())
        .collect();
    for name in names {
        let queue = |p: &NodePoint| p.workers.iter().find(|w| w.name == name)?.queue;
        let rate = mean(&|p| {
            p.workers
                .iter()
                .find(|w| w.name == name)
                .map_or(0.0, |w| w.processed)
        });
        backlog(&name, "items", &queue, rate);
    }
    if let Some(done) = last.scrub_progress.filter(|d| *d > 0.0) {
        // A pass's progress moves a page of blocks at a time, and a slow
        // pass takes longer than the rate window between pages: the rate
        // is measured between the first value of the pass seen in the
        // window and the point its latest value was first seen, so that it
        // is known from the second page on and does not fall between pages.
        // The time left counts from that latest page.
        let in_pass = |p: &&NodePoint| p.scrub_progress.is_some_and(|d| d > 0.0 && d <= done);
        let since = points.iter().find(in_pass).unwrap_or(last);
        let reached = points
            .iter()
            .find(|p| p.scrub_progress == Some(done))
            .unwrap_or(last);
        let gain = since.scrub_progress.map_or(0.0, |d0| done - d0);
        let rate = gain / (reached.t - since.t).max(1) as f64;
        out.push(TaskProgress {
            name: "scrub".into(),
            unit: "pass".into(),
            done: Some(done),
            rate,
            remaining: Some(1.0 - done),
            eta_secs: eta(1.0 - done, rate),
        });
    }
    out
}

fn eta(left: f64, rate: f64) -> Option<f64> {
    (rate > 0.0).then(|| left / rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history_answers::WorkerPoint;

    fn at(t: u64, queue: u64, checked: f64) -> NodePoint {
        NodePoint {
            t,
            resync_queue: Some(queue),
            resync_checked: checked,
            ..NodePoint::default()
        }
    }

    #[test]
    fn a_draining_resync_has_progress_rate_and_time_left() {
        let points: Vec<_> = (0..20).map(|i| at(i * 5, 1000 - i * 50, 10.0)).collect();
        let t = tasks(&points);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(t[0].name, "resync");
        assert_eq!(t[0].remaining, Some(50.0));
        assert_eq!(t[0].rate, 10.0);
        assert_eq!(t[0].eta_secs, Some(5.0));
        assert_eq!(t[0].done, Some(0.95));
    }

    #[test]
    fn a_scrub_that_just_started_is_measured_from_its_start() {
        let mut points: Vec<_> = (0..12).map(|i| at(i * 5, 0, 0.0)).collect();
        points[10].scrub_progress = Some(0.2);
        points[11].scrub_progress = Some(0.3);
        let t = tasks(&points);
        assert_eq!(t.len(), 1, "{t:?}");
        assert!((t[0].rate - 0.02).abs() < 1e-9, "{t:?}");
        assert!((t[0].eta_secs.unwrap() - 35.0).abs() < 1e-6, "{t:?}");
        // Seen once: no rate yet, so no time left.
        points.pop();
        let t = tasks(&points);
        assert_eq!((t[0].rate, t[0].eta_secs), (0.0, None), "{t:?}");
    }

    #[test]
    fn a_slow_scrub_has_a_rate_between_its_pages() {
        // Pages 90 s apart, longer than the rate window.
        let mut points: Vec<_> = (0..60).map(|i| at(i * 5, 0, 0.0)).collect();
        for p in &mut points[10..] {
            p.scrub_progress = Some(0.2);
        }
        for p in &mut points[28..] {
            p.scrub_progress = Some(0.4);
        }
        let t = tasks(&points[..40]);
        assert!((t[0].rate - 0.2 / 90.0).abs() < 1e-9, "{t:?}");
        // Long after the second page, the rate is still the pages' rate.
        let t = tasks(&points);
        assert!((t[0].rate - 0.2 / 90.0).abs() < 1e-9, "{t:?}");
        assert!((t[0].eta_secs.unwrap() - 270.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn idle_tasks_are_not_shown_and_a_scrub_moves() {
        let mut points: Vec<_> = (0..4).map(|i| at(i * 5, 0, 0.0)).collect();
        assert!(tasks(&points).is_empty());
        for (i, p) in points.iter_mut().enumerate() {
            p.scrub_progress = Some(0.1 + 0.01 * i as f64);
            p.workers = vec![WorkerPoint {
                name: "lifecycle".into(),
                processed: 2.0,
                queue: Some(10 - i as u64),
            }];
        }
        let t = tasks(&points);
        let names: Vec<_> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["lifecycle", "scrub"]);
        assert_eq!(t[0].eta_secs, Some(3.5));
        assert!((t[1].rate - 0.002).abs() < 1e-9, "{:?}", t[1]);
    }
}
