//! Placement: where every key of ringstore lives.
//!
//! This crate is pure computation — no I/O, no clocks, no global randomness —
//! so that every node, given the same membership, computes the same placement,
//! and every rule here can be tested exhaustively.
//!
//! # The model
//! - A key's [`Token`] is Cassandra's `Murmur3Partitioner` token, bit for bit
//!   ([`Murmur3Partitioner`]), so operators and drivers that know Cassandra can
//!   predict where a key lives.
//! - A [`Ring`] is an immutable snapshot of every member's tokens (its vnodes)
//!   with their owners. The range `(previous token, token]` belongs to the
//!   token's owner; the last range wraps around past `Token::MAX`. Rings carry
//!   an epoch (a counter of the views a node has built) and a checksum of their
//!   contents, equal on every node that sees the same members and tokens.
//! - A [`ReplicationStrategy`] (`SimpleStrategy` or Cassandra 4.x
//!   `NetworkTopologyStrategy`) turns a range into its replicas by one clockwise
//!   walk. A [`ReplicaMap`] precomputes the walk for every range of a ring, so a
//!   lookup is a binary search; nodes build one per keyspace when the ring
//!   changes and share it behind an `Arc`.
//! - Ownership: a ring's primary ownership ([`Ring::primary_ownership`]) and a
//!   replica map's effective ownership ([`ReplicaMap::effective_ownership`]),
//!   which is what `status` prints.
//! - [`allocation`] chooses a joining host's tokens: random, or balanced for a
//!   replication factor and rack layout. Weight is expressed as token count.
//! - A [`MovementPlan`] is the diff of two replica maps: the ranges whose
//!   replica set changes in a join, leave, replace or weight change, with who
//!   loses and who gains each. Streaming and pending-range writes follow it.
//!
//! # Invariants
//! - Ring tokens are unique across hosts; every member has at least one token.
//! - The replicas of a range are distinct hosts, primary first, and number
//!   `min(rf, hosts)` per data center (NTS) or in all (SimpleStrategy).
//! - A movement plan covers exactly the tokens whose replica set differs.
//!
//! # Caveats
//! - NTS walks are precomputed per range; a DC with very few hosts among very
//!   many tokens makes each walk long (Cassandra has the same cost).
//! - The balanced allocator is greedy and never moves tokens already placed.
//! - Transient replication, ByteOrderedPartitioner and RandomPartitioner are
//!   not supported.

#![deny(missing_docs)]

pub mod allocation;
mod error;
mod host;
mod movement;
mod murmur3;
mod partitioner;
mod replica_map;
mod ring;
mod strategy;
mod token;

pub use error::{PlacementError, Result};
pub use host::{Datacenter, HostId, Location, Rack};
pub use movement::{MovementPlan, RangeMovement};
pub use murmur3::cassandra_murmur3_x64_128;
pub use partitioner::Murmur3Partitioner;
pub use replica_map::{ReplicaMap, Replicas};
pub use ring::{Ring, RingHost, RingMember};
pub use strategy::ReplicationStrategy;
pub use token::{RING_SIZE, Token, TokenRange, parse_token_list};
