//! The `Repair` service: `ringstore repair` (started here, progress
//! streamed back), `repair status`, `garbagecollect` and
//! `repair --paxos-only`.
//!
//! It takes the node as repair's host ([`RepairHost`]), and as a
//! compare-and-set coordinator ([`CasHost`]) for the Paxos repair.
//! [`repair_status`] is a free function, which the web console's host
//! calls too.

use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::{Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::repair_server::Repair;
use ringstore_repair::{RepairOptions, UnitState, overdue};
use ringstore_storage::Timestamp;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::coordinator::cas::CasHost;
use crate::coordinator::cas::repair::repair_keyspace;
use crate::error::{NodeError, OperatorError, Result};
use crate::repair::RepairHost;
use crate::repair::gc;
use crate::repair::job::{self, RepairScope};
use crate::repair::scheduler::{gc_grace_of, scheduled_ranges};
use crate::repair::state::{JobProgress, JobState};
use crate::schema::KeyspaceDef;

/// The shortest time between two progress messages of one repair.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Serves `Repair` from a node, its host (see the module docs).
pub struct RepairService<H> {
    /// In an `Arc`: a repair job, and the stream of its progress, outlive
    /// the call that starts them.
    host: Arc<H>,
}

impl<H: RepairHost + 'static> RepairService<H> {
    /// The service of `host`'s node.
    pub fn new(host: Arc<H>) -> RepairService<H> {
        RepairService { host }
    }

    /// The keyspace named `name` (not dropped, or `NOT_FOUND`), or every
    /// keyspace when it is empty.
    fn keyspaces(&self, name: &str) -> Result<Vec<KeyspaceDef>> {
        let keyspaces = self.host.keyspaces();
        if name.is_empty() {
            return Ok(keyspaces);
        }
        let named = keyspaces.into_iter().find(|k| k.name == name);
        named
            .map(|keyspace| vec![keyspace])
            .ok_or_else(|| NodeError::KeyspaceNotFound(name.to_string()))
    }
}

/// The sub-range of a request: both tokens or neither.
fn sub_range(start: Option<i64>, end: Option<i64>) -> Result<Option<TokenRange>> {
    match (start, end) {
        (None, None) => Ok(None),
        (Some(start), Some(end)) => Ok(Some(TokenRange::new(Token(start), Token(end)))),
        _ => Err(OperatorError::HalfSubRange.into()),
    }
}

/// The wire form of a job's progress.
fn progress_to_pb(host: &impl RepairHost, progress: &JobProgress) -> pb::RepairProgress {
    let job = &progress.job;
    let totals = job.totals();
    let ranges = job
        .units
        .iter()
        .filter_map(|unit| {
            let (mismatched_keys, error) = match &unit.state {
                UnitState::Failed(reason) => (0, reason.clone()),
                UnitState::Done(report) if job.options.dry_run && report.mismatched_keys > 0 => {
                    (report.mismatched_keys, String::new())
                }
                _ => return None,
            };
            Some(pb::RepairRangeReport {
                keyspace: host.keyspace_name(unit.keyspace),
                start_token: unit.range.start.0,
                end_token: unit.range.end.0,
                mismatched_keys,
                error,
            })
        })
        .collect();
    pb::RepairProgress {
        id: job.id.to_string(),
        ranges_total: totals.units as u32,
        ranges_done: totals.done as u32,
        ranges_failed: totals.failed as u32,
        mismatched_keys: totals.report.mismatched_keys,
        rows_sent: totals.report.rows_sent,
        bytes: totals.report.bytes,
        eta_seconds: progress.eta_seconds(),
        dry_run: job.options.dry_run,
        finished: progress.state != JobState::Running,
        ranges,
        state: progress.state.as_str().to_string(),
        resumed_from: progress.done_at_start as u32,
    }
}

