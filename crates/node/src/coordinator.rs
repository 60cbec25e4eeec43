//! The coordinator: any node runs a client's read or write against the key's
//! replicas at the requested consistency level.
//!
//! Writes go to every live replica at once, each send in its own task so a
//! write keeps reaching every replica after the client has its answer; the
//! coordinator answers when the level's acks are in (or with `UNAVAILABLE`
//! before sending anything, or `DEADLINE_EXCEEDED` after the write timeout,
//! which is indeterminate). Reads ask the closest replica for data and the
//! next ones for digests, top up from spare replicas when one fails or is
//! slow, and on a digest mismatch fetch full data, reconcile (last write
//! wins) and repair the stale replicas before answering (blocking read
//! repair, as Cassandra 4). The bookkeeping is the pure state machines of
//! `ringstore_replication`; this module only moves messages.

use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::{HostId, Murmur3Partitioner};
use ringstore_proto::v1 as pb;
use ringstore_replication::{
    ConsistencyLevel, Digest, ReadAction, ReadTracker, ReplicaCandidate, Request, WriteStatus,
    WriteTimeout, WriteTracker, plan_read, plan_write,
};
use ringstore_storage::Cell;
use tokio::sync::mpsc;

use crate::context::NodeContext;
use crate::convert::{cell_from_pb, cell_to_pb};
use crate::error::{NodeError, Result};
use crate::schema::KeyspaceDef;

/// A replica's answer to a read request.
enum ReadReply {
    Data(Option<Cell>),
    Digest(Digest),
    Failed,
}

/// Writes `cell` for `key` at `level`.
pub async fn write(
    context: &Arc<NodeContext>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    cell: Cell,
    level: ConsistencyLevel,
) -> Result<()> {
    let (natural, pending) = write_candidates(context, keyspace, &key)?;
    let plan = plan_write(
        level,
        &keyspace.strategy,
        &dc_of(context),
        &natural,
        &pending,
    )
    .map_err(|e| NodeError::Unavailable(e.to_string()))?;
    let mut tracker = WriteTracker::new(&plan);
    let (acks, mut replies) = mpsc::channel(plan.targets().len().max(1));
    let key = Arc::new(key);
    let timeout = Duration::from_millis(context.config.timeouts.write_ms);
    for target in plan.targets() {
        let (context, keyspace, key, cell, acks, host) = (
            context.clone(),
            keyspace.clone(),
            key.clone(),
            cell.clone(),
            acks.clone(),
            target.host,
        );
        tokio::spawn(async move {
            let ok = match tokio::time::timeout(
                timeout,
                apply_on(&context, host, &keyspace, &key, cell.clone()),
            )
            .await
            {
                Ok(Ok(())) => true,
                Ok(Err(error)) => {
                    tracing::debug!(%host, %error, "replica write failed");
                    false
                }
                Err(_) => false,
            };
            let _ = acks.send((host, ok)).await;
            // A replica that failed or did not answer in time gets a hint,
            // even after the client has its answer.
            if !ok && host != context.host_id {
                let _ = context
                    .handoff
                    .hint(&context.store, host, keyspace.id, &key, &cell)
                    .await;
            }
        });
    }
    // Replicas known down get hints; at ANY a stored hint counts as an ack.
    let mut status = tracker.status();
    for &host in plan.down() {
        if context
            .handoff
            .hint(&context.store, host, keyspace.id, &key, &cell)
            .await?
        {
            status = tracker.on_hint_stored();
        }
    }
    if status == WriteStatus::Satisfied {
        return Ok(());
    }
    drop(acks);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        let status = tokio::select! {
            reply = replies.recv() => match reply {
                Some((host, true)) => tracker.on_ack(host),
                Some((host, false)) => tracker.on_failure(host),
                None => WriteStatus::Failed,
            },
            () = &mut deadline => return Err(timeout_of(&tracker)),
        };
        match status {
            WriteStatus::Pending => continue,
            WriteStatus::Satisfied => return Ok(()),
            WriteStatus::Failed => {
                return Err(NodeError::Unavailable(format!(
                    "write failed at consistency level {}: {} of {} required acks received; \
                     the write may have been applied on some replicas",
                    tracker.level(),
                    tracker.acked(),
                    tracker.required()
                )));
            }
        }
    }
}

fn timeout_of(tracker: &WriteTracker) -> NodeError {
    NodeError::Timeout(
        WriteTimeout {
            level: tracker.level(),
            acked: tracker.acked(),
            required: tracker.required(),
        }
        .to_string(),
    )
}

