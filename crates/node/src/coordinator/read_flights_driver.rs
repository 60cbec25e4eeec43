//! Running the coalesced reads of hot keys: a read joins its key's flight
//! ([`ReadFlights`](crate::coordinator::read_flights::ReadFlights)); the read that finds
//! none leads and spawns the task that runs the flight's rounds. See
//! `read_flights.rs` for the design. The flights and the counters come
//! from the coordinator's host ([`CoordinatorHost`]), which a round is
//! handed too.

use std::sync::Arc;

use ringstore_replication::{ConsistencyLevel, Joined};
use ringstore_storage::Cell;
use tokio::sync::oneshot;

use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::read_flights::{FlightKey, ReadFlights, Shared};
use crate::error::{CoordinatorError, NodeError, Result};
use crate::schema::KeyspaceDef;

/// Reads `key` at `level`, sharing the replica round with concurrent reads
/// of the same key and level (see the module docs); `round` runs one round.
pub(crate) async fn coalesced<H, R>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    level: ConsistencyLevel,
    round: R,
) -> Result<Option<Cell>>
where
    H: CoordinatorHost,
    R: AsyncRound<H>,
{
    let (sender, answer) = oneshot::channel();
    let flight = (keyspace.id, key, level);
    let joined = context.read_flights().lock().join(flight.clone(), sender);
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
        Joined::Queued => context.metrics().coalesced_read(),
    }
    answer
        .await
        .map_err(|_| CoordinatorError::Abandoned {
            replica: None,
            what: "read's replica round",
        })?
        .map_err(NodeError::from)
}

/// One replica round of a read: the coordinator's `read_unmeasured`, as a
/// trait so the flight task can be spawned with it.
pub(crate) trait AsyncRound<H>: Send + 'static {
    /// Reads `key` of `keyspace` at `level` once, on `context`.
    fn run(
        &self,
        context: Arc<H>,
        keyspace: KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> impl Future<Output = Result<Option<Cell>>> + Send;
}

/// Runs rounds for `flight` until one lands with nobody queued.
async fn fly<H: CoordinatorHost, R: AsyncRound<H>>(
    context: Arc<H>,
    keyspace: KeyspaceDef,
    flight: FlightKey,
    first: oneshot::Sender<Shared>,
    round: R,
) {
    // Should a round panic, the flight is removed and its queued reads fail
    // (their senders drop) rather than wait forever.
    struct Abandon<'a>(&'a ReadFlights, &'a FlightKey, bool);
    impl Drop for Abandon<'_> {
        fn drop(&mut self) {
            if self.2 {
                while self.0.lock().land(self.1).is_some() {}
            }
        }
    }
    let mut guard = Abandon(context.read_flights(), &flight, true);
    let mut batch = vec![first];
    loop {
        let (_, key, level) = &flight;
        let answer = round
            .run(context.clone(), keyspace.clone(), key.clone(), *level)
            .await
            .map_err(Arc::new);
        for waiter in batch {
            let _ = waiter.send(answer.clone());
        }
        match context.read_flights().lock().land(&flight) {
            Some(next) => batch = next,
            None => break,
        }
    }
    guard.2 = false;
}
