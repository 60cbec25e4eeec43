//! A bounded map that forgets its least recently used entry when full: the
//! shape of every table here that names an attacker can invent would
//! otherwise grow (users, client addresses).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// At most `capacity` entries; reading one through [`Lru::get_mut`] or
/// writing it makes it the most recently used, and inserting past the
/// capacity evicts the least recently used. Each operation is one hash
/// lookup and one ordered-map update (O(log n)).
pub(crate) struct Lru<K, V> {
    capacity: usize,
    /// Increases at every use; an entry's last use orders the evictions.
    tick: u64,
    entries: HashMap<K, (V, u64)>,
    /// Keys by last use, oldest first.
    order: BTreeMap<u64, K>,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty map of at most `capacity` entries (at least 1).
    pub(crate) fn new(capacity: usize) -> Lru<K, V> {
        Lru {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    /// The entry of `key`, without making it recently used.
    pub(crate) fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(key).map(|(value, _)| value)
    }

    /// The entry of `key`, made the most recently used.
    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.tick += 1;
        let (value, used) = self.entries.get_mut(key)?;
        let owned = self
            .order
            .remove(used)
            .expect("every entry is in the order");
        *used = self.tick;
        self.order.insert(self.tick, owned);
        Some(value)
    }

    /// Sets `key` to `value`, the most recently used; returns the entry
    /// evicted to make room, if one was.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(slot) = self.get_mut(&key) {
            *slot = value;
            return None;
        }
        let evicted = if self.entries.len() >= self.capacity {
            self.pop_oldest()
        } else {
            None
        };
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, self.tick));
        evicted
    }

    /// Removes `key`'s entry.
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (value, used) = self.entries.remove(key)?;
        self.order.remove(&used);
        Some(value)
    }

    /// Removes and returns the least recently used entry.
    pub(crate) fn pop_oldest(&mut self) -> Option<(K, V)> {
        let (_, key) = self.order.pop_first()?;
        let (value, _) = self.entries.remove(&key).expect("every key is an entry");
        Some((key, value))
    }

    /// How many entries it holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entry_is_evicted_first() {
        let mut lru = Lru::new(3);
        for key in ["a", "b", "c"] {
            assert_eq!(lru.insert(key.to_string(), key.len()), None);
        }
        // Reading "a" and rewriting "b" leave "c" the oldest.
        assert!(lru.get_mut("a").is_some());
        assert_eq!(lru.insert("b".to_string(), 7), None);
        assert_eq!(lru.insert("d".to_string(), 1), Some(("c".to_string(), 1)));
        assert_eq!(lru.peek("b"), Some(&7));
        assert_eq!(lru.len(), 3);
        // Peeking does not count as a use: "a" is the oldest now.
        assert_eq!(lru.peek("a"), Some(&1));
        assert_eq!(lru.pop_oldest(), Some(("a".to_string(), 1)));
        assert_eq!(lru.remove("d"), Some(1));
        assert_eq!(lru.len(), 1);
    }
}
