//! A history checker for the fault-injection suite and the whole-cluster
//! simulation.
//!
//! The suite (`tests/faults.rs`) runs real servers under faults, and the
//! simulation (`crates/simulation`) real nodes on a simulated network,
//! while concurrent clients read and write; each client records every operation
//! it made as an [`Op`]: when it was invoked and when it completed (on one
//! monotonic clock, as offsets from the start of the run), which client and
//! which coordinator, the key, the consistency [`Level`], the value written
//! and what came back. After the faults heal (hints replayed, then
//! `ringstore repair`), the suite reads every key at `ALL` and from every
//! replica directly ([`FinalKey`]) and calls [`check`]. This crate judges;
//! it does no I/O and knows nothing of gRPC.
//!
//! # What is checked, and why each check is sound
//! Writes are stamped by their coordinator (server-side timestamps) and
//! merged by last-write-wins, so the order that matters is the one of
//! [`Version`]s: the timestamp, then the value (ringstore's tie-break for
//! two values at one timestamp). Every value written is unique per key, so
//! a value read names the one write it came from.
//!
//! - **Lost write** (`ViolationKind::Lost`): a write acknowledged at a level
//!   of at least a quorum is held, at its version or a newer one, by the
//!   final `ALL` read. Acknowledged means on a quorum of replicas, durably
//!   (`batch` durability); with at most one node faulty at a time the
//!   healing must bring it back.
//! - **Stale read** (`Stale`): a read at level R that began after a write at
//!   level W was acknowledged, with R + W > RF, returns that write's version
//!   or a newer one (the read and write quorums share a replica, and the
//!   coordinator returns the newest version it sees).
//! - **Non-monotonic read** (`NonMonotonic`, optional): a read that began
//!   after another read completed, their levels overlapping, returns the
//!   other's version or a newer one. Sound because read repair is blocking:
//!   a read answers only once every replica it saw stale holds the winner,
//!   so the winner is on the read's quorum. Not guaranteed while a range
//!   moves (read repair does not write to pending replicas, as in
//!   Cassandra), so the suite turns it off for runs that change topology.
//! - **Phantom** (`Phantom`): nothing is read or held that no client wrote
//!   to that key, nor a value before its write was invoked, nor an
//!   acknowledged value under another timestamp than the one its write was
//!   acknowledged with.
//! - **Divergence** (`Divergent`): after repair every replica of a key holds
//!   the same cell.
//! - **Clock bound** (`Reordered`, optional): of two acknowledged writes
//!   to a key, the one sent more than the bound after the other was
//!   acknowledged has the higher timestamp. The bound is how far apart two
//!   coordinators' clocks may be: every node refuses to coordinate writes
//!   while its clock (or the timestamps it issued) is further than
//!   `max_clock_offset` from the majority's, so it is `max_clock_offset`
//!   when only one node's clock is off (the fault suite) and twice that
//!   when several may be, in opposite directions (the simulation). Sound
//!   because the later write's coordinator then read a clock past the
//!   earlier one's. Writes a node coordinated while its clock was
//!   deliberately pushed past the bound (before it noticed) are exempt.
//! - **Late write** (`LateWrite`, with the clock bound): a write its client
//!   was told failed, if it appears at all, has a lower version than every
//!   write the same client sent more than the bound after the failure and
//!   saw acknowledged. Sound because a coordinator refuses to stamp a write
//!   read after its client's deadline plus `max_clock_offset` (by its own
//!   clock, the client's send time travelling with the request), and the
//!   later write's coordinator, within `max_clock_offset` of true time,
//!   stamps it after that: the simulation's bound, twice the offset, covers
//!   both. Writes a node coordinated while its clock was pushed past the
//!   bound are exempt, as above.
//!
//! Writes that failed (`UNAVAILABLE`, a timeout, a broken connection) are
//! otherwise indeterminate: a coordinator may have sent them before it gave
//! up, so they may or may not appear. They are never counted lost, never
//! make a read stale, and reads may return them. A read that failed tells
//! nothing.
//!
//! # Caveats
//! - No deletes, TTLs or batches: the checks are of plain values.
//! - Real time is the clients' clock, taken around each request: an
//!   operation's interval covers its whole life on the server, so an order
//!   by these times is an order the servers also saw.
//! - Linearizability is not checked (Cassandra-style QUORUM does not give
//!   it: two concurrent reads may see an in-flight write in either order).

#![deny(missing_docs)]

mod check;
mod history;
mod violation;

#[cfg(test)]
mod check_tests;

pub use check::{CheckReport, Checks, ClockBound, check};
pub use history::{
    ClientId, Failure, FailureKind, FaultWindow, FinalKey, Level, NodeId, Op, OpKind, ReadOutcome,
    Timestamp, Version, WriteOutcome,
};
pub use violation::{Violation, ViolationKind};
