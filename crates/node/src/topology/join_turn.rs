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
//!   each allocates at once against the members before it in its balance
//!   group ([`BalanceGroup`]: its rack when its data center has as many
//!   racks as replicas, else its data center): their gossiped tokens where
//!   gossip already shows them, otherwise the tokens the deterministic
//!   allocator gives them against the members before *them*
//!   ([`cohort_tokens`]), which is what they choose themselves when their
//!   views agree. No node waits for a gossip round per earlier node, nor
//!   computes a member whose tokens cannot change its own.
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
//!   misplaced. So do nodes that count their data center's racks
//!   differently, as they choose different balance groups.
//! - A member still computes every member before it in its group: the
//!   last of a rack of `k` computes `k - 1` allocations, each against its
//!   rack's tokens only. A data center whose rack count differs from its
//!   replication factor is one group, and costs as much as a one-DC cohort
//!   did before groups (the last of 100 computed 99 allocations against up
//!   to 1,600 tokens).

use std::collections::BTreeMap;

use ringstore_membership::{ClusterView, Liveness, NodeMetadata, NodeState};
use ringstore_placement::allocation::balanced_tokens;
use ringstore_placement::{
    Datacenter, HostId, Location, RING_SIZE, ReplicationStrategy, Ring, RingMember, Token,
};

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
/// tokens cohort members gossip as they choose: each member, where it is
/// and its state, and who owns the ring. A fresh node waits for this, not
/// the whole view, to stop changing: a member that gossips its tokens
/// changes no one's choice (every member computes the same tokens for it,
/// gossiped or not), and, were it counted, each announcement would restart
/// the wait of every member still waiting, one after the other.
///
/// Nor does a member's liveness count. A member that goes down and comes
/// back keeps its place in the cohort ([`cohort_order`]), and in the serial
/// order only its turn moves, which the node waits for anyway. Counted, it
/// kept a 100-node cluster started at once on one 2-core machine from
/// choosing for 81 s: the processes answered probes late, some were
/// suspected and declared down every few seconds, and each verdict
/// restarted every member's wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhoIsStarting {
    members: Vec<(HostId, Location, NodeState)>,
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
                (md.host_id, md.location(), md.state)
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

