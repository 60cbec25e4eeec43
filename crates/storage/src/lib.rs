//! Storage: each node's durable cells, in token order.
//!
//! # What it does
//! A node stores, per keyspace and key, one [`Cell`]: a value or a tombstone
//! with its write [`Timestamp`] and optional expiry. Every write is merged with
//! the stored cell by last-write-wins ([`Cell::reconcile`]), so replicas that
//! receive the same writes in any order, any number of times, converge. The
//! [`Store`] is what the node uses: `apply`, `read`, `scan` a token range,
//! `drop_keyspace`, node metadata, and `sync`.
//!
//! # Layers
//! - [`Engine`] / [`Tree`]: a small trait for named ordered byte maps with an
//!   engine-wide flush. [`SledEngine`] is what ringstore ships;
//!   [`MemoryEngine`] is for tests; [`SimulatedDisk`] is an in-memory
//!   engine that loses unflushed writes when a simulation crashes its node
//!   (the stand-in for sled, whose promise it keeps and nothing more).
//!   All pass one shared suite (`tests/engine_suite.rs`), so the store
//!   cannot tell them apart.
//! - [`file_system`]: the store's own files — commit log segments, runs,
//!   their directories — are read, written, synced, renamed and removed
//!   through one [`FileSystem`] trait: [`OsFileSystem`] in production,
//!   [`SimulatedFileSystem`] in simulations, which loses unsynced writes and
//!   directory changes on a crash, tears the last writes, flips bits,
//!   returns `EIO` and fills up. The simulation (`crates/simulation`) runs
//!   the real store — log, checkpoints, runs, fold, replay — on it.
//! - [`offload`]: blocking work goes to tokio's blocking pool, or runs
//!   inline on a deterministic simulation's thread.
//! - Key encoding: a data key is the token's order-preserving bytes followed
//!   by the key, so a data tree is sorted by token and a token range — the
//!   unit of replication, repair and streaming — is one range scan (two when
//!   it wraps past `Token::MAX`).
//! - [`KeyspaceId`]: a keyspace's data lives in the tree `data/<uuid>`. A
//!   re-created keyspace has a new id and so a new, empty tree: old data is
//!   never resurrected.
//! - [`Store`]: LWW merges through atomic [`Tree::update`], the [`Durability`]
//!   policy, and group commit.
//! - `runs`: bulk loads (streamed ranges) written as sorted files beside the
//!   engine ([`Store::start_run`]), read through by reads, writes and scans
//!   until a background thread folds them into the engine. sled writes a
//!   bulk load about four times over at ~15 µs of CPU per cell; a run is
//!   written once.
//!
//! # Durability
//! - [`Durability::Batch`]: a write is acknowledged only once it is durable.
//!   With a commit log ([`Store::open_with_commit_log`], what the node uses
//!   on sled), that is once the log's writer thread has synced the record of
//!   the cell that won at its key; the engine is flushed only at
//!   checkpoints, and a replay on open restores what a crash lost
//!   (`commit_log`, `checkpoint`). Without one, it is once a flush that
//!   started after the write has completed. Either way concurrent writers
//!   share syncs (group commit): while one sync runs, the next gathers
//!   everyone who arrives, so throughput scales with concurrency at the same
//!   fsync rate.
//! - [`Durability::Periodic`]: writes are acknowledged at once, and a
//!   background task flushes every interval. A crash loses up to one interval
//!   of acknowledged writes; replication covers for it.
//! - Metadata writes and keyspace drops are always durable on return.
//!
//! # Invariants
//! - The stored cell of a key is the LWW winner of every cell applied to it
//!   since it was last dropped, whatever the order and concurrency of applies.
//! - The LWW winner of two cells is a function of the two cells alone
//!   (timestamp, then tombstone, then expiring, then later expiry, then
//!   value), never of the clock at the merge, so replicas merging before and
//!   after an expiry converge (CASSANDRA-14592). Only what a read shows
//!   ([`Cell::visible_value`]) depends on the time.
//! - A TTL counts from when the coordinator accepted the write, not from the
//!   write's timestamp ([`Cell::expiring`]).
//! - Scans return exactly the keys whose tokens the range contains, in
//!   `(token, key)` order.
//! - Stored bytes that do not decode are reported as errors
//!   ([`StorageError::is_corruption`]), never a panic, and never overwritten by
//!   a merge.
//! - [`Store::load_bytes`] (the node's `Load`) is the bytes of the keys and
//!   cells the keyspaces hold, kept by every write, purge and drop and
//!   carried across restarts (`live_size`); it falls when garbage collection
//!   purges, where sled's files ([`Store::disk_bytes`]) never shrink. The
//!   keys and tombstones of each keyspace are counted the same way
//!   ([`Store::keyspace_counts`]), so reporting them reads no cell.
//! - Stored cells start with a format version byte. Data keys have none: their
//!   layout is versioned by the tree prefix (`data/` is version 1), so a new
//!   layout would live in new trees and be migrated by copying.
//!
//! # Caveats
//! - Tombstones and expired cells stay until garbage collection (the
//!   node's repair module) removes them with [`Store::purge_unchanged`].
//! - Engine calls for single keys run on the caller's thread, not the blocking
//!   pool; sled usually answers from memory but may block.
//! - sled 0.34 is pre-1.0: its memory use is several times its cache
//!   capacity, it loses unflushed writes on `kill -9`, and its on-disk format
//!   may change with its version.
//! - The `hints` tree is reserved; hinted handoff defines its format.

#![deny(missing_docs)]

mod cell;
mod checkpoint;
mod commit_log;
mod durability;
mod engine;
mod error;
pub mod file_system;
mod group_commit;
mod key_encoding;
mod keyspace;
mod live_size;
mod memory_engine;
pub mod offload;
mod periodic_flush;
mod runs;
mod scan;
mod simulated_disk;
mod sled_engine;
mod sled_files;
mod store;

pub use cell::{Cell, Timestamp};
pub use commit_log::CommitLogOptions;
pub use durability::Durability;
pub use engine::{Engine, KvIter, Tree, Updater};
pub use error::{Result, StorageError};
pub use file_system::{FileSystem, OsFileSystem, SimulatedFileSystem};
pub use keyspace::KeyspaceId;
pub use live_size::KeyspaceCounts;
pub use memory_engine::MemoryEngine;
pub use scan::Scan;
pub use simulated_disk::SimulatedDisk;
pub use sled_engine::{LOCK_RETRY_WINDOW, SledEngine, SledOptions};
pub use store::{FoldHold, HINTS_TREE, RunIngest, SYSTEM_TREE, Store};
