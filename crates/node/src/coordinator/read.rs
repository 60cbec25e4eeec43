//! The read flow: data from the closest replica and digests from the next,
//! spares asked when one fails or is slow (`speculative_retry`), and on a
//! mismatch full data, reconciliation and a blocking read repair before
//! the answer (see the [module docs](super)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_membership::ClusterView;
use ringstore_metrics::{CoordinatorOp, Stage};
use ringstore_placement::HostId;
use ringstore_replication::{
    ConsistencyLevel, Digest, ReadAction, ReadRepair, ReadTracker, RepairAction, Request, plan_read,
};
use ringstore_storage::Cell;
use tokio::sync::mpsc;

use crate::convert::cell_from_pb;
use crate::error::{CoordinatorError, Result};
use crate::schema::KeyspaceDef;
use crate::{empty_ring, ring_lag};

use super::host::CoordinatorHost;
use super::local_reads::read_own_copy;
use super::peer_calls::read_queues_driver;
use super::replicas::{candidates, dc_of, token_of};
use super::write::{ReplicaWrite, WriteOutcome, send_to_replica};
use super::{measured, read_flights_driver, read_latencies};

/// A replica's answer to a read request.
enum ReadReply {
    Data(Option<Cell>),
    Digest(Digest),
    Failed,
    /// Its copy of the cell does not read back.
    Damaged,
}

/// A replica's answer to a read, with how long it took.
type ReplicaAnswer = (HostId, ReadReply, Duration);

/// Reads `key` at `level`: the winning cell (possibly a tombstone), if any;
/// timed and counted in the coordinator metrics.
pub(crate) async fn read<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    level: ConsistencyLevel,
) -> Result<Option<Cell>> {
    let started = Instant::now();
    let result = read_flights_driver::coalesced(context, keyspace, key, level, Round).await;
    measured(context.as_ref(), CoordinatorOp::Read, started, &result);
    result
}

/// One replica round of a read, as a flight of `read_flights` runs it.
struct Round;

