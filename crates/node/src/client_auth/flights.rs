//! Password checks in flight, by credentials: requests arriving together
//! with one user's name and password (an application opening with many
//! requests at once) wait for one check instead of each taking a check
//! slot and a token of its source's limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ringstore_client_auth::UserRecord;
use tokio::sync::watch;
use tonic::Status;

/// How a check ended, for the requests that waited for it.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// The password verified against this record.
    Verified(UserRecord),
    /// An unknown user or a wrong password.
    Failed,
    /// No verdict: the record could not be read.
    Unavailable(Status),
}

/// A check's key: a keyed digest of the name and password (never the
/// password itself).
pub type FlightKey = [u8; 32];

type Waiters = watch::Receiver<Option<Verdict>>;

/// The checks in flight.
#[derive(Default)]
pub struct Flights {
    /// Held for inserts and removals only.
    flights: Arc<Mutex<HashMap<FlightKey, Waiters>>>,
}

/// What a request does about its check.
pub enum Flight {
    /// Make the check, and [`Lead::finish`] it.
    Lead(Lead),
    /// Wait for the check in flight with these credentials.
    Follow(Waiters),
}

/// The request making a check. Dropped without [`Lead::finish`] (its
/// request cancelled), the followers find no verdict and lead again.
pub struct Lead {
    key: FlightKey,
    flights: Arc<Mutex<HashMap<FlightKey, Waiters>>>,
    sender: watch::Sender<Option<Verdict>>,
}

impl Flights {
    /// Leads the check of `key`, or follows the one in flight.
    pub fn join(&self, key: FlightKey) -> Flight {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(waiters) = flights.get(&key) {
            return Flight::Follow(waiters.clone());
        }
        let (sender, waiters) = watch::channel(None);
        flights.insert(key, waiters);
        Flight::Lead(Lead {
            key,
            flights: self.flights.clone(),
            sender,
        })
    }

    /// Checks in flight.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Lead {
    /// Tells the followers how the check ended.
    pub fn finish(self, verdict: Verdict) {
        let _ = self.sender.send(Some(verdict));
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// The verdict of the check `waiters` follow; `None` if its leader went
/// away without one (lead again).
pub async fn verdict(mut waiters: Waiters) -> Option<Verdict> {
    waiters
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|verdict| verdict.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_get_the_leaders_verdict_and_lead_again_if_it_leaves() {
        let flights = Flights::default();
        let Flight::Lead(lead) = flights.join([1; 32]) else {
            panic!("the first leads");
        };
        let Flight::Follow(waiters) = flights.join([1; 32]) else {
            panic!("the second follows");
        };
        assert!(matches!(flights.join([2; 32]), Flight::Lead(_)));
        lead.finish(Verdict::Failed);
        assert!(matches!(verdict(waiters).await, Some(Verdict::Failed)));
        assert_eq!(flights.len(), 0, "a finished check leaves");

        let Flight::Lead(lead) = flights.join([1; 32]) else {
            panic!("a new check leads");
        };
        let Flight::Follow(waiters) = flights.join([1; 32]) else {
            panic!("follows");
        };
        drop(lead);
        assert!(verdict(waiters).await.is_none());
        assert!(matches!(flights.join([1; 32]), Flight::Lead(_)));
    }
}
