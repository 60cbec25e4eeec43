//! A coordinator whose ring is behind its replicas': noticed from their
//! answers, waited out, and the request tried once more.
//!
//! # Why
//! Rings change through gossip: a range movement ends when its node
//! gossips its new state, and every coordinator places requests with the
//! ring it knows. A coordinator cut off from gossip while a movement ended
//! (a partition, a long pause) goes on placing requests with the old ring
//! when it is back, until gossip catches it up: a few hundred milliseconds
//! to seconds. Meanwhile its reads may ask a quorum of the old ring, whose
//! replicas did not get the writes the others placed with the new ring,
//! and its writes may be acknowledged by replicas that no longer own the
//! key: a stale read, or a lost write. The whole-cluster simulation found
//! it (soak seeds 931 and 1147: a node partitioned while a join ended read
//! the old ring's replicas the moment the partition healed, and returned a
//! value older than one acknowledged seconds before). Cassandra has the same
//! gap; its transactional cluster metadata (CEP-21) closes it with epochs.
//!
//! # How
//! - Every coordinator read and write names the checksum of the ring it was
//!   placed with. A replica whose own ring differs serves the request as
//!   usual and also answers with what it knows of every member: the stamp
//!   and state of its metadata ([`answer_for`]).
//! - The coordinator compares ([`ahead`]): a member whose stamp at the
//!   replica is newer than in the placing view *and* whose state differs (a
//!   state change is what moves a ring; newer load figures do not) shows
//!   that the coordinator's ring is behind. That answer counts as a failure
//!   of the replica, and the members are noted ([`RingLag::note`]).
//! - A request that failed while members were noted waits, at most its
//!   timeout, for the node's view to hold them (gossip brings them), then
//!   runs once more, placed with the new ring ([`retry_when_caught_up`]);
//!   so does a request that failed while the node's ring changed (another
//!   request may have noted the members and seen them arrive already). In
//!   a healthy cluster that wait is the few milliseconds a ring change takes
//!   to spread; a coordinator still cut off fails the request, and the
//!   client retries it elsewhere.
//!
//! # Caveats
//! - Only the coordinator's ring matters: a replica behind the coordinator
//!   still serves, since it holds data and the coordinator's ring decides
//!   whom to ask.
//! - Hint replay, repair and streams carry no checksum: they do not place
//!   anything with the ring of the moment.
//! - A coordinator that asks only itself (`ONE` on a local replica) hears
//!   from no replica and cannot notice, as in Cassandra.
//! - A removal (`removenode`, a replacement) travels in the metadata of the
//!   node that performs it, whose state does not change: a coordinator that
//!   missed it is not noticed here.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringstore_membership::{ClusterView, Generation, MetadataStamp, NodeState};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::Result;

/// How long a noted member is awaited at most, whatever requests wait on
/// it: a member this node never hears of again must not keep later
/// requests retrying.
const FORGET_AFTER: Duration = Duration::from_secs(30);

/// Members a replica knew in a newer state than this coordinator, with the
/// stamp its view must reach, and when they were noted.
#[derive(Default)]
pub struct RingLag {
    /// Held only to read or change, never across an await.
    awaited: Mutex<BTreeMap<HostId, (MetadataStamp, Instant)>>,
}

impl RingLag {
    /// Notes members a replica knows in a newer state than this node.
    pub fn note(&self, members: &[(HostId, MetadataStamp)]) {
        let now = Instant::now();
        let mut awaited = self.awaited.lock().unwrap_or_else(PoisonError::into_inner);
        for &(host, stamp) in members {
            let entry = awaited.entry(host).or_insert((stamp, now));
            *entry = (entry.0.max(stamp), now);
        }
    }

    /// Drops what `view` holds (or what was noted too long ago); whether
    /// anything is still awaited.
    fn still_awaited(&self, view: &ClusterView) -> bool {
        let now = Instant::now();
        let mut awaited = self.awaited.lock().unwrap_or_else(PoisonError::into_inner);
        awaited.retain(|host, (stamp, noted)| {
            let arrived = view
                .member(*host)
                .is_some_and(|m| m.metadata.stamp >= *stamp);
            !arrived && now.duration_since(*noted) < FORGET_AFTER
        });
        !awaited.is_empty()
    }

