//! Node metadata: what every node tells the cluster about itself.

use std::fmt;
use std::net::SocketAddr;

use ringstore_identity::{NodeKeys, PublicKeys, SIGNATURE_LEN, Signature};
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

/// A node's metadata. Only the node itself changes it (bumping `version`)
/// and signs it ([`SignedMetadata`]); everyone else keeps the newest copy
/// they have seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMetadata {
    /// The node.
    pub host_id: HostId,
    /// Its public keys: its records are signed with them, and its host id is
    /// derived from them (or, for a host id from before identities, bound
    /// to the first keys seen with it).
    pub keys: PublicKeys,
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
/// Version 3 carries the node's public keys and ends with its signature;
/// version 2 (before identities) is still read from a restarted node's
/// saved members, never accepted from gossip.
const FORMAT_VERSION: u8 = 3;
/// The unsigned format of builds from before identities.
const UNSIGNED_FORMAT_VERSION: u8 = 2;

impl NodeMetadata {
    /// The node's location.
    pub fn location(&self) -> Location {
        Location {
            dc: self.dc.clone(),
            rack: self.rack.clone(),
        }
    }

    /// Signs this metadata with `keys` (the node's own).
    pub fn sign(self, keys: &NodeKeys) -> SignedMetadata {
        let mut bytes = vec![FORMAT_VERSION];
        bytes.extend(postcard::to_stdvec(&self).expect("metadata serializes"));
        SignedMetadata {
            signature: Some(keys.sign(&bytes)),
            metadata: std::sync::Arc::new(self),
        }
    }
}

/// A node's metadata with the node's signature, as gossip carries it and a
/// restarted node remembers it. Only a signed copy is ever sent to others:
/// receivers cannot re-sign what they pass on, so they pass on the bytes
/// the node signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedMetadata {
    /// The metadata.
    pub metadata: std::sync::Arc<NodeMetadata>,
    /// The node's signature over the encoded metadata; `None` for a copy
    /// remembered from a build before identities, which is used locally
    /// and never sent.
    pub signature: Option<Signature>,
}

impl SignedMetadata {
    /// A copy without a signature (for tests, and remembered legacy copies).
    pub fn unsigned(metadata: NodeMetadata) -> SignedMetadata {
        SignedMetadata {
            metadata: std::sync::Arc::new(metadata),
            signature: None,
        }
    }

    /// Encodes as a format-version byte, postcard, then the signature
    /// (`None` for an unsigned copy, which cannot be encoded).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let signature = self.signature?;
        let mut bytes = vec![FORMAT_VERSION];
        bytes.extend(postcard::to_stdvec(&*self.metadata).expect("metadata serializes"));
        bytes.extend_from_slice(&signature.0);
        Some(bytes)
    }

    /// Encodes for the node's own memory (see [`crate::Remembrance`]): a
    /// signed copy as [`SignedMetadata::encode`] does, an unsigned one in
    /// the format of builds from before identities.
    pub fn encode_for_memory(&self) -> Vec<u8> {
        if let Some(bytes) = self.encode() {
            return bytes;
        }
        let m = &*self.metadata;
        let legacy = LegacyMetadata {
            host_id: m.host_id,
            stamp: m.stamp,
            cluster_name: m.cluster_name.clone(),
            dc: m.dc.clone(),
            rack: m.rack.clone(),
            client_addr: m.client_addr,
            internode_addr: m.internode_addr,
            gossip_addr: m.gossip_addr,
            tokens: m.tokens.clone(),
            state: m.state,
            load_bytes: m.load_bytes,
            schema_version: m.schema_version,
            software_version: m.software_version.clone(),
            takeovers: m.takeovers.clone(),
        };
        let mut bytes = vec![UNSIGNED_FORMAT_VERSION];
        bytes.extend(postcard::to_stdvec(&legacy).expect("metadata serializes"));
        bytes
    }

    /// Decodes what [`SignedMetadata::encode`] wrote and checks the
    /// signature against the keys the metadata names (whether those keys
    /// may speak for its host id is the receiver's [`Binding`] to check).
    /// Refuses unsigned and unknown formats.
    ///
    /// [`Binding`]: ringstore_identity::Binding
    pub fn decode(bytes: &[u8]) -> Result<SignedMetadata> {
        let invalid = |reason: String| MembershipError::InvalidMetadata { reason };
        match bytes.first() {
            None => Err(invalid("empty".into())),
            Some(&FORMAT_VERSION) => {
                let signed_len = bytes
                    .len()
                    .checked_sub(SIGNATURE_LEN)
                    .filter(|&len| len > 1)
                    .ok_or_else(|| invalid("too short for a signature".into()))?;
                let (signed, signature) = bytes.split_at(signed_len);
                let signature = Signature(signature.try_into().expect("SIGNATURE_LEN bytes"));
                let metadata: NodeMetadata = decode_exactly(&signed[1..])?;
                if !metadata.keys.verify(signed, &signature) {
                    return Err(MembershipError::BadSignature {
                        host: metadata.host_id,
                    });
                }
                Ok(SignedMetadata {
                    metadata: std::sync::Arc::new(metadata),
                    signature: Some(signature),
                })
            }
            Some(&UNSIGNED_FORMAT_VERSION) => Err(invalid(
                "unsigned metadata of a build from before node identities".into(),
            )),
            Some(version) => Err(invalid(format!("unknown format version {version}"))),
        }
    }

    /// Decodes a signed copy, or an unsigned one of a build from before
    /// identities (a restarted node's saved members): the latter comes
    /// back without a signature, keys all zero.
    pub fn decode_remembered(bytes: &[u8]) -> Result<SignedMetadata> {
        if bytes.first() == Some(&UNSIGNED_FORMAT_VERSION) {
            let legacy: LegacyMetadata = decode_exactly(&bytes[1..])?;
            return Ok(SignedMetadata::unsigned(legacy.into()));
        }
        SignedMetadata::decode(bytes)
    }
}

