//! Node metadata: what every node tells the cluster about itself.

use std::fmt;
use std::net::SocketAddr;

use ringstore_placement::{Datacenter, HostId, Location, Rack, Token};
use serde::{Deserialize, Serialize};

use crate::error::{MembershipError, Result};
use crate::identity::Generation;

/// Where a node is in its life in the ring, as Cassandra's gossip states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeState {
    /// Bootstrapping: its tokens are pending, not yet in the ring.
    Joining,
    /// Serving its tokens.
    Normal,
    /// Decommissioning: still in the ring while it streams its data away.
    Leaving,
    /// Gone: its tokens are out of the ring for good.
    Left,
}

impl NodeState {
    /// The letter `status` prints: `J`, `N`, `L` (leaving) — `Left` nodes are not listed.
    pub fn letter(self) -> char {
        match self {
            NodeState::Joining => 'J',
            NodeState::Normal => 'N',
            NodeState::Leaving | NodeState::Left => 'L',
        }
    }

    /// Whether the node's tokens are part of the ring.
    pub fn owns_tokens(self) -> bool {
        matches!(self, NodeState::Normal | NodeState::Leaving)
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which metadata is newer: compared by generation, then version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MetadataStamp {
    /// The node's generation when it published this metadata.
    pub generation: Generation,
    /// Bumped by the node on every change within a generation.
    pub version: u64,
}

/// A node's metadata. Only the node itself changes it (bumping `version`);
/// everyone else keeps the newest copy they have seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMetadata {
    /// The node.
    pub host_id: HostId,
    /// Newness of this copy.
    pub stamp: MetadataStamp,
    /// The cluster it belongs to.
    pub cluster_name: String,
    /// Its data center.
    pub dc: Datacenter,
    /// Its rack.
    pub rack: Rack,
    /// Where clients reach it (the advertised address).
    pub client_addr: SocketAddr,
    /// Where other nodes send it internode requests (advertised).
    pub internode_addr: SocketAddr,
    /// Where its gossip socket is reached (advertised).
    pub gossip_addr: SocketAddr,
    /// Its tokens, sorted.
    pub tokens: Vec<Token>,
    /// Its state in the ring.
    pub state: NodeState,
    /// Bytes of data it stores.
    pub load_bytes: u64,
    /// The version of the schema it has applied (nil before any).
    pub schema_version: uuid::Uuid,
    /// The ringstore version it runs.
    pub software_version: String,
    /// Other nodes this node replaces or removes.
    pub takeovers: Takeovers,
}

/// What a node claims about *other* nodes' places in the ring. Only a node
/// itself changes its metadata, so a node that replaces or removes a dead
/// node says so in its own metadata, and every view applies it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Takeovers {
    /// The dead node whose tokens this node takes over: while it is
    /// `Joining` (streaming), and for good once `Normal`.
    pub replaces: Option<HostId>,
    /// The dead node whose ranges this node is having restored elsewhere
    /// (`removenode` in progress).
    pub removing: Option<HostId>,
    /// Nodes this node has removed (or replaced): out of the ring for good.
    pub removed: Vec<HostId>,
}

/// The first byte of every encoded metadata blob: its format version.
const FORMAT_VERSION: u8 = 2;

impl NodeMetadata {
    /// The node's location.
    pub fn location(&self) -> Location {
        Location {
            dc: self.dc.clone(),
            rack: self.rack.clone(),
        }
    }

    /// Encodes as a format-version byte followed by postcard.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![FORMAT_VERSION];
        bytes.extend(postcard::to_stdvec(self).expect("metadata serializes"));
        bytes
    }

    /// Decodes what [`NodeMetadata::encode`] wrote; refuses other format versions.
    pub fn decode(bytes: &[u8]) -> Result<NodeMetadata> {
        let invalid = |reason: String| MembershipError::InvalidMetadata { reason };
        match bytes.split_first() {
            None => Err(invalid("empty".into())),
            Some((&FORMAT_VERSION, body)) => {
                let (metadata, rest): (NodeMetadata, &[u8]) =
                    postcard::take_from_bytes(body).map_err(|e| invalid(e.to_string()))?;
                if !rest.is_empty() {
                    return Err(invalid(format!("{} trailing bytes", rest.len())));
                }
                Ok(metadata)
            }
            Some((version, _)) => Err(invalid(format!("unknown format version {version}"))),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(host: u128, tokens: usize) -> NodeMetadata {
        NodeMetadata {
            host_id: HostId::from_u128(host),
            stamp: MetadataStamp {
                generation: Generation(7),
                version: 1,
            },
            cluster_name: "test".into(),
            dc: "dc1".into(),
            rack: "rack1".into(),
            client_addr: "127.0.0.1:7100".parse().unwrap(),
            internode_addr: "127.0.0.1:7101".parse().unwrap(),
            gossip_addr: "127.0.0.1:7000".parse().unwrap(),
            tokens: (0..tokens as i64)
                .map(|t| Token(t * 1_000_000_007 - (1 << 62)))
                .collect(),
            state: NodeState::Normal,
            load_bytes: 12345,
            schema_version: uuid::Uuid::nil(),
            software_version: "0.1.0".into(),
            takeovers: Takeovers::default(),
        }
    }

    #[test]
    fn metadata_round_trips_with_a_version_byte() {
        let metadata = sample(1, 256);
        let bytes = metadata.encode();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(NodeMetadata::decode(&bytes).unwrap(), metadata);
    }

    #[test]
    fn unknown_versions_and_garbage_are_refused() {
        let mut bytes = sample(1, 3).encode();
        bytes[0] = 99;
        assert!(NodeMetadata::decode(&bytes).is_err());
        assert!(NodeMetadata::decode(&[]).is_err());
        assert!(NodeMetadata::decode(&[FORMAT_VERSION, 0xff, 0xff]).is_err());
        let mut long = sample(1, 3).encode();
        long.push(0);
        assert!(NodeMetadata::decode(&long).is_err());
    }

    #[test]
    fn stamps_order_by_generation_then_version() {
        let a = MetadataStamp {
            generation: Generation(1),
            version: 9,
        };
        let b = MetadataStamp {
            generation: Generation(2),
            version: 0,
        };
        assert!(b > a);
    }
}
