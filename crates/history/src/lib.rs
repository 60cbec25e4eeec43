//! A history checker for the fault-injection suite and the whole-cluster
//! simulation.
//!
//! The suite (`tests/faults.rs`) runs real servers under faults, and the
//! simulation (`crates/simulation`) real nodes on a simulated network,
//! while concurrent clients read and write; each client records every operation
//! it made as an [`Op`]: when it was invoked and when it completed (on one
//! monotonic clock, as offsets from the start of the run), which client and
//! which coordinator, the consistency [`Level`], the keys with what was
//! written to each (a value, with or without a TTL, or a delete; several
//! for a batch) and what came back. After the faults heal (hints replayed, then
//! `ringstore repair`), the suite reads every key at `ALL` and from every
//! replica directly ([`FinalKey`]) and calls [`check`]. This crate judges;
//! it does no I/O and knows nothing of gRPC.
//!
//! # The model
//! Writes are stamped by their coordinator (server-side timestamps) and
//! merged by last-write-wins, so the order that matters is the store's
//! (`Cell::compare`): the timestamp, then a tombstone over a value, then a
//! value with a TTL over one without, then the later expiry (deletion
//! time), then the greater value. A write is a put (of a value unique per
//! key, so a value read names the one write it came from), a put with a
//! TTL, or a delete (a tombstone, with its own timestamp); a batch is one
//! operation of several writes, each part with its own outcome (ringstore's
//! batches are unlogged: each mutation is coordinated on its own at the
//! batch's level), and each part is judged as a write of its own. Reads
//! return a value and its timestamp, or nothing.
//!
//! The checker knows less than the store: a failed write's timestamp only
//! if it is seen, and never the expiry a coordinator computed from its own
//! clock. So it calls a version older than another only when that is
//! certain (`order.rs`): by known timestamps and the store's tie-breaks, or
//! by real time, when one was stamped, at the latest, more than the clock
//! bound before the other was sent (a failed write is stamped by its
//! coordinator's answer, or else by the deadline nodes keep,
//! [`Checks::stamp_deadline`]). Where the order is not certain (two TTL
//! writes at one timestamp) nothing is called a violation.
//!
//! A TTL counts from when the coordinator accepted the write (by its
//! clock: `Cell::expiring`), and a read's coordinator hides the value once
//! its own clock is past that. With the nodes' clocks at most `bound`
//! apart as measured against the clients' clock ([`ClockBound`]), a value
//! accepted by `s` (its acknowledgement) with TTL `t` is hidden from every
//! read that begins after `s + t + bound`, and may be hidden from a read
//! that ends after `sent + t - bound`. A read that found nothing is
//! explained only by a write that can hide the key by then: a delete sent
//! before the read ended, or a value whose TTL may have run out.
//!
//! # What is checked, and why each check is sound
//! - **Lost write** (`ViolationKind::Lost`): a write acknowledged at a level
//!   of at least a quorum is held, at its version or a newer one, by the
//!   final `ALL` read; if that read finds nothing, a delete or an expired
//!   value no older than the write explains it. Acknowledged means on a
//!   quorum of replicas, durably (`batch` durability); with at most one
//!   node faulty at a time the healing must bring it back.
//! - **Stale read** (`Stale`): a read at level R that began after a write at
//!   level W was acknowledged, with R + W > RF, returns that write's version
//!   or a newer one, or nothing only if a write no older than it can have
//!   hidden the key (the read and write quorums share a replica, and the
//!   coordinator returns the newest version it sees).
//! - **Resurrected value** (`Resurrected`): the stale rule where the write
//!   acknowledged is a delete: a read that began after a delete was
//!   acknowledged (levels overlapping) returns no value older than the
//!   tombstone; nor does the final `ALL` read after a durable delete. A
//!   tombstone at a timestamp beats a value at the same timestamp.
//! - **Expired value** (`Expired`): no read that began more than its TTL
//!   plus the clock bound after a TTL write was accepted (by its
//!   acknowledgement, or its coordinator's answer, or the stamp deadline)
//!   returns its value, the final `ALL` read included: its coordinator's
//!   clock is then past the expiry the write's coordinator set.
//! - **Non-monotonic read** (`NonMonotonic`, optional): a read that began
//!   after another read completed, their levels overlapping, returns the
//!   other's version or a newer one (or nothing, hidden by a write no older
//!   than that version); and after a read that found nothing, explained
//!   only by writes newer than some value, no later read returns that
//!   value. Sound because read repair is blocking: a read answers only once
//!   every replica it saw stale holds the winner, so the winner is on the
//!   read's quorum. This is the rule that judges indeterminate writes: a
//!   failed write may be read or not, but once read (at `QUORUM`) it never
//!   disappears again, and a failed delete once it hid the key never lets
//!   the older value back. **During topology changes** it holds, except
//!   for reads that overlap the change: read repair writes to the natural
//!   replicas only, not to pending ones (as Cassandra), so a value that
//!   reached a quorum only through a repair made while a range moved (after
//!   its stream was cut) may be on one replica of the new set. A read made
//!   before the change began binds every later read (the new replica
//!   streams from the one it replaces, so a quorum of the old set maps to
//!   one of the new), and reads after it bind each other; a read that
//!   overlaps [`Checks::range_movements`] binds none.
//! - **Phantom** (`Phantom`): nothing is read or held that no client wrote
//!   to that key, nor a value before its write was invoked, nor an
//!   acknowledged value under another timestamp than the one its write was
//!   acknowledged with (nor a failed one under two timestamps), nor a value
//!   held with an expiry its write did not ask for (or without one it
//!   did), nor a tombstone that no delete of the key can have stamped.
//! - **Divergence** (`Divergent`): after repair every replica of a key holds
//!   the same cell, or nothing where that cell is a tombstone or an expired
//!   value (garbage collection may have purged it on some replicas).
//! - **Clock bound** (`Reordered`, optional): of two acknowledged writes
//!   to a key, the one sent more than the bound after the other was
//!   acknowledged has the higher timestamp. The bound is how far apart two
//!   coordinators' clocks may be: every node refuses to coordinate writes
//!   while its clock (or the timestamps it issued) is further than
//!   `max_clock_offset` from the majority's, so it is twice that when
//!   nodes may be off in opposite directions (the simulation). Sound
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
//! make a read stale, and reads may return them (or, for a failed delete or
//! TTL write, find nothing because of them); the monotonic-read rule and
//! the TTL rule judge them once seen. A read that failed tells nothing.
//!
//! # Caveats
//! - Real time is the clients' clock, taken around each request: an
//!   operation's interval covers its whole life on the server, so an order
//!   by these times is an order the servers also saw.
//! - A read that found nothing is judged against every write that could
//!   have hidden the key, each on its own: one that no single write
//!   explains together with all its bounds passes if each bound has some
//!   explanation. A failed delete's timestamp is never learned (nothing
//!   names it), so its order comes from real time alone, and a failed delete
//!   that came back late (the `LateWrite` case for a delete) shows as a
//!   stale read, not as a late write.
//! - Garbage collection is not modelled beyond the final state: a purged
//!   tombstone reads as nothing, as it should; an older value that came
//!   back after a purge is caught by the rules above, not named as a GC
//!   fault.
//! - Linearizability is not checked here (Cassandra-style QUORUM does not
//!   give it: two concurrent reads may see an in-flight write in either
//!   order); lightweight transactions, which promise it, are judged by
//!   [`linearizable`], a checker for a compare-and-set register per key.

#![deny(missing_docs)]

mod check;
mod final_state;
mod history;
mod key;
pub mod linearizable;
mod order;
mod reads;
mod violation;
mod write_order;

#[cfg(test)]
mod check_tests;

pub use check::{CheckReport, Checks, ClockBound, check};
pub use history::{
    ClientId, Failure, FailureKind, FaultWindow, FinalKey, HeldCell, Level, Mutation, NodeId, Op,
    OpKind, ReadOutcome, Timestamp, Version, Write, WriteOutcome,
};
pub use violation::{Violation, ViolationKind};
