//! `HintStore`: hints in the node's `hints` tree, with per-target accounting,
//! a per-target cap, and expiry by age.
//!
//! # Design
//! Entries are keyed by [`HintId`] (`target ++ created_at ++ sequence`, see
//! `hint_id.rs`), so one target's hints are one range scan,
//! oldest first; values are [`Hint::encode`]d. Per-target counts and bytes
//! live in memory and are rebuilt by one scan of the tree on
//! [`HintStore::open`], so hints — and their accounting — survive restarts.
//!
//! # Invariants
//! - Every tree mutation is accounted by the call that made it, using what
//!   the tree says it removed (`remove` returns the old value), so once
//!   concurrent calls return, [`HintStore::pending`] equals a fresh scan, and
//!   each hint that leaves the store is counted exactly once, under one reason.
//! - The counter mutex is held only to read or adjust numbers — never across
//!   a tree call.
//! - A hint is removed only by: the target's acknowledgement
//!   ([`HintStore::delete`]), the cap (oldest first), age past `max_age`,
//!   [`HintStore::truncate`], or corruption. A failed delivery removes nothing.
//!
//! # Caveats
//! - Writes go straight to the tree and bypass the store's durability policy:
//!   the node calls `Store::sync` when it wants hints durable (a crash may
//!   lose the latest unsynced hints; repair covers that).
//! - Concurrent `store`s for one target may each evict for room at the same
//!   moment: the cap can be exceeded by the hints in flight, or one hint too
//!   many evicted. Sequential use is exact.
//! - The cap counts encoded hint bytes, not tree keys or engine overhead.
//! - Open reads every key (not values) once; corrupt values are discovered,
//!   deleted and counted when a batch reaches them.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ringstore_placement::HostId;
use ringstore_storage::{KeyspaceId, Timestamp, Tree};

use crate::error::Result;
use crate::hint::Hint;
use crate::hint_id::HintId;
use crate::stats::{HintCounters, TargetStats, Undeliverable};

/// Bounds on what the store keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintLimits {
    /// The most hint bytes ([`Hint::size_bytes`]) kept for one target. When a
    /// new hint does not fit, that target's oldest hints are evicted; a hint
    /// larger than this on its own is dropped.
    pub max_bytes_per_target: u64,
}

impl Default for HintLimits {
    /// 128 MiB per target.
    fn default() -> HintLimits {
        HintLimits {
            max_bytes_per_target: 128 << 20,
        }
    }
}

/// What [`HintStore::store`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOutcome {
    /// The new hint's id; `None` if it alone exceeds the cap and was dropped.
    pub id: Option<HintId>,
    /// How many of the target's oldest hints were evicted to make room.
    pub dropped_oldest: u64,
}

impl StoreOutcome {
    /// Whether the hint was stored.
    pub fn stored(&self) -> bool {
        self.id.is_some()
    }
}

/// The hints of one coordinator, over its `hints` tree. Thread-safe: share it
/// by `Arc`; every method takes `&self`.
pub struct HintStore {
    tree: Arc<dyn Tree>,
    limits: HintLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Targets with at least one hint.
    targets: BTreeMap<HostId, TargetStats>,
    counters: HintCounters,
    /// The sequence number of the next hint.
    next_sequence: u64,
}

impl State {
    fn add(&mut self, target: HostId, bytes: u64) {
        let stats = self.targets.entry(target).or_default();
        stats.hints += 1;
        stats.bytes += bytes;
    }

    fn forget(&mut self, target: HostId, bytes: u64) {
        if let Some(stats) = self.targets.get_mut(&target) {
            stats.hints = stats.hints.saturating_sub(1);
            stats.bytes = stats.bytes.saturating_sub(bytes);
            if stats.hints == 0 {
                self.targets.remove(&target);
            }
        }
    }

    fn bytes_of(&self, target: HostId) -> u64 {
        self.targets.get(&target).map_or(0, |stats| stats.bytes)
    }
}

/// Locks `mutex`, ignoring poisoning: critical sections only adjust numbers
/// and cannot leave them half-updated.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Debug for HintStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("HintStore")
            .field("limits", &self.limits)
            .field("targets", &state.targets)
            .field("counters", &state.counters)
            .finish_non_exhaustive()
    }
}