fn decode_exactly<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    let invalid = |reason: String| MembershipError::InvalidMetadata { reason };
    let (value, rest): (T, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| invalid(e.to_string()))?;
    if !rest.is_empty() {
        return Err(invalid(format!("{} trailing bytes", rest.len())));
    }
    Ok(value)
}

/// Format 2 of [`NodeMetadata`]: the same fields but the keys.
#[derive(Serialize, Deserialize)]
struct LegacyMetadata {
    host_id: HostId,
    stamp: MetadataStamp,
    cluster_name: String,
    dc: Datacenter,
    rack: Rack,
    client_addr: SocketAddr,
    internode_addr: SocketAddr,
    gossip_addr: SocketAddr,
    tokens: Vec<Token>,
    state: NodeState,
    load_bytes: u64,
    schema_version: uuid::Uuid,
    software_version: String,
    takeovers: Takeovers,
}

impl From<LegacyMetadata> for NodeMetadata {
    fn from(m: LegacyMetadata) -> NodeMetadata {
        NodeMetadata {
            host_id: m.host_id,
            keys: PublicKeys::default(),
            stamp: m.stamp,
            cluster_name: m.cluster_name,
            dc: m.dc,
            rack: m.rack,
            client_addr: m.client_addr,
            internode_addr: m.internode_addr,
            gossip_addr: m.gossip_addr,
            tokens: m.tokens,
            state: m.state,
            load_bytes: m.load_bytes,
            schema_version: m.schema_version,
            software_version: m.software_version,
            takeovers: m.takeovers,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(host: u128, tokens: usize) -> NodeMetadata {
        NodeMetadata {
            host_id: HostId::from_u128(host),
            keys: PublicKeys::default(),
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

    /// A sample signed by test keys `n`, under the host id they make.
    pub(crate) fn signed_sample(n: u64, tokens: usize) -> (NodeKeys, SignedMetadata) {
        let keys = NodeKeys::for_test(n);
        let mut metadata = sample(0, tokens);
        metadata.host_id = keys.host_id();
        metadata.keys = keys.public();
        let signed = metadata.sign(&keys);
        (keys, signed)
    }

    #[test]
    fn signed_metadata_round_trips_with_a_version_byte() {
        let (_, signed) = signed_sample(1, 256);
        let bytes = signed.encode().unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(SignedMetadata::decode(&bytes).unwrap(), signed);
    }

    #[test]
    fn a_changed_byte_or_another_key_breaks_the_signature() {
        let (_, signed) = signed_sample(1, 4);
        let bytes = signed.encode().unwrap();
        // Every byte before the signature is covered.
        for i in 1..bytes.len() - SIGNATURE_LEN {
            let mut bent = bytes.clone();
            bent[i] ^= 0x01;
            assert!(SignedMetadata::decode(&bent).is_err(), "byte {i}");
        }
        // Metadata naming another node's keys, signed by a third: refused.
        let (_, other) = signed_sample(2, 4);
        let mut forged = (*signed.metadata).clone();
        forged.keys = other.metadata.keys;
        let forged = SignedMetadata {
            signature: forged.clone().sign(&NodeKeys::for_test(3)).signature,
            metadata: std::sync::Arc::new(forged),
        };
        assert!(matches!(
            SignedMetadata::decode(&forged.encode().unwrap()),
            Err(MembershipError::BadSignature { .. })
        ));
    }

    #[test]
    fn unsigned_copies_are_read_only_from_memory() {
        let mut legacy = vec![UNSIGNED_FORMAT_VERSION];
        let old = sample(1, 3);
        legacy.extend(
            postcard::to_stdvec(&(
                old.host_id,
                old.stamp,
                &old.cluster_name,
                &old.dc,
                &old.rack,
                old.client_addr,
                old.internode_addr,
                old.gossip_addr,
                &old.tokens,
                old.state,
                old.load_bytes,
                old.schema_version,
                &old.software_version,
                &old.takeovers,
            ))
            .unwrap(),
        );
        assert!(SignedMetadata::decode(&legacy).is_err(), "not from gossip");
        let remembered = SignedMetadata::decode_remembered(&legacy).unwrap();
        assert_eq!(*remembered.metadata, old);
        assert_eq!(remembered.signature, None);
        assert_eq!(remembered.encode(), None, "never sent on");
        assert_eq!(remembered.encode_for_memory(), legacy, "but remembered");
    }

    #[test]
    fn unknown_versions_and_garbage_are_refused() {
        let (_, signed) = signed_sample(1, 3);
        let mut bytes = signed.encode().unwrap();
        bytes[0] = 99;
        assert!(SignedMetadata::decode(&bytes).is_err());
        assert!(SignedMetadata::decode(&[]).is_err());
        assert!(SignedMetadata::decode(&[FORMAT_VERSION, 0xff, 0xff]).is_err());
        assert!(SignedMetadata::decode_remembered(&[UNSIGNED_FORMAT_VERSION, 0xff]).is_err());
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
