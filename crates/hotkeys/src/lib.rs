//! The hottest keys a node serves, for `ringstore toppartitions`.
//!
//! # Why
//! A hot key is one key taking a large share of a node's requests: a
//! celebrity's profile, a global counter. No token layout spreads it, since
//! every copy of one key lives on the same replicas; what helps is handling
//! it above the ring (the coordinator coalesces concurrent reads of one
//! key) and knowing which key it is. The operator asks the node, as
//! Cassandra's `nodetool toppartitions` does: sample its reads and writes
//! for a while, then list the keys seen most, with how sure the counts are.
//!
//! # How
//! - [`SpaceSaving`] (Metwally, Agrawal and El Abbadi, 2005) keeps at most
//!   `capacity` counters. A key already counted adds one; a new key takes a
//!   free counter, or, when none is free, the smallest one, inheriting its
//!   count plus one and remembering that count as its `error`. Memory is
//!   bounded by the capacity whatever the traffic, and for every key it
//!   reports, `count - error <= true count <= count`; every key with more
//!   than `total / capacity` operations is among those kept. The smallest
//!   counter is found through an ordered index, so each operation costs
//!   `O(log capacity)`.
//! - [`Samplers`] holds the sessions running on a node. A session samples
//!   one keyspace (a scope) for reads, writes or both, into one summary per
//!   operation, until its [`Session`] handle is finished or dropped (a
//!   client that hangs up ends its session). While no session runs, a
//!   recorded operation costs one atomic load.
//!
//! # Invariants
//! - At most [`MAX_SESSIONS`] sessions at once, each with at most
//!   [`MAX_CAPACITY`] counters per operation: memory is bounded by
//!   `MAX_SESSIONS × 2 × MAX_CAPACITY` keys (a few MiB for keys of tens of
//!   bytes; the node's largest keys, 64 KiB, could take 512 MiB, which is
//!   why the bounds are small).
//! - A reported count never under-counts, and over-counts by at most its
//!   `error`.
//!
//! # Caveats
//! - The counts are what this node served as a replica (its local reads
//!   and writes, including those it coordinated for itself), not what the
//!   cluster served: a hot key shows on each of its replicas, so ask one
//!   of them (`ringstore getendpoints` names them). A read at `QUORUM`
//!   counts on every replica it asks, digests included. Writes that reach
//!   a replica the way client writes do count with them: hint replays,
//!   read repairs and repair's row writes. Streamed ranges do not.
//! - Keys that are all equally cold are reported with large errors; the
//!   list is meaningful when the counts stand above their errors.

mod samplers;
mod space_saving;

pub use samplers::{
    MAX_CAPACITY, MAX_SESSIONS, Operation, OperationSample, SampleError, Samplers, Session,
};
pub use space_saving::{Counted, SpaceSaving};
