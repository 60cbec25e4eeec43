//! Per-keyspace replica maps, built on first use and kept while their ring
//! is current: the ring itself and, during a range movement, the pending
//! ring, or for a moment after one, the ring it replaced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringstore_placement::{ReplicaMap, ReplicationStrategy, Ring};
use ringstore_storage::KeyspaceId;

/// How many rings' maps are kept (the current one, the pending one, and the
/// one just replaced).
const RINGS_KEPT: usize = 3;

/// A cache of replica maps, one per (ring, keyspace, strategy).
#[derive(Default)]
pub struct ReplicaMaps {
    /// Held only to look up or insert, never across an await.
    cache: Mutex<Vec<RingMaps>>,
}

struct RingMaps {
    ring: Arc<Ring>,
    maps: HashMap<(KeyspaceId, ReplicationStrategy), Arc<ReplicaMap>>,
}

impl ReplicaMaps {
    /// The replica map of keyspace `id` with `strategy` on `ring`.
    pub fn replica_map(
        &self,
        ring: &Arc<Ring>,
        id: KeyspaceId,
        strategy: &ReplicationStrategy,
    ) -> Arc<ReplicaMap> {
        let mut cache = self.cache.lock().expect("placement cache lock");
        let index = match cache.iter().position(|r| Arc::ptr_eq(&r.ring, ring)) {
            Some(index) => index,
            None => {
                if cache.len() == RINGS_KEPT {
                    cache.remove(0);
                }
                cache.push(RingMaps {
                    ring: ring.clone(),
                    maps: HashMap::new(),
                });
                cache.len() - 1
            }
        };
        cache[index]
            .maps
            .entry((id, strategy.clone()))
            .or_insert_with(|| Arc::new(ReplicaMap::new(ring.clone(), strategy)))
            .clone()
    }
}
