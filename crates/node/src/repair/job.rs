//! `ringstore repair`: a job over every ring range of the chosen keyspaces
//! (cut to a sub-range if one is given), repaired one unit at a time by
//! this node, checkpointed after each unit in the store's metadata. A node
//! that restarts with an unfinished job resumes it in the background.
//! The job reads the node through its [`RepairHost`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::{HostId, TokenRange};
use ringstore_repair::{RepairJob, RepairOptions, UnitState};
use ringstore_storage::KeyspaceId;
use ringstore_streaming::{Direction, SessionInfo};
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::{NodeError, RangeRepairError, Result};
use crate::repair::RepairHost;
use crate::repair::state::{JobProgress, JobState};
use crate::repair::unit::{DownReplicas, SECOND_PASS_PATIENCE, repair_unit};
use crate::schema::KeyspaceDef;

/// The metadata record of the job checkpoint.
const JOB_RECORD: &str = "repair_job";

/// What to repair.
#[derive(Clone, Debug)]
pub struct RepairScope {
    /// The keyspaces.
    pub keyspaces: Vec<KeyspaceDef>,
    /// Only this part of the ring, if given.
    pub sub_range: Option<TokenRange>,
    /// How.
    pub options: RepairOptions,
}

/// The units of a job over `scope` on the current ring: each keyspace's
/// ring ranges in token order, cut to the sub-range.
fn plan_units(host: &dyn RepairHost, scope: &RepairScope) -> Vec<(KeyspaceId, TokenRange)> {
    let mut units = Vec::new();
    for keyspace in &scope.keyspaces {
        let map = host.replica_map(keyspace);
        for replicas in map.ranges() {
            let range = replicas.range();
            match scope.sub_range {
                None => units.push((keyspace.id, range)),
                Some(sub) => units.extend(
                    range
                        .intersection(&sub)
                        .into_iter()
                        .map(|r| (keyspace.id, r)),
                ),
            }
        }
    }
    units
}

/// Starts a repair of `scope`, coordinated by this node, in the background;
/// refused while another runs here. Its id.
pub async fn start(host: Arc<dyn RepairHost>, scope: RepairScope) -> Result<Uuid> {
    let guard = Arc::clone(&host.repair().running)
        .try_lock_owned()
        .map_err(|_| already_running(&*host))?;
    let units = plan_units(&*host, &scope);
    if units.is_empty() {
        return Err(RangeRepairError::NothingToRepair.into());
    }
    let job = RepairJob::new(Uuid::new_v4(), host.now(), scope.options, units);
    save(&*host, &job).await?;
    let id = job.id;
    tokio::spawn(run(host, job, guard));
    Ok(id)
}

/// Resumes the job a previous run of this node left unfinished, if any.
pub async fn resume(host: Arc<dyn RepairHost>) -> Result<()> {
    let Some(bytes) = host.store().meta_get(JOB_RECORD)? else {
        return Ok(());
    };
    let Some(job) = RepairJob::decode(&bytes) else {
        tracing::warn!("the saved repair job is corrupt; it will not be resumed");
        return Ok(());
    };
    if job.is_finished() {
        publish(&*host, &job, final_state(&job), Instant::now(), 0);
        return Ok(());
    }
    let guard = Arc::clone(&host.repair().running).lock_owned().await;
    wait_for_ring_members(&*host).await;
    let totals = job.totals();
    tracing::info!(
        id = %job.id,
        done = totals.done,
        total = totals.units,
        "resuming the repair interrupted by the restart"
    );
    run(host, job, guard).await;
    Ok(())
}

/// How long a restarted node waits to see the other ring members up before
/// it resumes or schedules repairs anyway.
const PEERS_PATIENCE: Duration = Duration::from_secs(60);

/// Waits (at most [`PEERS_PATIENCE`]) until this node sees every ring
/// member up: right after a restart gossip has not shown them yet, and a
/// range repaired then would fail for a replica that only seems down.
pub async fn wait_for_ring_members(host: &dyn RepairHost) {
    let mut views = host.views();
    let deadline = Instant::now() + PEERS_PATIENCE;
    loop {
        {
            let view = views.borrow_and_update();
            if !view.ring.is_empty() && view.ring.hosts().iter().all(|h| view.is_up(h.id)) {
                return;
            }
        }
        match tokio::time::timeout_at(deadline, views.changed()).await {
            Ok(Ok(())) => continue,
            _ => return,
        }
    }
}

