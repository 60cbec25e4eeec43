//! `MemoryEngine`: trees as `BTreeMap`s in memory, for tests and for nodes
//! that need no durability.
//!
//! # Design
//! Each tree is a `BTreeMap` behind its own `std::sync::Mutex`, held only for
//! the duration of one operation (never across an `.await` — the engine has
//! none). Range iterators do not hold the lock between items: they copy up to
//! [`RANGE_BATCH`] entries at a time and resume after the last key copied, so
//! a long scan never blocks writers and the iterator owns no borrow.
//!
//! # Invariants
//! - `flush` is a no-op: nothing survives the process, and nothing is lost
//!   that a flush could have saved.
//! - A dropped tree's handles see `None` state and fail with
//!   [`StorageError::TreeDropped`]; opening the name again creates a fresh map.
//!
//! # Caveats
//! - `size_on_disk` reports the bytes of keys and values, not allocator
//!   overhead.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::engine::{Engine, KvIter, Tree, Updater, is_empty_range};
use crate::error::{Result, StorageError};

/// How many entries a range iterator copies per lock acquisition.
const RANGE_BATCH: usize = 128;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// An engine that keeps every tree in memory. Cheap to create; flushing is a no-op.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    trees: Mutex<BTreeMap<String, MemoryTree>>,
}

impl MemoryEngine {
    /// An engine with no trees.
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }

    /// Sets the tree called `name` to hold exactly `map` (creating it if
    /// need be); handles already open see the new contents.
    pub(crate) fn replace_tree(&self, name: &str, map: Map) {
        let mut trees = lock(&self.trees);
        let tree = trees.entry(name.to_string()).or_insert_with(|| MemoryTree {
            name: name.into(),
            map: Arc::new(Mutex::new(None)),
        });
        *lock(&tree.map) = Some(map);
    }
}

/// Locks `mutex`, ignoring poisoning: every critical section here leaves the
/// map consistent even if a caller's update closure panics, because the map is
/// changed only after the closure returns.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine for MemoryEngine {
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
        let mut trees = lock(&self.trees);
        let tree = trees.entry(name.to_string()).or_insert_with(|| MemoryTree {
            name: name.into(),
            map: Arc::new(Mutex::new(Some(Map::new()))),
        });
        Ok(Arc::new(tree.clone()))
    }

    fn drop_tree(&self, name: &str) -> Result<bool> {
        let Some(tree) = lock(&self.trees).remove(name) else {
            return Ok(false);
        };
        *lock(&tree.map) = None;
        Ok(true)
    }

    fn tree_names(&self) -> Vec<String> {
        lock(&self.trees).keys().cloned().collect()
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        let trees = lock(&self.trees);
        let bytes = trees
            .values()
            .map(|tree| {
                lock(&tree.map).as_ref().map_or(0, |map| {
                    map.iter()
                        .map(|(k, v)| (k.len() + v.len()) as u64)
                        .sum::<u64>()
                })
            })
            .sum();
        Ok(bytes)
    }
}

/// One tree of a [`MemoryEngine`]; clones share the map.
#[derive(Clone, Debug)]
struct MemoryTree {
    name: Arc<str>,
    /// `None` once the tree has been dropped.
    map: Arc<Mutex<Option<Map>>>,
}

impl MemoryTree {
    fn with_map<T>(&self, op: impl FnOnce(&mut Map) -> T) -> Result<T> {
        match lock(&self.map).as_mut() {
            Some(map) => Ok(op(map)),
            None => Err(StorageError::TreeDropped {
                name: self.name.to_string(),
            }),
        }
    }
}

impl Tree for MemoryTree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_map(|map| map.get(key).cloned())
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_map(|map| map.insert(key.to_vec(), value.to_vec()))
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_map(|map| map.remove(key))
    }

    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.with_map(|map| {
            let new = f(map.get(key).map(Vec::as_slice));
            match &new {
                Some(value) => map.insert(key.to_vec(), value.clone()),
                None => map.remove(key),
            };
            new
        })
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter {
        let done = is_empty_range(from, to);
        Box::new(MemoryRange {
            tree: self.clone(),
            next_from: (!done).then(|| from.map(<[u8]>::to_vec)),
            to: to.map(<[u8]>::to_vec),
            buffer: VecDeque::new(),
        })
    }

    fn len(&self) -> Result<usize> {
        self.with_map(|map| map.len())
    }
}

/// A range scan over a [`MemoryTree`], copying [`RANGE_BATCH`] entries per lock.
struct MemoryRange {
    tree: MemoryTree,
    /// Where the next batch starts; `None` when the scan is over.
    next_from: Option<Bound<Vec<u8>>>,
    to: Bound<Vec<u8>>,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
}

impl Iterator for MemoryRange {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.buffer.pop_front() {
            return Some(Ok(entry));
        }
        let from = self.next_from.take()?;
        let from = from.as_ref().map(Vec::as_slice);
        let to = self.to.as_ref().map(Vec::as_slice);
        if is_empty_range(from, to) {
            return None;
        }
        let batch = self.tree.with_map(|map| {
            map.range::<[u8], _>((from, to))
                .take(RANGE_BATCH)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<VecDeque<_>>()
        });
        match batch {
            Err(error) => Some(Err(error)),
            Ok(batch) => {
                if batch.len() == RANGE_BATCH {
                    let last = batch.back().map(|(k, _)| k.clone());
                    self.next_from = last.map(Bound::Excluded);
                }
                self.buffer = batch;
                self.buffer.pop_front().map(Ok)
            }
        }
    }
}
