//! Storage: each node's durable cells, in token order.
//!
//! # What it does
//! The data model — [`Cell`], [`Timestamp`], [`KeyspaceId`], last write
//! wins — is the `ringstore-cell` crate's (re-exported here); this crate is
//! the engine stack that keeps it. A node stores, per keyspace and key, one [`Cell`]: a value or a tombstone
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
//! - [`DataTree`]: a keyspace's data lives in the tree `data/<uuid>`,
//!   named by its [`KeyspaceId`]. A re-created keyspace has a new id and so
//!   a new, empty tree: old data is never resurrected.
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
//! - Stored bytes that do not read back are reported as errors
//!   ([`StorageError::CorruptCell`], [`StorageError::is_corruption`]), never a
//!   panic and never served; a merge treats them as absent and replaces them
//!   (see "Damaged cells").
//! - [`Store::load_bytes`] (the node's `Load`) is the bytes of the keys and
//!   cells the keyspaces hold, kept by every write, purge and drop and
//!   carried across restarts (`live_size`); it falls when garbage collection
//!   purges, where sled's files ([`Store::disk_bytes`]) never shrink. The
//!   keys and tombstones of each keyspace are counted the same way
//!   ([`Store::keyspace_counts`]), so reporting them reads no cell.
//! - Stored cells start with a format version byte (format 2 carries a
//!   CRC-32; format 1, without one, is still read and is rewritten as format
//!   2 by the next write of its key: see `cell`). Data keys have none: their
//!   layout is versioned by the tree prefix (`data/` is version 1), so a new
//!   layout would live in new trees and be migrated by copying.
//!
//! # Damaged cells
//! A cell whose bytes changed on the disk, or on their way back from it, must
//! never be served: the replica holding it answers that its copy does not
//! read back, and the node reads another replica instead (its coordinator
//! and read repair: the node crate's `local_reads` and `coordinator`). Which
//! check catches the damage depends on the path the bytes took:
//!
//! | path | check |
//! |---|---|
//! | sled's files (`db`, `blobs/`, `snap.*`) | sled's CRC-32 of each log message, snapshot and blob, when it reads one from the disk: at open, a damaged snapshot, or a damaged message before the snapshot's point, makes sled refuse to open (the node does not start, saying so); later, a damaged page or blob read on a cache miss fails the call (`sled::Error::Corruption`, a damaged cell to the node) |
//! | what sled hands back (its cache, flipped in memory) and any other engine, the simulation's stand-in included | the cell's own CRC-32 (format 2) |
//! | the commit log | a CRC-32 per record and per synced section (`commit_log`): a damaged section is skipped at replay and counted (`commit_log_damage`), and each cell in it checks itself once more |
//! | runs | a CRC-32 per block and of the index (`runs`): a damaged run is set aside and counted (`run_damage`); the cells in it check themselves once more |
//! | hints (the `hints` tree) | the hint's own CRC-32 (format 2, the hints crate), covering its key and keyspace as well as its cell |
//!
//! Format-1 cells (written before format 2) have only the check of their
//! path. Whatever caught it, a damaged cell is counted in
//! [`Store::corrupt_reads`] on every path that meets it: a read fails with
//! `CorruptCell` naming the key; a scan yields that error for the row and
//! goes on, and its caller skips the row or fails (repair and garbage
//! collection skip it, so repair heals it; streaming, snapshots and client
//! scan pages fail, so nothing with a hole in it is sent); a merge — a client
//! write, read repair, repair, hint replay, a stream, the commit log's
//! replay, the fold of a run — treats it as absent and replaces it. That is
//! safe: the damaged copy can never be read again, so the replica was as
//! good as one that missed the write, and the newest version lives on the
//! other replicas, from which read repair and repair bring it back as they
//! would to any replica that missed a write.
//!
//! # Caveats
//! - The cell's CRC does not cover its key: bytes stored under another key
//!   (a misdirected write) would read back as that key's cell. Two flips
//!   that turn format 2's version byte into 1 make the CRC part of the value
//!   of a format-1 cell.
//! - sled 0.34 takes a damaged log message *after* its last snapshot (or
//!   anywhere, in a database never reopened, which has none) for a torn
//!   write: it discards the log from there on and zeroes the segments
//!   after, without an error. What was there is lost silently, metadata
//!   included; seen with bits flipped in a stopped node's files, the node
//!   then started as a new one (no tokens) and bootstrapped again under its
//!   host id (`tests/damaged_disk.rs` keeps to the reopened case, where sled
//!   refuses to open).
//! - A damaged cell that no replica holds a readable version of stays, and
//!   fails every read of it that reaches this replica, until a write of the
//!   key replaces it.
//! - Replacing a damaged cell moves the live counts by its length and by
//!   the tombstone flag its damaged bytes show, which a flip may have
//!   changed: the count of tombstones may be off by one per such cell until
//!   a count from scratch (after a crash).
//! - Tombstones and expired cells stay until garbage collection (the
//!   node's repair module) removes them with [`Store::purge_unchanged`].
//! - Engine calls for single keys run on the caller's thread, not the blocking
//!   pool; sled usually answers from memory but may block.
//! - sled 0.34 is pre-1.0: its memory use is several times its cache
//!   capacity, it loses unflushed writes on `kill -9`, and its on-disk format
//!   may change with its version.
//! - The `hints` tree is reserved; hinted handoff defines its format. The
//!   `paxos` tree likewise: the node's Paxos replica stores each key's
//!   acceptor state there ([`Store::paxos_put`], durable on return), in
//!   the paxos crate's format. A dropped keyspace's Paxos state stays until
//!   Paxos garbage collection exists.

#![deny(missing_docs)]

mod checkpoint;
mod commit_log;
mod damage;
mod data_tree;
mod durability;
mod engine;
mod error;
pub mod file_system;
mod group_commit;
mod key_encoding;
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

pub use commit_log::CommitLogOptions;
pub use data_tree::DataTree;
pub use durability::Durability;
pub use engine::{Engine, KvIter, Tree, Updater};
pub use error::{Result, StorageError, printable_key};
pub use file_system::{FileSystem, OsFileSystem, SimulatedFileSystem};
pub use live_size::KeyspaceCounts;
pub use memory_engine::MemoryEngine;
pub use scan::Scan;
pub use simulated_disk::SimulatedDisk;
pub use sled_engine::{LOCK_RETRY_WINDOW, SledEngine, SledOptions};
pub use store::{FoldHold, HINTS_TREE, PAXOS_TREE, RunIngest, SYSTEM_TREE, Store};

/// The data model the store keeps (from `ringstore-cell`), re-exported for
/// the crates that use both.
pub use ringstore_cell::{Cell, CellDamage, InvalidKeyspaceId, KeyspaceId, Timestamp};
