//! `SimulatedDisk`: an in-memory engine that behaves like a disk behind a
//! page cache, for simulations that crash nodes and fill disks.
//!
//! # Model
//! Every tree keeps two maps: what reads see (`current`) and what a crash
//! leaves (`durable`), plus the keys written since the last flush. A write
//! changes `current` only; [`Engine::flush`] copies the written keys into
//! `durable`; [`SimulatedDisk::crash`] throws away everything written
//! since the last flush, as the power going out would (sled, like every
//! engine with a write-back cache, loses unflushed writes on `kill -9`).
//! [`SimulatedDisk::set_full`] makes every later write and flush fail with
//! an I/O error (`StorageFull`), as a full disk does, until it is cleared.
//! [`SimulatedDisk::flip_bits`] damages stored values, as bit rot would.
//!
//! The disk outlives the node that uses it: a simulation keeps it across a
//! crash and opens the restarted node's store on it.
//!
//! # Invariants
//! - Until a crash, reads see every write that returned.
//! - After a crash, every tree holds exactly what its last successful flush
//!   covered: nothing newer survives, nothing flushed is lost.
//! - Creating and dropping trees is durable at once (sled makes both
//!   durable in its own metadata before it returns).
//! - It passes the engine suite (`tests/engine_suite.rs`) like the others.
//!
//! # Caveats
//! - A flush is all or nothing; a real disk may persist part of one.
//! - `size_on_disk` counts the bytes of the keys and values reads see.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::engine::{Engine, KvIter, Tree, Updater};
use crate::error::{Result, StorageError};
use crate::file_system::SplitMix;
use crate::memory_engine::{MemoryEngine, lock};

/// An in-memory engine that loses unflushed writes on [`SimulatedDisk::crash`]
/// and can be made full. Clones share the disk. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct SimulatedDisk {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// What reads see: an ordinary in-memory engine.
    current: MemoryEngine,
    /// What survives a crash, and the keys written since the last flush,
    /// by tree name.
    durable: Mutex<BTreeMap<String, DurableTree>>,
    full: AtomicBool,
}

/// One tree's flushed contents and its keys written since.
#[derive(Debug, Default)]
struct DurableTree {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    written: BTreeSet<Vec<u8>>,
}

impl SimulatedDisk {
    /// An empty disk.
    pub fn new() -> SimulatedDisk {
        SimulatedDisk::default()
    }

    /// Loses every write made since the last successful flush. Handles
    /// opened before the crash must not be used again (the node that held
    /// them is gone): reopen the trees.
    pub fn crash(&self) {
        let mut durable = lock(&self.shared.durable);
        for name in self.shared.current.tree_names() {
            if !durable.contains_key(&name) {
                let _ = self.shared.current.drop_tree(&name);
            }
        }
        for (name, tree) in durable.iter_mut() {
            tree.written.clear();
            self.shared.current.replace_tree(name, tree.map.clone());
        }
    }

    /// Flips one bit in about one of every `one_per_values` stored values
    /// of the trees `select` accepts, at places the seed picks; how many
    /// values were damaged. Meant for a disk whose node is down (after
    /// [`SimulatedDisk::crash`]): what a crash leaves and what reads see
    /// are then the same, and both are damaged. sled would catch most such
    /// damage with its own page checksums; this stand-in hands the flipped
    /// bytes back as they are, so the store's own checks must catch them.
    pub fn flip_bits(
        &self,
        seed: u64,
        one_per_values: u64,
        select: impl Fn(&str) -> bool,
    ) -> usize {
        let mut rng = SplitMix::new(seed);
        let mut durable = lock(&self.shared.durable);
        let mut damaged = 0;
        for (name, tree) in durable.iter_mut().filter(|(name, _)| select(name)) {
            for value in tree.map.values_mut() {
                if value.is_empty() || rng.below(one_per_values.max(1)) != 0 {
                    continue;
                }
                let at = rng.below(value.len() as u64) as usize;
                value[at] ^= 1 << rng.below(8);
                damaged += 1;
            }
            self.shared.current.replace_tree(name, tree.map.clone());
        }
        damaged
    }

    /// Makes the disk full (every later write and flush fails with
    /// `StorageFull`) or gives it room again.
    pub fn set_full(&self, full: bool) {
        self.shared.full.store(full, Ordering::SeqCst);
    }
}

impl Shared {
    fn check_room(&self) -> Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(StorageError::Disk(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on the simulated disk",
            )));
        }
        Ok(())
    }

    fn note_written(&self, tree: &str, key: &[u8]) {
        lock(&self.durable)
            .entry(tree.to_string())
            .or_default()
            .written
            .insert(key.to_vec());
    }
}

impl Engine for SimulatedDisk {
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
        let tree = self.shared.current.open_tree(name)?;
        lock(&self.shared.durable)
            .entry(name.to_string())
            .or_default();
        Ok(Arc::new(DiskTree {
            shared: Arc::clone(&self.shared),
            name: name.into(),
            tree,
        }))
    }

    fn drop_tree(&self, name: &str) -> Result<bool> {
        lock(&self.shared.durable).remove(name);
        self.shared.current.drop_tree(name)
    }

    fn tree_names(&self) -> Vec<String> {
        self.shared.current.tree_names()
    }

    fn flush(&self) -> Result<()> {
        self.shared.check_room()?;
        let mut durable = lock(&self.shared.durable);
        for (name, tree) in durable.iter_mut() {
            let current = self.shared.current.open_tree(name)?;
            for key in std::mem::take(&mut tree.written) {
                match current.get(&key)? {
                    Some(value) => tree.map.insert(key, value),
                    None => tree.map.remove(&key),
                };
            }
        }
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.shared.current.size_on_disk()
    }
}