impl HintStore {
    /// A store over `tree` (the node's `Store::hints()`), rebuilding the
    /// per-target accounting from what the tree holds. Keys that are not hint
    /// keys are deleted and counted as corrupt.
    pub fn open(tree: Arc<dyn Tree>, limits: HintLimits) -> Result<HintStore> {
        let mut state = State::default();
        let mut corrupt = Vec::new();
        for entry in tree.range(Bound::Unbounded, Bound::Unbounded) {
            let (key, value) = entry?;
            match HintId::from_key(&key) {
                Ok(id) => {
                    state.add(id.target(), value.len() as u64);
                    state.next_sequence = state.next_sequence.max(id.sequence().saturating_add(1));
                }
                Err(error) => {
                    tracing::warn!(%error, "deleting a corrupt entry from the hints tree");
                    corrupt.push(key);
                }
            }
        }
        for key in corrupt {
            if tree.remove(&key)?.is_some() {
                state.counters.dropped_corrupt += 1;
            }
        }
        Ok(HintStore {
            tree,
            limits,
            state: Mutex::new(state),
        })
    }

    /// The limits the store enforces.
    pub fn limits(&self) -> HintLimits {
        self.limits
    }

    /// Stores `hint` for its target, first evicting that target's oldest hints
    /// until it fits under [`HintLimits::max_bytes_per_target`]. A hint that
    /// alone exceeds the cap is dropped (and counted) without evicting anything.
    pub fn store(&self, hint: &Hint) -> Result<StoreOutcome> {
        let size = hint.size_bytes();
        if size > self.limits.max_bytes_per_target {
            lock(&self.state).counters.dropped_over_cap += 1;
            tracing::debug!(target_host = %hint.target, size, "hint larger than the per-target cap dropped");
            return Ok(StoreOutcome {
                id: None,
                dropped_oldest: 0,
            });
        }
        let dropped_oldest = self.make_room(hint.target, size)?;
        let sequence = {
            let mut state = lock(&self.state);
            let sequence = state.next_sequence;
            state.next_sequence += 1;
            sequence
        };
        let id = HintId::new(hint.target, hint.created_at, sequence);
        let value = hint.encode();
        self.tree.insert(&id.to_key(), &value)?;
        let mut state = lock(&self.state);
        state.add(hint.target, value.len() as u64);
        state.counters.stored += 1;
        Ok(StoreOutcome {
            id: Some(id),
            dropped_oldest,
        })
    }

    /// Evicts `target`'s oldest hints until `size` more bytes fit; how many.
    fn make_room(&self, target: HostId, size: u64) -> Result<u64> {
        let cap = self.limits.max_bytes_per_target;
        let fits = |state: &State| state.bytes_of(target) + size <= cap;
        if fits(&lock(&self.state)) {
            return Ok(0);
        }
        let (first, last) = HintId::key_range(target);
        let mut dropped = 0;
        for entry in self
            .tree
            .range(Bound::Included(&first), Bound::Included(&last))
        {
            let (key, _) = entry?;
            // `None`: a concurrent call removed it (and accounted for it).
            if let Some(old) = self.tree.remove(&key)? {
                dropped += 1;
                let mut state = lock(&self.state);
                state.forget(target, old.len() as u64);
                state.counters.dropped_over_cap += 1;
                if fits(&state) {
                    break;
                }
            }
        }
        if dropped > 0 {
            tracing::debug!(target_host = %target, dropped, "oldest hints evicted by the per-target cap");
        }
        Ok(dropped)
    }

    /// The targets with hints, and how many and how big.
    pub fn pending(&self) -> BTreeMap<HostId, TargetStats> {
        lock(&self.state).targets.clone()
    }

    /// Whether any hint is stored for `target`.
    pub fn has_hints(&self, target: HostId) -> bool {
        lock(&self.state).targets.contains_key(&target)
    }

