//! Keyspace sizes on this node (keys, bytes, tombstones), from a scan of
//! each keyspace's cells, kept briefly so frequent scrapes do not rescan.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ringstore_metrics::KeyspaceSample;
use ringstore_placement::{Token, TokenRange};
use ringstore_storage::{KeyspaceId, Store};

use crate::error::{NodeError, Result};

/// How long a scan's result serves scrapes.
pub const SCRAPE_MAX_AGE: Duration = Duration::from_secs(10);

/// The latest scan of every keyspace, with when it was made.
#[derive(Default)]
pub struct KeyspaceSizes {
    latest: Mutex<Option<(Instant, Vec<KeyspaceSample>)>>,
}

impl KeyspaceSizes {
    /// The sizes of `keyspaces` (name, id) in `store`, rescanned unless the
    /// latest scan of the same keyspaces is younger than `max_age` (zero:
    /// always rescan). The scan runs on the blocking pool.
    pub async fn get(
        &self,
        store: &Store,
        keyspaces: Vec<(String, KeyspaceId)>,
        max_age: Duration,
    ) -> Result<Vec<KeyspaceSample>> {
        {
            let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, samples)) = &*latest
                && at.elapsed() < max_age
                && samples
                    .iter()
                    .map(|s| &s.name)
                    .eq(keyspaces.iter().map(|k| &k.0))
            {
                return Ok(samples.clone());
            }
        }
        let store = store.clone();
        let samples = ringstore_storage::offload::spawn_blocking(move || {
            keyspaces
                .into_iter()
                .map(|(name, id)| scan(&store, name, id))
                .collect::<Result<Vec<_>>>()
        })
        .await
        .map_err(NodeError::task("the keyspace scan"))??;
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), samples.clone()));
        Ok(samples)
    }
}

/// Counts keyspace `id`'s cells: keys, bytes of keys and encoded cells, tombstones.
fn scan(store: &Store, name: String, id: KeyspaceId) -> Result<KeyspaceSample> {
    let mut sample = KeyspaceSample {
        name,
        ..KeyspaceSample::default()
    };
    let whole_ring = TokenRange::new(Token::MIN, Token::MIN);
    for entry in store.scan(id, whole_ring)? {
        let (_, key, cell) = entry?;
        sample.keys += 1;
        sample.bytes += (key.len() + cell.encode().len()) as u64;
        sample.tombstones += u64::from(cell.is_tombstone());
    }
    Ok(sample)
}
