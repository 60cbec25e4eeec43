//! The cluster view: an immutable snapshot of who is in the cluster, where
//! they sit, whether they are up, and the ring their tokens make.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
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
    /// The ring once every range movement under way has completed: joining
    /// members (replacements included) in, leaving and removed members out.
    /// `None` when nothing moves. Writes also go to the replicas this ring
    /// adds (the pending replicas).
    pub pending_ring: Option<Arc<Ring>>,
    /// Members removed or replaced by another node: out of the ring for good,
    /// whatever their own metadata says. Only claims this node accepted
    /// count (see [`crate::claims`]); `members` shows each member's
    /// takeovers with the refused claims left out.
    pub removed: BTreeSet<HostId>,
    /// Members that claim to have removed or replaced *this* node, which it
    /// refuses on its own word (it is alive); the node asks the others
    /// whether they accepted the claim.
    pub removal_claims: BTreeSet<HostId>,
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

    /// The range movements of other members under way, for the
    /// one-movement-at-a-time rule and its error messages. Only live
    /// members' movements count: a member that died mid-movement must be
    /// restarted (it resumes) or removed.
    pub fn movements(&self) -> Vec<Movement> {
        let mut movements = Vec::new();
        for member in self
            .up_members()
            .filter(|m| m.metadata.host_id != self.local)
        {
            let m = &member.metadata;
            if self.removed.contains(&m.host_id) {
                continue;
            }
            match (m.state, m.takeovers.replaces) {
                (NodeState::Joining, Some(dead)) if !m.tokens.is_empty() => {
                    movements.push(Movement::Replacing {
                        node: m.host_id,
                        dead,
                    });
                }
                (NodeState::Joining, None) if !m.tokens.is_empty() => {
                    movements.push(Movement::Joining(m.host_id));
                }
                (NodeState::Leaving, _) => movements.push(Movement::Leaving(m.host_id)),
                _ => {}
            }
            if let Some(dead) = m.takeovers.removing {
                movements.push(Movement::Removing {
                    node: m.host_id,
                    dead,
                });
            }
        }
        movements
    }

    /// Whether `host` is gone from the cluster for good: it left
    /// (decommissioned) or another node removed or replaced it.
    pub fn has_left(&self, host: HostId) -> bool {
        self.removed.contains(&host)
            || self
                .member(host)
                .is_some_and(|m| m.metadata.state == NodeState::Left)
    }

    /// The node that replaced `host`, if one did (or is doing so).
    pub fn replacement_of(&self, host: HostId) -> Option<HostId> {
        self.members
            .values()
            .find(|m| m.metadata.takeovers.replaces == Some(host))
            .map(|m| m.metadata.host_id)
    }
}

/// A range movement under way, as gossip shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Movement {
    /// A node bootstrapping with its tokens.
    Joining(HostId),
    /// A node taking over a dead node's tokens.
    Replacing {
        /// The replacement.
        node: HostId,
        /// The node it replaces.
        dead: HostId,
    },
    /// A node decommissioning.
    Leaving(HostId),
    /// A node having a dead node's ranges restored elsewhere.
    Removing {
        /// The node running `removenode`.
        node: HostId,
        /// The node removed.
        dead: HostId,
    },
}

impl fmt::Display for Movement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Movement::Joining(node) => write!(f, "{node} is joining"),
            Movement::Replacing { node, dead } => write!(f, "{node} is replacing {dead}"),
            Movement::Leaving(node) => write!(f, "{node} is leaving"),
            Movement::Removing { node, dead } => write!(f, "{node} is removing {dead}"),
        }
    }
}

/// The members removed or replaced by others (see [`ClusterView::removed`]):
/// every `removed` claim, and the node each `Normal` replacement replaced.
pub(crate) fn removed_members<'a>(
    members: impl Iterator<Item = &'a NodeMetadata>,
) -> BTreeSet<HostId> {
    let mut removed = BTreeSet::new();
    for m in members {
        removed.extend(m.takeovers.removed.iter().copied());
        if m.state == NodeState::Normal
            && let Some(dead) = m.takeovers.replaces
        {
            removed.insert(dead);
        }
    }
    removed
}

