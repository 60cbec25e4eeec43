//! The coordinator's read coalescing for hot keys: the node's flights (the
//! state, over `ringstore_replication::Flights`) and the error every read
//! of a round shares; `coalesced_reads.rs` runs the rounds.
//!
//! Every coordinated read of one key joins the key's flight (keyed by
//! keyspace, key and level). The read that finds none leads: a spawned task
//! runs the replica round, hands its answer to the reads of that round,
//! then runs one more round for all the reads that queued meanwhile, and so
//! on until a round lands with nobody queued. Rounds run in a task of their
//! own, not in the leading client's request, so a client that cancels
//! cannot strand the reads queued behind it. Each read waits on a oneshot
//! channel for its round's answer; errors are shared as their kind and
//! message (`NodeError` is not `Clone`).
//!
//! # Caveats
//! - A read of a key under contention waits for the round in flight before
//!   its own (at most two rounds); an uncontended read pays one task spawn
//!   and a map lookup under a short `std::sync::Mutex`.
//! - `ringstore_coordinator_requests_total` counts rounds, not the reads
//!   they served.

use std::sync::{Mutex, PoisonError};

use ringstore_replication::{ConsistencyLevel, Flights};
use ringstore_storage::{Cell, KeyspaceId};
use tokio::sync::oneshot;

use crate::error::NodeError;

/// What a flight is keyed by.
pub(crate) type FlightKey = (KeyspaceId, Vec<u8>, ConsistencyLevel);

/// A round's answer as every read of it gets it.
pub(crate) type Shared = std::result::Result<Option<Cell>, SharedError>;

/// An error a round ended with, in a form each of its reads can have: its
/// message, and a variant that keeps its gRPC code (a client told
/// `UNAVAILABLE` retries elsewhere; one told `INTERNAL` does not).
#[derive(Clone, Debug)]
pub(crate) enum SharedError {
    Timeout(String),
    Unavailable(String),
    InvalidArgument(String),
    KeyspaceNotFound(String),
    Other(String),
}

impl From<NodeError> for SharedError {
    fn from(error: NodeError) -> SharedError {
        match error {
            NodeError::KeyspaceNotFound(name) => SharedError::KeyspaceNotFound(name),
            error => match error.code() {
                tonic::Code::DeadlineExceeded => SharedError::Timeout(error.to_string()),
                tonic::Code::Unavailable => SharedError::Unavailable(error.to_string()),
                tonic::Code::InvalidArgument => SharedError::InvalidArgument(error.to_string()),
                _ => SharedError::Other(error.to_string()),
            },
        }
    }
}

impl From<SharedError> for NodeError {
    fn from(error: SharedError) -> NodeError {
        match error {
            SharedError::Timeout(m) => NodeError::Timeout(m),
            SharedError::Unavailable(m) => NodeError::Unavailable(m),
            SharedError::InvalidArgument(m) => NodeError::InvalidArgument(m),
            SharedError::KeyspaceNotFound(name) => NodeError::KeyspaceNotFound(name),
            SharedError::Other(m) => NodeError::Internal(m),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn through_a_flight(error: NodeError) -> NodeError {
        NodeError::from(SharedError::from(error))
    }

    #[test]
    fn a_shared_error_keeps_its_grpc_code() {
        for (error, code) in [
            (NodeError::ShuttingDown, tonic::Code::Unavailable),
            (
                NodeError::Unavailable("down".into()),
                tonic::Code::Unavailable,
            ),
            (
                NodeError::Timeout("slow".into()),
                tonic::Code::DeadlineExceeded,
            ),
            (
                NodeError::KeyspaceNotFound("ks".into()),
                tonic::Code::NotFound,
            ),
            (
                NodeError::InvalidArgument("bad".into()),
                tonic::Code::InvalidArgument,
            ),
            (NodeError::Internal("broken".into()), tonic::Code::Internal),
        ] {
            let message = error.to_string();
            let shared = through_a_flight(error);
            assert_eq!(shared.code(), code, "{message}");
            assert_eq!(shared.to_string(), message);
        }
    }
}
