//! The write flow: a client's write sent to every live replica of its key
//! (pending replicas included) in tasks of their own, hints stored for the
//! replicas known down or failed, and the answer given once the level's
//! acks are in or the write timeout passes (see the [module docs](super)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_membership::ClusterView;
use ringstore_metrics::{CoordinatorOp, LocalOp};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use ringstore_replication::{
    ConsistencyLevel, ReplicationError, WriteStatus, WriteTimeout, WriteTracker, plan_write,
};
use ringstore_storage::Cell;
use tokio::sync::mpsc;

use crate::convert::cell_to_pb;
use crate::deadline;
use crate::error::{CoordinatorError, NodeError, Result};
use crate::schema::KeyspaceDef;
use crate::{empty_ring, ring_lag};

use super::host::CoordinatorHost;
use super::measured;
use super::peer_calls::write_queues_driver;
use super::replicas::{dc_of, write_candidates};

/// What a write's helper tasks report to its coordinator.
pub(super) enum WriteOutcome {
    /// The replica applied the write.
    Acked(HostId),
    /// The replica failed or did not answer within the write timeout.
    Failed(HostId),
    /// A hint for the replica is stored (durably).
    HintStored,
}

/// One write as its helper tasks share it.
pub(super) struct ReplicaWrite {
    pub(super) keyspace: KeyspaceDef,
    pub(super) key: Vec<u8>,
    pub(super) cell: Cell,
}

/// Writes `cell` for `key` at `level`, timed and counted in the
/// coordinator metrics (see [`write_unmeasured`]).
pub(crate) async fn write<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    cell: Cell,
    level: ConsistencyLevel,
) -> Result<()> {
    let started = Instant::now();
    let write = Arc::new(ReplicaWrite {
        keyspace: keyspace.clone(),
        key,
        cell,
    });
    let within = Duration::from_millis(context.write_timeout_ms());
    let result = ring_lag::retry_when_caught_up(
        context.ring_lag(),
        || context.views(),
        || context.view().ring.checksum(),
        within,
        || write_unmeasured(context, &write, level),
    )
    .await;
    measured(context.as_ref(), CoordinatorOp::Write, started, &result);
    result
}

/// Writes `write` at `level`, placed with the node's current view.
///
/// Every send to a replica and every hint runs in a task of its own that
/// outlives the request: a client that cancels or times out cannot stop a
/// hint from being stored once the write has gone out. A hint that cannot be
/// stored is logged and counted, never turned into an error of a write whose
/// level was met.
async fn write_unmeasured<H: CoordinatorHost>(
    context: &Arc<H>,
    write: &Arc<ReplicaWrite>,
    level: ConsistencyLevel,
) -> Result<()> {
    let keyspace = &write.keyspace;
    let view = context.view();
    empty_ring::refuse_while_starting(&view)?;
    let (natural, pending) = write_candidates(context.as_ref(), &view, keyspace, &write.key)?;
    let local = natural
        .iter()
        .chain(&pending)
        .any(|c| c.host == context.host_id());
    context
        .metrics()
        .coordinator_request(CoordinatorOp::Write, local);
    let plan = plan_write(
        level,
        &keyspace.strategy,
        &dc_of(context.as_ref()),
        &natural,
        &pending,
    )
    .map_err(ReplicationError::from)?;
    let mut tracker = WriteTracker::new(&plan);
    let (outcomes, mut replies) = mpsc::unbounded_channel();
    for target in plan.targets() {
        tokio::spawn(send_to_replica(
            context.clone(),
            target.host,
            write.clone(),
            outcomes.clone(),
            view.clone(),
        ));
    }
    // Replicas known down get hints; at ANY a stored hint counts as an ack.
    for &host in plan.down() {
        tokio::spawn(store_hint(
            context.clone(),
            host,
            write.clone(),
            Some(outcomes.clone()),
        ));
    }
    drop(outcomes);
    let timeout = Duration::from_millis(context.write_timeout_ms());
    match track(&mut tracker, &mut replies, timeout).await {
        Tracked::Satisfied => Ok(()),
        Tracked::Failed => Err(CoordinatorError::WriteFailed {
            level: tracker.level(),
            acked: tracker.acked(),
            required: tracker.required(),
        }
        .into()),
        Tracked::TimedOut => Err(timeout_of(&tracker)),
    }
}

/// How a write's acks came in.
pub(super) enum Tracked {
    /// The level is met.
    Satisfied,
    /// Too many replicas failed for the level to be met.
    Failed,
    /// The timeout passed first.
    TimedOut,
}

