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
//! Until a keyspace has an estimate (its first ten answers after every
//! restart, and for a new keyspace: see `ReadLatency`'s provisional
//! estimate), a percentile setting speculates after a fixed delay instead,
//! half the read timeout, as Cassandra starts its estimate at half the read
//! timeout; and no estimate makes a read wait longer than that. Without the
//! fallback a replica that stopped answering in those first moments held
//! every read it was asked for up to the whole read timeout (the
//! whole-cluster simulation found reads timing out at the client that way).
//!
//! # Caveats
//! - One lock for all keyspaces: a few hundred nanoseconds per replica
//!   answer, shared by every read of the node.
//! - A dropped keyspace's estimator stays until the node restarts.
//! - A provisional estimate is not cached: each read computes a percentile
//!   of the samples so far (a few microseconds) until the first window
//!   completes.

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
    /// speculates; `None`: it does not. A percentile waits its estimate,
    /// at most `before_estimate`, and that without an estimate yet (see the
    /// module docs).
    pub fn speculation_delay(
        &self,
        keyspace: KeyspaceId,
        setting: SpeculativeRetry,
        before_estimate: Duration,
    ) -> Option<Duration> {
        setting.delay(|p| {
            let mut map = self
                .by_keyspace
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let estimate = map.get_mut(&keyspace).and_then(|l| l.estimate(now(), p));
            Some(estimate.map_or(before_estimate, |e| e.min(before_estimate)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_waits_the_fallback_until_it_has_an_estimate() {
        let latencies = ReadLatencies::default();
        let keyspace = KeyspaceId::random();
        let fallback = Duration::from_millis(2500);
        let p99 = SpeculativeRetry::Percentile(ringstore_replication::Percentile::P99);
        assert_eq!(
            latencies.speculation_delay(keyspace, p99, fallback),
            Some(fallback)
        );
        assert_eq!(
            latencies.speculation_delay(keyspace, SpeculativeRetry::None, fallback),
            None
        );
        let fixed = SpeculativeRetry::Fixed(Duration::from_millis(20));
        assert_eq!(
            latencies.speculation_delay(keyspace, fixed, fallback),
            Some(Duration::from_millis(20))
        );
    }

    #[test]
    fn a_percentile_follows_the_first_few_answers_and_never_waits_beyond_the_fallback() {
        let latencies = ReadLatencies::default();
        let fallback = Duration::from_millis(2500);
        let p99 = SpeculativeRetry::Percentile(ringstore_replication::Percentile::P99);
        let (quick, slow) = (KeyspaceId::random(), KeyspaceId::random());
        for _ in 0..10 {
            latencies.record(quick, Duration::from_millis(4));
            latencies.record(slow, Duration::from_secs(4));
        }
        let delay = latencies.speculation_delay(quick, p99, fallback).unwrap();
        assert!(
            delay.abs_diff(Duration::from_millis(4)) < Duration::from_micros(100),
            "{delay:?}"
        );
        assert_eq!(
            latencies.speculation_delay(slow, p99, fallback),
            Some(fallback)
        );
    }
}
