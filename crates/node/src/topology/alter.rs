//! Keyspace alter: changing a keyspace's replication and moving its data to
//! the new placement, so that no read misses an acknowledged write, during
//! the move or after.
//!
//! # Design
//! Cassandra only changes the metadata and leaves the operator to run a full
//! repair, reads missing data meanwhile. Here an alter is a range movement
//! of one keyspace on an unchanged ring, run as a join is:
//!
//! 1. **Announce.** The schema entry gains `pending_strategy` (the new
//!    replication) and is pushed to every node, which must all be up. From
//!    then on coordinators send each write to the replicas of both
//!    placements, waiting for one more ack per replica the new one adds
//!    (see [`coordinator`](crate::coordinator)); reads stay on the old one.
//! 2. **Stream.** After `ring_delay` (writes planned before the announcement
//!    have landed), each node fetches every range it gains from old
//!    replicas of that range ([`transfers`]): from a quorum of them, in
//!    rounds, so that every write acknowledged at `QUORUM` or above under
//!    the old placement reaches the new replicas (Cassandra's bootstrap
//!    takes one source; with a replication factor above 1 that one may miss
//!    a write the others acknowledged).
//! 3. **Commit.** The entry's `strategy` becomes the new one and
//!    `pending_strategy` is cleared; reads move to the new placement.
//! 4. **Clean up.** Once every node has the committed entry (so none reads
//!    from the old placement any more, nor plans a write for it) and
//!    `ring_delay` more has passed (so the writes planned before that have
//!    landed), each node that lost ranges deletes them
//!    ([`cleanup`](super::cleanup)). Without the wait, a write a
//!    coordinator sent to a dropped replica just before it merged the
//!    commit could land behind that replica's cleanup and stay there (a
//!    fresh machine's test run saw one key left so).
//!
//! A write acknowledged before the announcement is on the old replicas and
//! streamed; one acknowledged after it is on the new replicas directly.
//!
//! # Caveats
//! - The alter is driven by the node that was asked. If it dies, the
//!   keyspace stays pending (writes keep going to both placements, reads to
//!   the old one, so nothing is lost); asking any node for the same alter
//!   again resumes it (finished streams are checkpointed). Asking for a
//!   different replication meanwhile is refused.
//! - One movement at a time: an alter is refused while a node joins or
//!   leaves, and a joining node waits while an alter is pending. Two started
//!   within a gossip round of each other may both proceed.
//! - Lowering the replication moves nothing; the replicas it drops delete
//!   their copies at the end. A write acknowledged at `QUORUM` by replicas
//!   that include a dropped one may then be left on fewer replicas than the
//!   new placement has, until hints or repair fill them in.

use std::collections::BTreeMap;
use std::sync::Arc;

use ringstore_placement::{HostId, MovementPlan, ReplicaMap, ReplicationStrategy, Ring};
use ringstore_proto::v1 as pb;
use ringstore_storage::KeyspaceId;
use ringstore_streaming::{FetchTotals, StreamOperation};
use tokio::sync::oneshot;

use crate::error::{NodeError, Result, TopologyError};
use crate::schema::KeyspaceDef;
use crate::streaming::fetch::RangeFetch;
use crate::topology::cleanup::clean_keyspace;
use crate::topology::host::TopologyHost;
use crate::topology::movement::ensure_no_movement;
use crate::topology::strategy_fits;
use crate::topology::transfers::fetch_everywhere;
use crate::topology::waits::wait_ring_delay;

/// Attempts at pushing an alter's schema change to every node.
const PUSH_ATTEMPTS: u32 = 5;

/// What an alter did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Altered {
    /// The keyspace as it is now.
    pub keyspace: KeyspaceDef,
    /// What the new replicas streamed (all rounds).
    pub streamed: FetchTotals,
    /// Keys deleted by the nodes that lost ranges.
    pub keys_removed: u64,
}

