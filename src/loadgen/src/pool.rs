//! The set of live objects in a mixed run: GET and STAT lease an object, DELETE takes
//! away only an object nobody is reading, so no request of the run itself can make
//! another fail.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::payload::ObjectSpec;

/// How many random picks DELETE tries before giving up on finding an idle object.
const DELETE_TRIES: usize = 8;

#[derive(Debug)]
struct Entry {
    spec: ObjectSpec,
    /// Readers in flight. Only incremented under the pool lock, so a zero seen under the
    /// lock means no reader can start on this entry before it is removed.
    readers: AtomicU32,
}

/// Live objects, shared by all workers of a mixed run.
#[derive(Debug, Default)]
pub struct ObjectPool {
    entries: Mutex<Vec<Arc<Entry>>>,
}

/// A read lease on one object; the object cannot be deleted while the lease lives.
#[derive(Debug)]
pub struct Lease {
    entry: Arc<Entry>,
}

impl Lease {
    /// The leased object.
    pub fn spec(&self) -> &ObjectSpec {
        &self.entry.spec
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.entry.readers.fetch_sub(1, Ordering::Release);
    }
}

impl ObjectPool {
    /// A pool holding `specs`.
    pub fn new(specs: impl IntoIterator<Item = ObjectSpec>) -> Self {
        let entries = specs
            .into_iter()
            .map(|spec| {
                Arc::new(Entry {
                    spec,
                    readers: AtomicU32::new(0),
                })
            })
            .collect();
        ObjectPool {
            entries: Mutex::new(entries),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds an object that now exists.
    pub fn insert(&self, spec: ObjectSpec) {
        self.lock().push(Arc::new(Entry {
            spec,
            readers: AtomicU32::new(0),
        }));
    }

    /// Leases the object at `random % len`, or `None` if the pool is empty.
    pub fn lease(&self, random: u64) -> Option<Lease> {
        let entries = self.lock();
        if entries.is_empty() {
            return None;
        }
        let entry = entries[(random % entries.len() as u64) as usize].clone();
        entry.readers.fetch_add(1, Ordering::Acquire);
        Some(Lease { entry })
    }

    /// Removes and returns an object nobody is reading, picked from `randoms`; `None` if
    /// the pool holds no more than `floor` objects or every pick was busy.
    pub fn take_idle(
        &self,
        floor: usize,
        randoms: impl Iterator<Item = u64>,
    ) -> Option<ObjectSpec> {
        let mut entries = self.lock();
        if entries.len() <= floor {
            return None;
        }
        for random in randoms.take(DELETE_TRIES) {
            let index = (random % entries.len() as u64) as usize;
            if entries[index].readers.load(Ordering::Acquire) == 0 {
                return Some(entries.swap_remove(index).spec.clone());
            }
        }
        None
    }

    /// Every object still in the pool.
    pub fn specs(&self) -> Vec<ObjectSpec> {
        self.lock().iter().map(|e| e.spec.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> ObjectSpec {
        ObjectSpec::new("p", seed, 10)
    }

    #[test]
    fn leased_objects_are_not_deleted() {
        let pool = ObjectPool::new([spec(1), spec(2)]);
        let lease = pool.lease(0).unwrap();
        assert_eq!(lease.spec(), &spec(1));
        // Index 0 is leased: every pick of it is refused.
        assert_eq!(pool.take_idle(0, std::iter::repeat(0)), None);
        assert_eq!(pool.take_idle(0, std::iter::repeat(1)), Some(spec(2)));
        drop(lease);
        assert_eq!(pool.take_idle(0, std::iter::repeat(0)), Some(spec(1)));
        assert!(pool.lease(0).is_none());
    }

    #[test]
    fn floor_keeps_objects() {
        let pool = ObjectPool::new([spec(1)]);
        assert_eq!(pool.take_idle(1, std::iter::repeat(0)), None);
        pool.insert(spec(2));
        assert!(pool.take_idle(1, std::iter::repeat(0)).is_some());
        assert_eq!(pool.specs().len(), 1);
    }
}
