//! Whose turn it is to choose tokens: the pure decisions of a fresh node's
//! join, taken from one cluster view ([`join::join`](crate::topology::join::join)
//! is the async shell that waits and gossips).
//!
//! # Two ways in
//! - **Serial** (the ring has owners): the live, token-less joining nodes
//!   take turns in [`join_order`], each only while no other range movement
//!   is under way, so each allocates against the ring it will stream from.
//! - **Fresh cohort** (the ring is empty: no node is `Normal` or `Leaving`,
//!   as when a whole new cluster starts at once): nothing is stored anywhere
//!   and no write can be acknowledged (a key has no natural replica), so the
//!   joiners need not wait for each other to finish. They agree on one order
//!   ([`cohort_order`], the same round-robin over racks as `join_order`), and
//!   each allocates at once against the members before it: their gossiped
//!   tokens where gossip already shows them, otherwise the tokens the
//!   deterministic allocator gives them against the members before *them*
//!   ([`cohort_tokens`]), which is what they choose themselves when their
//!   views agree. No node waits for a gossip round per earlier node.
//!
//! # Invariants
//! - A node decides from its own view only; every node with the same view
//!   takes the same decision and, in a cohort, computes the same tokens for
//!   every member.
//! - Cohort members still announce their tokens as `Joining` and bootstrap
//!   (the shell keeps every wait of the bootstrap: announced everywhere, the
//!   pending ring, streaming what the ring it then sees holds), so writes
//!   that start while some members are already `Normal` reach every pending
//!   replica or are streamed. A member goes `Normal` only once no live
//!   cohort member is still choosing ([`cohort_still_choosing`]), so the
//!   ring stays empty while the cohort announces (bounded by a patience, and
//!   over once a member is `Normal`: a late joiner then takes its turn).
//! - No node takes a token another has gossiped ([`claimed_by_others`]); a
//!   node choosing again after a collision allocates against every gossiped
//!   token and computes the members before it that are choosing too.
//!
//! # Caveats
//! - Nodes whose views of the cohort differ (one started late, or gossip
//!   was slow) compute different tokens for each other: balance suffers and
//!   tokens may collide (the shell then chooses again), but no data is
//!   misplaced.

use std::collections::BTreeMap;

use ringstore_membership::{ClusterView, Liveness, NodeMetadata, NodeState};
use ringstore_placement::allocation::balanced_tokens;
use ringstore_placement::{HostId, Location, ReplicationStrategy, Ring, RingMember, Token};

/// A node of a fresh cohort, as one view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortMember {
    /// The node.
    pub host: HostId,
    /// Its data center and rack.
    pub location: Location,
    /// The tokens gossip shows it has chosen; empty while it has not.
    pub tokens: Vec<Token>,
}

/// How a fresh node that has watched gossip settle chooses its tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinTurn {
    /// The ring has owners: wait for the first place in [`join_order`] and
    /// for no other movement, then allocate against the ring.
    Serial,
    /// The ring is empty: allocate now, against these members of the cohort
    /// that come before this node, in order ([`cohort_tokens`]).
    Cohort(Vec<CohortMember>),
}

/// What `me` does next with the view it has after gossip went quiet.
pub fn join_turn(view: &ClusterView, me: HostId) -> JoinTurn {
    if !view.ring.is_empty() {
        return JoinTurn::Serial;
    }
    JoinTurn::Cohort(cohort_before(view, me))
}

/// What of a view a fresh node's choice of tokens depends on, but for the
/// tokens cohort members gossip as they choose: each member, where it is,
/// its state and whether it is up, and who owns the ring. A fresh node
/// waits for this, not the whole view, to stop changing: a member that
/// gossips its tokens changes no one's choice (every member computes the
/// same tokens for it, gossiped or not), and, were it counted, each
/// announcement would restart the wait of every member still waiting, one
/// after the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhoIsStarting {
    members: Vec<(HostId, Location, NodeState, bool)>,
    owners: Vec<HostId>,
}

/// The [`WhoIsStarting`] of `view`.
pub fn who_is_starting(view: &ClusterView) -> WhoIsStarting {
    WhoIsStarting {
        members: view
            .members
            .values()
            .map(|m| {
                let md = &m.metadata;
                (
                    md.host_id,
                    md.location(),
                    md.state,
                    m.liveness == Liveness::Up,
                )
            })
            .collect(),
        owners: view.ring.hosts().iter().map(|h| h.id).collect(),
    }
}