/// Alters keyspace `name` to `target` and moves its data (see the module
/// docs). `announced`, if given, receives the keyspace as announced, or the
/// error that stopped the alter before, for a caller that returns at once
/// (the alter then returns only a short error of its own).
pub async fn alter<H: TopologyHost>(
    context: &Arc<H>,
    name: &str,
    target: ReplicationStrategy,
    announced: Option<oneshot::Sender<Result<KeyspaceDef>>>,
) -> Result<Altered> {
    let operation = context
        .operation()
        .try_lock()
        .map_err(|_| NodeError::from(TopologyError::OperationRunning));
    let pending = match operation {
        Ok(guard) => announce(&**context, name, &target)
            .await
            .map(|k| (guard, k)),
        Err(error) => Err(error),
    };
    let (_operation, pending) = match (pending, announced) {
        (Ok((guard, pending)), announced) => {
            if let Some(announced) = announced {
                let _ = announced.send(Ok(pending.clone()));
            }
            (guard, pending)
        }
        (Err(error), None) => return Err(error),
        (Err(error), Some(announced)) => {
            let _ = announced.send(Err(error));
            return Err(TopologyError::AlterRefused {
                keyspace: name.to_string(),
            }
            .into());
        }
    };
    let Some(target) = pending.pending_strategy.clone() else {
        // Already at the target: nothing to move.
        return Ok(Altered {
            keyspace: pending,
            streamed: FetchTotals::default(),
            keys_removed: 0,
        });
    };
    move_data(context, pending, target).await
}

/// Checks that the alter can run and announces the new placement to every
/// node; the keyspace as announced (unchanged if already at `target`).
async fn announce(
    context: &impl TopologyHost,
    name: &str,
    target: &ReplicationStrategy,
) -> Result<KeyspaceDef> {
    let keyspace = context.keyspace(name)?;
    match &keyspace.pending_strategy {
        Some(pending) if pending == target => {
            tracing::info!(keyspace = %name, %target, "resuming the keyspace alter under way");
            ensure_every_node_up(context)?;
            push_until_agreed(context).await?;
            return Ok(keyspace);
        }
        Some(pending) => {
            return Err(TopologyError::AlterPending {
                keyspace: name.to_string(),
                pending: pending.clone(),
            }
            .into());
        }
        None if keyspace.strategy == *target => return Ok(keyspace),
        None => {}
    }
    ensure_no_movement(context)?;
    ensure_every_node_up(context)?;
    if !strategy_fits(&context.view().ring, target) {
        return Err(TopologyError::StrategyDoesNotFit(target.clone()).into());
    }
    let pending = KeyspaceDef {
        pending_strategy: Some(target.clone()),
        ..keyspace
    };
    publish(context, &pending).await?;
    push_until_agreed(context).await?;
    tracing::info!(keyspace = %name, from = %pending.strategy, to = %target, "keyspace alter announced");
    Ok(pending)
}

/// Streams, commits and cleans up an alter of `pending` to `target`.
async fn move_data<H: TopologyHost>(
    context: &Arc<H>,
    pending: KeyspaceDef,
    target: ReplicationStrategy,
) -> Result<Altered> {
    wait_ring_delay(&**context).await;
    let ring = context.view().ring.clone();
    let plan = movement(&pending, &ring, &target);
    let rounds = rounds_of(pending.id, &plan);
    let mut streamed = FetchTotals::default();
    for (round, fetches) in rounds.into_iter().enumerate() {
        let operation = StreamOperation::Alter {
            keyspace: pending.id,
        };
        tracing::info!(keyspace = %pending.name, round, "streaming for the keyspace alter");
        streamed += fetch_everywhere(context, operation, fetches).await?;
    }
    let committed = KeyspaceDef {
        strategy: target.clone(),
        pending_strategy: None,
        ..pending.clone()
    };
    publish(&**context, &committed).await?;
    push_committed(&**context).await?;
    wait_ring_delay(&**context).await;
    let keys_removed = clean_up_everywhere(context, &pending, &plan).await?;
    tracing::info!(
        keyspace = %committed.name,
        strategy = %committed.strategy,
        bytes = streamed.bytes,
        keys_removed,
        "keyspace alter done"
    );
    Ok(Altered {
        keyspace: committed,
        streamed,
        keys_removed,
    })
}

