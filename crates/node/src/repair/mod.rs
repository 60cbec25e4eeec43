//! Anti-entropy repair and tombstone garbage collection: the node's async
//! shells around `ringstore-repair`.
//!
//! - [`replica`]: what a replica does when asked — build a range's tree (at
//!   the validation rate), answer node hashes, list row versions, read
//!   cells, end a session (recording the ranges repaired).
//! - [`range`]: the coordinator's repair of one range among its replicas.
//! - [`unit`]: one (keyspace, range) on the current ring, cut where the
//!   replica sets change, recorded when every replica took part.
//! - [`job`]: `ringstore repair`, a checkpointed job of units that a
//!   restarted node resumes.
//! - [`scheduler`]: `repair.schedule = "continuous"`.
//! - [`gc`]: purging what the garbage-collection rule allows.
//! - [`node_ops`]: repair-based `removenode` and `replace` (every gained
//!   range synced among all its new replicas after streaming).
//! - [`state`]: what the node keeps (trees, history, progress).
//! - [`host`]: what all of them need from the running node
//!   ([`RepairHost`]), so that none of them names the node's context.
//!
//! See the `ringstore-repair` crate for the protocol and its invariants.

pub mod gc;
pub mod host;
pub mod job;
pub mod node_ops;
pub mod range;
pub mod replica;
pub mod scheduler;
pub mod state;
pub mod unit;

pub use host::RepairHost;
