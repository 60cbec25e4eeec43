//! Before a dead node leaves the ring (removenode, replace), every surviving
//! replica of its ranges finishes the compare-and-sets it holds unfinished
//! there.
//!
//! A join or a decommission needs less. The replica that loses a range
//! streams it, and before it does it finishes its own unfinished proposals
//! there (`coordinator/cas/repair.rs`); a value chosen by a quorum without
//! that replica keeps the rest of the quorum, which meets every quorum of
//! the new replica set. A dead node cannot finish its own. Take RF 3,
//! replicas {A, B, D}, D dead: a value accepted by {A, D} is chosen, and its
//! commit may never have landed. removenode streams the range to the new
//! replica N from B (any survivor may be the source), which holds nothing of
//! it; once D is out, {B, N} is a quorum of {A, B, N} that never heard of the
//! value, and a compare-and-set through it decides on the older one: the
//! chosen value is lost. Cassandra 4.1 runs a Paxos repair of the ranges
//! before such a change completes, for the same reason.
//!
//! So the node running the change asks every live survivor of each range
//! the dead node replicated (`FinishProposals` over the internode port), and
//! each finishes its own unfinished proposals in those ranges while N is a
//! pending replica, in the electorate: the round commits the chosen value to
//! N and to every live replica.
//!
//! # How many must finish
//! A chosen value was accepted by a quorum of the old replicas: of those in
//! the local data center for `LOCAL_SERIAL`, of all of them for `SERIAL`.
//! It is safe once one of its acceptors has finished it, so the replicas
//! that did *not* finish (the dead node always among them) must be too few
//! to make a quorum ([`unfinished_ranges`]): fewer than a quorum of all,
//! and fewer than a local quorum in each data center. For RF 3, both
//! survivors. A data center where the dead node was the only replica
//! (RF 1 there) has nobody to ask: what it alone accepted is lost with its
//! data, and the change goes on, as its streaming does (with a warning
//! there); so does a range with no survivor at all. A survivor counts as
//! not finished when it is down, does not answer, or one of its rounds
//! failed (its state stays, and it is counted for the whole keyspace).
//!
//! When a range is short, the change stops with an error naming the range
//! and its survivors that did not finish; bring them up and run it again.
//! This runs before the sync of the gained ranges, which refuses a down
//! replica anyway (a Merkle-tree repair needs every replica), and the sync
//! then spreads what the rounds committed. Cassandra's
//! `skip_paxos_repair_on_topology_change` has no counterpart: it would not
//! get a change past that sync.
//!
//! # Caveats
//! - Each survivor walks the keyspace's whole Paxos state once per request
//!   (as a streaming source does per range; see `cas/repair.rs`).
//! - A survivor that holds no Paxos state still has to answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::{Datacenter, HostId, MovementPlan, ReplicaMap, Ring, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_storage::KeyspaceId;

use crate::convert::range_to_pb;
use crate::error::{Result, TopologyError};
use crate::schema::KeyspaceDef;
use crate::topology::host::TopologyHost;

/// How long a survivor has to finish its proposals of one keyspace.
const FINISH_PATIENCE: Duration = Duration::from_secs(300);

/// A range the dead node replicated, with its replicas before the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadRange {
    /// The range.
    pub range: TokenRange,
    /// Its replicas before the change, each with its data center; the dead
    /// node among them.
    pub replicas: Vec<(HostId, Option<Datacenter>)>,
}

/// The ranges of `keyspace` that `dead` replicates on `before` and that
/// change replicas on the way to `after`.
pub fn dead_ranges(
    keyspace: &KeyspaceDef,
    before: &Arc<Ring>,
    after: &Arc<Ring>,
    dead: HostId,
) -> Vec<DeadRange> {
    let old = ReplicaMap::new(before.clone(), &keyspace.strategy);
    let new = ReplicaMap::new(after.clone(), &keyspace.strategy);
    MovementPlan::between(&old, &new)
        .movements
        .into_iter()
        .filter(|m| m.before.contains(&dead))
        .map(|m| DeadRange {
            range: m.range,
            replicas: m
                .before
                .iter()
                .map(|&host| (host, before.host(host).map(|h| h.location.dc.clone())))
                .collect(),
        })
        .collect()
}

