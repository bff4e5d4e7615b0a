//! The registry through which long-running background tasks report progress.
//!
//! Each worker holds a [`WorkerHandle`] and updates its state and progress
//! line as it goes; `hangar worker list` and the metrics endpoint read the
//! registry. Updates are cheap (a short mutex), so workers may report often.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::time::now_msec;

/// What a worker is doing right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    Busy,
    /// Also what a worker that has not reported anything yet reads as.
    #[default]
    Idle,
    Done,
}

/// A snapshot of one worker, as shown by `hangar worker list`. A field an
/// older node does not send reads as its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerStatus {
    pub name: String,
    pub state: WorkerState,
    /// Items handled since the node started.
    pub processed: u64,
    /// Errors since the node started.
    pub errors: u64,
    /// Items still queued, when the worker knows.
    pub queue_length: Option<u64>,
    /// A human-readable progress line.
    pub progress: String,
    pub last_error: Option<String>,
    /// When the status last changed (ms since epoch).
    pub updated_msec: u64,
}

/// All workers of a node.
#[derive(Clone, Default)]
pub struct WorkerRegistry {
    inner: Arc<Mutex<BTreeMap<String, WorkerStatus>>>,
}

impl WorkerRegistry {
    /// Registers a worker under a unique name and returns its handle.
    pub fn register(&self, name: &str) -> WorkerHandle {
        let status = WorkerStatus {
            name: name.to_owned(),
            state: WorkerState::Idle,
            processed: 0,
            errors: 0,
            queue_length: None,
            progress: String::new(),
            last_error: None,
            updated_msec: now_msec(),
        };
        self.lock().insert(name.to_owned(), status);
        WorkerHandle {
            name: name.to_owned(),
            registry: self.clone(),
        }
    }

    /// Every worker's status, sorted by name.
    pub fn list(&self) -> Vec<WorkerStatus> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WorkerStatus>> {
        // A panicking worker must not take the registry down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A worker's handle on its own entry in the registry.
#[derive(Clone)]
pub struct WorkerHandle {
    name: String,
    registry: WorkerRegistry,
}

impl WorkerHandle {
    fn update(&self, f: impl FnOnce(&mut WorkerStatus)) {
        if let Some(s) = self.registry.lock().get_mut(&self.name) {
            f(s);
            s.updated_msec = now_msec();
        }
    }

    pub fn set_state(&self, state: WorkerState) {
        self.update(|s| s.state = state);
    }

    pub fn set_progress(&self, progress: impl Into<String>, queue_length: Option<u64>) {
        let p = progress.into();
        self.update(|s| {
            s.progress = p;
            s.queue_length = queue_length;
        });
    }

    /// Sets the queue length alone (the progress text unchanged).
    pub fn set_queue_length(&self, queue_length: Option<u64>) {
        self.update(|s| s.queue_length = queue_length);
    }

    pub fn add_processed(&self, n: u64) {
        self.update(|s| s.processed += n);
    }

    pub fn record_error(&self, err: impl ToString) {
        let e = err.to_string();
        self.update(|s| {
            s.errors += 1;
            s.last_error = Some(e);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_update_the_registry() {
        let reg = WorkerRegistry::default();
        let w = reg.register("block-gc");
        w.set_state(WorkerState::Busy);
        w.add_processed(3);
        w.record_error("disk full");
        w.set_progress("3 blocks deleted", Some(7));
        let list = reg.list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].processed, 3);
        assert_eq!(list[0].errors, 1);
        assert_eq!(list[0].queue_length, Some(7));
        assert_eq!(list[0].state, WorkerState::Busy);
    }
}
