//! Replication: the coordinator's decisions, without the I/O.
//!
//! When a node coordinates a request for a key, this crate decides whom to
//! ask, how many answers to wait for, when the request has succeeded or
//! failed, and — for reads — what the answer is and which replicas need
//! repairing. It is pure and sans-IO: no sockets, clocks, timers or async
//! runtime. The node passes plain data in (replicas with their DC and
//! liveness, replies, "the timer fired", the time when that matters) and
//! carries out the effects that
//! come back (requests to send, repairs to write). Which cell wins a read
//! does not depend on the time; only what a client sees of it does
//! ([`ReadOutcome::visible_value`]).
//!
//! # The protocol, as Cassandra runs it
//! - A [`ConsistencyLevel`] becomes a [`Requirement`] for a keyspace's
//!   strategy and the coordinator's DC: how many answers, from which DCs
//!   (Cassandra's `blockFor`).
//! - **Writes** ([`plan_write`] → [`WritePlan`] → [`WriteTracker`]): sent to
//!   every live natural replica and, during a range movement, every live
//!   pending one; the requirement grows by one per pending replica that
//!   counts. Down replicas are listed for hints. The tracker reports
//!   [`WriteStatus::Satisfied`] or [`WriteStatus::Failed`] as soon as either
//!   is certain; at the node's deadline it yields a [`WriteTimeout`].
//! - **Reads** ([`plan_read`] → [`ReadPlan`] → [`ReadTracker`]): data from the
//!   closest live replica, [`Digest`]s from just enough others, spares in
//!   reserve. Matching digests finish the read; a mismatch triggers a data
//!   round whose answers are reconciled by last-write-wins
//!   ([`Cell::reconcile`](ringstore_cell::Cell::reconcile), a function of
//!   the cells alone, not of the coordinator's clock), with the winner to be
//!   written back to replicas that differ ([`ReadOutcome`]).
//! - **Range scans** ([`plan_read`] per piece → [`RangeReadTracker`] →
//!   [`merge_pages`]): every replica the level counts is asked for a page of
//!   its rows after a [`ScanPoint`]; pages that stop at their limit end at
//!   different rows, so only rows up to the smallest last row of those pages
//!   are final. Those are reconciled per key as point reads are, stale
//!   replicas get the winners, tombstones and expired cells are hidden (but
//!   win), and the merge says where the next page starts ([`PageEnd`]).
//! - **Speculative retry** ([`SpeculativeRetry`], Cassandra's
//!   `speculative_retry`): a read still waiting after a fixed delay or a
//!   percentile of its keyspace's recent replica latency ([`ReadLatency`])
//!   asks one spare replica more. The tracker decides; the node only arms
//!   a timer at [`ReadTracker::next_deadline`].
//! - **Hot keys** ([`Flights`]): concurrent reads of one key at one level
//!   on a coordinator share replica rounds; a read arriving during a round
//!   queues for the next one, never taking an answer from a round that
//!   began before it.
//! - **Coalesced replica requests** ([`PeerBatches`]): writes (or reads)
//!   bound for one peer while its few call slots are busy leave together in
//!   the next call, so the batch size follows the load and an idle node adds
//!   no delay.
//! - Not enough live replicas: [`Unavailable`], before anything is sent.
//!
//! # Invariants
//! - Quotas are counted per DC wherever the level is (`LOCAL_*` under
//!   NetworkTopologyStrategy, `EACH_QUORUM`): a surplus in one DC never makes
//!   up for a shortfall in another.
//! - Plans refuse exactly when the live replicas cannot meet the level, and a
//!   plan that succeeds can be satisfied by its own targets (property-tested
//!   against an oracle written from Cassandra's definitions).
//! - A read's winner is the `reconcile` fold of all data it received, and its
//!   repairs go exactly to the replicas known to differ from it.
//! - A paged scan returns every visible winner of its replicas' rows once,
//!   in `(token, key)` order, however the replicas' pages are cut
//!   (property-tested against the reconciled union of the replicas).
//! - Trackers are deterministic functions of the events fed to them;
//!   duplicate replies and replies from unknown hosts are ignored.
//!
//! # Caveats
//! - `LOCAL_*` levels with SimpleStrategy count replicas in every DC as
//!   local (the strategy ignores DCs); Cassandra still counts only the
//!   coordinator's DC, which differs only for multi-DC SimpleStrategy keyspaces.
//! - Speculative retry ([`SpeculativeRetry`]) asks one spare once per read;
//!   with no spare, slow replicas are replaced only when the node's round
//!   timer fires. No latency-aware replica ordering (no dynamic snitch).
//! - No `SERIAL`/`LOCAL_SERIAL` (no lightweight transactions), no
//!   `NODE_LOCAL`, no transient replicas.
//! - Scans ask every counted replica for full pages (no digests): a page
//!   costs its rows times the level's replica count in bandwidth.
//! - Read repair and hint storage are computed or requested here but carried
//!   out by the node.

#![deny(missing_docs)]

mod consistency;
mod digest;
mod error;
mod peer_batches;
mod plan;
mod range_page;
mod range_tracker;
mod read_latency;
mod read_repair;
mod read_tracker;
mod requirement;
mod single_flight;
mod speculative_retry;
mod write_tracker;

#[cfg(test)]
mod testkit;

pub use consistency::ConsistencyLevel;
pub use digest::Digest;
pub use error::{ReplicationError, Result, Unavailable};
pub use peer_batches::{Batch, BatchLimits, PeerBatches};
pub use plan::{ReadPlan, ReplicaCandidate, WritePlan, WriteTarget, plan_read, plan_write};
pub use range_page::{
    MergedPage, PageEnd, PageError, RangeRow, ReplicaPage, RowPosition, RowRepair, ScanPoint,
    check_page, merge_pages,
};
pub use range_tracker::{RangeReadAction, RangeReadTracker};
pub use read_latency::ReadLatency;
pub use read_repair::{ReadRepair, ReadRepairFailure, RepairAction};
pub use read_tracker::{ReadAction, ReadFailure, ReadOutcome, ReadTracker, Request};
pub use requirement::Requirement;
pub use single_flight::{Flights, Joined};
pub use speculative_retry::{MAX_FIXED_DELAY, Percentile, SpeculativeRetry};
pub use write_tracker::{WriteStatus, WriteTimeout, WriteTracker};
