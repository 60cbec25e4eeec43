//! Catching up with the peers before data moves: a node about to compute
//! the ranges it gains or gives away must hold every member record its
//! live peers hold, down members included.
//!
//! Gossip does not promise that by itself. A node learns the records of
//! members that are up by pulling them when it sees them up, but a member
//! that was already down when this node started cannot be pulled from; its
//! record arrives only in another member's digest (one a second, to two
//! random members each: usually within a second or two, never certainly).
//! A joiner that chose tokens and computed its transfers before that built
//! its ring without the down member: it streamed too little, turned
//! `Normal`, and answered "not found" for keys whose range the true ring
//! gave it (simulation seed 5491 found it: an acknowledged `QUORUM` write
//! read back as missing, from the joiner and the down member's stale copy).
//!
//! So [`wait_until_caught_up`] asks every live peer which record of each
//! member it holds (`MembersSeen` over the internode port), and waits until
//! the view holds at least as new a record of each, pulling what is missing
//! from a peer that holds it (a gossip pull: the record arrives signed by
//! its member, checked as every gossiped record is). [`behind`] is the pure
//! part: what the view lacks, and whom to ask for it.
//!
//! # Caveats
//! - Each peer answers with one entry per member, so a join asks for
//!   O(members²) entries in all (about 500 KB at 100 nodes); at thousands of
//!   nodes a sample of peers would do for the full lists.
//! - A peer of a build without `MembersSeen` (a rolling upgrade) answers
//!   `UNIMPLEMENTED`: it counts as a peer that did not answer, and the
//!   wait goes on without it, as before the call existed.
//! - Records that arrive during the wait from a peer not asked, or after
//!   it, are not waited for: the question is "at least what the peers held
//!   when asked", as with the announcement this node waits for
//!   ([`wait_until_announced`](super::waits::wait_until_announced)).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;

use crate::topology::host::TopologyHost;

/// How long a node waits for its view to catch up before it proceeds (with
/// a warning): a peer whose record cannot be fetched is about to be seen
/// down, or holds a record this node refuses.
const CATCH_UP_PATIENCE: Duration = Duration::from_secs(30);
/// How often records still missing are pulled again (a pull is a datagram,
/// and can be lost).
const PULL_AGAIN_AFTER: Duration = Duration::from_millis(500);
/// How long a peer has to answer `MembersSeen`.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// A record stamp: (generation, version), ordered as the membership orders
/// records.
type Stamp = (u64, u64);

/// What one live peer said it holds.
#[derive(Clone, Debug)]
pub struct PeerHolds {
    /// The peer's gossip address, where a pull goes.
    pub gossip: SocketAddr,
    /// The stamp of its record of each member.
    pub members: BTreeMap<HostId, Stamp>,
}

/// The members whose record in `view` is missing or older than one a peer
/// holds, grouped by the peer to pull them from (the one holding the newest
/// record). Leaves out this node itself (its record is its own to change)
/// and members the view counts as removed (it refuses their records).
pub fn behind(view: &ClusterView, held: &[PeerHolds]) -> BTreeMap<SocketAddr, Vec<HostId>> {
    let mut newest: BTreeMap<HostId, (Stamp, SocketAddr)> = BTreeMap::new();
    for peer in held {
        for (&host, &stamp) in &peer.members {
            let entry = newest.entry(host).or_insert((stamp, peer.gossip));
            if stamp > entry.0 {
                *entry = (stamp, peer.gossip);
            }
        }
    }
    let mut pulls: BTreeMap<SocketAddr, Vec<HostId>> = BTreeMap::new();
    for (host, (stamp, from)) in newest {
        if host == view.local || view.removed.contains(&host) {
            continue;
        }
        let mine = view
            .member(host)
            .map(|m| (m.metadata.stamp.generation.0, m.metadata.stamp.version));
        if mine.is_none_or(|mine| mine < stamp) {
            pulls.entry(from).or_default().push(host);
        }
    }
    pulls
}

