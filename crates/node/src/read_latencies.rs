//! Each keyspace's recent replica read latency, which its reads' percentile
//! speculative retry (`speculative_retry = p99`) waits for.
//!
//! The coordinator records every replica answer that arrives while its read
//! still waits, and asks for the delay when a read starts. The estimator of
//! each keyspace is `ringstore_replication::ReadLatency` (windows of an HDR
//! histogram); this holder only keeps one per keyspace behind a short
//! `std::sync::Mutex` (a record or a cached lookup: never held across an
//! `.await`). Time comes from tokio's clock, so paused-time tests drive it.
//!
//! # Caveats
//! - One lock for all keyspaces: a few hundred nanoseconds per replica
//!   answer, shared by every read of the node.
//! - A dropped keyspace's estimator stays until the node restarts.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringstore_replication::{ReadLatency, SpeculativeRetry};
use ringstore_storage::KeyspaceId;

/// Every keyspace's recent replica read latency. See the module docs.
#[derive(Default)]
pub struct ReadLatencies {
    by_keyspace: Mutex<HashMap<KeyspaceId, ReadLatency>>,
}

/// The node's monotonic time as the replication crate takes it (tokio's, so
/// paused in tests).
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl ReadLatencies {
    /// A replica of `keyspace` answered a read after `latency`.
    pub fn record(&self, keyspace: KeyspaceId, latency: Duration) {
        let mut map = self
            .by_keyspace
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.entry(keyspace).or_default().record(now(), latency);
    }

    /// How long a read of `keyspace` with `setting` waits before it
    /// speculates; `None`: it does not.
    pub fn speculation_delay(
        &self,
        keyspace: KeyspaceId,
        setting: SpeculativeRetry,
    ) -> Option<Duration> {
        setting.delay(|p| {
            let mut map = self
                .by_keyspace
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            map.get_mut(&keyspace)?.estimate(now(), p)
        })
    }
}
