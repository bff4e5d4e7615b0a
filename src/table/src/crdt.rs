//! The merge rule every row obeys, and the building blocks rows are made of.
//!
//! A replicated row is a CRDT: replicas that received the same set of writes
//! in any order, any number of times, hold the same row. That holds when
//! [`Crdt::merge`] is commutative, associative and idempotent — and, for a
//! register that keeps "the newest" value, only when ties between equally
//! new values are broken by a total order of the *content*, never by which
//! replica holds the row (otherwise two replicas each keep their own).
//!
//! - [`Lww`]: a last-writer-wins register; newest timestamp wins, equal
//!   timestamps are ordered by value.
//! - [`LwwMap`]: a map whose entries are independent [`Lww`] registers, so
//!   concurrent changes of two entries both survive (two concurrent grants of
//!   permissions on different buckets are both kept).
//! - [`max_by_content`]: the rule for rows that are registers as a whole:
//!   the greater of (timestamp, …, content) wins.
//!
//! [`laws`] checks the three laws; each row type's property tests use it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A row type that merges deterministically with another version of itself.
pub trait Crdt {
    /// Merges `other` into `self`. Must be commutative, associative and
    /// idempotent, so that replicas converge whatever order writes arrive in.
    fn merge(&mut self, other: &Self);
}

/// Keeps the greater of `a` and `b` in `a`. Rows that are registers as a
/// whole derive `Ord` with their timestamp first and merge with this: the
/// newest wins, and rows of equal timestamps are ordered by the rest of
/// their content, identically on every replica.
pub fn max_by_content<T: Ord + Clone>(a: &mut T, b: &T) {
    if *b > *a {
        *a = b.clone();
    }
}

/// A last-writer-wins register: the value with the greatest timestamp, and
/// of equal timestamps the greatest value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lww<T> {
    /// When the value was set, ms since the epoch (or any growing clock).
    pub ts: u64,
    pub value: T,
}

impl<T: Default> Default for Lww<T> {
    /// A register never set: timestamp 0, the default value.
    fn default() -> Self {
        Lww {
            ts: 0,
            value: T::default(),
        }
    }
}

impl<T: Default + PartialEq> Lww<T> {
    /// Whether the register was never set (for `skip_serializing_if`: a
    /// row whose register was never set encodes as if it had none).
    pub fn is_unset(&self) -> bool {
        self.ts == 0 && self.value == T::default()
    }
}

impl<T> Lww<T> {
    pub fn new(ts: u64, value: T) -> Lww<T> {
        Lww { ts, value }
    }

    /// Sets `value` with a timestamp strictly greater than the current one
    /// and at least `now`, so that a change always wins over what it saw.
    pub fn update(&mut self, now: u64, value: T) {
        self.ts = now.max(self.ts + 1);
        self.value = value;
    }
}

impl<T: Ord + Clone> Crdt for Lww<T> {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// A map of independent last-writer-wins registers. Removing an entry is
/// setting it to a tombstone value the caller chooses (for permissions: no
/// right at all), so that a removal replicates like any other change.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LwwMap<K: Ord, V> {
    entries: BTreeMap<K, Lww<V>>,
}

