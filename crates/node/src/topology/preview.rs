//! Movement plans: what a join, decommission, removenode or keyspace alter
//! would move, computed without changing anything (`ringstore plan`).
//!
//! The hypothetical ring is built as the change would build it (a join
//! allocates balanced tokens exactly as the joining node would), diffed
//! against the current ring per keyspace ([`MovementPlan`]), and each moving
//! range is sized by asking its source replica for a sampled estimate
//! ([`estimate`](ringstore_streaming::estimate_ranges)). The time is the busiest
//! source's bytes at the stream throttle (every source has its own).

use std::collections::BTreeMap;
use std::sync::Arc;

use ringstore_placement::allocation::balanced_tokens;
use ringstore_placement::{
    HostId, Location, MovementPlan, ReplicaMap, ReplicationStrategy, Ring, RingMember, TokenRange,
};
use ringstore_proto::v1 as pb;
use ringstore_storage::KeyspaceId;

use crate::convert::range_to_pb;
use crate::error::{NodeError, Result, TopologyError};
use crate::schema::KeyspaceDef;
use crate::topology::host::TopologyHost;
use crate::topology::movement::ensure_enough_replicas;
use crate::topology::strategy_fits;
use ringstore_membership::ClusterView;
use ringstore_streaming::estimate_ranges;

/// The change to plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new node in `location` with `num_tokens` tokens.
    Join {
        /// Where it would sit.
        location: Location,
        /// How many tokens it would choose.
        num_tokens: u32,
    },
    /// A live node leaving.
    Decommission(HostId),
    /// A dead node removed (its ranges come from the survivors).
    Removenode(HostId),
    /// A keyspace's replication changed ([`super::alter`]).
    Alter {
        /// The keyspace's name.
        keyspace: String,
        /// Its new replication.
        strategy: ReplicationStrategy,
    },
}

/// One range that would move.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRange {
    /// Its keyspace's name.
    pub keyspace: String,
    /// The range.
    pub range: TokenRange,
    /// Where it would be streamed from.
    pub source: HostId,
    /// Where to.
    pub target: HostId,
    /// Its estimated size.
    pub estimated_bytes: u64,
}

/// A host's effective ownership of a keyspace before and after.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedOwnership {
    /// The host (the joining one has a made-up id).
    pub host: HostId,
    /// Its keyspace.
    pub keyspace: String,
    /// Before the change, in [0, 1].
    pub before: f64,
    /// After it.
    pub after: f64,
}

/// A plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    /// What it is a plan of.
    pub description: String,
    /// Every range that would move.
    pub ranges: Vec<PlannedRange>,
    /// Ownership per host and keyspace.
    pub ownership: Vec<PlannedOwnership>,
    /// The fraction of all replica data that moves (mean over keyspaces).
    pub replica_fraction_moved: f64,
    /// The fraction of the token space whose primary owner changes.
    pub primary_fraction_moved: f64,
}

impl Preview {
    /// The estimated bytes of the whole change.
    pub fn estimated_bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.estimated_bytes).sum()
    }

    /// The seconds the change takes at `mib_per_sec` per source (0 when
    /// unthrottled): the busiest source's bytes at that rate.
    pub fn estimated_seconds(&self, mib_per_sec: u64) -> f64 {
        if mib_per_sec == 0 {
            return 0.0;
        }
        let mut per_source: BTreeMap<HostId, u64> = BTreeMap::new();
        for range in &self.ranges {
            *per_source.entry(range.source).or_default() += range.estimated_bytes;
        }
        let busiest = per_source.values().copied().max().unwrap_or(0);
        busiest as f64 / (mib_per_sec << 20) as f64
    }
}

