//! Anti-entropy repair: making every replica of a range hold the same cells,
//! and knowing when tombstones may finally go — the parts that need no
//! network and no disk.
//!
//! Hints and read repair fix most divergence, but not all of it: a replica
//! down longer than the hint window, a dropped hint, a write at `ONE` that
//! reached one replica, a key nobody reads. Repair compares replicas range by
//! range and copies the newest version of every row that differs to the
//! replicas that lack it. The node (`ringstore-node`, `repair/`) holds the
//! async shells that scan the store, talk gRPC and persist; this crate holds
//! what they decide.
//!
//! # The protocol, per range
//! 1. **Trees** ([`TreeBuilder`], [`MerkleTree`]): every replica scans its
//!    cells of the range in token order and folds each row's
//!    [`row_hash`] (key, timestamp, tombstone, expiry, value) into a Merkle
//!    tree and keeps it for the session. The tree is as deep as
//!    [`depth_for`] says for the most rows a replica estimates it holds
//!    there: about one row per leaf, at most [`MAX_DEPTH`] (2^16 leaves).
//!    Deeper leaves would list hardly fewer rows, and a tree costs 16
//!    bytes per leaf however few rows it holds.
//! 2. **Compare** ([`TreeComparison`], sans-IO): the coordinator compares the
//!    roots; if they differ it asks every replica for the same node hashes,
//!    four levels per round, only below the nodes that differ, down to the
//!    leaves. Identical replicas cost one hash each.
//! 3. **Rows** ([`RowAligner`]): for the differing leaves' token ranges
//!    every replica lists its rows, in pages, as [`RowVersion`]s (what
//!    decides the winner, with a hash instead of the value). Per key that
//!    is not the same everywhere the aligner names a replica holding the
//!    winning version and the replicas that lack it.
//! 4. **Sync**: the coordinator reads those cells and writes them to the
//!    replicas that lack them. Writes merge by last-write-wins, so a cell
//!    overtaken by a newer write meanwhile changes nothing.
//! 5. **Record** ([`RepairHistory`]): when every replica took part and every
//!    step succeeded, each replica records that the range was repaired as of
//!    the time the repair began.
//!
//! A command runs as a [`RepairJob`] of (keyspace, range) units, one at a
//! time, checkpointed after each so that a restarted coordinator continues
//! with the next unit.
//!
//! # Garbage collection
//! [`GcRule`] decides when a tombstone or an expired cell may be purged. The
//! default ([`TombstoneGc::Repair`]) waits for `gc_grace` after the deletion
//! *and* for a successful repair of the token that began after it, so a
//! replica that missed a delete always receives the tombstone before any
//! replica drops it: deleted data does not come back.
//!
//! # Scheduling
//! [`next_repair`] picks the range to repair next when `repair.schedule =
//! "continuous"`: each range once per interval, the longest unrepaired first;
//! [`overdue`] names ranges unrepaired for longer than `gc_grace`.
//!
//! # Invariants
//! - A range is recorded repaired only if all its replicas built trees and
//!   every row the plan named was written to every replica that lacked it.
//! - Repair never deletes: it writes cells that win by last-write-wins, so
//!   running it twice, or concurrently with writes, is safe.
//! - A tree depends only on the rows (order-independent leaves), so equal
//!   rows give equal trees whatever the scan order or chunking.
//! - Persisted records (history, job checkpoints) start with a format byte.
//!
//! # Caveats
//! - Trees are built per repair by a full scan of the range (Cassandra's
//!   validation), not maintained on every write (Riak's AAE).
//! - Leaves hash with 64-bit xxh3 and XOR: two different row sets collide
//!   with probability about 2^-64 per leaf.
//! - Writes racing a tree build may show as differences; they are synced
//!   like any other (harmlessly: last write wins).
//! - Rows tied on everything but their value are read from each replica
//!   holding one and reconciled by the cells themselves.

#![deny(missing_docs)]

mod compare;
mod digest;
mod error;
mod gc;
mod history;
mod job;
mod merkle;
mod rows;
mod schedule;

pub use compare::{CompareStep, LEVELS_PER_ROUND, TreeComparison};
pub use digest::{RowVersion, row_hash};
pub use error::RepairError;
pub use gc::{GcRule, TombstoneGc};
pub use history::RepairHistory;
pub use job::{JobTotals, RepairJob, RepairOptions, RepairUnit, UnitReport, UnitState};
pub use merkle::{MAX_DEPTH, MerkleTree, TreeBuilder, depth_for, leaf_range};
pub use rows::{KeySync, ListedRow, RowAligner};
pub use schedule::{ScheduleDecision, ScheduledRange, next_repair, overdue};