/// One tree of a [`SimulatedDisk`]: reads and writes go to the tree reads
/// see; writes are noted for the next flush.
struct DiskTree {
    shared: Arc<Shared>,
    name: Arc<str>,
    tree: Arc<dyn Tree>,
}

impl DiskTree {
    fn write<T>(&self, key: &[u8], op: impl FnOnce(&dyn Tree) -> Result<T>) -> Result<T> {
        self.shared.check_room()?;
        let outcome = op(self.tree.as_ref())?;
        self.shared.note_written(&self.name, key);
        Ok(outcome)
    }
}

impl Tree for DiskTree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.write(key, |tree| tree.insert(key, value))
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.write(key, |tree| tree.remove(key))
    }

    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.write(key, |tree| tree.update(key, f))
    }

    fn update_expecting_absent(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.write(key, |tree| tree.update_expecting_absent(key, f))
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter {
        self.tree.range(from, to)
    }

    fn len(&self) -> Result<usize> {
        self.tree.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(tree: &Arc<dyn Tree>, key: &[u8]) -> Option<Vec<u8>> {
        tree.get(key).unwrap()
    }

    #[test]
    fn a_crash_keeps_what_was_flushed_and_loses_the_rest() {
        let disk = SimulatedDisk::new();
        let tree = disk.open_tree("t").unwrap();
        tree.insert(b"flushed", b"1").unwrap();
        tree.insert(b"overwritten", b"old").unwrap();
        tree.insert(b"removed", b"x").unwrap();
        disk.flush().unwrap();
        tree.insert(b"unflushed", b"2").unwrap();
        tree.insert(b"overwritten", b"new").unwrap();
        tree.remove(b"removed").unwrap();
        let fresh = disk.open_tree("fresh").unwrap();
        fresh.insert(b"k", b"v").unwrap();
        assert_eq!(value(&tree, b"unflushed"), Some(b"2".to_vec()));

        disk.crash();
        let tree = disk.open_tree("t").unwrap();
        assert_eq!(value(&tree, b"flushed"), Some(b"1".to_vec()));
        assert_eq!(value(&tree, b"unflushed"), None);
        assert_eq!(value(&tree, b"overwritten"), Some(b"old".to_vec()));
        assert_eq!(value(&tree, b"removed"), Some(b"x".to_vec()));
        assert!(disk.open_tree("fresh").unwrap().is_empty().unwrap());

        tree.insert(b"after", b"3").unwrap();
        disk.flush().unwrap();
        disk.crash();
        let tree = disk.open_tree("t").unwrap();
        assert_eq!(value(&tree, b"after"), Some(b"3".to_vec()));
    }

    #[test]
    fn a_full_disk_refuses_writes_and_flushes_until_it_has_room() {
        let disk = SimulatedDisk::new();
        let tree = disk.open_tree("t").unwrap();
        tree.insert(b"a", b"1").unwrap();
        disk.set_full(true);
        let refused = tree.insert(b"b", b"2").unwrap_err();
        assert!(
            matches!(&refused, StorageError::Disk(e) if e.kind() == io::ErrorKind::StorageFull)
        );
        assert!(refused.is_retryable());
        assert!(disk.flush().is_err());
        assert_eq!(value(&tree, b"a"), Some(b"1".to_vec()), "reads still work");
        disk.set_full(false);
        disk.flush().unwrap();
        disk.crash();
        let tree = disk.open_tree("t").unwrap();
        assert_eq!(value(&tree, b"a"), Some(b"1".to_vec()));
        assert_eq!(value(&tree, b"b"), None);
    }

    #[test]
    fn flipped_bits_damage_the_chosen_trees_durably_and_deterministically() {
        let fill = || {
            let disk = SimulatedDisk::new();
            for name in ["data/x", "system"] {
                let tree = disk.open_tree(name).unwrap();
                for i in 0..200u32 {
                    tree.insert(&i.to_be_bytes(), &[0u8; 32]).unwrap();
                }
            }
            disk.flush().unwrap();
            disk
        };
        let (one, two) = (fill(), fill());
        let damaged = one.flip_bits(3, 10, |name| name.starts_with("data/"));
        assert_eq!(
            damaged,
            two.flip_bits(3, 10, |name| name.starts_with("data/"))
        );
        assert!(
            (5..=60).contains(&damaged),
            "{damaged} of 200 values damaged"
        );
        let changed = |disk: &SimulatedDisk, name: &str| {
            let tree = disk.open_tree(name).unwrap();
            (0..200u32)
                .filter(|i| value(&tree, &i.to_be_bytes()) != Some(vec![0u8; 32]))
                .count()
        };
        assert_eq!(changed(&one, "data/x"), damaged);
        assert_eq!(changed(&one, "system"), 0);
        one.crash();
        assert_eq!(
            changed(&one, "data/x"),
            damaged,
            "the damage is on the disk"
        );
    }
}