/// Plans `change` against the current ring.
pub async fn preview<H: TopologyHost>(context: &Arc<H>, change: &Change) -> Result<Preview> {
    let view = context.view();
    let before = view.ring.clone();
    if before.is_empty() {
        return Err(TopologyError::NothingToPlan.into());
    }
    let (after, description, unavailable) = match change {
        Change::Join {
            location,
            num_tokens,
        } => {
            let host = HostId::random();
            let strategy = ReplicationStrategy::network_topology([(
                location.dc.as_str(),
                context.token_allocation().local_replication_factor,
            )])
            .map_err(TopologyError::AllocationSettings)?;
            let tokens = balanced_tokens(&before, host, location, *num_tokens as usize, &strategy)
                .map_err(TopologyError::TokensNotAllocated)?;
            let after = before
                .with_member(
                    before.epoch() + 1,
                    RingMember::new(host, location.clone(), tokens),
                )
                .map_err(NodeError::placement("adding the new node to the ring"))?;
            let description = format!(
                "join of a new node ({host}, shown as 'new') in {}/{} with {num_tokens} tokens",
                location.dc, location.rack
            );
            (after, description, Vec::new())
        }
        Change::Decommission(host) | Change::Removenode(host) => {
            if !before.contains_host(*host) {
                return Err(TopologyError::NotInRing(*host).into());
            }
            let removing = matches!(change, Change::Removenode(_));
            let description = if removing {
                format!("removenode of {host}: its ranges are streamed from the surviving replicas")
            } else {
                format!("decommission of {host}: it streams its ranges to their new owners")
            };
            let unavailable = if removing { vec![*host] } else { Vec::new() };
            (
                before.without_host(before.epoch() + 1, *host),
                description,
                unavailable,
            )
        }
        Change::Alter { keyspace, strategy } => {
            let current = context.keyspace(keyspace)?;
            if !strategy_fits(&before, strategy) {
                return Err(TopologyError::StrategyDoesNotFit(strategy.clone()).into());
            }
            let description = format!(
                "alter of keyspace {keyspace} from {} to {strategy}: each new replica streams \
                 from a quorum of the old ones",
                current.strategy
            );
            ((*before).clone(), description, Vec::new())
        }
    };
    ensure_enough_replicas(&**context, &after)?;
    let after = Arc::new(after);
    let mut ranges = Vec::new();
    let mut ownership = Vec::new();
    let mut replica_fractions = Vec::new();
    for (keyspace, target) in planned_keyspaces(&**context, change)? {
        let old = ReplicaMap::new(before.clone(), &keyspace.strategy);
        let new = ReplicaMap::new(after.clone(), &target);
        let plan = MovementPlan::between(&old, &new);
        let rf = f64::from(target.total_rf().max(1));
        replica_fractions.push(plan.gained_fraction() / rf);
        let moves = match change {
            Change::Alter { .. } => alter_moves(&keyspace, &before, &target, &view),
            _ => ring_moves(&plan, &unavailable, &view),
        };
        ranges.extend(sized(&**context, &keyspace, moves).await?);
        let (old_own, new_own) = (old.effective_ownership(), new.effective_ownership());
        let hosts: std::collections::BTreeSet<HostId> =
            old_own.keys().chain(new_own.keys()).copied().collect();
        for host in hosts {
            ownership.push(PlannedOwnership {
                host,
                keyspace: keyspace.name.clone(),
                before: old_own.get(&host).copied().unwrap_or(0.0),
                after: new_own.get(&host).copied().unwrap_or(0.0),
            });
        }
    }
    let primary = |ring: &Arc<Ring>| {
        ReplicaMap::new(
            ring.clone(),
            &ReplicationStrategy::simple(1).expect("rf 1 is valid"),
        )
    };
    let primary_fraction_moved =
        MovementPlan::between(&primary(&before), &primary(&after)).changed_fraction();
    let replica_fraction_moved = if replica_fractions.is_empty() {
        0.0
    } else {
        replica_fractions.iter().sum::<f64>() / replica_fractions.len() as f64
    };
    Ok(Preview {
        description,
        ranges,
        ownership,
        replica_fraction_moved,
        primary_fraction_moved,
    })
}

