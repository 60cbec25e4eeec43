//! The ringstore node: storage, membership and replication wired behind gRPC.
//!
//! # Design
//! A node is a [`NodeContext`](context::NodeContext) — configuration,
//! identity, the sled-backed [`Store`](ringstore_storage::Store), the
//! membership handle, the replicated schema and a cache of per-keyspace replica
//! maps — shared by five gRPC services: `Client`, `Schema`, `Admin` and
//! `Topology` on the client port, `Internode` on the internode port. Any node coordinates any
//! request ([`coordinator`]): it finds the key's replicas on the current ring,
//! plans the request with `ringstore_replication`, and talks to the replicas
//! (itself included, directly) in parallel. Writes and reads bound for
//! one peer while its call slots are busy leave together in its next call
//! ([`coordinator::peer_calls`]); the write calls to a peer go on one long-lived stream
//! ([`coordinator::peer_calls::write_streams`]); and reads of one hot key share replica rounds
//! ([`coordinator::read_flights`]).
//!
//! - **Schema** ([`schema`]) is a last-write-wins map of keyspace entries,
//!   merged identically everywhere. A change is pushed to every live node and
//!   returns once all applied it; nodes also pull from any live node that
//!   gossips another schema version, so a node that was down catches up.
//!   Replica maps are cached per ring and keyspace ([`replica_maps`]).
//! - **Tokens** ([`topology::join`]): saved at first start; a fresh node
//!   takes its turn to choose balanced tokens (or take its `initial_token`)
//!   and bootstraps ([`topology`]).
//! - **Durability**: `batch` (acknowledged after fsync, group-committed; the
//!   default) or `periodic` (acknowledged at once, synced every period).
//!
//! - **Hinted handoff** ([`handoff`]): a write that cannot reach a replica
//!   (down, failed or too slow) is kept as a hint and replayed, throttled,
//!   when the replica is up again.
//!
//! - **Metrics** ([`metrics`]): `ringstore_metrics` families recorded on the
//!   request path, sampled from the rest of the node at scrape time, served
//!   over HTTP (`GET /metrics`, port 7200) and the `Metrics` RPC; `tpstats`,
//!   `proxyhistograms` and `tablestats` read the same numbers. The same
//!   port serves the web [`console`] and its JSON API (`/api/v1/…`). `drain` stops
//!   writes and gossip before maintenance; [`snapshots`] copies keyspace
//!   data at one point in time and restores it. A node whose storage fails
//!   for good (a full disk) acts on its `disk_failure_policy`
//!   ([`disk_failure`]): by default it stops writes and gossip, as a drain.
//!
//! - **Topology changes** ([`topology`]): joins, replacements, decommissions
//!   and removals announce a pending ring first; writes go to the pending
//!   replicas too while the ranges are streamed ([`streaming`]: pulled,
//!   checksummed, throttled, resumable), and only then does the ring change.
//!   For `ring_delay` after a switch, writes also reach the replaced ring's
//!   replicas ([`settling_ring`]); a coordinator whose ring is behind its
//!   replicas' learns it from their answers and tries again once gossip
//!   caught it up ([`ring_lag`]).
//!
//! - **Clock bound** ([`clock_guard`]): a node whose clock gossip finds off
//!   from the majority of the live members by more than `max_clock_offset`
//!   refuses to coordinate writes until it is back, so last-write-wins
//!   orders writes further apart than twice the bound as they happened. Every
//!   wall-clock reading goes through one [`clock::WallClock`], which tests
//!   can skew.
//!
//! - **Deadlines** ([`deadline`]): a client request carries when it was
//!   sent and how long its client waits, and a replica write when its
//!   coordinator stops waiting; a coordinator refuses to stamp a write read
//!   after its client's deadline, and a replica drops a mutation read after
//!   its coordinator's, so a write the client was told failed cannot be
//!   stamped later than the writes that client made next.
//!
//! - **Repair** ([`repair`]): Merkle-tree anti-entropy repair of token
//!   ranges (`ringstore repair`, or continuously by the built-in
//!   scheduler), and garbage collection of tombstones and expired cells once
//!   a repair has made them safe to drop.
//!
//! - **Lightweight transactions, replica side** ([`paxos`]): this node as
//!   a Paxos acceptor per key (`ringstore_paxos`'s rules), its state in
//!   the store's `paxos` tree, durable before each answer.
//!
//! - **Starting** (`node/`): the start's named steps, its servers and its
//!   background tasks, on a [`platform`]: the operating system's sockets,
//!   clock and disk, or a deterministic simulation's (`crates/simulation`
//!   runs whole clusters of real nodes on one).
//!
//! # Caveats
//! - Gossiped metadata is in format 2 (with `takeovers`): nodes of format 1
//!   cannot decode it, so a cluster is upgraded to it all at once.

#![deny(missing_docs)]

pub mod client_auth;
pub mod clock;
pub mod clock_guard;
pub mod config;
pub mod console;
pub mod context;
pub mod convert;
pub mod coordinator;
pub mod deadline;
pub mod disk_failure;
pub mod drain;
mod empty_ring;
pub mod error;
pub mod file_modes;
pub mod handoff;
pub mod internode_auth;
pub mod known_members;
pub mod limits;
pub mod log_levels;
pub mod metrics;
pub mod metrics_http;
mod node;
pub mod paxos;
pub mod peers;
pub mod platform;
pub mod removal;
pub mod repair;
pub mod replica_maps;
pub mod ring_lag;
pub mod rotation;
pub mod scan;
pub mod schema;
pub mod security;
pub mod services;
pub mod serving;
pub mod settling_ring;
pub mod snapshot_file;
pub mod snapshots;
pub mod start_refusals;
pub mod streaming;
#[cfg(test)]
mod test_views;
pub mod tls;
pub mod topology;

pub use config::NodeConfig;
pub use error::{NodeError, Result};
pub use node::{RunningNode, start, start_on};
/// The membership crate, for callers that look at a running node's view.
pub use ringstore_membership as membership;
