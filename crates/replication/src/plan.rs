//! Fan-out: which replicas a coordinator contacts, and how many must answer.
//!
//! The node resolves a key to its natural replicas (placement order, primary
//! first) and, during a range movement, its pending replicas, marks each
//! alive or not from its failure detector, and asks for a plan:
//!
//! - [`plan_write`] targets every live natural and pending replica (writes go
//!   everywhere they can; the level only decides how many acks to wait for)
//!   and requires the level's [`Requirement`] plus one ack per pending replica
//!   that counts toward it (Cassandra's `blockForWrite`). Down replicas are
//!   listed for hinting.
//! - [`plan_read`] orders the live replicas that count toward the level
//!   closest first (the coordinator's DC, then the others, placement order
//!   within each), asks the first for data and just enough of the next ones
//!   for digests, and keeps the rest as spares to top up with on failure or
//!   timeout.
//!
//! Both refuse with [`Unavailable`] — before anything is sent — when the live
//! replicas cannot meet the requirement, checked per quota (so per DC for
//! `LOCAL_*` under NTS and for `EACH_QUORUM`).
//!
//! # Invariants
//! - A successful write plan's targets meet its requirement if all ack, quota
//!   by quota (except `ANY`, which a stored hint satisfies, so it never
//!   refuses). A successful read plan's contacted replicas meet its
//!   requirement exactly, and every spare counts toward some quota.
//! - Hosts are deduplicated: a host listed twice, or both natural and
//!   pending, is planned once (as natural).
//!
//! # Caveats
//! - "Closest" is the coordinator's DC first; there is no latency-based
//!   snitch, and within a DC placement order stands in for proximity.
//! - Reads do not contact pending replicas: they may not have the data yet.

use std::collections::{BTreeMap, BTreeSet};

use ringstore_placement::{Datacenter, HostId, ReplicationStrategy};

use crate::consistency::ConsistencyLevel;
use crate::error::{Result, Unavailable};
use crate::read_tracker::Request;
use crate::requirement::Requirement;

/// One replica of a key as the node sees it when planning a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaCandidate {
    /// The replica.
    pub host: HostId,
    /// Its data center.
    pub dc: Datacenter,
    /// Whether the failure detector considers it up.
    pub alive: bool,
}

impl ReplicaCandidate {
    /// A candidate from its parts.
    pub fn new(host: HostId, dc: impl Into<Datacenter>, alive: bool) -> ReplicaCandidate {
        ReplicaCandidate {
            host,
            dc: dc.into(),
            alive,
        }
    }
}

/// A replica a write is sent to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteTarget {
    /// The replica.
    pub host: HostId,
    /// Its data center.
    pub dc: Datacenter,
    /// Whether it is gaining the range in a range movement (not yet a natural replica).
    pub pending: bool,
}

/// Where a write goes and how many acks it waits for. Built by [`plan_write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    level: ConsistencyLevel,
    requirement: Requirement,
    targets: Vec<WriteTarget>,
    down: Vec<HostId>,
}

impl WritePlan {
    /// The level asked for.
    pub fn level(&self) -> ConsistencyLevel {
        self.level
    }

    /// The acks needed, pending replicas included.
    pub fn requirement(&self) -> &Requirement {
        &self.requirement
    }

    /// Acks needed in all: the level's `blockFor` plus the pending replicas
    /// that count toward it.
    pub fn required(&self) -> u32 {
        self.requirement.total()
    }

    /// The live replicas to send the write to: natural ones in placement
    /// order, then pending ones.
    pub fn targets(&self) -> &[WriteTarget] {
        &self.targets
    }

    /// Natural and pending replicas not targeted because they are down: the
    /// node stores a hint for each.
    pub fn down(&self) -> &[HostId] {
        &self.down
    }
}

/// Plans a write at `level` for a keyspace placed by `strategy`, coordinated
/// from `local_dc`.
///
/// `natural` are the key's replicas in placement order, `pending` the
/// replicas gaining its range in a range movement (empty otherwise). Every
/// live one is targeted; the level's [`Requirement`] is raised by one for
/// each pending replica that counts toward it (except at `ANY`). Refused with
/// [`Unavailable`] when the live targets cannot meet it, quota by quota;
/// `ANY` is never refused, since a stored hint satisfies it.
pub fn plan_write(
    level: ConsistencyLevel,
    strategy: &ReplicationStrategy,
    local_dc: &Datacenter,
    natural: &[ReplicaCandidate],
    pending: &[ReplicaCandidate],
) -> Result<WritePlan, Unavailable> {
    let mut requirement = Requirement::for_level(level, strategy, local_dc);
    let mut seen = BTreeSet::new();
    let mut targets = Vec::new();
    let mut down = Vec::new();
    let tagged = natural.iter().map(|c| (c, false));
    for (candidate, is_pending) in tagged.chain(pending.iter().map(|c| (c, true))) {
        if !seen.insert(candidate.host) {
            continue;
        }
        // ANY is satisfied by one ack or hint whatever the movement (Cassandra
        // adds nothing for pending replicas at ANY).
        if is_pending && level != ConsistencyLevel::Any {
            requirement.add_pending(&candidate.dc);
        }
        if candidate.alive {
            targets.push(WriteTarget {
                host: candidate.host,
                dc: candidate.dc.clone(),
                pending: is_pending,
            });
        } else {
            down.push(candidate.host);
        }
    }
    // ANY never refuses: the coordinator can always store a hint.
    if level != ConsistencyLevel::Any {
        check_available(level, &requirement, targets.iter().map(|t| &t.dc))?;
    }
    Ok(WritePlan {
        level,
        requirement,
        targets,
        down,
    })
}