/// Refuses an alter unless every node of the ring is up: each may gain or
/// lose ranges, and each coordinator must learn the pending placement.
fn ensure_every_node_up(context: &impl TopologyHost) -> Result<()> {
    let view = context.view();
    let down: Vec<HostId> = view
        .ring
        .hosts()
        .iter()
        .filter(|h| !view.is_up(h.id))
        .map(|h| h.id)
        .collect();
    if down.is_empty() {
        return Ok(());
    }
    Err(TopologyError::AlterNeedsEveryNode { down }.into())
}

/// Merges `keyspace` as this node's newest schema entry for it.
async fn publish(context: &impl TopologyHost, keyspace: &KeyspaceDef) -> Result<()> {
    context.publish_keyspace(keyspace.clone()).await
}

/// Pushes the schema until every live node has merged it, trying
/// [`PUSH_ATTEMPTS`] times.
async fn push_until_agreed(context: &impl TopologyHost) -> Result<()> {
    context.push_schema(PUSH_ATTEMPTS).await
}

/// Pushes the committed schema until every live node has merged it: only
/// then may replicas that lost ranges delete them.
async fn push_committed(context: &impl TopologyHost) -> Result<()> {
    push_until_agreed(context).await.map_err(|error| {
        TopologyError::AlterCommittedUnconfirmed {
            source: Box::new(error),
        }
        .into()
    })
}

/// The fetches of an alter of `keyspace` to `target` on `ring`, in rounds:
/// round `r` has each receiver fetch each range it gains from its `r`-th
/// old replica first (then the others, should that one fail). There are as
/// many rounds as a quorum of the old replicas, so every range comes from
/// that many distinct replicas.
pub fn transfers(
    keyspace: &KeyspaceDef,
    ring: &Arc<Ring>,
    target: &ReplicationStrategy,
) -> Vec<BTreeMap<HostId, Vec<RangeFetch>>> {
    rounds_of(keyspace.id, &movement(keyspace, ring, target))
}

/// What moves when `keyspace` goes from its `strategy` to `target` on `ring`.
fn movement(
    keyspace: &KeyspaceDef,
    ring: &Arc<Ring>,
    target: &ReplicationStrategy,
) -> MovementPlan {
    let old = ReplicaMap::new(ring.clone(), &keyspace.strategy);
    let new = ReplicaMap::new(ring.clone(), target);
    MovementPlan::between(&old, &new)
}

/// The fetch rounds of `plan` for keyspace `id` (see [`transfers`]).
fn rounds_of(id: KeyspaceId, plan: &MovementPlan) -> Vec<BTreeMap<HostId, Vec<RangeFetch>>> {
    let mut rounds: Vec<BTreeMap<HostId, Vec<RangeFetch>>> = Vec::new();
    for movement in &plan.movements {
        for &receiver in &movement.gaining {
            let sources: Vec<HostId> = movement
                .before
                .iter()
                .copied()
                .filter(|&h| h != receiver)
                .collect();
            let quorum = (sources.len() / 2 + 1).min(sources.len());
            for round in 0..quorum {
                if rounds.len() <= round {
                    rounds.push(BTreeMap::new());
                }
                let mut ordered = sources.clone();
                ordered.rotate_left(round);
                rounds[round].entry(receiver).or_default().push(RangeFetch {
                    keyspace: id,
                    range: movement.range,
                    sources: ordered,
                });
            }
        }
    }
    rounds
}

/// Has every node that loses ranges of `keyspace` in `plan` delete them;
/// the keys deleted in all.
async fn clean_up_everywhere<H: TopologyHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    plan: &MovementPlan,
) -> Result<u64> {
    let mut losers: Vec<HostId> = plan
        .movements
        .iter()
        .flat_map(|m| m.losing.iter().copied())
        .collect();
    losers.sort_unstable();
    losers.dedup();
    let cleanups = losers
        .into_iter()
        .map(|host| clean_up_on(context, host, keyspace));
    let mut removed = 0;
    for outcome in futures::future::join_all(cleanups).await {
        removed += outcome?;
    }
    Ok(removed)
}