/// The members of the cohort before `me` in [`cohort_order`].
pub fn cohort_before(view: &ClusterView, me: HostId) -> Vec<CohortMember> {
    cohort_order(view)
        .into_iter()
        .take_while(|m| m.host != me)
        .collect()
}

/// Every other member's gossiped tokens (not `Left`), as ring members; a
/// token two others claim (a collision still being resolved) counts once.
pub fn gossiped_tokens(view: &ClusterView, me: HostId) -> Vec<RingMember> {
    let mut claimed = std::collections::BTreeSet::new();
    view.members
        .values()
        .map(|m| &m.metadata)
        .filter(|m| m.host_id != me && m.state != NodeState::Left)
        .filter_map(|m| {
            let tokens: Vec<Token> = m
                .tokens
                .iter()
                .copied()
                .filter(|&t| claimed.insert(t))
                .collect();
            (!tokens.is_empty()).then(|| RingMember::new(m.host_id, m.location(), tokens))
        })
        .collect()
}

/// Whether `metadata` is a fresh joiner's: `Joining`, replacing no one.
fn is_fresh_joiner(metadata: &NodeMetadata, view: &ClusterView) -> bool {
    metadata.state == NodeState::Joining
        && metadata.takeovers.replaces.is_none()
        && !view.removed.contains(&metadata.host_id)
}

/// The fresh joiners of `view` — live, or down with tokens chosen (those
/// still count on the ring) — in the cohort's order: round-robin over racks
/// (a rack's `i`-th joiner before any rack's `i+1`-th), by host id within a
/// rack. Unlike [`join_order`], a member keeps its place once it has tokens,
/// so the order does not change while the cohort chooses.
pub fn cohort_order(view: &ClusterView) -> Vec<CohortMember> {
    let mut racks: BTreeMap<Location, Vec<CohortMember>> = BTreeMap::new();
    for member in view.members.values() {
        let m = &member.metadata;
        if is_fresh_joiner(m, view) && (member.liveness == Liveness::Up || !m.tokens.is_empty()) {
            racks.entry(m.location()).or_default().push(CohortMember {
                host: m.host_id,
                location: m.location(),
                tokens: m.tokens.clone(),
            });
        }
    }
    let mut order: Vec<(usize, Location, CohortMember)> = racks
        .into_iter()
        .flat_map(|(rack, mut members)| {
            members.sort_by_key(|m| m.host);
            members
                .into_iter()
                .enumerate()
                .map(move |(i, m)| (i, rack.clone(), m))
        })
        .collect();
    order.sort_by(|a, b| (a.0, &a.1, a.2.host).cmp(&(b.0, &b.1, b.2.host)));
    order.into_iter().map(|(_, _, m)| m).collect()
}

/// The first live cohort member that has not chosen tokens yet, if any: a
/// cohort member waits for none before turning `Normal`. None once the
/// ring has an owner: a member has turned `Normal` already, so one still
/// choosing finds the ring not empty and takes its turn after the cohort.
pub fn cohort_still_choosing(view: &ClusterView, me: HostId) -> Option<HostId> {
    if !view.ring.is_empty() {
        return None;
    }
    view.members
        .values()
        .filter(|m| m.metadata.host_id != me && m.liveness == Liveness::Up)
        .map(|m| &m.metadata)
        .find(|m| is_fresh_joiner(m, view) && m.tokens.is_empty())
        .map(|m| m.host_id)
}

/// Whether another member (not `Left` nor removed) has gossiped any of
/// `tokens`: a cohort member whose view of the cohort differed from this
/// node's may have been given the same place.
pub fn claimed_by_others(view: &ClusterView, me: HostId, tokens: &[Token]) -> bool {
    view.members
        .values()
        .map(|m| &m.metadata)
        .filter(|m| m.host_id != me && m.state != NodeState::Left)
        .filter(|m| !view.removed.contains(&m.host_id))
        .any(|m| m.tokens.iter().any(|t| tokens.contains(t)))
}

