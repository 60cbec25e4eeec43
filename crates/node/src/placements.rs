//! Per-keyspace replica maps for the current ring, built on first use and
//! kept until the ring changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringstore_placement::{ReplicaMap, ReplicationStrategy, Ring};
use ringstore_storage::KeyspaceId;

/// A cache of replica maps, one per (keyspace, strategy), for one ring at a time.
#[derive(Default)]
pub struct Placements {
    /// Held only to look up or insert, never across an await.
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    ring: Option<Arc<Ring>>,
    maps: HashMap<(KeyspaceId, ReplicationStrategy), Arc<ReplicaMap>>,
}

impl Placements {
    /// The replica map of keyspace `id` with `strategy` on `ring`.
    pub fn replica_map(
        &self,
        ring: &Arc<Ring>,
        id: KeyspaceId,
        strategy: &ReplicationStrategy,
    ) -> Arc<ReplicaMap> {
        let mut cache = self.cache.lock().expect("placement cache lock");
        if !cache.ring.as_ref().is_some_and(|r| Arc::ptr_eq(r, ring)) {
            cache.ring = Some(ring.clone());
            cache.maps.clear();
        }
        cache
            .maps
            .entry((id, strategy.clone()))
            .or_insert_with(|| Arc::new(ReplicaMap::new(ring.clone(), strategy)))
            .clone()
    }
}
