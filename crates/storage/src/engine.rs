//! The `Engine` and `Tree` traits: the small interface every storage engine
//! implements, so that the store above it never names sled.
//!
//! # Model
//! An engine holds named *trees*: independent ordered maps from byte keys to
//! byte values, ordered by unsigned lexicographic byte order. One engine-wide
//! [`Engine::flush`] makes every write to every tree made before it durable.
//!
//! # Invariants every engine keeps (checked by `tests/engine_suite.rs`)
//! - Trees are independent: a write to one is never visible in another.
//! - [`Tree::update`] is atomic with respect to every other write to the key.
//! - [`Tree::range`] yields keys in strictly increasing byte order, honours
//!   every [`Bound`] kind, and yields nothing (never panics) for an empty or
//!   inverted range.
//! - After [`Engine::drop_tree`], the tree's data is gone: opening the name
//!   again gives an empty tree, and old handles fail with
//!   [`StorageError::TreeDropped`](crate::StorageError::TreeDropped).
//! - After [`Engine::flush`] returns `Ok`, every write that returned before it
//!   was called survives a crash (for engines that have a disk at all).
//!
//! # Caveats
//! - Calls block the calling thread (sled may do I/O in a write); async
//!   callers accept that for single-key operations and move flushes to the
//!   blocking pool.
//! - Range iterators are not snapshots: concurrent writes may or may not be
//!   seen, but each key is seen at most once and in order.

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;

/// A range scan's results: `(key, value)` pairs in key order. After an error
/// the iterator ends.
pub type KvIter = Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + Send>;

/// The closure of [`Tree::update`]: from the current value (`None`: absent)
/// to the new one (`None`: remove the key).
pub type Updater<'a> = dyn FnMut(Option<&[u8]>) -> Option<Vec<u8>> + 'a;

/// A storage engine: a set of named trees and one flush for them all.
pub trait Engine: Send + Sync {
    /// The tree called `name`, created empty if it does not exist. Handles to
    /// the same name share the same data.
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>>;

    /// Removes the tree called `name` and all its data; whether it existed.
    fn drop_tree(&self, name: &str) -> Result<bool>;

    /// The names of the trees that exist, sorted.
    fn tree_names(&self) -> Vec<String>;

    /// Blocks until every write made before the call is durable.
    fn flush(&self) -> Result<()>;

    /// The bytes the engine occupies on disk (for an in-memory engine, the
    /// bytes of its keys and values).
    fn size_on_disk(&self) -> Result<u64>;
}

/// One ordered map of an engine.
pub trait Tree: Send + Sync {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Sets `key` to `value`; the previous value.
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Removes `key`; the previous value.
    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Atomically replaces the value of `key` by `f(current)` (`None` removes
    /// it) and returns the new value.
    ///
    /// `f` is called at least once, and may be called more than once (an engine may retry a
    /// compare-and-swap under contention); only the last call's result is
    /// stored, so `f` must depend only on its argument, and any state it
    /// records must be overwritten, not accumulated, on each call.
    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>>;

    /// [`Tree::update`] for a key that is probably absent: the same atomic
    /// result, but the engine may first try `f(None)` without looking the
    /// key up, and look again only if the key turns out to be there. For
    /// bulk loads into ranges new to the node (stream chunks), where most
    /// keys are absent and a lookup per key is half the cost of the write.
    /// Slower than [`Tree::update`] for a key that is present (one wasted
    /// call of `f`).
    fn update_expecting_absent(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        self.update(key, f)
    }

    /// The entries with keys between `from` and `to`, in key order.
    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter;

    /// The number of keys. May be linear in the tree's size (it is for sled).
    fn len(&self) -> Result<usize>;

    /// Whether the tree has no keys.
    fn is_empty(&self) -> Result<bool> {
        match self.range(Bound::Unbounded, Bound::Unbounded).next() {
            None => Ok(true),
            Some(Ok(_)) => Ok(false),
            Some(Err(error)) => Err(error),
        }
    }
}

/// Whether `(from, to)` is inverted or degenerate (start after end, or equal
/// with one end excluded): such a range selects no key, and `BTreeMap::range`
/// would panic on it, so engines answer it themselves.
pub(crate) fn is_empty_range(from: Bound<&[u8]>, to: Bound<&[u8]>) -> bool {
    match (from, to) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverted_and_degenerate_ranges_are_recognised_as_empty() {
        use Bound::*;
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert!(is_empty_range(Included(b), Included(a)));
        assert!(!is_empty_range(Included(a), Included(a)));
        assert!(is_empty_range(Included(a), Excluded(a)));
        assert!(is_empty_range(Excluded(a), Included(a)));
        assert!(!is_empty_range(Excluded(a), Excluded(b)));
        assert!(!is_empty_range(Unbounded, Excluded(a)));
        assert!(!is_empty_range(Excluded(b), Unbounded));
    }
}
