//! Repairing one unit of work, a (keyspace, range), on the current ring:
//! the range is cut where the ring's replica sets change, each piece is
//! repaired among its replicas, and, when every replica took part, each
//! piece is recorded as repaired on all of them.
//!
//! A replica that is down does not fail a unit at once: under load a
//! healthy node is now and then judged down for a moment, and a whole
//! repair should not fail for that. Before each attempt the unit waits (at
//! most [`REPLICA_PATIENCE`]) for its replicas to be up; a replica lost
//! during an attempt (seen down, or restarted: its trees are gone) fails
//! the attempt, and the unit is tried again from the start, at most
//! [`RETRIES_AFTER_LOSS`] more times. A replica waited for in vain is not
//! waited for again by the same job ([`DownReplicas`]), so a node that
//! stays down fails its units at once, naming it, as Cassandra's repair
//! does, instead of holding every unit up. If the replicas given up on were
//! up when the job began and are seen up again by its end (waited for at
//! most [`SECOND_PASS_PATIENCE`]), the job makes one second pass over the
//! units that failed ([`DownReplicas::all_back`], `job.rs`): a live node
//! judged down for a while, as right after a restart, fails no range.
//!
//! The ring, the schema, liveness and whether ranges are moving (the
//! topology subsystem's judgement) come through the [`RepairHost`].

use std::collections::BTreeSet;
use std::time::Duration;

use ringstore_membership::Liveness;
use ringstore_placement::{HostId, TokenRange};
use ringstore_repair::{RepairOptions, UnitReport, UnitState};
use ringstore_storage::{KeyspaceId, Timestamp};
use uuid::Uuid;

use crate::error::{NodeError, RangeRepairError, Result};
use crate::repair::RepairHost;
use crate::repair::range::{RangeRepair, end_session};

/// How many more times a unit is tried after a replica was lost during it.
pub const RETRIES_AFTER_LOSS: u32 = 2;
/// How long a unit waits for a replica that is down.
pub const REPLICA_PATIENCE: Duration = Duration::from_secs(10);
/// How long a job that gave up on replicas up at its start waits for them
/// before its second pass.
pub const SECOND_PASS_PATIENCE: Duration = Duration::from_secs(30);

/// The replicas a repair job waited for in vain: it does not wait for them
/// again until they are seen up.
#[derive(Debug, Default)]
pub struct DownReplicas {
    given_up: BTreeSet<HostId>,
}

impl DownReplicas {
    /// Whether some replica was given up on, each of them was up when the
    /// job began (`up_at_start`: it went down during the job, so it may
    /// come back), and each is seen up again within `patience`.
    pub async fn all_back(
        &self,
        host: &dyn RepairHost,
        up_at_start: &BTreeSet<HostId>,
        patience: Duration,
    ) -> bool {
        if self.given_up.is_empty() || !self.given_up.is_subset(up_at_start) {
            return false;
        }
        let mut views = host.views();
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if self
                .given_up
                .iter()
                .all(|&h| views.borrow_and_update().is_up(h))
            {
                return true;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, views.changed()).await,
                Ok(Ok(()))
            ) {
                return false;
            }
        }
    }

    /// Waits until every one of `hosts` is up, or [`REPLICA_PATIENCE`] has
    /// passed; hosts given up on before are not waited for. Hosts still down
    /// then are given up on.
    async fn wait_for(&mut self, host: &dyn RepairHost, hosts: &BTreeSet<HostId>) {
        let mut views = host.views();
        let deadline = tokio::time::Instant::now() + REPLICA_PATIENCE;
        loop {
            let down: Vec<HostId> = {
                let view = views.borrow_and_update();
                hosts
                    .iter()
                    .copied()
                    .filter(|&h| !view.member(h).is_some_and(|m| m.liveness == Liveness::Up))
                    .collect()
            };
            self.given_up
                .retain(|h| down.contains(h) || !hosts.contains(h));
            if down.iter().all(|h| self.given_up.contains(h)) {
                return;
            }
            let changed = tokio::time::timeout_at(deadline, views.changed()).await;
            if !matches!(changed, Ok(Ok(()))) {
                tracing::warn!(
                    ?down,
                    "repair: replicas still down after waiting for them; their ranges fail"
                );
                self.given_up.extend(down);
                return;
            }
        }
    }
}

