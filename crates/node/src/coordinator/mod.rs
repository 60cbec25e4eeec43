//! The coordinator: any node runs a client's read or write against the key's
//! replicas at the requested consistency level.
//!
//! Writes go to every live replica at once, each send in its own task so a
//! write keeps reaching every replica after the client has its answer; the
//! coordinator answers when the level's acks are in (or with `UNAVAILABLE`
//! before sending anything, or `DEADLINE_EXCEEDED` after the write timeout,
//! which is indeterminate). Hints, for replicas known down or that failed,
//! are stored by tasks too, so a client that cancels cannot cut them short,
//! and a hint that cannot be stored never fails a write whose level was met.
//! A write's natural and pending replicas come from one snapshot of the
//! cluster view, so a ring switch between two reads of it cannot drop a
//! pending replica. Reads ask the closest replica for data and the
//! next ones for digests, top up from spare replicas when one fails or is
//! slow, and on a digest mismatch fetch full data, reconcile (last write
//! wins) and repair the stale replicas before answering (blocking read
//! repair, as Cassandra 4). A read still waiting after its keyspace's
//! `speculative_retry` delay (fixed, or a percentile of the keyspace's
//! recent replica latency from `read_latencies`) asks one spare more: the
//! tracker decides at its `next_deadline`, this module only arms a timer
//! there and counts the retries. Concurrent reads of one key at one level
//! share replica rounds (`read_flights`: a read arriving during a round
//! queues for the next, so none is answered from a round older than it).
//! A replica whose own copy of the cell does not read back (its answer is
//! `DATA_LOSS`, or this node's store reports corruption; `local_reads`) is
//! no unavailable replica: the tracker reads another one in its place, at
//! every level, and its read repair writes the winner to it, replacing the
//! damaged copy (`ReadTracker::on_damaged`).
//! The bookkeeping is the pure state machines
//! of `ringstore_replication`; this module only moves messages.
//!
//! What it needs of the node (its store, view, queues, clock, metrics,
//! hints, …) comes from a [`CoordinatorHost`]; its functions are generic
//! over it, so the per-request path makes no `dyn` call.
//!
//! # Layout
//! - [`write`] and [`read`]: the two flows (read repair, which writes, is
//!   the read's);
//! - [`cas`]: lightweight transactions (compare-and-set, serial reads) by
//!   per-key Paxos;
//! - [`replicas`]: which replicas a key has on the view's rings;
//! - [`peer_calls`]: the calls to other replicas, coalesced per peer;
//! - [`read_flights`] and [`read_flights_driver`]: concurrent reads of one
//!   key sharing replica rounds;
//! - [`local_reads`]: this node's own copy, read as a replica's;
//! - [`read_latencies`]: the replica latencies `speculative_retry` uses;
//! - [`host`]: what the coordinator needs of the node.
//!
//! A queue or a table of shared work and the task that drives it are two
//! files: `<name>.rs` holds the state (pure, under a short lock) and
//! `<name>_driver.rs` the async code that moves it.

use std::time::Instant;

use ringstore_metrics::CoordinatorOp;

use crate::error::Result;

pub mod cas;
pub(crate) mod host;
pub(crate) mod local_reads;
pub mod peer_calls;
mod read;
pub mod read_flights;
mod read_flights_driver;
pub mod read_latencies;
mod replicas;
mod write;

pub(crate) use host::CoordinatorHost;
pub(crate) use read::read;
pub(crate) use write::write;

/// Records a coordinated read or write that began at `started` and ended
/// with `result`: its latency, and whether it was unavailable or timed out.
fn measured<T>(
    context: &impl CoordinatorHost,
    op: CoordinatorOp,
    started: Instant,
    result: &Result<T>,
) {
    let metrics = context.metrics();
    metrics.coordinated(op, started.elapsed());
    if let Err(error) = result {
        match error.code() {
            tonic::Code::Unavailable => metrics.unavailable(op),
            tonic::Code::DeadlineExceeded => metrics.timed_out(op),
            _ => {}
        }
    }
}
