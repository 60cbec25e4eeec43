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
//!   departed ones' entries too, to know they left.
//! - The record starts with a format byte, then each member's encoded
//!   metadata behind its length; a record that does not decode is an error
//!   at start, never a silent empty ring.

use std::net::SocketAddr;
use std::sync::Arc;

use ringstore_membership::{ClusterView, NodeMetadata};
use ringstore_storage::Store;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};

/// The key of the record in the storage's system tree.
const KNOWN_MEMBERS_KEY: &str = "known_members";
/// The first byte of the record: its format version.
const FORMAT: u8 = 1;

/// The members saved by an earlier run (none for a fresh node).
pub fn load(store: &Store) -> Result<Vec<NodeMetadata>> {
    let Some(bytes) = store.meta_get(KNOWN_MEMBERS_KEY)? else {
        return Ok(Vec::new());
    };
    let corrupt = || NodeError::corrupt("the saved metadata of the known members");
    let (format, mut rest) = bytes.split_first().ok_or_else(corrupt)?;
    if *format != FORMAT {
        return Err(corrupt());
    }
    let mut members = Vec::new();
    while !rest.is_empty() {
        let (length, body) = rest.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let length = u32::from_le_bytes(*length) as usize;
        let encoded = body.get(..length).ok_or_else(corrupt)?;
        members.push(NodeMetadata::decode(encoded).map_err(|_| corrupt())?);
        rest = &body[length..];
    }
    Ok(members)
}

/// The gossip addresses of `members`, to announce to.
pub fn gossip_addresses(members: &[NodeMetadata]) -> Vec<SocketAddr> {
    members.iter().map(|m| m.gossip_addr).collect()
}

/// Saves `members` durably.
async fn save(store: &Store, members: &[Arc<NodeMetadata>]) -> Result<()> {
    let mut bytes = vec![FORMAT];
    for member in members {
        let encoded = member.encode();
        let length = u32::try_from(encoded.len()).map_err(|_| {
            NodeError::Internal(format!("member {} encodes too large", member.host_id))
        })?;
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(&encoded);
    }
    store.meta_put(KNOWN_MEMBERS_KEY, &bytes).await?;
    Ok(())
}

/// The metadata of `view`'s other members.
fn members_of(view: &ClusterView) -> Vec<Arc<NodeMetadata>> {
    view.members
        .iter()
        .filter(|(host, _)| **host != view.local)
        .map(|(_, member)| member.metadata.clone())
        .collect()
}

/// Saves the other members' metadata whenever it changes; runs until the
/// node stops.
pub async fn keep_saving(context: Arc<NodeContext>) {
    let mut views = context.membership.watch_view();
    let mut saved: Vec<Arc<NodeMetadata>> = Vec::new();
    loop {
        let members = members_of(&views.borrow_and_update());
        if members != saved {
            match save(&context.store, &members).await {
                Ok(()) => saved = members,
                Err(error) => tracing::warn!(%error, "saving the known members' metadata"),
            }
        }
        if views.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_membership::{MetadataStamp, NodeState, Takeovers};
    use ringstore_placement::{HostId, Token};
    use ringstore_storage::{Durability, MemoryEngine};

    fn member(host: u128) -> NodeMetadata {
        NodeMetadata {
            host_id: HostId::from_u128(host),
            stamp: MetadataStamp {
                generation: ringstore_membership::Generation(3),
                version: 9,
            },
            cluster_name: "c".into(),
            dc: "dc1".into(),
            rack: "rack1".into(),
            client_addr: "10.0.0.2:7100".parse().unwrap(),
            internode_addr: "10.0.0.2:7101".parse().unwrap(),
            gossip_addr: format!("10.0.0.{host}:7000").parse().unwrap(),
            tokens: vec![Token(host as i64 * 1000)],
            state: NodeState::Normal,
            load_bytes: 0,
            schema_version: uuid::Uuid::nil(),
            software_version: "test".into(),
            takeovers: Takeovers::default(),
        }
    }

    #[tokio::test]
    async fn saved_members_load_back_and_a_garbled_record_is_an_error() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        assert!(
            load(&store).unwrap().is_empty(),
            "a fresh node knows nobody"
        );
        let members = vec![Arc::new(member(2)), Arc::new(member(3))];
        save(&store, &members).await.unwrap();
        let loaded = load(&store).unwrap();
        assert_eq!(loaded, [member(2), member(3)]);
        assert_eq!(
            gossip_addresses(&loaded),
            [
                "10.0.0.2:7000".parse().unwrap(),
                "10.0.0.3:7000".parse().unwrap()
            ]
        );
        let mut truncated = vec![FORMAT, 200, 0, 0, 0];
        truncated.extend_from_slice(&member(2).encode());
        for garbled in [&truncated[..], b"\x01\x02\x00", b"\x02"] {
            store.meta_put(KNOWN_MEMBERS_KEY, garbled).await.unwrap();
            assert!(load(&store).is_err(), "{garbled:?}");
        }
    }
}