/// Feeds `replies` to `tracker` until its level is met, can no longer be
/// met, or `timeout` passes.
pub(super) async fn track(
    tracker: &mut WriteTracker,
    replies: &mut mpsc::UnboundedReceiver<WriteOutcome>,
    timeout: Duration,
) -> Tracked {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut status = tracker.status();
    loop {
        match status {
            WriteStatus::Pending => {}
            WriteStatus::Satisfied => return Tracked::Satisfied,
            WriteStatus::Failed => return Tracked::Failed,
        }
        status = tokio::select! {
            reply = replies.recv() => match reply {
                Some(WriteOutcome::Acked(host)) => tracker.on_ack(host),
                Some(WriteOutcome::Failed(host)) => tracker.on_failure(host),
                Some(WriteOutcome::HintStored) => tracker.on_hint_stored(),
                None => WriteStatus::Failed,
            },
            () = &mut deadline => return Tracked::TimedOut,
        };
    }
}

/// Sends `write`, placed with `placed`, to replica `host` within the write
/// timeout and reports the outcome; a replica that failed or did not answer
/// in time gets a hint.
pub(super) async fn send_to_replica<H: CoordinatorHost>(
    context: Arc<H>,
    host: HostId,
    write: Arc<ReplicaWrite>,
    outcomes: mpsc::UnboundedSender<WriteOutcome>,
    placed: Arc<ClusterView>,
) {
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let deadline = deadline::replica_deadline(context.now(), timeout);
    let applied = apply_on(
        &context,
        host,
        &write.keyspace,
        &write.key,
        write.cell.clone(),
        deadline,
        &placed,
    );
    let ok = match tokio::time::timeout(timeout, applied).await {
        Ok(Ok(())) => true,
        Ok(Err(error)) => {
            tracing::debug!(%host, %error, "replica write failed");
            false
        }
        Err(_) => false,
    };
    let outcome = if ok {
        WriteOutcome::Acked(host)
    } else {
        WriteOutcome::Failed(host)
    };
    // The coordinator may have answered already: nobody listening is fine.
    let _ = outcomes.send(outcome);
    if !ok && host != context.host_id() {
        store_hint(context, host, write, None).await;
    }
}

/// Stores a hint of `write` for `host`; reports it to `outcomes` if stored.
/// A failure is logged and counted: the write's fate is the replicas'.
/// None for a node that has left the cluster: it would never be delivered.
pub(super) async fn store_hint<H: CoordinatorHost>(
    context: Arc<H>,
    host: HostId,
    write: Arc<ReplicaWrite>,
    outcomes: Option<mpsc::UnboundedSender<WriteOutcome>>,
) {
    if context.view().has_left(host) {
        tracing::debug!(%host, "no hint for a node that has left the cluster");
        return;
    }
    let stored = context
        .handoff()
        .hint(
            context.store(),
            host,
            write.keyspace.id,
            &write.key,
            &write.cell,
        )
        .await;
    match stored {
        Ok(true) => {
            if let Some(outcomes) = outcomes {
                let _ = outcomes.send(WriteOutcome::HintStored);
            }
        }
        Ok(false) => {}
        Err(error) => {
            context.handoff().note_store_failure();
            tracing::warn!(%host, %error, "could not store a hint; the replica will need a repair");
        }
    }
}

fn timeout_of(tracker: &WriteTracker) -> NodeError {
    ReplicationError::from(WriteTimeout {
        level: tracker.level(),
        acked: tracker.acked(),
        required: tracker.required(),
    })
    .into()
}

/// Applies `cell` on replica `host` (locally when it is this node; through
/// the peer's queue of coalesced writes otherwise, `write_queues.rs`). A
/// peer gets `deadline` (µs, this node's clock), when this node stops
/// waiting: it drops the write if it reads it later ([`deadline`]).
async fn apply_on<H: CoordinatorHost>(
    context: &Arc<H>,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    cell: Cell,
    deadline: i64,
    placed: &ClusterView,
) -> Result<()> {
    if host == context.host_id() {
        let started = Instant::now();
        context.store().apply(keyspace.id, key, cell).await?;
        let elapsed = started.elapsed();
        context.served_locally(keyspace.id, &keyspace.name, LocalOp::Write, key, elapsed);
        return Ok(());
    }
    let mutation = pb::ReplicaMutation {
        keyspace_id: keyspace.id.to_string(),
        key: key.to_vec(),
        cell: Some(cell_to_pb(&cell)),
        deadline_micros: Some(deadline),
    };
    let address = context.internode_address(host)?;
    write_queues_driver::apply(context, address, mutation, placed).await
}
