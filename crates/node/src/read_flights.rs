//! The coordinator's read coalescing for hot keys: the tokio side of
//! `ringstore_replication::Flights`.
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

use std::sync::{Arc, Mutex, PoisonError};

use ringstore_replication::{ConsistencyLevel, Flights, Joined};
use ringstore_storage::{Cell, KeyspaceId};
use tokio::sync::oneshot;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::schema::KeyspaceDef;

/// What a flight is keyed by.
type FlightKey = (KeyspaceId, Vec<u8>, ConsistencyLevel);

/// A round's answer as every read of it gets it.
type Shared = std::result::Result<Option<Cell>, SharedError>;

/// An error a round ended with, in a form each of its reads can have.
#[derive(Clone, Debug)]
enum SharedError {
    Timeout(String),
    Unavailable(String),
    InvalidArgument(String),
    Other(String),
}

impl From<NodeError> for SharedError {
    fn from(error: NodeError) -> SharedError {
        match error {
            NodeError::Timeout(m) => SharedError::Timeout(m),
            NodeError::Unavailable(m) => SharedError::Unavailable(m),
            NodeError::InvalidArgument(m) => SharedError::InvalidArgument(m),
            other => SharedError::Other(other.to_string()),
        }
    }
}

impl From<SharedError> for NodeError {
    fn from(error: SharedError) -> NodeError {
        match error {
            SharedError::Timeout(m) => NodeError::Timeout(m),
            SharedError::Unavailable(m) => NodeError::Unavailable(m),
            SharedError::InvalidArgument(m) => NodeError::InvalidArgument(m),
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
    fn lock(&self) -> std::sync::MutexGuard<'_, Flights<FlightKey, oneshot::Sender<Shared>>> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reads `key` at `level`, sharing the replica round with concurrent reads
/// of the same key and level (see the module docs); `round` runs one round.
pub async fn coalesced<R>(
    context: &Arc<NodeContext>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    level: ConsistencyLevel,
    round: R,
) -> Result<Option<Cell>>
where
    R: AsyncRound,
{
    let (sender, answer) = oneshot::channel();
    let flight = (keyspace.id, key, level);
    let joined = context.read_flights.lock().join(flight.clone(), sender);
    match joined {
        Joined::Lead(sender) => {
            tokio::spawn(fly(
                context.clone(),
                keyspace.clone(),
                flight,
                sender,
                round,
            ));
        }
        Joined::Queued => context.metrics.coalesced_read(),
    }
    answer
        .await
        .map_err(|_| NodeError::Internal("the read's replica round was abandoned".into()))?
        .map_err(NodeError::from)
}

/// One replica round of a read: the coordinator's `read_unmeasured`, as a
/// trait so the flight task can be spawned with it.
pub trait AsyncRound: Send + 'static {
    /// Reads `key` of `keyspace` at `level` once.
    fn run(
        &self,
        context: Arc<NodeContext>,
        keyspace: KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> impl Future<Output = Result<Option<Cell>>> + Send;
}

/// Runs rounds for `flight` until one lands with nobody queued.
async fn fly<R: AsyncRound>(
    context: Arc<NodeContext>,
    keyspace: KeyspaceDef,
    flight: FlightKey,
    first: oneshot::Sender<Shared>,
    round: R,
) {
    // Should a round panic, the flight is removed and its queued reads fail
    // (their senders drop) rather than wait forever.
    struct Abandon<'a>(&'a NodeContext, &'a FlightKey, bool);
    impl Drop for Abandon<'_> {
        fn drop(&mut self) {
            if self.2 {
                while self.0.read_flights.lock().land(self.1).is_some() {}
            }
        }
    }
    let mut guard = Abandon(&context, &flight, true);
    let mut batch = vec![first];
    loop {
        let (_, key, level) = &flight;
        let answer = round
            .run(context.clone(), keyspace.clone(), key.clone(), *level)
            .await
            .map_err(SharedError::from);
        for waiter in batch {
            let _ = waiter.send(answer.clone());
        }
        match context.read_flights.lock().land(&flight) {
            Some(next) => batch = next,
            None => break,
        }
    }
    guard.2 = false;
}
