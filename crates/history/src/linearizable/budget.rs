//! How much search a key may cost before the checker gives up on it.

/// The bound on one key's search. Deciding linearizability is NP-complete,
/// so a history can always be built that takes longer than anyone will
/// wait; past the budget the verdict is `Unknown`, never a guess.
///
/// A step is one attempt to place an operation next: a model step and, if
/// legal, one probe of Lowe's cache. The cache gains at most one entry per
/// step (a bitset of the key's operations and a register state), so the
/// budget also bounds memory: at most `max_steps × (ops / 8 + 24)` bytes.
/// Steps rather than wall-clock time keep a verdict reproducible (the same
/// history gets the same verdict on any machine, however loaded); see the
/// module's essay for the measured rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most steps one key's search may take (each key has its own).
    pub max_steps: u64,
}

impl Budget {
    /// A budget of `max_steps` steps per key.
    pub const fn steps(max_steps: u64) -> Budget {
        Budget { max_steps }
    }
}

impl Default for Budget {
    /// Two million steps per key: a fraction of a second for the histories
    /// the simulation and the fault suite record, and at most ~0.6 GB of
    /// cache for a key of 2,000 operations.
    fn default() -> Budget {
        Budget::steps(2_000_000)
    }
}
