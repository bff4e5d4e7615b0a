//! A few threads at the lowest CPU priority for the blocking work of
//! background tasks (a resync's block reads, checks and writes, a scrub's
//! reads), so that on a busy machine the kernel runs the node's client work
//! first.
//!
//! Tokio's blocking pool cannot do this: its threads run client work too,
//! and a thread that lowered its priority cannot raise it again without
//! privileges. The threads here lower theirs once, at start: nice 19 (CPU
//! weight 15 against 1 024 for the node's other threads; only shares of a
//! busy CPU change, an idle one is used in full) and the lowest best-effort
//! I/O priority (honoured by the BFQ scheduler; ignored, harmlessly, by the
//! others). On systems other than Linux the threads run at normal priority.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// What a job may be: any blocking closure.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The job's thread panicked, or every thread of the pool has ended.
#[derive(Debug, thiserror::Error)]
#[error("background job failed: {0}")]
pub struct JobFailed(&'static str);

/// A fixed set of low-priority threads running blocking jobs in the order
/// they were given. Dropping the pool lets its threads end once the jobs
/// given before are done.
pub struct LowPriorityPool {
    jobs: mpsc::Sender<Job>,
}

impl LowPriorityPool {
    /// Starts `threads` threads (at least one) named `name`.
    pub fn new(name: &str, threads: usize) -> std::io::Result<LowPriorityPool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    lower_this_threads_priority();
                    loop {
                        // The lock is held only to take one job.
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        // A panicking job drops its answer's sender, which
                        // the caller sees; the thread goes on.
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                })?;
        }
        Ok(LowPriorityPool { jobs: tx })
    }

    /// Runs `f` on one of the pool's threads and returns what it returned.
    pub async fn run<F, R>(&self, f: F) -> Result<R, JobFailed>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.jobs
            .send(job)
            .map_err(|_| JobFailed("the pool's threads have ended"))?;
        rx.await.map_err(|_| JobFailed("the job panicked"))
    }
}

/// Nice 19 and the lowest best-effort I/O priority for the calling thread.
/// Failures are logged and ignored: the work still runs, at normal
/// priority.
#[cfg(target_os = "linux")]
fn lower_this_threads_priority() {
    // On Linux both settings belong to the thread named by its id.
    let tid = this_thread_id();
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 19) } != 0 {
        tracing::warn!(
            "background thread stays at normal CPU priority: {}",
            std::io::Error::last_os_error()
        );
    }
    let set = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            libc::c_long::from(tid),
            LOWEST_BEST_EFFORT,
        )
    };
    if set != 0 {
        tracing::debug!(
            "background thread keeps its I/O priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// `ioprio_set`'s "which" for one thread (linux/ioprio.h).
#[cfg(target_os = "linux")]
const IOPRIO_WHO_PROCESS: libc::c_long = 1;

/// The best-effort class (2) at its lowest level (7), as
/// `class << 13 | level` (linux/ioprio.h).
#[cfg(target_os = "linux")]
const LOWEST_BEST_EFFORT: libc::c_long = (2 << 13) | 7;

#[cfg(target_os = "linux")]
fn this_thread_id() -> libc::id_t {
    (unsafe { libc::syscall(libc::SYS_gettid) }) as libc::id_t
}

#[cfg(not(target_os = "linux"))]
fn lower_this_threads_priority() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_and_return_their_results() {
        let pool = Arc::new(LowPriorityPool::new("test-low", 2).unwrap());
        let tasks: Vec<_> = (0..16u64)
            .map(|i| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.run(move || i * i).await.unwrap() })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), (i * i) as u64);
        }
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_pool_goes_on() {
        let pool = LowPriorityPool::new("test-low", 1).unwrap();
        let failed = pool.run(|| -> u32 { panic!("on purpose") }).await;
        assert!(failed.is_err());
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_threads_run_at_the_lowest_priorities_and_the_callers_do_not_change() {
        let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let pool = LowPriorityPool::new("test-low", 1).unwrap();
        let (nice, io) = pool
            .run(|| {
                let tid = this_thread_id();
                let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
                let io = unsafe {
                    libc::syscall(
                        libc::SYS_ioprio_get,
                        IOPRIO_WHO_PROCESS,
                        libc::c_long::from(tid),
                    )
                };
                (nice, io)
            })
            .await
            .unwrap();
        assert_eq!(nice, 19);
        assert_eq!(io, LOWEST_BEST_EFFORT);
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, mine);
    }
}