/// Has `host` delete its data of `keyspace` outside its ranges.
async fn clean_up_on<H: TopologyHost>(
    context: &Arc<H>,
    host: HostId,
    keyspace: &KeyspaceDef,
) -> Result<u64> {
    if host == context.host_id() {
        let keyspace = context.keyspace(&keyspace.name)?;
        return Ok(clean_keyspace(context, &keyspace).await?.keys_removed);
    }
    let address = context
        .view()
        .member(host)
        .map(|m| m.metadata.internode_addr)
        .ok_or(NodeError::NoAddress(host))?;
    let response = context
        .peers()
        .client(address)
        .cleanup_keyspace(pb::CleanupKeyspaceRequest {
            keyspace_id: keyspace.id.to_string(),
        })
        .await
        .map_err(NodeError::peer(host, "clean up the altered keyspace"))?;
    Ok(response.into_inner().keys_removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::{Location, RingMember, Token};
    use ringstore_replication::SpeculativeRetry;

    fn ring(nodes: u128) -> Arc<Ring> {
        let members = (1..=nodes).map(|n| {
            let tokens = (0..4)
                .map(|t| Token((n as i64) * 1_000 + t * 1_000_000_000_000_000))
                .collect();
            RingMember::new(HostId::from_u128(n), Location::new("dc1", "r1"), tokens)
        });
        Arc::new(Ring::new(1, members).unwrap())
    }

    fn keyspace(strategy: ReplicationStrategy) -> KeyspaceDef {
        KeyspaceDef {
            name: "ks".into(),
            id: KeyspaceId(uuid::Uuid::from_u128(1)),
            strategy,
            gc_grace_seconds: 0,
            speculative_retry: SpeculativeRetry::default(),
            pending_strategy: None,
        }
    }

    fn simple(rf: u32) -> ReplicationStrategy {
        ReplicationStrategy::simple(rf).unwrap()
    }

    #[test]
    fn raising_rf_from_one_fetches_each_gained_range_from_its_only_replica() {
        let ring = ring(3);
        let rounds = transfers(&keyspace(simple(1)), &ring, &simple(3));
        assert_eq!(rounds.len(), 1, "one old replica: one round");
        let old = ReplicaMap::new(ring.clone(), &simple(1));
        let mut covered = 0.0;
        for (receiver, fetches) in &rounds[0] {
            for fetch in fetches {
                assert_eq!(
                    fetch.sources,
                    vec![old.replicas(fetch.range.end).ids().next().unwrap()]
                );
                assert_ne!(fetch.sources[0], *receiver);
                covered += fetch.range.fraction();
            }
        }
        assert!(
            (covered - 2.0).abs() < 1e-9,
            "two new copies of the whole ring, got {covered}"
        );
    }

    #[test]
    fn raising_rf_from_three_fetches_each_range_from_a_quorum_of_distinct_old_replicas() {
        let ring = ring(5);
        let rounds = transfers(&keyspace(simple(3)), &ring, &simple(5));
        assert_eq!(rounds.len(), 2, "quorum of 3 old replicas");
        let firsts = |round: usize| -> Vec<(HostId, TokenRangeKey, HostId)> {
            rounds[round]
                .iter()
                .flat_map(|(r, f)| {
                    f.iter()
                        .map(move |f| (*r, (f.range.start, f.range.end), f.sources[0]))
                })
                .collect()
        };
        let (zero, one) = (firsts(0), firsts(1));
        assert_eq!(zero.len(), one.len());
        for ((r0, range0, s0), (r1, range1, s1)) in zero.iter().zip(&one) {
            assert_eq!((r0, range0), (r1, range1));
            assert_ne!(s0, s1, "each round starts from another old replica");
        }
    }

    type TokenRangeKey = (Token, Token);

    #[test]
    fn lowering_rf_moves_nothing() {
        let ring = ring(3);
        assert!(transfers(&keyspace(simple(3)), &ring, &simple(2)).is_empty());
    }
}