/// The ranges whose replicas that finished (`finished`) are too few: in
/// some data center, those that did not finish make a local quorum. Each
/// with the survivors that did not finish (not `dead`).
pub fn unfinished_ranges(
    ranges: &[DeadRange],
    dead: HostId,
    finished: &BTreeSet<HostId>,
) -> Vec<(TokenRange, Vec<HostId>)> {
    let mut short = Vec::new();
    for range in ranges {
        // Per data center: replicas, those that did not finish, survivors.
        let mut per_dc: BTreeMap<Option<&Datacenter>, (usize, usize, usize)> = BTreeMap::new();
        for (host, dc) in &range.replicas {
            let (replicas, unfinished, survivors) = per_dc.entry(dc.as_ref()).or_default();
            *replicas += 1;
            if !finished.contains(host) {
                *unfinished += 1;
            }
            if *host != dead {
                *survivors += 1;
            }
        }
        let quorum = |replicas: usize| replicas / 2 + 1;
        let unfinished = range
            .replicas
            .iter()
            .filter(|(host, _)| !finished.contains(host))
            .count();
        // Where the dead node was the only replica, nobody can finish
        // anything: what it alone accepted is lost with its data.
        let anyone = range.replicas.iter().any(|(host, _)| *host != dead);
        let short_somewhere = per_dc.values().any(|&(replicas, unfinished, survivors)| {
            survivors > 0 && unfinished >= quorum(replicas)
        });
        if anyone && (unfinished >= quorum(range.replicas.len()) || short_somewhere) {
            let survivors = range
                .replicas
                .iter()
                .map(|(host, _)| *host)
                .filter(|host| *host != dead && !finished.contains(host))
                .collect();
            short.push((range.range, survivors));
        }
    }
    short
}

/// Has every live survivor of the ranges `dead` replicates finish its
/// compare-and-sets there (see the module docs), on the way from `before`
/// to `after`; refuses when a range is short.
pub async fn finish_survivors_proposals<H: TopologyHost>(
    context: &Arc<H>,
    before: &Arc<Ring>,
    after: &Arc<Ring>,
    dead: HostId,
) -> Result<()> {
    for keyspace in context.keyspaces() {
        let ranges = dead_ranges(&keyspace, before, after, dead);
        let survivors: BTreeSet<HostId> = ranges
            .iter()
            .flat_map(|r| r.replicas.iter().map(|(host, _)| *host))
            .filter(|host| *host != dead)
            .collect();
        let asks = survivors.iter().map(|&survivor| {
            let mine: Vec<TokenRange> = ranges
                .iter()
                .filter(|r| r.replicas.iter().any(|(host, _)| *host == survivor))
                .map(|r| r.range)
                .collect();
            let keyspace = &keyspace;
            async move {
                finish_on(&**context, survivor, keyspace.id, mine)
                    .await
                    .map_err(|error| {
                        tracing::warn!(%survivor, keyspace = %keyspace.name, %error,
                            "a survivor did not finish its compare-and-sets of the dead node's ranges");
                    })
                    .ok()
                    .map(|()| survivor)
            }
        });
        let finished: BTreeSet<HostId> = futures::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .collect();
        if let Some((range, unfinished)) = unfinished_ranges(&ranges, dead, &finished)
            .into_iter()
            .next()
        {
            return Err(TopologyError::ProposalsUnfinished {
                keyspace: keyspace.name.clone(),
                range,
                unfinished,
            }
            .into());
        }
    }
    Ok(())
}

