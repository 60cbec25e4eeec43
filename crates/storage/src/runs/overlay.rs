//! `ReadThrough`: a keyspace's sled tree as its readers see it, with the
//! keyspace's runs laid over it. Reads (`get`, `range`) answer the newest
//! cell of sled's and the runs'; writes go to sled unchanged (the store
//! merges writes with the runs' cells itself, see `Store::merge`).

use std::ops::Bound;
use std::sync::Arc;

use crate::engine::{KvIter, Tree, Updater, is_empty_range};
use crate::error::Result;
use crate::runs::set::{Merged, RunSet, newer_owned};

/// A sled tree with its keyspace's runs laid over it, for reading.
pub(crate) struct ReadThrough {
    pub(crate) sled: Arc<dyn Tree>,
    pub(crate) runs: Arc<RunSet>,
}

impl Tree for ReadThrough {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // The runs first: the fold writes sled before it removes a run, so
        // a run gone from this snapshot has its cells in sled already.
        let from_runs = match self.runs.snapshot() {
            Some(runs) => runs.get(key)?,
            None => None,
        };
        let stored = self.sled.get(key)?;
        Ok(match (stored, from_runs) {
            (stored, None) => stored,
            (stored, Some(run_cell)) => Some(newer_owned(stored, run_cell)),
        })
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.sled.insert(key, value)
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.sled.remove(key)
    }

    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.sled.update(key, f)
    }

    fn update_expecting_absent(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.sled.update_expecting_absent(key, f)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter {
        let Some(runs) = self.runs.snapshot() else {
            return self.sled.range(from, to);
        };
        if is_empty_range(from, to) {
            return Box::new(std::iter::empty());
        }
        let sled = self.sled.range(from, to);
        Box::new(Merged::new(
            sled,
            &runs,
            from.map(<[u8]>::to_vec),
            to.map(<[u8]>::to_vec),
        ))
    }

    fn len(&self) -> Result<usize> {
        self.range(Bound::Unbounded, Bound::Unbounded)
            .try_fold(0, |count, entry| entry.map(|_| count + 1))
    }
}