    fn any_awaited(&self) -> bool {
        !self
            .awaited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

/// Runs `attempt`; if it failed, runs it once more when the node's ring
/// moved on meanwhile: when `lag` awaited members, after waiting at most
/// `within` for the node's views (`watch` subscribes to them, only then) to
/// hold them; or when the ring (`ring_now`, its checksum) changed during
/// the attempt. The second case covers a request that failed on members
/// another request had noted and then seen arrive, so that it found
/// nothing awaited any more (the whole-cluster simulation's seed 35: writes
/// that failed together, answered by one call, only one of them retried).
pub async fn retry_when_caught_up<T, F, Fut>(
    lag: &RingLag,
    watch: impl FnOnce() -> watch::Receiver<Arc<ClusterView>>,
    ring_now: impl Fn() -> u64,
    within: Duration,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let ring_before = ring_now();
    let result = attempt().await;
    if result.is_ok() {
        return result;
    }
    let caught_up = lag.any_awaited() && caught_up(lag, watch(), within).await;
    if caught_up || ring_now() != ring_before {
        tracing::debug!("this node's ring caught up with its replicas'; trying again");
        return attempt().await;
    }
    result
}

/// Whether the view now holds every awaited member (waiting at most
/// `within` for gossip to bring them).
async fn caught_up(
    lag: &RingLag,
    mut views: watch::Receiver<Arc<ClusterView>>,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let view = views.borrow_and_update().clone();
        if !lag.still_awaited(&view) {
            return true;
        }
        match tokio::time::timeout_at(deadline, views.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return false,
        }
    }
}

/// A replica's answer to a request placed with ring `checksum`: what it
/// knows of every member when its own ring differs, else nothing.
pub fn answer_for(view: &ClusterView, checksum: u64) -> Vec<pb::MemberStamp> {
    if checksum == 0 || checksum == view.ring.checksum() {
        return Vec::new();
    }
    member_stamps(view)
}

/// What `view` holds of every member: its record's stamp and state.
pub fn member_stamps(view: &ClusterView) -> Vec<pb::MemberStamp> {
    view.members
        .values()
        .map(|m| pb::MemberStamp {
            host_id: m.metadata.host_id.to_string(),
            generation: m.metadata.stamp.generation.0,
            version: m.metadata.stamp.version,
            state: state_to_pb(m.metadata.state).into(),
        })
        .collect()
}

/// The members a replica's answer shows in a newer state than `placed`
/// (the view the request was placed with). Entries that do not decode are
/// skipped: a replica cannot make a coordinator wait with garbage.
pub fn ahead(placed: &ClusterView, members: &[pb::MemberStamp]) -> Vec<(HostId, MetadataStamp)> {
    members
        .iter()
        .filter_map(|m| {
            let host: HostId = m.host_id.parse().ok()?;
            let state = state_from_pb(m.state)?;
            let stamp = MetadataStamp {
                generation: Generation(m.generation),
                version: m.version,
            };
            let newer = match placed.member(host) {
                Some(mine) => stamp > mine.metadata.stamp && state != mine.metadata.state,
                None => state != NodeState::Left,
            };
            newer.then_some((host, stamp))
        })
        .collect()
}

fn state_to_pb(state: NodeState) -> pb::MemberState {
    match state {
        NodeState::Joining => pb::MemberState::Joining,
        NodeState::Normal => pb::MemberState::Normal,
        NodeState::Leaving => pb::MemberState::Leaving,
        NodeState::Left => pb::MemberState::Left,
    }
}

fn state_from_pb(value: i32) -> Option<NodeState> {
    match pb::MemberState::try_from(value).ok()? {
        pb::MemberState::Joining => Some(NodeState::Joining),
        pb::MemberState::Normal => Some(NodeState::Normal),
        pb::MemberState::Leaving => Some(NodeState::Leaving),
        pb::MemberState::Left => Some(NodeState::Left),
        pb::MemberState::Unspecified => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_views::{self, at_version};

    fn member(id: u128, state: NodeState, version: u64) -> ringstore_membership::MemberInfo {
        let tokens = vec![ringstore_placement::Token(id as i64 * 1000)];
        at_version(test_views::member(id, "r1", tokens, state), version)
    }

    fn view(members: Vec<ringstore_membership::MemberInfo>) -> ClusterView {
        test_views::view(1, members)
    }

    /// The coordinator still sees node 3 joining; the replica saw it join,
    /// and also saw node 2's load change (a newer stamp, the same state).
    fn coordinator_and_replica() -> (ClusterView, ClusterView) {
        let coordinator = view(vec![
            member(1, NodeState::Normal, 1),
            member(2, NodeState::Normal, 1),
            member(3, NodeState::Joining, 1),
        ]);
        let replica = view(vec![
            member(1, NodeState::Normal, 1),
            member(2, NodeState::Normal, 5),
            member(3, NodeState::Normal, 2),
        ]);
        (coordinator, replica)
    }

    #[test]
    fn a_replica_answers_with_its_members_only_when_the_rings_differ() {
        let (coordinator, replica) = coordinator_and_replica();
        assert_eq!(answer_for(&replica, replica.ring.checksum()), []);
        assert_eq!(answer_for(&replica, 0), [], "not sent: not checked");
        let answer = answer_for(&replica, coordinator.ring.checksum());
        assert_eq!(answer.len(), 3);
    }

    #[test]
    fn only_a_newer_state_shows_the_coordinator_behind() {
        let (coordinator, replica) = coordinator_and_replica();
        let answer = answer_for(&replica, coordinator.ring.checksum());
        let behind = ahead(&coordinator, &answer);
        let three = MetadataStamp {
            generation: Generation(1),
            version: 2,
        };
        assert_eq!(behind, [(HostId::from_u128(3), three)]);
        // The other way round the replica is the one behind: nothing to wait for.
        let answer = answer_for(&coordinator, replica.ring.checksum());
        assert_eq!(ahead(&replica, &answer), []);
        // Garbage is skipped.
        let garbage = pb::MemberStamp {
            host_id: "not a host".into(),
            generation: 9,
            version: 9,
            state: 77,
        };
        assert_eq!(ahead(&coordinator, &[garbage]), []);
    }

    #[tokio::test(start_paused = true)]
    async fn noted_members_are_awaited_until_the_view_holds_them_or_for_a_while() {
        let (coordinator, replica) = coordinator_and_replica();
        let lag = RingLag::default();
        let behind = ahead(
            &coordinator,
            &answer_for(&replica, coordinator.ring.checksum()),
        );
        lag.note(&behind);
        assert!(lag.still_awaited(&coordinator));
        assert!(!lag.still_awaited(&replica), "the view caught up");
        lag.note(&behind);
        tokio::time::advance(FORGET_AFTER).await;
        assert!(!lag.still_awaited(&coordinator), "forgotten");
    }
}