/// Which replicas a read asks, for what, and which it keeps in reserve.
/// Built by [`plan_read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    level: ConsistencyLevel,
    requirement: Requirement,
    /// Contacted replicas, closest first; the first is asked for data.
    contacted: Vec<HostId>,
    /// Live replicas not contacted that count toward the level, closest first.
    spares: Vec<HostId>,
    /// The data center of every contacted replica and spare.
    dcs: BTreeMap<HostId, Datacenter>,
    /// Whether the level needs every natural replica that counts toward it
    /// (`ALL`; `QUORUM` of two), down ones included.
    needs_every_replica: bool,
}

impl ReadPlan {
    /// Whether the level needs an answer from every natural replica that
    /// counts toward it, down ones included (`ALL`, or `QUORUM` at
    /// replication factor 2): then no replica is left to read in place of
    /// one, and nothing any live replica holds is missing from the read.
    pub fn needs_every_replica(&self) -> bool {
        self.needs_every_replica
    }

    /// The level asked for.
    pub fn level(&self) -> ConsistencyLevel {
        self.level
    }

    /// The answers needed.
    pub fn requirement(&self) -> &Requirement {
        &self.requirement
    }

    /// Answers needed in all (Cassandra's `blockFor`).
    pub fn required(&self) -> u32 {
        self.requirement.total()
    }

    /// The replica asked for the full data: the closest live one that counts.
    pub fn data_from(&self) -> HostId {
        self.contacted[0]
    }

    /// The replicas asked for digests: `required() - 1` of them, closest
    /// first (for `EACH_QUORUM`, enough in every DC).
    pub fn digests_from(&self) -> &[HostId] {
        &self.contacted[1..]
    }

    /// Live replicas held in reserve, closest first, to top up with when a
    /// contacted one fails or is too slow.
    pub fn spares(&self) -> &[HostId] {
        &self.spares
    }

    /// The requests to send first: data from [`data_from`](Self::data_from),
    /// a digest from each of [`digests_from`](Self::digests_from).
    pub fn requests(&self) -> Vec<(HostId, Request)> {
        let digests = self.digests_from().iter().map(|&h| (h, Request::Digest));
        std::iter::once((self.data_from(), Request::Data))
            .chain(digests)
            .collect()
    }

    /// The data center of a contacted replica or spare.
    pub(crate) fn dc_of(&self, host: HostId) -> &Datacenter {
        &self.dcs[&host]
    }

    /// Every contacted replica, closest first (the data replica first).
    #[cfg(test)]
    pub(crate) fn contacted(&self) -> &[HostId] {
        &self.contacted
    }
}

/// Plans a read at `level` for a keyspace placed by `strategy`, coordinated
/// from `local_dc`, over the key's `natural` replicas in placement order.
///
/// The live replicas that count toward the level are ordered closest first
/// (`local_dc`, then the others, placement order within each); the first is
/// asked for data, just enough of the next for digests to meet the level
/// (per DC for `EACH_QUORUM`), and the rest are spares. `ANY` is refused
/// with [`ReplicationError::InvalidForReads`](crate::ReplicationError::InvalidForReads),
/// too few live replicas with [`ReplicationError::Unavailable`](crate::ReplicationError::Unavailable).
pub fn plan_read(
    level: ConsistencyLevel,
    strategy: &ReplicationStrategy,
    local_dc: &Datacenter,
    natural: &[ReplicaCandidate],
) -> Result<ReadPlan> {
    level.check_valid_for_reads()?;
    let requirement = Requirement::for_level(level, strategy, local_dc);
    let mut seen = BTreeSet::new();
    let mut eligible: Vec<&ReplicaCandidate> = natural
        .iter()
        .filter(|c| c.alive && requirement.counts_toward(&c.dc) && seen.insert(c.host))
        .collect();
    // Stable: placement order is kept within the local DC and the rest.
    eligible.sort_by_key(|c| c.dc != *local_dc);

    let quotas = requirement.quotas();
    let mut taken = vec![0; quotas.len()];
    let mut contacted = Vec::new();
    let mut spares = Vec::new();
    for candidate in &eligible {
        let quota = requirement
            .quota_of(&candidate.dc)
            .expect("eligible replicas count toward a quota");
        if taken[quota] < quotas[quota].1 {
            taken[quota] += 1;
            contacted.push(candidate.host);
        } else {
            spares.push(candidate.host);
        }
    }
    check_available(level, &requirement, eligible.iter().map(|c| &c.dc))?;
    let dcs = eligible.iter().map(|c| (c.host, c.dc.clone())).collect();
    let counting: BTreeSet<HostId> = natural
        .iter()
        .filter(|c| requirement.counts_toward(&c.dc))
        .map(|c| c.host)
        .collect();
    let needs_every_replica = requirement.total() as usize >= counting.len();
    Ok(ReadPlan {
        level,
        requirement,
        contacted,
        spares,
        dcs,
        needs_every_replica,
    })
}

/// `Err(Unavailable)` naming the first quota that live replicas in `alive` leave short.
fn check_available<'a>(
    level: ConsistencyLevel,
    requirement: &Requirement,
    alive: impl IntoIterator<Item = &'a Datacenter>,
) -> Result<(), Unavailable> {
    match requirement.shortfall(alive) {
        None => Ok(()),
        Some((dc, required, alive)) => Err(Unavailable {
            level,
            dc,
            required,
            alive,
        }),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
