//! The space-saving summary: the most frequent keys of a stream in bounded
//! memory (see the crate's essay).

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

/// A key's estimated count: `count - error <= true count <= count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted<K> {
    /// The key.
    pub key: K,
    /// Its count, never below the true one.
    pub count: u64,
    /// By how much `count` may exceed the true count.
    pub error: u64,
}

/// At most `capacity` counters over a stream of keys.
#[derive(Debug)]
pub struct SpaceSaving<K> {
    capacity: usize,
    /// The counters; an index into it names a counter.
    counters: Vec<Counted<K>>,
    /// Which counter holds each key.
    slots: HashMap<K, usize>,
    /// (count, counter) in increasing order: the first is the smallest.
    by_count: BTreeSet<(u64, usize)>,
    total: u64,
}

impl<K: Clone + Eq + Hash> SpaceSaving<K> {
    /// An empty summary of `capacity` counters (at least one).
    pub fn new(capacity: usize) -> SpaceSaving<K> {
        let capacity = capacity.max(1);
        SpaceSaving {
            capacity,
            counters: Vec::with_capacity(capacity),
            slots: HashMap::with_capacity(capacity),
            by_count: BTreeSet::new(),
            total: 0,
        }
    }

    /// Counts one occurrence of `key`.
    pub fn offer<Q>(&mut self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.total += 1;
        if let Some(&slot) = self.slots.get(key) {
            self.raise(slot, 1);
        } else if self.counters.len() < self.capacity {
            let slot = self.counters.len();
            self.counters.push(Counted {
                key: key.to_owned(),
                count: 1,
                error: 0,
            });
            self.slots.insert(key.to_owned(), slot);
            self.by_count.insert((1, slot));
        } else {
            self.replace_smallest(key.to_owned());
        }
    }

    /// Gives the smallest counter to `key`: it inherits that count, plus
    /// one, and the inherited count as its error.
    fn replace_smallest(&mut self, key: K) {
        let (smallest, slot) = self
            .by_count
            .pop_first()
            .expect("a full summary has counters");
        let evicted = std::mem::replace(
            &mut self.counters[slot],
            Counted {
                key: key.clone(),
                count: smallest,
                error: smallest,
            },
        );
        self.slots.remove(&evicted.key);
        self.slots.insert(key, slot);
        self.by_count.insert((smallest, slot));
        self.raise(slot, 1);
    }

    fn raise(&mut self, slot: usize, by: u64) {
        let counter = &mut self.counters[slot];
        self.by_count.remove(&(counter.count, slot));
        counter.count += by;
        self.by_count.insert((counter.count, slot));
    }

    /// Occurrences offered in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The counters it keeps at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keys counted now (at most the capacity).
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    /// Whether nothing was offered.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The `n` keys with the highest counts, highest first (ties by the
    /// smaller error, then in the order the counters were taken).
    pub fn top(&self, n: usize) -> Vec<Counted<K>> {
        let mut order: Vec<usize> = (0..self.counters.len()).collect();
        order.sort_by_key(|&slot| {
            let c = &self.counters[slot];
            (std::cmp::Reverse(c.count), c.error, slot)
        });
        order
            .into_iter()
            .take(n)
            .map(|slot| self.counters[slot].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn below_capacity_every_count_is_exact() {
        let mut summary = SpaceSaving::<String>::new(4);
        for key in ["a", "b", "a", "c", "a", "b"] {
            summary.offer(key);
        }
        let top = summary.top(10);
        let counts: Vec<(&str, u64, u64)> = top
            .iter()
            .map(|c| (c.key.as_str(), c.count, c.error))
            .collect();
        assert_eq!(counts, [("a", 3, 0), ("b", 2, 0), ("c", 1, 0)]);
        assert_eq!(summary.total(), 6);
    }

    #[test]
    fn a_new_key_takes_the_smallest_counter_and_its_count_as_error() {
        let mut summary = SpaceSaving::<String>::new(2);
        for key in ["a", "a", "a", "b", "c"] {
            summary.offer(key);
        }
        // "c" replaced "b" (count 1): count 2, error 1.
        let top = summary.top(2);
        assert_eq!(top[0].key, "a");
        assert_eq!((top[0].count, top[0].error), (3, 0));
        assert_eq!(top[1].key, "c");
        assert_eq!((top[1].count, top[1].error), (2, 1));
        assert_eq!(summary.len(), 2);
    }

    #[test]
    fn heavy_keys_rise_above_a_long_tail_in_order() {
        let mut summary = SpaceSaving::<String>::new(16);
        for round in 0..200 {
            for _ in 0..8 {
                summary.offer("hot");
            }
            for _ in 0..4 {
                summary.offer("warm");
            }
            summary.offer("mild");
            summary.offer("mild");
            for cold in 0..3 {
                summary.offer(format!("cold{round}-{cold}").as_str());
            }
        }
        let top: Vec<String> = summary.top(3).into_iter().map(|c| c.key).collect();
        assert_eq!(top, ["hot", "warm", "mild"]);
    }

    proptest! {
        /// The guarantees of the algorithm, against exact counts: bounds
        /// on every reported count, and every key above total/capacity kept.
        #[test]
        fn counts_are_bounded_and_frequent_keys_are_kept(
            stream in proptest::collection::vec(0u8..40, 0..2_000),
            capacity in 1usize..24,
        ) {
            let mut summary = SpaceSaving::<u8>::new(capacity);
            let mut exact = HashMap::<u8, u64>::new();
            for key in &stream {
                summary.offer(key);
                *exact.entry(*key).or_default() += 1;
            }
            let kept = summary.top(capacity);
            prop_assert!(kept.len() <= capacity);
            for c in &kept {
                let truth = exact[&c.key];
                prop_assert!(c.count >= truth, "{c:?} under the true {truth}");
                prop_assert!(c.count - c.error <= truth, "{c:?} error too small for {truth}");
            }
            let threshold = stream.len() as u64 / capacity as u64;
            for (key, count) in &exact {
                if *count > threshold {
                    prop_assert!(kept.iter().any(|c| c.key == *key), "{key} ({count}) dropped");
                }
            }
            prop_assert_eq!(kept.iter().map(|c| c.count).sum::<u64>(), stream.len() as u64);
        }
    }
}
