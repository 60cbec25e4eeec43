//! What a node tells the client about the cluster, parsed into types: the
//! members with their tokens and locations (`Admin.Ring`) and the keyspaces
//! with their replication (`Schema.ListKeyspaces`).

use std::net::SocketAddr;

use ringstore_placement::{HostId, Location, ReplicationStrategy, Token};
use ringstore_proto::v1 as pb;

use crate::error::{ClientError, Result};

/// A member's place in the ring's life, as gossip reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// Bootstrapping: coordinates, but owns no range yet.
    Joining,
    /// Owns its tokens.
    Normal,
    /// Decommissioning: still owns its tokens until it has left.
    Leaving,
}

impl NodeState {
    /// Whether the member's tokens are in the ring (as the nodes build it:
    /// `Normal` and `Leaving` members).
    pub fn owns_tokens(self) -> bool {
        matches!(self, NodeState::Normal | NodeState::Leaving)
    }
}

/// One member of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its host id.
    pub host: HostId,
    /// The client address it advertises; the client dials it.
    pub address: SocketAddr,
    /// Its data center and rack.
    pub location: Location,
    /// Its state.
    pub state: NodeState,
    /// Whether the answering node's failure detector thinks it is up.
    pub up: bool,
    /// Its tokens (none while joining without tokens chosen).
    pub tokens: Vec<Token>,
}

/// A keyspace and how it places replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyspace {
    /// Its name.
    pub name: String,
    /// Its replication strategy.
    pub strategy: ReplicationStrategy,
}

/// The cluster as one node described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Every member but those that left or were removed.
    pub nodes: Vec<Node>,
    /// Every keyspace.
    pub keyspaces: Vec<Keyspace>,
    /// The checksum of the answering node's ring (members, locations,
    /// tokens), to check the ring rebuilt from `nodes` against.
    pub ring_checksum: u64,
}

impl Topology {
    /// Parses a node's ring and schema answers. A member or keyspace that
    /// does not parse is an error naming it (a node of another version).
    pub fn from_pb(ring: pb::RingResponse, schema: pb::ListKeyspacesResponse) -> Result<Topology> {
        let nodes = ring
            .nodes
            .into_iter()
            .filter(|n| n.state != "LEFT")
            .map(node_from_pb)
            .collect::<Result<_>>()?;
        let keyspaces = schema
            .keyspaces
            .into_iter()
            .map(keyspace_from_pb)
            .collect::<Result<_>>()?;
        Ok(Topology {
            nodes,
            keyspaces,
            ring_checksum: ring.ring_checksum,
        })
    }
}

fn invalid(what: String) -> ClientError {
    ClientError::Topology(what)
}

fn node_from_pb(node: pb::NodeStatus) -> Result<Node> {
    let host = node
        .host_id
        .parse()
        .map_err(|_| invalid(format!("host id {:?}", node.host_id)))?;
    let address = node
        .client_address
        .parse()
        .map_err(|_| invalid(format!("client address {:?}", node.client_address)))?;
    let state = match node.state.as_str() {
        "JOINING" => NodeState::Joining,
        "NORMAL" => NodeState::Normal,
        "LEAVING" => NodeState::Leaving,
        other => return Err(invalid(format!("state {other:?} of {host}"))),
    };
    Ok(Node {
        host,
        address,
        location: Location::new(node.datacenter, node.rack),
        state,
        up: node.up,
        tokens: node.tokens.into_iter().map(Token).collect(),
    })
}

fn keyspace_from_pb(keyspace: pb::Keyspace) -> Result<Keyspace> {
    use pb::replication::Strategy;
    let name = keyspace.name;
    let strategy = match keyspace.replication.and_then(|r| r.strategy) {
        Some(Strategy::Simple(simple)) => ReplicationStrategy::simple(simple.replication_factor),
        Some(Strategy::NetworkTopology(nts)) => {
            ReplicationStrategy::network_topology(nts.replication_factors)
        }
        None => return Err(invalid(format!("keyspace {name:?} has no replication"))),
    }
    .map_err(|e| invalid(format!("keyspace {name:?}: {e}")))?;
    Ok(Keyspace { name, strategy })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn status(i: u8, state: &str, tokens: &[i64]) -> pb::NodeStatus {
        pb::NodeStatus {
            host_id: HostId::from_u128(u128::from(i)).to_string(),
            client_address: format!("127.0.0.{i}:7100"),
            datacenter: "dc1".into(),
            rack: "rack1".into(),
            up: true,
            state: state.into(),
            tokens: tokens.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn members_and_keyspaces_parse_and_left_members_are_dropped() {
        let ring = pb::RingResponse {
            nodes: vec![
                status(1, "NORMAL", &[10]),
                status(2, "JOINING", &[]),
                status(3, "LEFT", &[30]),
            ],
            ring_epoch: 4,
            ring_checksum: 99,
        };
        let schema = pb::ListKeyspacesResponse {
            keyspaces: vec![pb::Keyspace {
                name: "ks".into(),
                id: String::new(),
                replication: Some(pb::Replication {
                    strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                        replication_factor: 2,
                    })),
                }),
                gc_grace_seconds: None,
                speculative_retry: None,
                pending_replication: None,
            }],
        };
        let topology = Topology::from_pb(ring, schema).unwrap();
        assert_eq!(topology.nodes.len(), 2);
        assert_eq!(topology.nodes[0].state, NodeState::Normal);
        assert_eq!(topology.nodes[0].tokens, [Token(10)]);
        assert_eq!(topology.nodes[1].state, NodeState::Joining);
        assert_eq!(
            topology.keyspaces[0].strategy,
            ReplicationStrategy::simple(2).unwrap()
        );
        assert_eq!(topology.ring_checksum, 99);
    }

    #[test]
    fn a_member_that_does_not_parse_is_an_error_naming_it() {
        let mut bad = status(1, "NORMAL", &[10]);
        bad.client_address = "nowhere".into();
        let ring = pb::RingResponse {
            nodes: vec![bad],
            ..Default::default()
        };
        let error = Topology::from_pb(ring, Default::default()).unwrap_err();
        assert!(error.to_string().contains("\"nowhere\""), "{error}");
    }
}