/// Repairs `range` of `keyspace` with `options`, recording it as repaired
/// as of `began` (unless a dry run or DC-local, which do not reach every
/// replica), waiting for its replicas that are down unless `down` gave up
/// on them. What became of it.
pub async fn repair_unit(
    host: &dyn RepairHost,
    keyspace: KeyspaceId,
    range: TokenRange,
    options: RepairOptions,
    began: Timestamp,
    down: &mut DownReplicas,
) -> UnitState {
    let mut retries = RETRIES_AFTER_LOSS;
    let outcome = loop {
        let attempt = match unit_pieces(host, keyspace, range, options) {
            Ok(pieces) => {
                let hosts = pieces.iter().flat_map(|(_, h)| h.iter().copied()).collect();
                down.wait_for(host, &hosts).await;
                repair_pieces(host, keyspace, pieces, options, began).await
            }
            Err(error) => Err(error),
        };
        match attempt {
            Err(NodeError::ReplicaLost(host)) if retries > 0 => {
                retries -= 1;
                tracing::info!(%range, %host, "a replica was lost while its range was repaired; repairing the range again");
            }
            outcome => break outcome,
        }
    };
    let state = match outcome {
        Ok(report) => UnitState::Done(report),
        Err(error) => {
            tracing::warn!(%range, %error, "repair of a range failed");
            UnitState::Failed(error.to_string())
        }
    };
    host.repair().stats.count(&state);
    state
}

/// The pieces of `range` of `keyspace` on the current ring (cut where the
/// replica sets change), each with the replicas that take part.
fn unit_pieces(
    host: &dyn RepairHost,
    keyspace: KeyspaceId,
    range: TokenRange,
    options: RepairOptions,
) -> Result<Vec<(TokenRange, Vec<HostId>)>> {
    if let Some(movements) = host.movements_under_way() {
        return Err(RangeRepairError::MovementsUnderway(movements).into());
    }
    let definition = host
        .keyspaces()
        .into_iter()
        .find(|k| k.id == keyspace)
        .ok_or_else(|| NodeError::KeyspaceNotFound(host.keyspace_name(keyspace)))?;
    let map = host.replica_map(&definition);
    let mut pieces: Vec<(TokenRange, Vec<HostId>)> = Vec::new();
    for replicas in map.ranges() {
        for piece in replicas.range().intersection(&range) {
            let hosts = replicas
                .hosts()
                .filter(|h| !options.dc_local || h.location.dc.as_str() == host.dc())
                .map(|h| h.id)
                .collect();
            pieces.push((piece, hosts));
        }
    }
    Ok(pieces)
}

/// Repairs each of `pieces` among its replicas; the sum of their reports.
async fn repair_pieces(
    host: &dyn RepairHost,
    keyspace: KeyspaceId,
    pieces: Vec<(TokenRange, Vec<HostId>)>,
    options: RepairOptions,
    began: Timestamp,
) -> Result<UnitReport> {
    let record = !options.dry_run && !options.dc_local;
    let mut total = UnitReport::default();
    for (piece, hosts) in pieces {
        let report = repair_piece(host, keyspace, piece, &hosts, options, began, record).await?;
        total.mismatched_keys += report.mismatched_keys;
        total.rows_sent += report.rows_sent;
        total.bytes += report.bytes;
    }
    Ok(total)
}

/// Repairs one piece among `hosts` in a session of its own, and ends the
/// session on every replica (recording the piece if `record`).
pub async fn repair_piece(
    host: &dyn RepairHost,
    keyspace: KeyspaceId,
    piece: TokenRange,
    hosts: &[HostId],
    options: RepairOptions,
    began: Timestamp,
    record: bool,
) -> Result<UnitReport> {
    let session = Uuid::new_v4();
    let outcome = match RangeRepair::new(host, session, keyspace, piece, hosts, options) {
        Ok(repair) => repair.run().await,
        Err(error) => Err(error),
    };
    let repaired = match (&outcome, record) {
        (Ok(_), true) => vec![(keyspace, piece)],
        _ => Vec::new(),
    };
    let ended = end_session(host, session, hosts, &repaired, began).await;
    let report = outcome?;
    ended?;
    Ok(report)
}