/// `count` balanced tokens for `me` at `location`, against the tokens
/// `taken` and then the members `before` it (in order): each of those keeps
/// its gossiped tokens, or gets the ones the allocator gives it against
/// what precedes it. A node's first choice takes nothing as `taken` (only
/// the members before it count, so that every node computes the same for
/// each); a node choosing again takes every gossiped token (so it cannot
/// collide with one it knows), and still computes the members before it
/// that are choosing, so that two nodes choosing again at once choose
/// apart. A token two members claim counts once.
pub fn cohort_tokens(
    taken: Vec<RingMember>,
    before: &[CohortMember],
    me: HostId,
    location: &Location,
    count: usize,
    strategy: &ReplicationStrategy,
) -> ringstore_placement::Result<Vec<Token>> {
    let mut claimed: std::collections::BTreeSet<Token> = taken
        .iter()
        .flat_map(|m| m.tokens.iter().copied())
        .collect();
    let mut placed = taken;
    for member in before {
        if placed.iter().any(|p| p.host == member.host) {
            continue;
        }
        let tokens = if member.tokens.is_empty() {
            let ring = Ring::new(0, placed.iter().cloned())?;
            balanced_tokens(&ring, member.host, &member.location, count, strategy)?
        } else {
            member.tokens.clone()
        };
        let tokens: Vec<Token> = tokens.into_iter().filter(|&t| claimed.insert(t)).collect();
        if !tokens.is_empty() {
            placed.push(RingMember::new(
                member.host,
                member.location.clone(),
                tokens,
            ));
        }
    }
    let ring = Ring::new(0, placed)?;
    balanced_tokens(&ring, me, location, count, strategy)
}

