//! Range size estimates for movement plans.
//!
//! # The estimator
//! A replica estimates the bytes ([`entry_bytes`]) and keys of a token range
//! of a keyspace by scanning it in token order: a range of at most
//! [`SAMPLE_KEYS`] keys is counted exactly; a bigger one is sampled — the
//! first `SAMPLE_KEYS` keys cover a measurable part of the range's token
//! space, and since Murmur3 spreads keys uniformly over the token space the
//! range holds about `sampled / covered_fraction`. The cost is bounded per
//! range, and a plan asks each range's source replica, so the estimate is of
//! the very data that would be streamed.

use ringstore_placement::TokenRange;
use ringstore_storage::{KeyspaceId, Store};

use crate::chunk::entry_bytes;
use crate::error::{Result, StreamingError};

/// The keys counted exactly per range before extrapolating.
pub const SAMPLE_KEYS: u64 = 2_000;

/// A range's estimated size.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RangeEstimate {
    /// Bytes, as streaming counts them.
    pub bytes: u64,
    /// Keys (cells, tombstones included).
    pub keys: u64,
}

/// The estimated sizes of `ranges` of `keyspace` in `store`, scanned on the
/// blocking pool (sled may block on I/O).
pub async fn estimate_ranges(
    store: &Store,
    keyspace: KeyspaceId,
    ranges: Vec<TokenRange>,
) -> Result<Vec<RangeEstimate>> {
    let store = store.clone();
    ringstore_storage::offload::spawn_blocking(move || {
        ranges
            .into_iter()
            .map(|range| estimate_range(&store, keyspace, range))
            .collect()
    })
    .await
    .map_err(|source| StreamingError::Task {
        what: "estimating range sizes",
        source,
    })?
}

/// The estimated size of `range` of `keyspace` in `store` (see the module
/// docs). Blocking: call it off the async workers.
pub fn estimate_range(
    store: &Store,
    keyspace: KeyspaceId,
    range: TokenRange,
) -> Result<RangeEstimate> {
    let mut bytes = 0u64;
    let mut keys = 0u64;
    for entry in store.scan(keyspace, range)? {
        let (token, key, cell) = match entry {
            Ok(row) => row,
            // An estimate: a cell that does not read back (counted and
            // logged by the store) is left out.
            Err(error) if error.is_damaged_entry() => continue,
            Err(error) => return Err(error.into()),
        };
        bytes += entry_bytes(&key, &cell);
        keys += 1;
        if keys >= SAMPLE_KEYS {
            let covered = TokenRange::new(range.start, token).fraction();
            let whole = range.fraction();
            if covered <= 0.0 || covered >= whole {
                break;
            }
            let scale = whole / covered;
            return Ok(RangeEstimate {
                bytes: (bytes as f64 * scale) as u64,
                keys: (keys as f64 * scale) as u64,
            });
        }
    }
    Ok(RangeEstimate { bytes, keys })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::{Murmur3Partitioner, Token};
    use ringstore_storage::{Cell, Durability, MemoryEngine, Timestamp};
    use std::sync::Arc;

    #[tokio::test]
    async fn small_ranges_are_exact_and_big_ones_close() {
        let store = Store::open(
            Arc::new(MemoryEngine::new()),
            Durability::Periodic {
                interval: std::time::Duration::from_secs(60),
            },
        )
        .unwrap();
        let ks = KeyspaceId::random();
        let mut writes = Vec::new();
        for i in 0..20_000u32 {
            let key = format!("key-{i}").into_bytes();
            writes.push((ks, key, Cell::live(Timestamp(1), vec![0; 100])));
        }
        store.apply_many(&writes).await.unwrap();
        let exact = |range: TokenRange| -> u64 {
            writes
                .iter()
                .filter(|(_, k, _)| range.contains(Murmur3Partitioner::token(k).unwrap()))
                .map(|(_, k, c)| entry_bytes(k, c))
                .sum()
        };
        let small = TokenRange::new(Token(0), Token(i64::MAX / 50));
        assert_eq!(
            estimate_range(&store, ks, small).unwrap().bytes,
            exact(small)
        );
        let big = TokenRange::new(Token(i64::MIN / 2), Token(i64::MAX / 2));
        let estimate = estimate_range(&store, ks, big).unwrap().bytes as f64;
        let truth = exact(big) as f64;
        assert!(
            (estimate - truth).abs() / truth < 0.1,
            "{estimate} vs {truth}"
        );
    }
}