fn already_running(host: &dyn RepairHost) -> NodeError {
    let job = host
        .repair()
        .progress
        .borrow()
        .as_ref()
        .filter(|p| p.state == JobState::Running)
        .map(|p| p.job.id);
    RangeRepairError::AlreadyRunning { job }.into()
}

/// Runs `job`'s pending units one by one, checkpointing after each.
async fn run(host: Arc<dyn RepairHost>, mut job: RepairJob, _running: OwnedMutexGuard<()>) {
    let host = &*host;
    let started = Instant::now();
    let done_at_start = job.totals().done + job.totals().failed;
    publish(host, &job, JobState::Running, started, done_at_start);
    let session = host.streams().open(SessionInfo {
        operation: format!("repair {}", job.id),
        direction: Direction::Receiving,
        peer: host.host_id(),
        peer_address: Some(host.client_address()),
        keyspace: keyspace_names(host, &job),
        ranges_total: job.units.len() as u32,
        bytes_total: 0,
    });
    let mut down = DownReplicas::default();
    let up_at_start: BTreeSet<HostId> = {
        let view = host.view();
        view.ring
            .hosts()
            .iter()
            .map(|h| h.id)
            .filter(|&h| view.is_up(h))
            .collect()
    };
    let mut second_pass = false;
    loop {
        while let Some(index) = job.next_pending() {
            let unit = &job.units[index];
            let state = repair_unit(
                host,
                unit.keyspace,
                unit.range,
                job.options,
                job.began,
                &mut down,
            )
            .await;
            if let UnitState::Done(report) = &state {
                session.add_bytes(report.bytes);
            }
            if !second_pass {
                session.range_done();
            }
            job.finish_unit(index, state);
            if let Err(error) = save(host, &job).await {
                tracing::warn!(%error, "could not checkpoint the repair");
            }
            publish(host, &job, JobState::Running, started, done_at_start);
        }
        // One second pass over the failed units when every replica given
        // up on was up at the start and is back: a node judged down for a
        // while under load (or after a restart) would otherwise fail every
        // unit that came up meanwhile.
        if second_pass
            || job.totals().failed == 0
            || !down
                .all_back(host, &up_at_start, SECOND_PASS_PATIENCE)
                .await
        {
            break;
        }
        second_pass = true;
        let again = job.retry_failed();
        tracing::info!(
            units = again,
            "repair: the replicas given up on are back; repairing the failed ranges again"
        );
    }
    let state = final_state(&job);
    let failures = job.totals().failed;
    session.finish(if failures == 0 {
        Ok(())
    } else {
        Err(format!("{failures} ranges failed"))
    });
    tracing::info!(id = %job.id, state = state.as_str(), "repair ended");
    publish(host, &job, state, started, done_at_start);
}

fn final_state(job: &RepairJob) -> JobState {
    if job.totals().failed == 0 {
        JobState::Finished
    } else {
        JobState::Failed
    }
}

fn publish(
    host: &dyn RepairHost,
    job: &RepairJob,
    state: JobState,
    started: Instant,
    done_at_start: usize,
) {
    host.repair().progress.send_replace(Some(JobProgress {
        job: job.clone(),
        state,
        started,
        done_at_start,
    }));
}

async fn save(host: &dyn RepairHost, job: &RepairJob) -> Result<()> {
    host.store().meta_put(JOB_RECORD, &job.encode()).await?;
    Ok(())
}

/// The names of the job's keyspaces, for `netstats`.
fn keyspace_names(host: &dyn RepairHost, job: &RepairJob) -> String {
    let mut ids: Vec<KeyspaceId> = job.units.iter().map(|u| u.keyspace).collect();
    ids.dedup();
    ids.iter()
        .map(|&id| host.keyspace_name(id))
        .collect::<Vec<_>>()
        .join(",")
}