impl<H: CoordinatorHost> read_flights_driver::AsyncRound<H> for Round {
    async fn run(
        &self,
        context: Arc<H>,
        keyspace: KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> Result<Option<Cell>> {
        let key = Arc::new(key);
        let within = Duration::from_millis(context.read_timeout_ms());
        ring_lag::retry_when_caught_up(
            context.ring_lag(),
            || context.views(),
            || context.view().ring.checksum(),
            within,
            || read_unmeasured(&context, &keyspace, &key, level),
        )
        .await
    }
}

async fn read_unmeasured<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    level: ConsistencyLevel,
) -> Result<Option<Cell>> {
    let view = context.view();
    empty_ring::refuse_while_starting(&view)?;
    let natural = candidates(context.as_ref(), &view, keyspace, token_of(key)?);
    let local = natural.iter().any(|c| c.host == context.host_id());
    context
        .metrics()
        .coordinator_request(CoordinatorOp::Read, local);
    let plan = plan_read(
        level,
        &keyspace.strategy,
        &dc_of(context.as_ref()),
        &natural,
    )?;
    let mut tracker = ReadTracker::new(&plan);
    let latencies = context.read_latencies();
    let before_estimate = Duration::from_millis(context.read_timeout_ms() / 2);
    let setting = keyspace.speculative_retry;
    if let Some(delay) = latencies.speculation_delay(keyspace.id, setting, before_estimate) {
        tracker = tracker.with_speculative_retry(read_latencies::now() + delay);
    }
    let (sender, mut replies) = mpsc::channel::<ReplicaAnswer>(16);
    let round = Duration::from_millis(context.read_timeout_ms());
    let send_reads = |requests| send_reads(context, keyspace, key, requests, &sender, &view);
    send_reads(plan.requests());
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    // Armed at the tracker's speculation deadline while it has one.
    let speculation = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(speculation);
    loop {
        let speculate_at = tracker.next_deadline();
        if let Some(at) = speculate_at {
            speculation
                .as_mut()
                .reset(tokio::time::Instant::from_std(at));
        }
        let (action, speculative) = tokio::select! {
            reply = replies.recv() => {
                let (host, reply, latency) = reply.expect("the coordinator holds a sender");
                if !matches!(reply, ReadReply::Failed | ReadReply::Damaged) {
                    latencies.record(keyspace.id, latency);
                }
                let action = match reply {
                    ReadReply::Data(cell) => tracker.on_data(host, cell),
                    ReadReply::Digest(digest) => tracker.on_digest(host, digest),
                    ReadReply::Failed => tracker.on_failure(host),
                    ReadReply::Damaged => tracker.on_damaged(host),
                };
                (action, false)
            },
            () = &mut deadline => (tracker.on_timeout(), false),
            () = &mut speculation, if speculate_at.is_some() => {
                (tracker.on_timer(read_latencies::now()), true)
            },
        };
        match action {
            ReadAction::Wait => {}
            // A speculation adds a replica to the round; it does not restart it.
            ReadAction::Contact(requests) if speculative => {
                context.metrics().speculative_retry();
                send_reads(requests);
            }
            ReadAction::Contact(requests) => {
                send_reads(requests);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            ReadAction::Done(outcome) => {
                if let Some(repair) = tracker.read_repair() {
                    read_repair(context, keyspace, key, repair, &view).await?;
                }
                return Ok(outcome.winner);
            }
            ReadAction::Failed(failure) => {
                return Err(ringstore_replication::ReplicationError::from(failure).into());
            }
        }
    }
}

/// Writes the read's winner to its stale replicas (and, should some of them
/// fail, to others) until enough hold it for the read's level (blocking read
/// repair); each write runs in its own task, as a write's do, so repairs
/// still in flight when the client gets its answer carry on.
async fn read_repair<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    mut repair: ReadRepair,
    placed: &Arc<ClusterView>,
) -> Result<()> {
    let _stage = context.metrics().stage(Stage::ReadRepair);
    let write = Arc::new(ReplicaWrite {
        keyspace: keyspace.clone(),
        key: key.as_ref().clone(),
        cell: repair.winner().clone(),
    });
    let (outcomes, mut replies) = mpsc::unbounded_channel();
    let send = |hosts: Vec<HostId>| {
        for host in hosts {
            let (write, outcomes, placed) = (write.clone(), outcomes.clone(), placed.clone());
            let task = send_to_replica(context.clone(), host, write, outcomes, placed);
            tokio::spawn(task);
        }
    };
    send(repair.targets());
    let round = Duration::from_millis(context.write_timeout_ms());
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    let mut action = repair.status();
    loop {
        match action {
            RepairAction::Wait => {}
            RepairAction::Send(hosts) => {
                tracing::debug!(count = hosts.len(), "read repair writes to more replicas");
                send(hosts);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            RepairAction::Done => return Ok(()),
            RepairAction::Failed(failure) => return Err(CoordinatorError::from(failure).into()),
        }
        action = tokio::select! {
            reply = replies.recv() => match reply.expect("the coordinator holds a sender") {
                WriteOutcome::Acked(host) => {
                    context.metrics().read_repaired(1);
                    repair.on_ack(host)
                }
                WriteOutcome::Failed(host) => repair.on_failure(host),
                WriteOutcome::HintStored => RepairAction::Wait,
            },
            () = &mut deadline => repair.on_timeout(),
        };
    }
}

fn send_reads<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    requests: Vec<(HostId, Request)>,
    replies: &mpsc::Sender<ReplicaAnswer>,
    placed: &Arc<ClusterView>,
) {
    for (host, request) in requests {
        let (context, keyspace, key, replies, placed) = (
            context.clone(),
            keyspace.clone(),
            key.clone(),
            replies.clone(),
            placed.clone(),
        );
        tokio::spawn(async move {
            let sent = tokio::time::Instant::now();
            let reply = match read_on(&context, host, &keyspace, &key, request, &placed).await {
                Ok(reply) => reply,
                // Logged by the replica, with the keyspace and the key.
                Err(error) if error.is_damaged_replica() => ReadReply::Damaged,
                Err(error) => {
                    tracing::debug!(%host, %error, "replica read failed");
                    ReadReply::Failed
                }
            };
            // A read that finished no longer listens: its late answers are
            // dropped here, unrecorded (see `read_latencies`).
            let _ = replies.send((host, reply, sent.elapsed())).await;
        });
    }
}

/// Reads `key` on replica `host` (locally when it is this node; through
/// the peer's queue of coalesced reads otherwise, `read_queues.rs`).
async fn read_on<H: CoordinatorHost>(
    context: &Arc<H>,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    request: Request,
    placed: &ClusterView,
) -> Result<ReadReply> {
    let digest_only = request == Request::Digest;
    if host == context.host_id() {
        let cell = read_own_copy(context.as_ref(), keyspace.id, &keyspace.name, key)?;
        return Ok(if digest_only {
            ReadReply::Digest(Digest::of(cell.as_ref()))
        } else {
            ReadReply::Data(cell)
        });
    }
    let address = context.internode_address(host)?;
    let (cell, digest) =
        read_queues_driver::read(context, address, keyspace.id, key, digest_only, placed).await?;
    Ok(if digest_only {
        ReadReply::Digest(Digest(digest))
    } else {
        ReadReply::Data(cell.map(cell_from_pb))
    })
}