impl<K: Ord, V> Default for LwwMap<K, V> {
    fn default() -> Self {
        LwwMap {
            entries: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone, V: Ord + Clone> LwwMap<K, V> {
    /// The current value of `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|e| &e.value)
    }

    /// The register of `key`, with its timestamp.
    pub fn entry(&self, key: &K) -> Option<&Lww<V>> {
        self.entries.get(key)
    }

    /// Sets `key` to `value`, newer than the entry's current timestamp.
    pub fn update(&mut self, key: K, now: u64, value: V) {
        match self.entries.get_mut(&key) {
            Some(e) => e.update(now, value),
            None => {
                self.entries.insert(key, Lww::new(now, value));
            }
        }
    }

    /// Every (key, value), in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, e)| (k, &e.value))
    }

    /// Every (key, register), in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&K, &Lww<V>)> {
        self.entries.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: Ord + Clone, V: Ord + Clone> Crdt for LwwMap<K, V> {
    fn merge(&mut self, other: &Self) {
        for (k, e) in &other.entries {
            match self.entries.get_mut(k) {
                Some(mine) => mine.merge(e),
                None => {
                    self.entries.insert(k.clone(), e.clone());
                }
            }
        }
    }
}

/// The CRDT laws, for property tests of every row type.
pub mod laws {
    use std::fmt::Debug;

    use super::Crdt;

    fn merged<T: Crdt + Clone>(a: &T, b: &T) -> T {
        let mut m = a.clone();
        m.merge(b);
        m
    }

    /// Panics unless merge is commutative, associative and idempotent on
    /// these three values.
    pub fn check<T: Crdt + Clone + PartialEq + Debug>(a: &T, b: &T, c: &T) {
        assert_eq!(merged(a, b), merged(b, a), "merge is not commutative");
        assert_eq!(
            merged(&merged(a, b), c),
            merged(a, &merged(b, c)),
            "merge is not associative"
        );
        assert_eq!(merged(a, a), *a, "merge is not idempotent");
        assert_eq!(
            merged(&merged(a, b), b),
            merged(a, b),
            "merging again changes the result"
        );
    }

    /// Panics unless replicas that receive the same writes in two different
    /// orders (`order` is a permutation of the indexes of `writes`, with
    /// repetitions allowed: a write delivered twice) end with the same row.
    pub fn check_orders<T: Crdt + Clone + PartialEq + Debug>(writes: &[T], order: &[usize]) {
        let Some((first, rest)) = writes.split_first() else {
            return;
        };
        let mut in_order = first.clone();
        for w in rest {
            in_order.merge(w);
        }
        let mut shuffled: Option<T> = None;
        for &i in order {
            let w = &writes[i % writes.len()];
            match &mut shuffled {
                Some(s) => s.merge(w),
                None => shuffled = Some(w.clone()),
            }
        }
        // Every write must have been delivered at least once.
        let mut delivered = vec![false; writes.len()];
        for &i in order {
            delivered[i % writes.len()] = true;
        }
        for (i, w) in writes.iter().enumerate() {
            if !delivered[i] {
                let s = shuffled.get_or_insert_with(|| w.clone());
                s.merge(w);
            }
        }
        assert_eq!(
            shuffled.expect("at least one write"),
            in_order,
            "replicas diverge"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lww() -> impl Strategy<Value = Lww<u8>> {
        // Few timestamps and values, so ties are common.
        (0u64..4, 0u8..4).prop_map(|(ts, value)| Lww { ts, value })
    }

    fn map() -> impl Strategy<Value = LwwMap<u8, u8>> {
        proptest::collection::btree_map(0u8..4, lww(), 0..4).prop_map(|entries| LwwMap { entries })
    }

    proptest! {
        #[test]
        fn lww_obeys_the_laws(a in lww(), b in lww(), c in lww()) {
            laws::check(&a, &b, &c);
        }

        #[test]
        fn lww_map_obeys_the_laws(a in map(), b in map(), c in map()) {
            laws::check(&a, &b, &c);
        }

        #[test]
        fn lww_map_converges_over_orders(
            writes in proptest::collection::vec(map(), 1..6),
            order in proptest::collection::vec(0usize..6, 0..12),
        ) {
            laws::check_orders(&writes, &order);
        }
    }

    #[test]
    fn concurrent_changes_of_two_entries_both_survive() {
        let base = LwwMap::<String, u8>::default();
        let (mut a, mut b) = (base.clone(), base);
        a.update("x".into(), 10, 1);
        b.update("y".into(), 10, 2);
        a.merge(&b);
        assert_eq!(a.get(&"x".into()), Some(&1));
        assert_eq!(a.get(&"y".into()), Some(&2));
    }

    #[test]
    fn an_update_wins_over_what_it_saw_even_with_a_clock_behind() {
        let mut r = Lww::new(1_000, 1u8);
        let seen = r.clone();
        r.update(5, 0);
        let mut m = seen;
        m.merge(&r);
        assert_eq!(m.value, 0);
    }
}
