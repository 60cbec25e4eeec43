//! Cluster views for unit tests: members with the racks, tokens, states
//! and metadata versions a test needs, and the view holding them.

use std::collections::BTreeMap;
use std::sync::Arc;

use ringstore_membership::{
    ClusterView, Generation, Liveness, MemberInfo, MetadataStamp, NodeMetadata, NodeState,
};
use ringstore_placement::{HostId, Ring, RingMember, Token};

/// Host `id`, up, in data center `dc1` on `rack`, with `tokens` in `state`,
/// at metadata version 1.
pub fn member(id: u128, rack: &str, tokens: Vec<Token>, state: NodeState) -> MemberInfo {
    let addr: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
    MemberInfo {
        metadata: Arc::new(NodeMetadata {
            keys: Default::default(),
            host_id: HostId::from_u128(id),
            stamp: MetadataStamp {
                generation: Generation(1),
                version: 1,
            },
            cluster_name: "c".into(),
            dc: "dc1".into(),
            rack: rack.into(),
            client_addr: addr,
            internode_addr: addr,
            gossip_addr: addr,
            tokens,
            state,
            load_bytes: 0,
            schema_version: uuid::Uuid::nil(),
            software_version: "t".into(),
            takeovers: Default::default(),
        }),
        liveness: Liveness::Up,
    }
}

/// `member` at metadata version `version`.
pub fn at_version(mut member: MemberInfo, version: u64) -> MemberInfo {
    Arc::make_mut(&mut member.metadata).stamp.version = version;
    member
}

/// The view of `local` holding `members`, its ring their `Normal` ones.
pub fn view(local: u128, members: Vec<MemberInfo>) -> ClusterView {
    let owners = members
        .iter()
        .filter(|m| m.metadata.state == NodeState::Normal)
        .map(|m| {
            RingMember::new(
                m.metadata.host_id,
                m.metadata.location(),
                m.metadata.tokens.clone(),
            )
        });
    ClusterView {
        removal_claims: Default::default(),
        local: HostId::from_u128(local),
        ring: Arc::new(Ring::new(0, owners).unwrap()),
        members: members
            .into_iter()
            .map(|m| (m.metadata.host_id, m))
            .collect(),
        joining: BTreeMap::new(),
        pending_ring: None,
        removed: Default::default(),
    }
}
