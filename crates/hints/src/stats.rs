//! What the hint store reports: pending hints per target and event counters.

/// The hints pending for one target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetStats {
    /// How many hints are stored.
    pub hints: u64,
    /// Their total size, by [`Hint::size_bytes`](crate::Hint::size_bytes)
    /// (tree keys, 32 bytes each, are not counted).
    pub bytes: u64,
}

/// Hint events since the store was opened (not persisted: a restart starts
/// them at zero). Each hint that leaves the store is counted once, under the
/// reason it left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HintCounters {
    /// Hints written to the store.
    pub stored: u64,
    /// Hints deleted after their target acknowledged them.
    pub replayed: u64,
    /// Hints dropped by the per-target cap: the oldest hints evicted to make
    /// room, plus new hints that alone exceed the cap.
    pub dropped_over_cap: u64,
    /// Hints discarded unreplayed because they were older than the keyspace's
    /// `gc_grace` (replaying them could resurrect deleted data).
    pub dropped_expired: u64,
    /// Writes the node declined to hint because the target had been down
    /// longer than the hint window (reported through
    /// [`HintStore::note_outside_window`](crate::HintStore::note_outside_window)).
    pub dropped_outside_window: u64,
    /// Stored entries deleted because their key or value did not decode.
    pub dropped_corrupt: u64,
    /// Hints deleted by [`HintStore::truncate`](crate::HintStore::truncate).
    pub truncated: u64,
    /// Hints discarded unreplayed because their keyspace has been dropped
    /// (on the coordinator's schema, or on the target's).
    pub dropped_keyspace: u64,
    /// Hints the target refused for good for another reason (an invalid key
    /// or cell): retrying could never apply them.
    pub dropped_refused: u64,
}

/// Why a hint can never be applied, so that it is discarded rather than
/// retried (see [`HintStore::discard`](crate::HintStore::discard)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Undeliverable {
    /// Its keyspace has been dropped: counted in
    /// [`HintCounters::dropped_keyspace`].
    KeyspaceDropped,
    /// The target refused it for another permanent reason: counted in
    /// [`HintCounters::dropped_refused`].
    Refused,
}

impl Undeliverable {
    /// The counter this reason is counted in.
    pub(crate) fn counter(self, counters: &mut HintCounters) -> &mut u64 {
        match self {
            Undeliverable::KeyspaceDropped => &mut counters.dropped_keyspace,
            Undeliverable::Refused => &mut counters.dropped_refused,
        }
    }
}