/// Reads `key` at `level`: the winning cell (possibly a tombstone), if any.
pub async fn read(
    context: &Arc<NodeContext>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    level: ConsistencyLevel,
) -> Result<Option<Cell>> {
    let natural = candidates(context, keyspace, &key)?;
    let plan = plan_read(level, &keyspace.strategy, &dc_of(context), &natural)?;
    let mut tracker = ReadTracker::new(&plan);
    let key = Arc::new(key);
    let (sender, mut replies) = mpsc::channel::<(HostId, ReadReply)>(16);
    let round = Duration::from_millis(context.config.timeouts.read_ms);
    send_reads(context, keyspace, &key, plan.requests(), &sender);
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    loop {
        let action = tokio::select! {
            reply = replies.recv() => match reply.expect("the coordinator holds a sender") {
                (host, ReadReply::Data(cell)) => tracker.on_data(host, cell),
                (host, ReadReply::Digest(digest)) => tracker.on_digest(host, digest),
                (host, ReadReply::Failed) => tracker.on_failure(host),
            },
            () = &mut deadline => tracker.on_timeout(),
        };
        match action {
            ReadAction::Wait => {}
            ReadAction::Contact(requests) => {
                send_reads(context, keyspace, &key, requests, &sender);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            ReadAction::Done(outcome) => {
                if !outcome.repairs.is_empty() {
                    repair(context, keyspace, &key, outcome.repairs).await?;
                }
                return Ok(outcome.winner);
            }
            ReadAction::Failed(failure) => {
                return Err(ringstore_replication::ReplicationError::from(failure).into());
            }
        }
    }
}

/// Writes the winning cell to every stale replica and waits for all of them
/// (blocking read repair), within the write timeout.
async fn repair(
    context: &Arc<NodeContext>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    repairs: Vec<(HostId, Cell)>,
) -> Result<()> {
    let count = repairs.len();
    let writes = repairs.into_iter().map(|(host, cell)| {
        let (context, keyspace, key) = (context.clone(), keyspace.clone(), key.clone());
        async move { apply_on(&context, host, &keyspace, &key, cell).await }
    });
    let timeout = Duration::from_millis(context.config.timeouts.write_ms);
    match tokio::time::timeout(timeout, futures::future::join_all(writes)).await {
        Ok(results) => {
            let failed = results.iter().filter(|r| r.is_err()).count();
            if failed > 0 {
                return Err(NodeError::Timeout(format!(
                    "read repair failed on {failed} of {count} stale replicas"
                )));
            }
            tracing::debug!(count, "read repair done");
            Ok(())
        }
        Err(_) => Err(NodeError::Timeout(format!(
            "read repair of {count} stale replicas did not finish within {timeout:?}"
        ))),
    }
}

fn send_reads(
    context: &Arc<NodeContext>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    requests: Vec<(HostId, Request)>,
    replies: &mpsc::Sender<(HostId, ReadReply)>,
) {
    for (host, request) in requests {
        let (context, keyspace, key, replies) = (
            context.clone(),
            keyspace.clone(),
            key.clone(),
            replies.clone(),
        );
        tokio::spawn(async move {
            let reply = match read_on(&context, host, &keyspace, &key, request).await {
                Ok(reply) => reply,
                Err(error) => {
                    tracing::debug!(%host, %error, "replica read failed");
                    ReadReply::Failed
                }
            };
            let _ = replies.send((host, reply)).await;
        });
    }
}

/// The key's natural replicas, with their DCs and liveness.
fn candidates(
    context: &NodeContext,
    keyspace: &KeyspaceDef,
    key: &[u8],
) -> Result<Vec<ReplicaCandidate>> {
    let token =
        Murmur3Partitioner::token(key).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let (view, map) = context.placement(keyspace);
    Ok(map
        .replicas(token)
        .hosts()
        .map(|h| ReplicaCandidate::new(h.id, h.location.dc.clone(), view.is_up(h.id)))
        .collect())
}

/// What a write goes to: the key's natural replicas and, during a range
/// movement, its pending replicas (those the pending ring adds).
fn write_candidates(
    context: &NodeContext,
    keyspace: &KeyspaceDef,
    key: &[u8],
) -> Result<(Vec<ReplicaCandidate>, Vec<ReplicaCandidate>)> {
    let natural = candidates(context, keyspace, key)?;
    let view = context.view();
    let Some(ring) = &view.pending_ring else {
        return Ok((natural, Vec::new()));
    };
    let token =
        Murmur3Partitioner::token(key).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let pending = context
        .placements
        .replica_map(ring, keyspace.id, &keyspace.strategy)
        .replicas(token)
        .hosts()
        .filter(|h| !natural.iter().any(|n| n.host == h.id))
        .map(|h| ReplicaCandidate::new(h.id, h.location.dc.clone(), view.is_up(h.id)))
        .collect();
    Ok((natural, pending))
}

fn dc_of(context: &NodeContext) -> ringstore_placement::Datacenter {
    context.config.dc.as_str().into()
}

/// Applies `cell` on replica `host` (locally when it is this node).
async fn apply_on(
    context: &NodeContext,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    cell: Cell,
) -> Result<()> {
    if host == context.host_id {
        context.store.apply(keyspace.id, key, cell).await?;
        return Ok(());
    }
    let address = internode_address(context, host)?;
    let request = pb::ApplyRequest {
        mutations: vec![pb::ReplicaMutation {
            keyspace_id: keyspace.id.to_string(),
            key: key.to_vec(),
            cell: Some(cell_to_pb(&cell)),
        }],
    };
    context
        .peers
        .client(address)
        .apply(request)
        .await
        .map_err(|s| NodeError::Internal(format!("{address}: {}", s.message())))?;
    Ok(())
}

/// Reads `key` on replica `host` (locally when it is this node).
async fn read_on(
    context: &NodeContext,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    request: Request,
) -> Result<ReadReply> {
    let digest_only = request == Request::Digest;
    if host == context.host_id {
        let cell = context.store.read(keyspace.id, key)?;
        return Ok(if digest_only {
            ReadReply::Digest(Digest::of(cell.as_ref()))
        } else {
            ReadReply::Data(cell)
        });
    }
    let address = internode_address(context, host)?;
    let response = context
        .peers
        .client(address)
        .read(pb::ReadRequest {
            keyspace_id: keyspace.id.to_string(),
            key: key.to_vec(),
            digest_only,
        })
        .await
        .map_err(|s| NodeError::Internal(format!("{address}: {}", s.message())))?
        .into_inner();
    Ok(if digest_only {
        ReadReply::Digest(Digest(response.digest))
    } else {
        ReadReply::Data(response.cell.map(cell_from_pb))
    })
}

fn internode_address(context: &NodeContext, host: HostId) -> Result<std::net::SocketAddr> {
    context
        .view()
        .member(host)
        .map(|m| m.metadata.internode_addr)
        .ok_or_else(|| NodeError::Internal(format!("no address known for host {host}")))
}
