//! The metadata of the members this node has seen — their tokens, state,
//! data center, rack and addresses — saved so that a restarted node knows
//! the whole ring from its first moment and announces itself to them (as
//! Cassandra keeps its peers in `system.peers`).
//!
//! # Why
//! A restarted node comes back with a new generation and learns the others
//! through gossip, a few members at a time. Until then its ring would hold
//! only part of the cluster: a write it coordinated would go to the
//! replicas of that partial ring, be acknowledged by them, and be missed by
//! every later read of the true replicas. The whole-cluster simulation
//! found exactly that (a `QUORUM` write acknowledged 5 ms after a restart,
//! then a stale `QUORUM` read). With the saved metadata the ring is whole
//! at once, every other member down until gossip finds it up (so requests
//! fail `UNAVAILABLE` rather than go astray), and gossip replaces each copy
//! with any newer one. Announcing to the saved members also spares a seed
//! whose only seed is itself the wait for the others' periodic announce to
//! down members (every 2 s) before it rejoins.
//!
//! # Invariants
//! - Every other member is saved, whatever its state: the ring needs the
//!   departed ones' entries too, to know they left. Each is saved as the
//!   member signed it, with the claims this node had accepted (see
//!   `ringstore_membership::claims`), so a restart judges nothing anew.
//! - The format is `ringstore_membership::Remembrance`'s (older records are
//!   still read); a record that does not decode is an error at start,
//!   never a silent empty ring.
//!
//! It needs no host: it is handed the gossip agent and the store it saves
//! to, which is all it uses of the node.

use std::net::SocketAddr;

use ringstore_membership::{MembershipHandle, Remembrance};
use ringstore_storage::Store;

use crate::error::{NodeError, Result};

/// The key of the record in the storage's system tree.
const KNOWN_MEMBERS_KEY: &str = "known_members";

/// What an earlier run saved (nothing for a fresh node).
pub fn load(store: &Store) -> Result<Remembrance> {
    let Some(bytes) = store.meta_get(KNOWN_MEMBERS_KEY)? else {
        return Ok(Remembrance::default());
    };
    Remembrance::decode(&bytes)
        .map_err(|_| NodeError::corrupt("the saved metadata of the known members"))
}

/// The gossip addresses of the remembered members, to announce to.
pub fn gossip_addresses(memory: &Remembrance) -> Vec<SocketAddr> {
    memory
        .records
        .iter()
        .map(|r| r.metadata.gossip_addr)
        .collect()
}

/// Saves `memory` durably.
async fn save(store: &Store, memory: &Remembrance) -> Result<()> {
    store.meta_put(KNOWN_MEMBERS_KEY, &memory.encode()).await?;
    Ok(())
}

/// Saves what `membership` remembers to `store` whenever the view
/// changes; runs until the node stops.
pub async fn keep_saving(membership: MembershipHandle, store: Store) {
    let mut views = membership.watch_view();
    let mut saved = Remembrance::default();
    loop {
        views.borrow_and_update();
        match membership.remembrance().await {
            Ok(memory) if memory != saved => match save(&store, &memory).await {
                Ok(()) => saved = memory,
                Err(error) => tracing::warn!(%error, "saving the known members' metadata"),
            },
            Ok(_) => {}
            Err(_) => return,
        }
        if views.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_identity::NodeKeys;
    use ringstore_membership::{MetadataStamp, NodeMetadata, NodeState, Takeovers};
    use ringstore_placement::Token;
    use ringstore_storage::{Durability, MemoryEngine};
    use std::sync::Arc;

    fn member(n: u64) -> ringstore_membership::SignedMetadata {
        let keys = NodeKeys::for_test(n);
        NodeMetadata {
            host_id: keys.host_id(),
            keys: keys.public(),
            stamp: MetadataStamp {
                generation: ringstore_membership::Generation(3),
                version: 9,
            },
            cluster_name: "c".into(),
            dc: "dc1".into(),
            rack: "rack1".into(),
            client_addr: "10.0.0.2:7100".parse().unwrap(),
            internode_addr: "10.0.0.2:7101".parse().unwrap(),
            gossip_addr: format!("10.0.0.{n}:7000").parse().unwrap(),
            tokens: vec![Token(n as i64 * 1000)],
            state: NodeState::Normal,
            load_bytes: 0,
            schema_version: uuid::Uuid::nil(),
            software_version: "test".into(),
            takeovers: Takeovers::default(),
        }
        .sign(&keys)
    }

    #[tokio::test]
    async fn saved_members_load_back_and_a_garbled_record_is_an_error() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        assert!(
            load(&store).unwrap().records.is_empty(),
            "a fresh node knows nobody"
        );
        let memory = Remembrance {
            records: vec![member(2), member(3)],
            claims: Vec::new(),
        };
        save(&store, &memory).await.unwrap();
        let loaded = load(&store).unwrap();
        assert_eq!(loaded, memory);
        assert_eq!(
            gossip_addresses(&loaded),
            [
                "10.0.0.2:7000".parse().unwrap(),
                "10.0.0.3:7000".parse().unwrap()
            ]
        );
        let mut truncated = memory.encode();
        truncated.truncate(truncated.len() / 2);
        for garbled in [&truncated[..], b"\x01\x02\x00", b"\x02"] {
            store.meta_put(KNOWN_MEMBERS_KEY, garbled).await.unwrap();
            assert!(load(&store).is_err(), "{garbled:?}");
        }
    }
}