/// The keyspaces a plan covers, each with the replication it would have
/// after the change: every keyspace unchanged for a ring change, the one
/// altered keyspace for an alter.
fn planned_keyspaces(
    context: &impl TopologyHost,
    change: &Change,
) -> Result<Vec<(KeyspaceDef, ReplicationStrategy)>> {
    Ok(match change {
        Change::Alter { keyspace, strategy } => {
            vec![(context.keyspace(keyspace)?, strategy.clone())]
        }
        _ => context
            .keyspaces()
            .into_iter()
            .map(|k| {
                let strategy = k.strategy.clone();
                (k, strategy)
            })
            .collect(),
    })
}

/// One range the plan would stream: (range, source, target).
type Move = (TokenRange, HostId, HostId);

/// What a ring change streams: each gained range from the first live,
/// available source the fetch would use.
fn ring_moves(plan: &MovementPlan, unavailable: &[HostId], view: &ClusterView) -> Vec<Move> {
    let targets: std::collections::BTreeSet<HostId> = plan
        .movements
        .iter()
        .flat_map(|m| m.gaining.iter().copied())
        .collect();
    let mut moves = Vec::new();
    for target in targets {
        for (range, sources) in plan.fetches_for(target) {
            let source = sources
                .into_iter()
                .find(|s| !unavailable.contains(s) && view.is_up(*s));
            if let Some(source) = source {
                moves.push((range, source, target));
            }
        }
    }
    moves
}

/// What an alter streams: every round of [`super::alter::transfers`], each
/// range from the source its round starts with.
fn alter_moves(
    keyspace: &KeyspaceDef,
    ring: &Arc<Ring>,
    target: &ReplicationStrategy,
    view: &ClusterView,
) -> Vec<Move> {
    super::alter::transfers(keyspace, ring, target)
        .into_iter()
        .flat_map(|round| round.into_iter())
        .flat_map(|(receiver, fetches)| {
            fetches.into_iter().filter_map(move |fetch| {
                let source = fetch.sources.into_iter().find(|s| view.is_up(*s))?;
                Some((fetch.range, source, receiver))
            })
        })
        .collect()
}

/// `moves` of `keyspace` with their sizes, as each source estimates them.
async fn sized(
    context: &impl TopologyHost,
    keyspace: &KeyspaceDef,
    moves: Vec<Move>,
) -> Result<Vec<PlannedRange>> {
    let mut by_source: BTreeMap<HostId, Vec<(TokenRange, HostId)>> = BTreeMap::new();
    for (range, source, target) in moves {
        by_source.entry(source).or_default().push((range, target));
    }
    let mut ranges = Vec::new();
    for (source, moves) in by_source {
        let sizes = estimate_on(
            context,
            source,
            keyspace.id,
            moves.iter().map(|(r, _)| *r).collect(),
        )
        .await?;
        for ((range, target), estimated_bytes) in moves.into_iter().zip(sizes) {
            ranges.push(PlannedRange {
                keyspace: keyspace.name.clone(),
                range,
                source,
                target,
                estimated_bytes,
            });
        }
    }
    Ok(ranges)
}

/// Estimated sizes of `ranges` on `source` (this node directly).
async fn estimate_on(
    context: &impl TopologyHost,
    source: HostId,
    keyspace: KeyspaceId,
    ranges: Vec<TokenRange>,
) -> Result<Vec<u64>> {
    if source == context.host_id() {
        let estimates = estimate_ranges(context.store(), keyspace, ranges).await?;
        return Ok(estimates.into_iter().map(|e| e.bytes).collect());
    }
    let address = context
        .view()
        .member(source)
        .map(|m| m.metadata.internode_addr)
        .ok_or(NodeError::NoAddress(source))?;
    let response = context
        .peers()
        .client(address)
        .range_stats(pb::RangeStatsRequest {
            keyspace_id: keyspace.to_string(),
            ranges: ranges.iter().map(|r| range_to_pb(*r)).collect(),
        })
        .await
        .map_err(NodeError::peer(source, "estimate ranges"))?
        .into_inner();
    Ok(response.ranges.iter().map(|r| r.estimated_bytes).collect())
}
