//! A node's gossip identity, as foca sees it.

use std::fmt;
use std::net::SocketAddr;

use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};

/// A node's restart counter: bumped on every start and persisted, so that a
/// restarted node supersedes its previous incarnation everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Generation(pub u64);

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What foca knows a member by. Its address for foca (`Identity::Addr`) is the
/// gossip address — so a seed known only by address can be announced to —
/// and between two identities at one address the higher `(generation,
/// rejoin)` wins: a restarted node supersedes its old incarnation. A node
/// that comes back at another address is a new foca member whose old entry
/// goes down; the membership layer tracks liveness per host id.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeIdentity {
    /// The host's permanent id.
    pub host_id: HostId,
    /// Where its gossip socket can be reached (the advertised address).
    pub gossip_addr: SocketAddr,
    /// Its restart counter.
    pub generation: Generation,
    /// Bumped when foca finds this node declared down and rejoins by itself
    /// (`Identity::renew`), within one generation.
    pub rejoin: u32,
}

impl NodeIdentity {
    /// A placeholder for a seed we only know by address: used as the target of
    /// an announce (foca accepts an announce addressed to any identity with its
    /// address); never a member.
    pub fn seed(gossip_addr: SocketAddr) -> NodeIdentity {
        NodeIdentity {
            host_id: HostId(uuid::Uuid::nil()),
            gossip_addr,
            generation: Generation(0),
            rejoin: 0,
        }
    }

    fn precedence(&self) -> (Generation, u32) {
        (self.generation, self.rejoin)
    }
}

impl fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}/g{}r{}",
            self.host_id, self.gossip_addr, self.generation, self.rejoin
        )
    }
}

impl foca::Identity for NodeIdentity {
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(NodeIdentity {
            rejoin: self.rejoin.wrapping_add(1),
            ..self.clone()
        })
    }

    fn addr(&self) -> SocketAddr {
        self.gossip_addr
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.precedence() > adversary.precedence()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foca::Identity;

    #[test]
    fn a_later_generation_wins_and_renew_beats_the_old_identity() {
        let old = NodeIdentity {
            host_id: HostId::from_u128(1),
            gossip_addr: "127.0.0.1:7000".parse().unwrap(),
            generation: Generation(5),
            rejoin: 3,
        };
        let restarted = NodeIdentity {
            generation: Generation(6),
            rejoin: 0,
            ..old.clone()
        };
        assert!(restarted.win_addr_conflict(&old));
        assert!(!old.win_addr_conflict(&restarted));
        assert!(old.renew().unwrap().win_addr_conflict(&old));
        assert_eq!(old.addr(), restarted.addr());
    }
}
