//! Deterministic simulation of whole ringstore clusters: the real node code
//! — membership, coordinator, hints, streaming, schema, repair — on a
//! simulated network, clock and disk, driven by a seed, under faults, and
//! judged by the history checker (`ringstore_history`).
//!
//! # How it runs
//! [turmoil](https://docs.rs/turmoil) runs every host on one thread, each
//! on a paused tokio runtime whose time it moves in steps of a millisecond,
//! and carries their TCP and UDP over a simulated network whose latencies
//! it draws from the seed. Each node host runs
//! [`ringstore_node::start_on`] with a [`Platform`](ringstore_node::platform::Platform)
//! made of this crate's parts:
//! - [`net`]: turmoil's sockets behind the node's network seam (gossip,
//!   both gRPC servers, every peer channel), and channels for the clients;
//! - [`time`]: the simulation's time as each node's wall clock, plus a skew
//!   the faults set;
//! - a disk in two parts, kept across crashes: an engine standing in for
//!   sled ([`SimulatedDisk`](ringstore_storage::SimulatedDisk), which
//!   forgets what was not flushed) and a file system
//!   ([`SimulatedFileSystem`](ringstore_storage::SimulatedFileSystem))
//!   under the node's real commit log and runs, which forgets what was not
//!   synced, tears writes, rots and fails with `EIO` on cue.
//!
//! A client host ([`client`]) waits for the cluster, creates the keyspace,
//! runs the [`workload`] (workers reading and writing shared keys through
//! random coordinators, every operation recorded as [`records`] says, as
//! the process fault suite records its own; a share of them lightweight
//! transactions on keys of their own, recorded as [`cas`] says), then
//! heals: it waits
//! for the hints, repairs, and reads every key from every replica. The
//! driver ([`scenario`]) steps the simulation and applies the [`faults`]
//! drawn from the seed between steps: crashes with restarts (some tearing
//! the writes in flight, some leaving bits flipped on the disk),
//! partitions, flapping, pauses (clients' requests held in the node's
//! links), one-way drops, slow links, clock drift and jumps either way,
//! full and failing disks.
//! [`verdict`] then judges the run: the history checker's promises, the
//! CAS operations linearizable (`ringstore_history::linearizable`), every
//! failed operation excused by a fault, the load overlapping every fault,
//! and a node whose clock jumped refusing writes.
//!
//! [`storage`] is a second, smaller simulation: one node's storage stack
//! alone on the simulated disk, where replication cannot hide a lost or
//! damaged cell, judged against a model of what was acknowledged; it runs
//! hundreds of seeds a second.
//!
//! # Determinism
//! A seed replays exactly: the same operations with the same outcomes and
//! the same final state ([`scenario::Outcome::digest`]). What could vary
//! is pinned down:
//! - turmoil's network draws from the seed, and steps hosts in a fixed order;
//! - blocking work (scans, flushes) runs inline on the simulation's thread
//!   ([`ringstore_storage::offload`]) instead of on tokio's blocking pool;
//! - every wall-clock reading of a node comes from [`time`], and the
//!   decisions taken on monotonic time use tokio's (simulated) clock;
//! - every random number — host ids, foca's and the workers' generators,
//!   and the keys of every `HashMap` — comes from the C library's
//!   `getrandom`, which a simulation's test binary replaces with a stream
//!   seeded from the run's seed ([`entropy`]).
//!
//! The last one makes a run reproducible only as the first and only run of
//! its process, so the seed tests start each seed in a process of its own
//! (`tests/seeds.rs`), and a failure prints the command that replays it.
//!
//! # Caveats
//! - turmoil's TCP does not retransmit: a segment lost to a one-way drop
//!   stalls its connection until the peers' HTTP/2 keep-alive gives up and
//!   reconnects (a few seconds), which real TCP would shorten.
//! - The engine standing in for sled loses every write since its last
//!   flush at once on a crash; sled's own files may keep some of them.
//!   (The commit log and runs are on the simulated file system, which can
//!   keep a prefix of what was unsynced.)
//! - One thread runs everything: a run costs real time in proportion to
//!   the operations it simulates (about 2,000 a second in a debug build).

#![deny(missing_docs)]

pub mod cas;
pub mod client;
pub mod cluster;
pub mod entropy;
pub mod faults;
pub mod net;
pub mod records;
pub mod scenario;
pub mod storage;
pub mod time;
pub mod verdict;
pub mod workload;