/// Sends the progress of job `id` to `sender` as it changes, until it ends
/// or the receiver goes away.
async fn follow(
    host: Arc<impl RepairHost>,
    id: Uuid,
    sender: mpsc::Sender<Result<pb::RepairProgress, Status>>,
) {
    let mut progress = host.repair().progress.subscribe();
    loop {
        let message = progress
            .borrow_and_update()
            .as_ref()
            .filter(|p| p.job.id == id)
            .map(|p| progress_to_pb(host.as_ref(), p));
        if let Some(message) = message {
            let finished = message.finished;
            if sender.send(Ok(message)).await.is_err() || finished {
                return;
            }
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
        if progress.changed().await.is_err() {
            return;
        }
    }
}

/// What `repair status` shows: the job running or last run, the schedule,
/// and when each scheduled range was last repaired (and whether that is
/// overdue against its keyspace's gc grace).
pub fn repair_status(host: &impl RepairHost) -> pb::RepairStatusResponse {
    let current = host
        .repair()
        .progress
        .borrow()
        .as_ref()
        .map(|p| progress_to_pb(host, p));
    let ranges = scheduled_ranges(host);
    let now = host.now();
    let since = Timestamp(now.0 - host.started().elapsed().as_micros() as i64);
    let late = overdue(&ranges, gc_grace_of(host), since, now);
    let ranges = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| pb::ScheduledRangeStatus {
            keyspace: host.keyspace_name(range.keyspace),
            start_token: range.range.start.0,
            end_token: range.range.end.0,
            last_repaired_micros: range.last_repaired.map(|t| t.0),
            overdue: late.contains(&index),
        })
        .collect();
    let config = host.repair_config();
    pb::RepairStatusResponse {
        current,
        schedule: config.schedule.as_str().to_string(),
        schedule_interval_seconds: config.interval_seconds,
        ranges,
        tombstone_gc: config.tombstone_gc.as_str().to_string(),
    }
}

#[tonic::async_trait]
impl<H: RepairHost + CasHost + 'static> Repair for RepairService<H> {
    type RepairStream = ReceiverStream<Result<pb::RepairProgress, Status>>;

    async fn repair(
        &self,
        request: Request<pb::RepairRequest>,
    ) -> Result<Response<Self::RepairStream>, Status> {
        let request = request.into_inner();
        let scope = RepairScope {
            keyspaces: self.keyspaces(&request.keyspace)?,
            sub_range: sub_range(request.start_token, request.end_token)?,
            options: RepairOptions {
                dry_run: request.dry_run,
                dc_local: request.dc_local,
            },
        };
        let id = job::start(self.host.clone(), scope).await?;
        let (sender, receiver) = mpsc::channel(4);
        tokio::spawn(follow(self.host.clone(), id, sender));
        Ok(Response::new(ReceiverStream::new(receiver)))
    }

    async fn repair_status(
        &self,
        _: Request<pb::RepairStatusRequest>,
    ) -> Result<Response<pb::RepairStatusResponse>, Status> {
        Ok(Response::new(repair_status(self.host.as_ref())))
    }

    async fn garbage_collect(
        &self,
        request: Request<pb::GarbageCollectRequest>,
    ) -> Result<Response<pb::GarbageCollectResponse>, Status> {
        let keyspaces = self.keyspaces(&request.into_inner().keyspace)?;
        let keyspaces = gc::collect(self.host.as_ref(), &keyspaces)
            .await?
            .into_iter()
            .map(|c| pb::GarbageCollected {
                keyspace: c.keyspace,
                cells_scanned: c.scanned,
                cells_purged: c.purged,
                deleted_kept: c.deleted_kept,
            })
            .collect();
        Ok(Response::new(pb::GarbageCollectResponse { keyspaces }))
    }

    async fn paxos_repair(
        &self,
        request: Request<pb::PaxosRepairRequest>,
    ) -> Result<Response<pb::PaxosRepairResponse>, Status> {
        let mut keyspaces = Vec::new();
        for keyspace in self.keyspaces(&request.into_inner().keyspace)? {
            let report = repair_keyspace(&self.host, &keyspace).await?;
            keyspaces.push(pb::PaxosRepaired {
                keyspace: report.keyspace,
                keys_finished: report.finished,
                keys_failed: report.failed,
                first_error: report.first_error.unwrap_or_default(),
                states_purged: report.purge.purged,
                states_kept: report.purge.kept,
            });
        }
        Ok(Response::new(pb::PaxosRepairResponse { keyspaces }))
    }
}
