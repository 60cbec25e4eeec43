//! Who this node may call and be called by, and the key it shares with each.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ringstore_identity::{NodeKeys, PairKey, PublicKeys};
use ringstore_internode_auth::Refusal;
use ringstore_membership::{ClusterView, MembershipHandle, NodeState};
use ringstore_placement::HostId;

/// The most pairwise keys kept; past it the cache starts over (an
/// agreement costs about 50 µs, once per peer).
const MAX_CACHED_KEYS: usize = 4096;

/// This node's keys and the members gossip knows, with a cache of the
/// pairwise keys agreed so far.
pub struct PeerDirectory {
    keys: Arc<NodeKeys>,
    local: HostId,
    membership: MembershipHandle,
    /// Held only to look up or insert a key, never across an await.
    cache: Mutex<HashMap<(HostId, PublicKeys), PairKey>>,
}

impl PeerDirectory {
    /// The directory of node `local`, holding `keys`, over `membership`.
    pub fn new(keys: Arc<NodeKeys>, local: HostId, membership: MembershipHandle) -> PeerDirectory {
        PeerDirectory {
            keys,
            local,
            membership,
            cache: Mutex::default(),
        }
    }

    /// This node's host id.
    pub fn local(&self) -> HostId {
        self.local
    }

    /// The membership the directory reads.
    pub fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    /// The key shared with `caller`, if it may call: a member gossip knows,
    /// not removed, not departed, with usable keys.
    pub fn caller_key(&self, caller: HostId) -> Result<PairKey, Refusal> {
        let view = self.membership.view();
        if departed(&view, caller) {
            return Err(Refusal::NotMember(caller));
        }
        let keys = view
            .member(caller)
            .map(|m| m.metadata.keys)
            .ok_or(Refusal::UnknownCaller(caller))?;
        self.pair_key(caller, keys)
            .ok_or(Refusal::UnknownCaller(caller))
    }

    /// The member whose internode address is `address` (the newest record
    /// among those still in the cluster), and the key shared with it.
    pub fn callee_key(&self, address: SocketAddr) -> Option<(HostId, PairKey)> {
        let view = self.membership.view();
        let member = view
            .members
            .values()
            .filter(|m| m.metadata.internode_addr == address)
            .filter(|m| !departed(&view, m.metadata.host_id))
            .max_by_key(|m| m.metadata.stamp)?;
        let host = member.metadata.host_id;
        Some((host, self.pair_key(host, member.metadata.keys)?))
    }

    fn pair_key(&self, peer: HostId, keys: PublicKeys) -> Option<PairKey> {
        let mut cache = self.cache.lock().expect("pair key cache lock");
        if let Some(key) = cache.get(&(peer, keys)) {
            return Some(key.clone());
        }
        let key = self.keys.pair_key(self.local, peer, &keys)?;
        if cache.len() >= MAX_CACHED_KEYS {
            cache.clear();
        }
        cache.insert((peer, keys), key.clone());
        Some(key)
    }
}

/// Whether `host` has left the cluster (decommissioned) or was removed or
/// replaced, as `view` says.
pub(super) fn departed(view: &ClusterView, host: HostId) -> bool {
    view.removed.contains(&host)
        || view
            .member(host)
            .is_some_and(|m| m.metadata.state == NodeState::Left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_views::{member, view};

    #[test]
    fn departed_and_removed_hosts_are_not_members_but_others_are() {
        let mut view = view(
            1,
            vec![
                member(
                    1,
                    "r1",
                    vec![ringstore_placement::Token(1)],
                    NodeState::Normal,
                ),
                member(2, "r1", vec![], NodeState::Joining),
                member(3, "r1", vec![], NodeState::Leaving),
                member(4, "r1", vec![], NodeState::Left),
            ],
        );
        view.removed.insert(HostId::from_u128(5));
        for (host, gone) in [
            (1, false),
            (2, false),
            (3, false),
            (4, true),
            (5, true),
            (6, false),
        ] {
            assert_eq!(
                departed(&view, HostId::from_u128(host)),
                gone,
                "host {host}"
            );
        }
    }
}
