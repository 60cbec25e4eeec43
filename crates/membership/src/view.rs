//! The cluster view: an immutable snapshot of who is in the cluster, where
//! they sit, whether they are up, and the ring their tokens make.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ringstore_placement::{HostId, Ring, RingMember, Token};

use crate::metadata::{NodeMetadata, NodeState};

/// Whether the failure detector currently considers a member reachable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// Answering (a suspected member still counts as up until declared down).
    Up,
    /// Declared down by the cluster. It keeps its tokens: down is not left.
    Down,
}

impl Liveness {
    /// The letter `status` prints: `U` or `D`.
    pub fn letter(self) -> char {
        match self {
            Liveness::Up => 'U',
            Liveness::Down => 'D',
        }
    }
}

/// One member as this node sees it.
#[derive(Clone, Debug)]
pub struct MemberInfo {
    /// The newest metadata known for it.
    pub metadata: Arc<NodeMetadata>,
    /// Whether it is up.
    pub liveness: Liveness,
}

/// A snapshot of the cluster as one node sees it. Shared as `Arc` and replaced
/// whole on every change, never mutated.
#[derive(Clone, Debug)]
pub struct ClusterView {
    /// The node holding this view.
    pub local: HostId,
    /// Every member whose metadata is known, the local node included.
    pub members: BTreeMap<HostId, MemberInfo>,
    /// The ring of the `Normal` and `Leaving` members' tokens. Liveness never
    /// changes it.
    pub ring: Arc<Ring>,
    /// The tokens of `Joining` members, kept apart from the ring (they become
    /// pending ranges while the member streams its data).
    pub joining: BTreeMap<HostId, Vec<Token>>,
}

impl ClusterView {
    /// The member `host`, if known.
    pub fn member(&self, host: HostId) -> Option<&MemberInfo> {
        self.members.get(&host)
    }

    /// Whether `host` is known and up.
    pub fn is_up(&self, host: HostId) -> bool {
        self.member(host)
            .is_some_and(|m| m.liveness == Liveness::Up)
    }

    /// The members that are up.
    pub fn up_members(&self) -> impl Iterator<Item = &MemberInfo> {
        self.members.values().filter(|m| m.liveness == Liveness::Up)
    }
}

/// Builds the ring from the members that own tokens. When two members claim
/// one token (a misconfiguration), the member of the older generation keeps
/// it (ties: the lower host id) and the other member's conflicting tokens are
/// left out, identically on every node; the conflict is logged.
pub(crate) fn build_ring<'a>(epoch: u64, members: impl Iterator<Item = &'a NodeMetadata>) -> Ring {
    let mut owners: Vec<&NodeMetadata> = members.filter(|m| m.state.owns_tokens()).collect();
    owners.sort_by_key(|m| (m.stamp.generation, m.host_id));
    let mut claimed: BTreeSet<Token> = BTreeSet::new();
    let mut ring_members = Vec::with_capacity(owners.len());
    for metadata in owners {
        let tokens: Vec<Token> = metadata
            .tokens
            .iter()
            .copied()
            .filter(|&t| {
                let free = claimed.insert(t);
                if !free {
                    tracing::warn!(host = %metadata.host_id, token = %t, "token already claimed by another node; ignored");
                }
                free
            })
            .collect();
        if !tokens.is_empty() {
            ring_members.push(RingMember::new(
                metadata.host_id,
                metadata.location(),
                tokens,
            ));
        }
    }
    Ring::new(epoch, ring_members).expect("members are distinct and tokens deduplicated")
}

/// The tokens of the `Joining` members.
pub(crate) fn joining_tokens<'a>(
    members: impl Iterator<Item = &'a NodeMetadata>,
) -> BTreeMap<HostId, Vec<Token>> {
    members
        .filter(|m| m.state == NodeState::Joining)
        .map(|m| (m.host_id, m.tokens.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Generation;
    use crate::metadata::tests::sample;

    #[test]
    fn the_ring_holds_normal_and_leaving_members_only() {
        let mut members = [sample(1, 2), sample(2, 0), sample(3, 0), sample(4, 0)];
        members[1].tokens = vec![Token(10)];
        members[1].state = NodeState::Joining;
        members[2].tokens = vec![Token(20)];
        members[2].state = NodeState::Leaving;
        members[3].tokens = vec![Token(30)];
        members[3].state = NodeState::Left;
        let ring = build_ring(1, members.iter());
        let hosts: Vec<HostId> = ring.hosts().iter().map(|h| h.id).collect();
        assert_eq!(hosts, vec![HostId::from_u128(1), HostId::from_u128(3)]);
        assert_eq!(
            joining_tokens(members.iter())[&HostId::from_u128(2)],
            vec![Token(10)]
        );
    }

    #[test]
    fn a_contested_token_stays_with_the_older_generation() {
        let mut old = sample(2, 0);
        old.tokens = vec![Token(5), Token(6)];
        let mut new = sample(1, 0);
        new.tokens = vec![Token(5), Token(7)];
        new.stamp.generation = Generation(old.stamp.generation.0 + 1);
        let ring = build_ring(1, [&new, &old].into_iter());
        assert_eq!(ring.tokens_of(old.host_id), vec![Token(5), Token(6)]);
        assert_eq!(ring.tokens_of(new.host_id), vec![Token(7)]);
    }
}