/// The fresh joiners of `view`, up or down, in the cohort's order:
/// round-robin over racks (a rack's `i`-th joiner before any rack's
/// `i+1`-th), by host id within a rack. Unlike [`join_order`], liveness
/// does not count, so the order does not change while the cohort chooses,
/// nor when a member is wrongly suspected meanwhile (members whose views
/// differ compute different tokens for each other). A joiner that really
/// died before choosing keeps its place, and the ranges it would have had
/// go to its neighbours: less balance until a node joins into them (the
/// allocator places a joiner where the ring is least balanced), no data
/// misplaced, and no one waits for it ([`cohort_still_choosing`] counts
/// live members only).
pub fn cohort_order(view: &ClusterView) -> Vec<CohortMember> {
    let mut racks: BTreeMap<Location, Vec<CohortMember>> = BTreeMap::new();
    for member in view.members.values() {
        let m = &member.metadata;
        if is_fresh_joiner(m, view) {
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

/// The members whose tokens can change a cohort member's balanced choice:
/// the allocator balances each host within its balance group (see
/// `ringstore_placement::allocation`), and a member of another group moves
/// none of the group's replicas. So a cohort member computes the tokens of
/// the members before it in its own group only.
///
/// Computing every member before it cost the 100th member of a 100-node
/// cohort 99 allocations, and the cohort about 5,000 between them: on one
/// 2-core machine half a minute of both cores, while the processes starved
/// answered probes late and were declared down. By rack, with three racks,
/// a member computes a third of the members, each against a third of the
/// tokens, as one replica on its rack's own ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BalanceGroup {
    /// The member's data center has as many racks as replicas, so each
    /// rack holds one copy of every range: a host's share is what lies
    /// between each of its tokens and the rack's token before it, whatever
    /// the other racks hold. The rack's tokens are balanced as one replica
    /// (SimpleStrategy, RF 1) on a ring of the rack's tokens alone.
    Rack {
        /// The rack.
        location: Location,
        /// Its place among its data center's racks, by name.
        index: usize,
        /// How many racks the data center has.
        racks: usize,
    },
    /// Any other data center: its replicas are placed among its own hosts.
    Dc(Datacenter),
}

impl BalanceGroup {
    /// The group of a member at `location` whose data center the
    /// allocator balances for `rf` replicas and holds members in `racks`
    /// (by name, `location`'s among them).
    pub fn new(location: &Location, racks: &[Location], rf: u32) -> BalanceGroup {
        let index = racks.iter().position(|r| r == location);
        match index {
            Some(index) if usize::try_from(rf).is_ok_and(|rf| rf == racks.len()) => {
                BalanceGroup::Rack {
                    location: location.clone(),
                    index,
                    racks: racks.len(),
                }
            }
            _ => BalanceGroup::Dc(location.dc.clone()),
        }
    }

    /// Whether a member at `location` is of this group.
    fn contains(&self, location: &Location) -> bool {
        match self {
            BalanceGroup::Rack { location: rack, .. } => rack == location,
            BalanceGroup::Dc(dc) => *dc == location.dc,
        }
    }

    /// The strategy the group's tokens are balanced for, given the data
    /// center's.
    fn strategy(
        &self,
        dc_strategy: &ReplicationStrategy,
    ) -> ringstore_placement::Result<ReplicationStrategy> {
        match self {
            BalanceGroup::Rack { .. } => ReplicationStrategy::simple(1),
            BalanceGroup::Dc(_) => Ok(dc_strategy.clone()),
        }
    }

    /// How far the group's tokens are turned on the ring from where the
    /// allocator computes them, for members of `count` tokens: every
    /// group's first member gets the same evenly spaced tokens, which must
    /// not collide with another group's. A data center is turned by the
    /// Murmur3 token of its name (data centers' tokens never share a
    /// replica); the racks of one by an even share of the spacing each, so
    /// that their first members interleave exactly, as the first `rf` hosts
    /// of a ring do (which keeps a SimpleStrategy keyspace balanced too).
    fn offset(&self, count: usize) -> u64 {
        let dc = match self {
            BalanceGroup::Rack { location, .. } => &location.dc,
            BalanceGroup::Dc(dc) => dc,
        };
        let (turn, _) = ringstore_placement::cassandra_murmur3_x64_128(dc.as_str().as_bytes(), 0);
        match self {
            BalanceGroup::Rack { index, racks, .. } => {
                let share = RING_SIZE / (count.max(1) * racks) as f64;
                turn.wrapping_add((share * *index as f64) as u64)
            }
            BalanceGroup::Dc(_) => turn,
        }
    }
}

/// The balance group of a cohort member at `location` whose allocator
/// balances `rf` replicas in its data center: by the racks of that data
/// center's members in `view` (but removed and `Left` ones) and its own.
pub fn balance_group(view: &ClusterView, location: &Location, rf: u32) -> BalanceGroup {
    let mut racks: std::collections::BTreeSet<Location> = view
        .members
        .values()
        .map(|m| &m.metadata)
        .filter(|m| m.state != NodeState::Left && !view.removed.contains(&m.host_id))
        .map(|m| m.location())
        .filter(|l| l.dc == location.dc)
        .collect();
    racks.insert(location.clone());
    BalanceGroup::new(location, &racks.into_iter().collect::<Vec<_>>(), rf)
}

/// `count` balanced tokens for `me` at `location`, in balance `group`,
/// against the tokens `taken` and then the members `before` it (in order),
/// of those only the group's: each of those keeps its gossiped tokens, or
/// gets the ones the allocator gives it against what precedes it. A node's
/// first choice takes nothing as `taken` (only the members before it count,
/// so that every node computes the same for each); a node choosing again
/// takes every gossiped token (so it cannot collide with one it knows), and
/// still computes the members before it that are choosing, so that two
/// nodes choosing again at once choose apart. A token two members claim
/// counts once. The group's tokens are computed turned back by its offset
/// ([`BalanceGroup`]), and `strategy` is the one the data center's tokens
/// are balanced for.
pub fn cohort_tokens(
    taken: Vec<RingMember>,
    before: &[CohortMember],
    group: &BalanceGroup,
    me: HostId,
    location: &Location,
    count: usize,
    strategy: &ReplicationStrategy,
) -> ringstore_placement::Result<Vec<Token>> {
    let offset = group.offset(count);
    let turned_back = |tokens: &[Token]| -> Vec<Token> {
        tokens
            .iter()
            .map(|t| Token(t.value().wrapping_sub_unsigned(offset)))
            .collect()
    };
    let strategy = group.strategy(strategy)?;
    let mut claimed: std::collections::BTreeSet<Token> = std::collections::BTreeSet::new();
    let mut placed: Vec<RingMember> = Vec::new();
    let taken = taken
        .into_iter()
        .filter(|m| group.contains(&m.location))
        .map(|m| (m.host, m.location, turned_back(&m.tokens)));
    let before = before
        .iter()
        .filter(|m| group.contains(&m.location))
        .map(|m| (m.host, m.location.clone(), turned_back(&m.tokens)));
    for (host, location, tokens) in taken.chain(before) {
        if placed.iter().any(|p| p.host == host) {
            continue;
        }
        let tokens = if tokens.is_empty() {
            let ring = Ring::new(0, placed.iter().cloned())?;
            balanced_tokens(&ring, host, &location, count, &strategy)?
        } else {
            tokens
        };
        let tokens: Vec<Token> = tokens.into_iter().filter(|&t| claimed.insert(t)).collect();
        if !tokens.is_empty() {
            placed.push(RingMember::new(host, location, tokens));
        }
    }
    let ring = Ring::new(0, placed)?;
    let mut tokens: Vec<Token> = balanced_tokens(&ring, me, location, count, &strategy)?
        .into_iter()
        .map(|t| Token(t.value().wrapping_add_unsigned(offset)))
        // The one value no token may take.
        .map(|t| if t == Token::MIN { t.advance(1) } else { t })
        .collect();
    tokens.sort_unstable();
    Ok(tokens)
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
        let group = balance_group(view, &location, 3);
        cohort_tokens(
            Vec::new(),
            &before,
            &group,
            me,
            &location,
            TOKENS,
            &strategy(),
        )
        .unwrap()
    }

    #[test]
    fn the_balance_group_is_the_rack_when_the_data_center_has_as_many_racks_as_replicas() {
        let a = Location::new("dc1", "a");
        let three = view(1, vec![joiner(1, "a"), joiner(2, "b"), joiner(3, "c")]);
        let rack = |location: &Location, index, racks| BalanceGroup::Rack {
            location: location.clone(),
            index,
            racks,
        };
        assert_eq!(balance_group(&three, &a, 3), rack(&a, 0, 3));
        let two = view(1, vec![joiner(1, "a"), joiner(2, "b")]);
        assert_eq!(balance_group(&two, &a, 3), BalanceGroup::Dc("dc1".into()));
        assert_eq!(balance_group(&two, &a, 2), rack(&a, 0, 2));
        let b = Location::new("dc1", "b");
        assert_eq!(balance_group(&two, &b, 2), rack(&b, 1, 2));
        let four = view(
            1,
            vec![
                joiner(1, "a"),
                joiner(2, "b"),
                joiner(3, "c"),
                joiner(4, "d"),
            ],
        );
        assert_eq!(balance_group(&four, &a, 3), BalanceGroup::Dc("dc1".into()));
        // Another data center's racks do not count.
        let mut other_dc = joiner(5, "b");
        Arc::make_mut(&mut other_dc.metadata).dc = "dc2".into();
        let mut members = vec![joiner(1, "a"), joiner(2, "b"), joiner(3, "c")];
        members.push(other_dc);
        let with_dc2 = view(1, members);
        assert_eq!(balance_group(&with_dc2, &a, 3), rack(&a, 0, 3));
    }

    #[test]
    fn the_first_members_of_the_racks_interleave_exactly() {
        let racks = ["rack1", "rack2", "rack3"];
        let members: Vec<MemberInfo> = (1..=3).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let everyone = view(1, members);
        let mut tokens: Vec<(Token, u128)> = (1..=3)
            .flat_map(|i| cohort_choice(&everyone, i).into_iter().map(move |t| (t, i)))
            .collect();
        tokens.sort();
        assert_eq!(tokens.len(), 3 * TOKENS);
        let gap = RING_SIZE / tokens.len() as f64;
        for (i, pair) in tokens.windows(2).enumerate() {
            let ((a, a_host), (b, b_host)) = (pair[0], pair[1]);
            assert_ne!(
                a_host, b_host,
                "two tokens of node {a_host} in a row at {i}"
            );
            let apart = a.distance_to(b) as f64;
            assert!((apart / gap - 1.0).abs() < 1e-6, "{apart} apart, not {gap}");
        }
    }

    #[test]
    fn a_cohort_member_computes_only_the_members_of_its_balance_group() {
        let racks = ["rack1", "rack2", "rack3"];
        let members: Vec<MemberInfo> = (1..=12).map(|i| joiner(i, racks[i as usize % 3])).collect();
        let everyone = view(1, members.clone());
        // Racks rack1 (3, 6, 9, 12), rack2 (1, 4, 7, 10), rack3 (2, 5, 8,
        // 11): node 11 is last in the order. Drop nodes 10 (rack2) and 12
        // (rack1), both before it: its tokens stay, as they would not had
        // it computed every member before it.
        let without = |dropped: &[u128]| -> ClusterView {
            let kept = members
                .iter()
                .filter(|m| !dropped.contains(&m.metadata.host_id.0.as_u128()))
                .cloned()
                .collect();
            view(1, kept)
        };
        let ids_in_order = |view: &ClusterView| ids(cohort_order(view).into_iter().map(|m| m.host));
        assert_eq!(ids_in_order(&everyone).last(), Some(&11));
        assert_eq!(
            cohort_choice(&without(&[10, 12]), 11),
            cohort_choice(&everyone, 11)
        );
        // Dropping a member of its own rack changes them.
        assert_ne!(
            cohort_choice(&without(&[8]), 11),
            cohort_choice(&everyone, 11)
        );
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
        // Node 3 gossips its tokens and node 5 is seen down: the order stays.
        let mut later = members;
        later[2] = member(3, "a", vec![Token(7)], NodeState::Joining);
        let mut dead = joiner(5, "c");
        dead.liveness = Liveness::Down;
        later[4] = dead;
        assert_eq!(order(&view(1, later)), vec![3, 1, 2, 6, 4, 5, 7]);
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
        // 1.010 here, balancing each rack on its own ring; 1.009 when each
        // member was balanced against every member before it.
        assert!(max / min <= 1.05, "ownership from {min} to {max}");
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
                &balance_group(&now, &location, 3),
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
    fn who_is_starting_ignores_the_tokens_a_cohort_gossips_and_who_is_up_and_nothing_else() {
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
        assert_eq!(who_is_starting(&down), starting, "a member seen down");
        let moved = view(1, vec![joiner(1, "a"), joiner(2, "c")]);
        assert_ne!(who_is_starting(&moved), starting, "a member elsewhere");
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