/// The order in which the live, token-less joining nodes choose tokens
/// when the ring has owners: round-robin over racks — a rack's next joiner
/// goes before any rack's joiner after it, counting the rack's nodes that
/// already have tokens — and by host id within a rack. Growing racks evenly
/// is what lets the balanced allocator keep every rack's nodes balanced (it
/// cannot move tokens placed before the final rack layout was known). Every
/// node computes the same order from the same view.
pub fn join_order(view: &ClusterView) -> Vec<HostId> {
    let mut placed: BTreeMap<Location, usize> = BTreeMap::new();
    let mut waiting: BTreeMap<Location, Vec<HostId>> = BTreeMap::new();
    for member in view.members.values() {
        let m = &member.metadata;
        if !m.tokens.is_empty() && m.state != NodeState::Left {
            *placed.entry(m.location()).or_default() += 1;
        } else if m.tokens.is_empty()
            && m.state == NodeState::Joining
            && member.liveness == Liveness::Up
        {
            waiting.entry(m.location()).or_default().push(m.host_id);
        }
    }
    let mut order: Vec<(usize, Location, HostId)> = waiting
        .into_iter()
        .flat_map(|(rack, mut hosts)| {
            hosts.sort_unstable();
            let base = placed.get(&rack).copied().unwrap_or(0);
            hosts
                .into_iter()
                .enumerate()
                .map(move |(i, host)| (base + i, rack.clone(), host))
        })
        .collect();
    order.sort();
    order.into_iter().map(|(_, _, host)| host).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use ringstore_membership::MemberInfo;
    use ringstore_placement::ReplicaMap;

    use super::*;
    use crate::test_views::{member, view};

    const TOKENS: usize = 16;

    fn joiner(id: u128, rack: &str) -> MemberInfo {
        member(id, rack, Vec::new(), NodeState::Joining)
    }

    fn strategy() -> ReplicationStrategy {
        ReplicationStrategy::network_topology([("dc1", 3)]).unwrap()
    }

    fn ids(hosts: impl IntoIterator<Item = HostId>) -> Vec<u128> {
        hosts.into_iter().map(|h| h.0.as_u128()).collect()
    }

    /// The tokens `me` chooses from `view` (it must be a cohort member).
    fn cohort_choice(view: &ClusterView, me: u128) -> Vec<Token> {
        let me = HostId::from_u128(me);
        let JoinTurn::Cohort(before) = join_turn(view, me) else {
            panic!("{me} is not in a cohort");
        };
        let location = view.member(me).unwrap().metadata.location();
        cohort_tokens(Vec::new(), &before, me, &location, TOKENS, &strategy()).unwrap()
    }

    #[test]
    fn joiners_take_turns_round_robin_over_racks() {
        let view = view(
            1,
            vec![
                joiner(1, "a"),
                joiner(2, "a"),
                joiner(3, "b"),
                member(4, "c", vec![Token(1), Token(2)], NodeState::Normal),
                joiner(5, "c"),
            ],
        );
        // Rack c already has a node, so its joiner comes after the first of a and b.
        assert_eq!(ids(join_order(&view)), vec![1, 3, 2, 5]);
        assert_eq!(
            join_turn(&view, HostId::from_u128(1)),
            JoinTurn::Serial,
            "a ring with an owner means turns"
        );
    }

    #[test]
    fn a_new_cluster_is_one_cohort_in_round_robin_order_that_chosen_tokens_do_not_reorder() {
        let racks = ["a", "b", "c"];
        let members: Vec<MemberInfo> = (1..=7).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let order = |view: &ClusterView| ids(cohort_order(view).into_iter().map(|m| m.host));
        let fresh = view(1, members.clone());
        // Racks a (3, 6), b (1, 4, 7), c (2, 5): round-robin, by host id within a rack.
        assert_eq!(order(&fresh), vec![3, 1, 2, 6, 4, 5, 7]);
        let JoinTurn::Cohort(before) = join_turn(&fresh, HostId::from_u128(4)) else {
            panic!("an empty ring is a cohort");
        };
        assert_eq!(ids(before.iter().map(|m| m.host)), vec![3, 1, 2, 6]);
        // Node 3 gossips its tokens and node 5 dies: the order of the rest stays.
        let mut later = members;
        later[2] = member(3, "a", vec![Token(7)], NodeState::Joining);
        let mut dead = joiner(5, "c");
        dead.liveness = Liveness::Down;
        later[4] = dead;
        assert_eq!(order(&view(1, later)), vec![3, 1, 2, 6, 4, 7]);
    }

    #[test]
    fn cohort_members_compute_the_same_tokens_for_each_other_and_balance_them() {
        let racks = ["rack1", "rack2", "rack3"];
        let members: Vec<MemberInfo> = (1..=12).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let everyone = view(1, members.clone());
        // Each node, deciding alone from the same view, chooses its tokens.
        let chosen: BTreeMap<u128, Vec<Token>> =
            (1..=12).map(|i| (i, cohort_choice(&everyone, i))).collect();
        let all: BTreeSet<Token> = chosen.values().flatten().copied().collect();
        assert_eq!(all.len(), 12 * TOKENS, "no two nodes chose one token");
        // A node that already sees some of them gossiped chooses just the same.
        let mut gossiped = members;
        for m in gossiped.iter_mut().take(5) {
            let id = m.metadata.host_id.0.as_u128();
            let rack = racks[id as usize % 3];
            *m = member(id, rack, chosen[&id].clone(), NodeState::Joining);
        }
        let partly = view(1, gossiped);
        for i in 6..=12 {
            assert_eq!(cohort_choice(&partly, i), chosen[&i], "node {i}");
        }
        // Effective ownership at RF 3 over the three racks is balanced.
        let ring = Ring::new(
            0,
            chosen.iter().map(|(&i, tokens)| {
                RingMember::new(
                    HostId::from_u128(i),
                    Location::new("dc1", racks[i as usize % 3]),
                    tokens.clone(),
                )
            }),
        )
        .unwrap();
        let owned = ReplicaMap::new(Arc::new(ring), &strategy()).effective_ownership();
        let (min, max) = owned
            .values()
            .fold((f64::MAX, 0.0_f64), |(lo, hi), &o| (lo.min(o), hi.max(o)));
        assert!(max / min <= 1.25, "ownership from {min} to {max}");
    }

    #[test]
    fn a_node_that_took_the_same_place_in_another_view_is_seen_claiming_the_tokens() {
        let racks = ["rack1", "rack2", "rack3"];
        // Node 4 (rack2) does not see node 1 (rack2, before it): it takes
        // node 1's place in the order, and so its tokens.
        let all: Vec<MemberInfo> = (1..=6).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let first = cohort_choice(&view(1, all.clone()), 1);
        let without_1: Vec<MemberInfo> = all
            .iter()
            .filter(|m| m.metadata.host_id != HostId::from_u128(1))
            .cloned()
            .collect();
        let fourth = cohort_choice(&view(4, without_1.clone()), 4);
        assert_eq!(first, fourth, "the same place, the same tokens");
        let mut seen = all;
        seen[0] = member(1, racks[1], first.clone(), NodeState::Joining);
        assert!(claimed_by_others(
            &view(4, seen.clone()),
            HostId::from_u128(4),
            &fourth
        ));
        assert!(
            !claimed_by_others(&view(1, seen), HostId::from_u128(1), &first),
            "its own tokens do not count"
        );
        let mut left = member(1, racks[1], first, NodeState::Left);
        left.liveness = Liveness::Down;
        let mut gone = without_1;
        gone.push(left);
        assert!(
            !claimed_by_others(&view(4, gone), HostId::from_u128(4), &fourth),
            "nor a left node's"
        );
    }

    #[test]
    fn two_nodes_choosing_again_at_once_choose_apart_and_clear_of_every_gossiped_token() {
        let racks = ["rack1", "rack2", "rack3"];
        let members: Vec<MemberInfo> = (1..=6).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let fresh = view(1, members);
        let mut now: Vec<MemberInfo> = (1..=6)
            .map(|i| {
                member(
                    i,
                    racks[i as usize % 3],
                    cohort_choice(&fresh, i),
                    NodeState::Joining,
                )
            })
            .collect();
        // Nodes 2 and 5 lost a collision and cleared their tokens.
        now[1] = joiner(2, racks[2]);
        now[4] = joiner(5, racks[2]);
        let now = view(1, now);
        let again = |me: u128| {
            let me = HostId::from_u128(me);
            let location = now.member(me).unwrap().metadata.location();
            cohort_tokens(
                gossiped_tokens(&now, me),
                &cohort_before(&now, me),
                me,
                &location,
                TOKENS,
                &strategy(),
            )
            .unwrap()
        };
        let (two, five) = (again(2), again(5));
        let others: BTreeSet<Token> = gossiped_tokens(&now, HostId::from_u128(2))
            .into_iter()
            .flat_map(|m| m.tokens)
            .collect();
        assert_eq!(others.len(), 4 * TOKENS);
        let all: BTreeSet<Token> = others.iter().chain(&two).chain(&five).copied().collect();
        assert_eq!(all.len(), 6 * TOKENS, "no token chosen twice");
    }

    #[test]
    fn a_cohort_member_waits_for_live_members_still_choosing() {
        let me = HostId::from_u128(1);
        let mut dead = joiner(3, "c");
        dead.liveness = Liveness::Down;
        let choosing = view(
            1,
            vec![
                joiner(1, "a"),
                member(2, "b", vec![Token(5)], NodeState::Joining),
                dead.clone(),
                joiner(4, "a"),
            ],
        );
        assert_eq!(
            cohort_still_choosing(&choosing, me),
            Some(HostId::from_u128(4))
        );
        let chosen = view(
            1,
            vec![
                joiner(1, "a"),
                member(2, "b", vec![Token(5)], NodeState::Joining),
                dead,
                member(4, "a", vec![Token(9)], NodeState::Joining),
            ],
        );
        assert_eq!(
            cohort_still_choosing(&chosen, me),
            None,
            "itself and a dead member do not count"
        );
        let normal = view(
            1,
            vec![
                joiner(1, "a"),
                member(2, "b", vec![Token(5)], NodeState::Normal),
                joiner(4, "a"),
            ],
        );
        assert_eq!(
            cohort_still_choosing(&normal, me),
            None,
            "once a member is Normal, one still choosing takes a turn after the cohort"
        );
    }

    #[test]
    fn who_is_starting_ignores_the_tokens_a_cohort_gossips_and_nothing_else() {
        let before = view(1, vec![joiner(1, "a"), joiner(2, "b")]);
        let starting = who_is_starting(&before);
        let chosen = view(
            1,
            vec![
                joiner(1, "a"),
                member(2, "b", vec![Token(5)], NodeState::Joining),
            ],
        );
        assert_eq!(who_is_starting(&chosen), starting, "tokens gossiped");
        let grown = view(1, vec![joiner(1, "a"), joiner(2, "b"), joiner(3, "c")]);
        assert_ne!(who_is_starting(&grown), starting, "a member more");
        let mut down = before.clone();
        down.members
            .get_mut(&HostId::from_u128(2))
            .unwrap()
            .liveness = Liveness::Down;
        assert_ne!(who_is_starting(&down), starting, "a member down");
        let normal = view(
            1,
            vec![
                joiner(1, "a"),
                member(2, "b", vec![Token(5)], NodeState::Normal),
            ],
        );
        assert_ne!(who_is_starting(&normal), starting, "a ring owner");
    }
}
