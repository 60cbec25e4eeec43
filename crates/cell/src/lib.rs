//! The data model: what a replica stores for a key, and which of two
//! versions wins.
//!
//! # What it holds
//! - [`Cell`]: one version of a key's value — a live value (possibly
//!   expiring) or a tombstone — with its write [`Timestamp`] and its expiry.
//! - [`Cell::reconcile`]: last write wins, the rule every replica, read
//!   repair, repair, hint replay and stream applies, so replicas that see
//!   the same writes in any order, any number of times, converge.
//! - [`Cell::encode`] / [`Cell::decode`]: the stored format, which carries a
//!   CRC-32, so a cell checks itself wherever its bytes come from
//!   ([`CellDamage`] says what is wrong with bytes that do not read back);
//!   [`Cell::canonical_bytes`]: what nodes compare (digests, Merkle rows,
//!   stream checksums).
//! - [`KeyspaceId`]: the identity of one incarnation of a keyspace; a
//!   re-created keyspace gets a new one, so old data never comes back.
//!
//! # Why a crate of its own
//! Every layer shares these types, but only the storage engine needs an
//! engine and a runtime. With the model apart, the pure crates —
//! `replication` (consistency levels, read reconciliation) and `repair`
//! (Merkle trees, garbage-collection rules) — compile without sled or
//! tokio, and the storage crate is left with the engine stack (sled, the
//! commit log, runs, the fold).
//!
//! # Invariants
//! - The winner of two cells is a function of the two cells alone, never of
//!   the clock at the merge (CASSANDRA-14592); only what a read shows
//!   ([`Cell::visible_value`]) depends on the time.
//! - A TTL counts from when the coordinator accepted the write, not from
//!   the write's timestamp ([`Cell::expiring`]).
//! - Decoding never panics: any byte string is a cell or a [`CellDamage`].
//!
//! # Caveats
//! - Where a cell's bytes live on disk (the engine's trees, its key
//!   encoding by token) is the storage crate's business, not this one's.

#![deny(missing_docs)]

mod cell;
mod keyspace;

pub use cell::{Cell, CellDamage, Timestamp};
pub use keyspace::{InvalidKeyspaceId, KeyspaceId};