/// Asks `survivor` to finish its proposals of `keyspace` in `ranges`; an
/// error if it is down, does not answer, or a round failed.
async fn finish_on(
    context: &impl TopologyHost,
    survivor: HostId,
    keyspace: KeyspaceId,
    ranges: Vec<TokenRange>,
) -> std::result::Result<(), String> {
    let view = context.view();
    if !view.is_up(survivor) && survivor != context.host_id() {
        return Err("it is down".into());
    }
    let address = view
        .member(survivor)
        .map(|m| m.metadata.internode_addr)
        .ok_or("its address is unknown")?;
    let request = pb::FinishProposalsRequest {
        keyspace_id: keyspace.to_string(),
        ranges: ranges.into_iter().map(range_to_pb).collect(),
    };
    let mut client = context.peers().client(address);
    let answer = tokio::time::timeout(FINISH_PATIENCE, client.finish_proposals(request))
        .await
        .map_err(|_| format!("no answer within {FINISH_PATIENCE:?}"))?
        .map_err(|status| status.message().to_string())?
        .into_inner();
    match answer.failed {
        0 => Ok(()),
        failed => Err(format!(
            "{failed} of its rounds failed ({} finished)",
            answer.finished
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::Token;

    fn range() -> TokenRange {
        TokenRange::new(Token(0), Token(100))
    }

    fn replicas(hosts: &[(u128, &str)]) -> DeadRange {
        DeadRange {
            range: range(),
            replicas: hosts
                .iter()
                .map(|&(h, dc)| (host(h), Some(Datacenter::from(dc))))
                .collect(),
        }
    }

    fn finished(hosts: &[u128]) -> BTreeSet<HostId> {
        hosts.iter().map(|&h| host(h)).collect()
    }

    fn host(h: u128) -> HostId {
        HostId(uuid::Uuid::from_u128(h))
    }

    #[test]
    fn with_three_replicas_both_survivors_must_finish() {
        let ranges = [replicas(&[(1, "dc1"), (2, "dc1"), (9, "dc1")])];
        let dead = host(9);
        assert!(unfinished_ranges(&ranges, dead, &finished(&[1, 2])).is_empty());
        assert_eq!(
            unfinished_ranges(&ranges, dead, &finished(&[1])),
            [(range(), vec![host(2)])]
        );
        assert_eq!(
            unfinished_ranges(&ranges, dead, &finished(&[])),
            [(range(), vec![host(1), host(2)])]
        );
    }

    #[test]
    fn a_range_only_the_dead_node_held_has_nobody_to_ask() {
        let dead = host(9);
        let alone = [replicas(&[(9, "dc1")])];
        assert!(unfinished_ranges(&alone, dead, &finished(&[])).is_empty());
        // In a data center of its own, beside one whose survivors finished.
        let beside = [replicas(&[(1, "dc1"), (2, "dc1"), (9, "dc2")])];
        assert!(unfinished_ranges(&beside, dead, &finished(&[1, 2])).is_empty());
        // One of dc1's two meets dc1's quorums, not a SERIAL one: {2, 9}.
        assert_eq!(
            unfinished_ranges(&beside, dead, &finished(&[1])),
            [(range(), vec![host(2)])]
        );
    }

    #[test]
    fn with_five_replicas_one_survivor_may_be_missing() {
        let ranges = [replicas(&[
            (1, "dc1"),
            (2, "dc1"),
            (3, "dc1"),
            (4, "dc1"),
            (9, "dc1"),
        ])];
        let dead = host(9);
        assert!(unfinished_ranges(&ranges, dead, &finished(&[1, 2, 3])).is_empty());
        assert_eq!(
            unfinished_ranges(&ranges, dead, &finished(&[1, 2])),
            [(range(), vec![host(3), host(4)])]
        );
    }

    #[test]
    fn each_data_center_must_leave_no_local_quorum_unfinished() {
        // dc1 loses its dead replica; dc2 is whole but one of its three
        // did not answer: fine. Two in dc2 not answering make its quorum.
        let ranges = [replicas(&[
            (1, "dc1"),
            (2, "dc1"),
            (9, "dc1"),
            (4, "dc2"),
            (5, "dc2"),
            (6, "dc2"),
        ])];
        let dead = host(9);
        assert!(unfinished_ranges(&ranges, dead, &finished(&[1, 2, 4, 5])).is_empty());
        assert_eq!(
            unfinished_ranges(&ranges, dead, &finished(&[1, 2, 4])),
            [(range(), vec![host(5), host(6)])]
        );
    }
}