/// Waits until this node's view holds, of every member any live peer holds
/// (down ones included), at least the record that peer held when asked:
/// every state change a peer saw before the question — a node that turned
/// `Normal`, say — is then in the view, and so is every down member's place
/// in the ring. Pulls what is missing, again every `PULL_AGAIN_AFTER`. Gives
/// up after `CATCH_UP_PATIENCE`, and on peers that do not answer, with a
/// warning.
pub async fn wait_until_caught_up(context: &impl TopologyHost) {
    let view = context.view();
    let peers: Vec<(HostId, SocketAddr, SocketAddr)> = view
        .up_members()
        .filter(|m| m.metadata.host_id != context.host_id())
        .map(|m| {
            let metadata = &m.metadata;
            (
                metadata.host_id,
                metadata.internode_addr,
                metadata.gossip_addr,
            )
        })
        .collect();
    let asks = peers.iter().map(|&(_, internode, gossip)| async move {
        members_seen(context, internode)
            .await
            .map(|members| PeerHolds { gossip, members })
    });
    let answers = futures::future::join_all(asks).await;
    let unanswered: Vec<HostId> = answers
        .iter()
        .zip(&peers)
        .filter(|(answer, _)| answer.is_none())
        .map(|(_, &(host, _, _))| host)
        .collect();
    let held: Vec<PeerHolds> = answers.into_iter().flatten().collect();
    let mut views = context.membership().watch_view();
    let deadline = tokio::time::Instant::now() + CATCH_UP_PATIENCE;
    let mut pull_at = tokio::time::Instant::now();
    loop {
        let pulls = behind(&context.view(), &held);
        if pulls.is_empty() {
            if !unanswered.is_empty() {
                tracing::warn!(
                    ?unanswered,
                    "some live peers did not say which records they hold; proceeding"
                );
            }
            return;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            let missing: Vec<&HostId> = pulls.values().flatten().collect();
            tracing::warn!(
                ?missing,
                ?unanswered,
                "this node's view has not caught up with its live peers; proceeding"
            );
            return;
        }
        if now >= pull_at {
            for (from, hosts) in pulls {
                tracing::debug!(%from, ?hosts, "pulling member records this node lacks");
                if context.membership().pull(from, hosts).await.is_err() {
                    return; // Gossip stopped: so is the node.
                }
            }
            pull_at = now + PULL_AGAIN_AFTER;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), views.changed()).await;
    }
}

/// The stamp of each member record the node at `address` holds, asked over
/// the internode port; `None` if it did not answer within `ASK_TIMEOUT` or
/// named a host id that does not parse.
async fn members_seen(
    context: &impl TopologyHost,
    address: SocketAddr,
) -> Option<BTreeMap<HostId, Stamp>> {
    let answer = tokio::time::timeout(
        ASK_TIMEOUT,
        context
            .peers()
            .client(address)
            .members_seen(pb::MembersSeenRequest {}),
    )
    .await;
    let Ok(Ok(response)) = answer else {
        return None;
    };
    response
        .into_inner()
        .members
        .into_iter()
        .map(|m| {
            let host = m.host_id.parse().ok().map(HostId)?;
            Some((host, (m.generation, m.version)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_views::{at_version, member, view};
    use ringstore_membership::NodeState::{Joining, Normal};
    use ringstore_placement::Token;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn holds(port: u16, members: &[(u128, u64)]) -> PeerHolds {
        PeerHolds {
            gossip: addr(port),
            members: members
                .iter()
                .map(|&(id, version)| (HostId::from_u128(id), (1, version)))
                .collect(),
        }
    }

    /// Node 4's view: itself (joining), 1 and 2 at version 1, no record of 3.
    fn joiner_view() -> ClusterView {
        view(
            4,
            vec![
                member(1, "r1", vec![Token(10)], Normal),
                member(2, "r1", vec![Token(20)], Normal),
                member(4, "r1", vec![], Joining),
            ],
        )
    }

    #[test]
    fn a_member_the_peers_hold_and_the_view_lacks_is_pulled() {
        let pulls = behind(
            &joiner_view(),
            &[
                holds(1, &[(1, 1), (2, 1), (3, 1)]),
                holds(2, &[(1, 1), (2, 1)]),
            ],
        );
        assert_eq!(
            pulls,
            BTreeMap::from([(addr(1), vec![HostId::from_u128(3)])])
        );
    }

    #[test]
    fn an_older_record_is_pulled_from_the_peer_with_the_newest() {
        let pulls = behind(
            &joiner_view(),
            &[
                holds(1, &[(2, 2)]),
                holds(2, &[(2, 3)]),
                holds(3, &[(2, 1)]),
            ],
        );
        assert_eq!(
            pulls,
            BTreeMap::from([(addr(2), vec![HostId::from_u128(2)])])
        );
    }

    #[test]
    fn a_view_as_new_as_every_peer_or_newer_is_caught_up() {
        let mut view = joiner_view();
        let two = view.members.get_mut(&HostId::from_u128(2)).unwrap();
        *two = at_version(two.clone(), 5);
        assert!(behind(&view, &[holds(1, &[(1, 1), (2, 4)]), holds(2, &[])]).is_empty());
    }

    #[test]
    fn its_own_record_and_removed_members_are_never_waited_for() {
        let mut view = joiner_view();
        view.removed.insert(HostId::from_u128(3));
        assert!(behind(&view, &[holds(1, &[(3, 7), (4, 9)])]).is_empty());
    }
}