/// The ring after the movements under way (see [`ClusterView::pending_ring`]),
/// or `None` when no member is joining with tokens, leaving, or being removed
/// or replaced.
pub(crate) fn build_pending_ring<'a>(
    epoch: u64,
    members: impl Iterator<Item = &'a NodeMetadata> + Clone,
    removed: &BTreeSet<HostId>,
    current: &Ring,
) -> Option<Ring> {
    let mut going: BTreeSet<HostId> = removed.clone();
    let mut moving = false;
    for m in members.clone().filter(|m| !removed.contains(&m.host_id)) {
        match m.state {
            NodeState::Joining if !m.tokens.is_empty() => {
                moving = true;
                going.extend(m.takeovers.replaces);
            }
            NodeState::Leaving => {
                moving = true;
                going.insert(m.host_id);
            }
            _ => {}
        }
        if let Some(dead) = m.takeovers.removing {
            moving = true;
            going.insert(dead);
        }
    }
    if !moving {
        return None;
    }
    // Joining members own their tokens in the future ring; `build_ring` keeps
    // `Normal` and `Leaving` ones, so present joiners as `Normal`.
    let future: Vec<NodeMetadata> = members
        .filter(|m| !going.contains(&m.host_id))
        .filter(|m| m.state != NodeState::Leaving)
        .map(|m| {
            let mut m = m.clone();
            if m.state == NodeState::Joining && !m.tokens.is_empty() {
                m.state = NodeState::Normal;
            }
            m
        })
        .collect();
    Some(build_ring(epoch, future.iter(), Some(current)))
}