    /// `target`'s oldest hints, oldest first, up to `max_bytes` in total —
    /// but always at least one if any is left. Hints created more than
    /// `max_age(keyspace)` before `now` (the keyspace's `gc_grace`: replaying
    /// them could resurrect data deleted since) are deleted instead of returned, and
    /// counted as expired; so are undecodable entries, counted as corrupt.
    ///
    /// Nothing is removed for the returned hints: call [`HintStore::delete`]
    /// once the target acknowledged them. Calling it again before that returns
    /// the same hints (the replay scheduler keeps one batch per target in flight).
    pub fn next_batch(
        &self,
        target: HostId,
        max_bytes: u64,
        now: Timestamp,
        max_age: impl Fn(KeyspaceId) -> Duration,
    ) -> Result<Vec<(HintId, Hint)>> {
        let (first, last) = HintId::key_range(target);
        let mut batch = Vec::new();
        let mut bytes = 0;
        for entry in self
            .tree
            .range(Bound::Included(&first), Bound::Included(&last))
        {
            let (key, value) = entry?;
            let Ok(id) = HintId::from_key(&key) else {
                // Never written by this store (and so never accounted): a
                // key of the wrong length that sorts among `target`'s.
                tracing::warn!(target_host = %target, "deleting a corrupt hint key");
                self.remove_counted(&key, None, |c| &mut c.dropped_corrupt)?;
                continue;
            };
            let hint = match Hint::decode(&value) {
                Ok(hint) if hint.target == target && hint.created_at == id.created_at() => hint,
                Ok(_) | Err(_) => {
                    tracing::warn!(target_host = %target, "deleting a corrupt hint");
                    self.remove_counted(&key, Some(target), |c| &mut c.dropped_corrupt)?;
                    continue;
                }
            };
            let max_age = i64::try_from(max_age(hint.keyspace).as_micros()).unwrap_or(i64::MAX);
            if id.created_at().0 < now.0.saturating_sub(max_age) {
                self.remove_counted(&key, Some(target), |c| &mut c.dropped_expired)?;
                continue;
            }
            let size = value.len() as u64;
            if !batch.is_empty() && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            batch.push((id, hint));
            if bytes >= max_bytes {
                break;
            }
        }
        Ok(batch)
    }

    /// Deletes hints their target acknowledged, counting them as replayed;
    /// how many were still there (ids already gone are skipped).
    pub fn delete(&self, ids: &[HintId]) -> Result<u64> {
        let mut deleted = 0;
        for id in ids {
            if self.remove_counted(&id.to_key(), Some(id.target()), |c| &mut c.replayed)? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Deletes hints that can never be applied (their keyspace is dropped, or
    /// the target refused them for good), counting them under `reason`; how
    /// many were still there.
    pub fn discard(&self, ids: &[HintId], reason: Undeliverable) -> Result<u64> {
        let mut discarded = 0;
        for id in ids {
            if self.remove_counted(&id.to_key(), Some(id.target()), |c| reason.counter(c))? {
                discarded += 1;
            }
        }
        Ok(discarded)
    }

    /// When the oldest hint still pending for `target` was created, if any.
    /// The tree keeps it, so it survives restarts: the hint window of a
    /// target that went down before this node restarted is measured from it
    /// (see [`HintWindow::should_hint`](crate::HintWindow::should_hint)).
    pub fn oldest_hint(&self, target: HostId) -> Result<Option<Timestamp>> {
        if !self.has_hints(target) {
            return Ok(None);
        }
        let (first, last) = HintId::key_range(target);
        for entry in self
            .tree
            .range(Bound::Included(&first), Bound::Included(&last))
        {
            let (key, _) = entry?;
            // A corrupt key is skipped here; `next_batch` deletes it.
            if let Ok(id) = HintId::from_key(&key) {
                return Ok(Some(id.created_at()));
            }
        }
        Ok(None)
    }

    /// Deletes every hint of `target`, or of every target with `None`; how many.
    pub fn truncate(&self, target: Option<HostId>) -> Result<u64> {
        let bounds = target.map(HintId::key_range);
        let range = match &bounds {
            Some((first, last)) => self
                .tree
                .range(Bound::Included(first), Bound::Included(last)),
            None => self.tree.range(Bound::Unbounded, Bound::Unbounded),
        };
        let mut deleted = 0;
        for entry in range {
            let (key, _) = entry?;
            // A corrupt key (never accounted) is deleted and counted too.
            let owner = HintId::from_key(&key).ok().map(|id| id.target());
            if self.remove_counted(&key, owner, |c| &mut c.truncated)? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Counts a write the node declined to hint because its target was down
    /// for longer than the hint window.
    pub fn note_outside_window(&self) {
        lock(&self.state).counters.dropped_outside_window += 1;
    }

    /// The event counters since open.
    pub fn counters(&self) -> HintCounters {
        lock(&self.state).counters
    }

    /// Removes `key`; if it was there, forgets its bytes from `owner`'s stats
    /// (`None`: a corrupt key, never accounted) and bumps the counter `reason`
    /// picks. Whether it was there.
    fn remove_counted(
        &self,
        key: &[u8],
        owner: Option<HostId>,
        reason: impl FnOnce(&mut HintCounters) -> &mut u64,
    ) -> Result<bool> {
        let Some(old) = self.tree.remove(key)? else {
            return Ok(false);
        };
        let mut state = lock(&self.state);
        if let Some(owner) = owner {
            state.forget(owner, old.len() as u64);
        }
        *reason(&mut state.counters) += 1;
        Ok(true)
    }
}
