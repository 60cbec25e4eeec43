//! The coordinator's read coalescing for hot keys: the node's flights (the
//! state, over `ringstore_replication::Flights`) and the error every read
//! of a round shares; `read_flights_driver.rs` runs the rounds.
//!
//! Every coordinated read of one key joins the key's flight (keyed by
//! keyspace, key and level). The read that finds none leads: a spawned task
//! runs the replica round, hands its answer to the reads of that round,
//! then runs one more round for all the reads that queued meanwhile, and so
//! on until a round lands with nobody queued. Rounds run in a task of their
//! own, not in the leading client's request, so a client that cancels
//! cannot strand the reads queued behind it. Each read waits on a oneshot
//! channel for its round's answer; errors are shared as an `Arc<NodeError>`.
//!
//! # Caveats
//! - A read of a key under contention waits for the round in flight before
//!   its own (at most two rounds); an uncontended read pays one task spawn
//!   and a map lookup under a short `std::sync::Mutex`.
//! - `ringstore_coordinator_requests_total` counts rounds, not the reads
//!   they served.

use std::sync::{Arc, Mutex, PoisonError};

use ringstore_replication::{ConsistencyLevel, Flights};
use ringstore_storage::{Cell, KeyspaceId};
use tokio::sync::oneshot;

use crate::error::NodeError;

/// What a flight is keyed by.
pub(crate) type FlightKey = (KeyspaceId, Vec<u8>, ConsistencyLevel);

/// A round's answer as every read of it gets it.
pub(crate) type Shared = std::result::Result<Option<Cell>, Arc<NodeError>>;

/// The node's read flights. See the module docs.
#[derive(Default)]
pub struct ReadFlights {
    flights: Mutex<Flights<FlightKey, oneshot::Sender<Shared>>>,
}

impl ReadFlights {
    pub(crate) fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, Flights<FlightKey, oneshot::Sender<Shared>>> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