/// Builds the ring from the members that own tokens. When two members claim
/// one token (a misconfiguration, or a member claiming another's tokens),
/// the member that holds it in `incumbent` (the ring this one replaces)
/// keeps it; otherwise the member of the older generation (ties: the lower
/// host id). The other member's conflicting tokens are left out, and the
/// conflict is logged. A member cannot take a token from its owner by
/// claiming it, whatever generation it names: tokens change hands only
/// through an accepted replacement, which takes the dead owner out first.
pub(crate) fn build_ring<'a>(
    epoch: u64,
    members: impl Iterator<Item = &'a NodeMetadata>,
    incumbent: Option<&Ring>,
) -> Ring {
    let mut owners: Vec<&NodeMetadata> = members.filter(|m| m.state.owns_tokens()).collect();
    owners.sort_by_key(|m| (m.stamp.generation, m.host_id));
    let held: BTreeMap<Token, HostId> = incumbent
        .map(|ring| ring.entries().map(|(t, host)| (t, host.id)).collect())
        .unwrap_or_default();
    let present: BTreeSet<HostId> = owners.iter().map(|m| m.host_id).collect();
    // Tokens whose incumbent still claims them are taken first.
    let mut claimed: BTreeSet<Token> = owners
        .iter()
        .flat_map(|m| m.tokens.iter().map(move |t| (*t, m.host_id)))
        .filter(|(t, host)| held.get(t) == Some(host) && present.contains(host))
        .map(|(t, _)| t)
        .collect();
    // Each incumbent token once, even if its owner lists it twice.
    let mut kept: BTreeSet<Token> = BTreeSet::new();
    let mut ring_members = Vec::with_capacity(owners.len());
    for metadata in owners {
        let tokens: Vec<Token> = metadata
            .tokens
            .iter()
            .copied()
            .filter(|&t| {
                if held.get(&t) == Some(&metadata.host_id) {
                    return kept.insert(t);
                }
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

/// Whether a member's record going from `old` to `new` can change what
/// [`build_ring`], [`build_pending_ring`], [`joining_tokens`] and
/// [`removed_members`] make of the members: its tokens, state, generation
/// (which breaks ties between token claims), location or takeovers. A
/// change of load, addresses, schema or software version cannot, and
/// spares every node a ring rebuild (each node's load is gossiped when it
/// moves, so at 1,000 nodes a busy cluster would rebuild every node's
/// ring many times a second).
pub(crate) fn reshapes_ring(old: &NodeMetadata, new: &NodeMetadata) -> bool {
    old.tokens != new.tokens
        || old.state != new.state
        || old.stamp.generation != new.stamp.generation
        || old.dc != new.dc
        || old.rack != new.rack
        || old.takeovers != new.takeovers
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
        let ring = build_ring(1, members.iter(), None);
        let hosts: Vec<HostId> = ring.hosts().iter().map(|h| h.id).collect();
        assert_eq!(hosts, vec![HostId::from_u128(1), HostId::from_u128(3)]);
        assert_eq!(
            joining_tokens(members.iter())[&HostId::from_u128(2)],
            vec![Token(10)]
        );
    }

    fn owners(ring: &Ring) -> Vec<u128> {
        ring.hosts().iter().map(|h| h.id.0.as_u128()).collect()
    }

    fn with_tokens(host: u128, state: NodeState, tokens: &[i64]) -> NodeMetadata {
        let mut m = sample(host, 0);
        m.tokens = tokens.iter().copied().map(Token).collect();
        m.state = state;
        m
    }

    #[test]
    fn nothing_pending_without_movements() {
        let members = [
            with_tokens(1, NodeState::Normal, &[1]),
            with_tokens(2, NodeState::Normal, &[2]),
            with_tokens(3, NodeState::Joining, &[]),
        ];
        assert!(build_pending_ring(1, members.iter(), &BTreeSet::new(), &Ring::empty(0)).is_none());
    }

    #[test]
    fn the_pending_ring_adds_joiners_and_drops_leavers() {
        let members = [
            with_tokens(1, NodeState::Normal, &[1]),
            with_tokens(2, NodeState::Leaving, &[2]),
            with_tokens(3, NodeState::Joining, &[3]),
            with_tokens(4, NodeState::Left, &[4]),
        ];
        let pending =
            build_pending_ring(1, members.iter(), &BTreeSet::new(), &Ring::empty(0)).unwrap();
        assert_eq!(owners(&pending), vec![1, 3]);
    }

    #[test]
    fn removal_and_replacement_take_the_dead_node_out() {
        let mut coordinator = with_tokens(1, NodeState::Normal, &[1]);
        coordinator.takeovers.removing = Some(HostId::from_u128(2));
        let members = [
            coordinator.clone(),
            with_tokens(2, NodeState::Normal, &[2]),
            with_tokens(3, NodeState::Normal, &[3]),
        ];
        let pending =
            build_pending_ring(1, members.iter(), &BTreeSet::new(), &Ring::empty(0)).unwrap();
        assert_eq!(owners(&pending), vec![1, 3], "removing 2");

        let mut replacement = with_tokens(4, NodeState::Joining, &[3]);
        replacement.takeovers.replaces = Some(HostId::from_u128(3));
        let members = [
            with_tokens(1, NodeState::Normal, &[1]),
            with_tokens(3, NodeState::Normal, &[3]),
            replacement.clone(),
        ];
        let removed = removed_members(members.iter());
        assert!(
            removed.is_empty(),
            "a joining replacement removes nothing yet"
        );
        let pending = build_pending_ring(1, members.iter(), &removed, &Ring::empty(0)).unwrap();
        assert_eq!(owners(&pending), vec![1, 4], "4 takes 3's token");
        assert_eq!(pending.tokens_of(HostId::from_u128(4)), vec![Token(3)]);

        replacement.state = NodeState::Normal;
        let members = [
            with_tokens(1, NodeState::Normal, &[1]),
            with_tokens(3, NodeState::Normal, &[3]),
            replacement,
        ];
        let removed = removed_members(members.iter());
        assert_eq!(removed, BTreeSet::from([HostId::from_u128(3)]));
        assert!(build_pending_ring(1, members.iter(), &removed, &Ring::empty(0)).is_none());
        let present = members.iter().filter(|m| !removed.contains(&m.host_id));
        assert_eq!(owners(&build_ring(1, present, None)), vec![1, 4]);
    }

    #[test]
    fn a_contested_token_stays_with_the_older_generation() {
        let mut old = sample(2, 0);
        old.tokens = vec![Token(5), Token(6)];
        let mut new = sample(1, 0);
        new.tokens = vec![Token(5), Token(7)];
        new.stamp.generation = Generation(old.stamp.generation.0 + 1);
        let ring = build_ring(1, [&new, &old].into_iter(), None);
        assert_eq!(ring.tokens_of(old.host_id), vec![Token(5), Token(6)]);
        assert_eq!(ring.tokens_of(new.host_id), vec![Token(7)]);
    }

    #[test]
    fn a_token_stays_with_its_incumbent_whatever_generation_a_claimant_names() {
        let mut owner = sample(2, 0);
        owner.tokens = vec![Token(5), Token(6)];
        let before = build_ring(1, [&owner].into_iter(), None);
        let mut claimant = sample(1, 0);
        claimant.tokens = vec![Token(5), Token(9)];
        claimant.stamp.generation = Generation(owner.stamp.generation.0 - 1);
        let after = build_ring(2, [&claimant, &owner].into_iter(), Some(&before));
        assert_eq!(after.tokens_of(owner.host_id), vec![Token(5), Token(6)]);
        assert_eq!(after.tokens_of(claimant.host_id), vec![Token(9)]);
        // Without an incumbent ring, the older generation wins.
        let fresh = build_ring(1, [&claimant, &owner].into_iter(), None);
        assert_eq!(fresh.tokens_of(claimant.host_id), vec![Token(5), Token(9)]);
    }
}
