//! The `Internode` service: replica reads and writes, schema exchange,
//! range streaming, hints handed over by a leaving node, and this replica's
//! part in per-key Paxos rounds (`paxos`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_hints::Hint;
use ringstore_metrics::{Expired, LocalOp, Stage};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::internode_server::Internode;
use ringstore_storage::{Cell, KeyspaceId, StorageError, Timestamp};
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::context::NodeContext;
use crate::convert::{cell_from_pb, cell_to_pb, keyspace_id_from_pb};
use crate::convert::{range_from_pb, ranges_from_pb};
use crate::coordinator::cas::repair::finish_range;
use crate::deadline;
use crate::error::{NodeError, OperatorError, RequestError, Result};
use crate::internode_auth::Caller;
use crate::limits::check_key;
use crate::paxos;
use crate::paxos::wire as paxos_wire;
use crate::repair::replica;
use crate::ring_lag;
use crate::schema::store::snapshot_of;
use crate::schema::sync::merge_and_publish;
use crate::schema::wire::schema_entry_from_pb;
use crate::services::apply_stream;
use crate::services::replica_reads;
use crate::streaming::fetch::{RangeFetch, fetch_ranges};
use crate::streaming::source::send_range;
use crate::topology::cleanup::clean_keyspace;
use ringstore_repair::MAX_DEPTH;
use ringstore_streaming::{StreamOperation, estimate_ranges};

/// One replica write: keyspace, key, cell.
type Write = (KeyspaceId, Vec<u8>, Cell);

/// The mutations of an `Apply` that passed validation, with their indices in
/// the request.
#[derive(Default)]
struct Accepted {
    indices: Vec<usize>,
    writes: Vec<Write>,
}

impl Accepted {
    fn push(&mut self, index: usize, write: Write) {
        self.indices.push(index);
        self.writes.push(write);
    }

    /// Takes out the writes to `keyspace`; their request indices.
    fn remove_keyspace(&mut self, keyspace: KeyspaceId) -> Vec<usize> {
        let mut removed = Vec::new();
        let mut kept = Accepted::default();
        for (index, write) in self.indices.drain(..).zip(self.writes.drain(..)) {
            if write.0 == keyspace {
                removed.push(index);
            } else {
                kept.push(index, write);
            }
        }
        *self = kept;
        removed
    }
}

/// The wire form of mutation `index` refused for good because of `error`
/// (a permanent, per-mutation problem).
fn refusal(index: usize, error: &NodeError) -> pb::RefusedMutation {
    let (reason, message) = match error {
        NodeError::KeyspaceNotFound(id) => (
            pb::RefusalReason::KeyspaceDropped,
            format!("keyspace {id} has been dropped"),
        ),
        other => (pb::RefusalReason::Invalid, other.to_string()),
    };
    pb::RefusedMutation {
        index: u32::try_from(index).unwrap_or(u32::MAX),
        reason: reason.into(),
        message,
    }
}

/// The refusal of mutation `index`, read at `now` after its coordinator's
/// `deadline`.
fn expired(index: usize, deadline: Option<i64>, now: Timestamp) -> pb::RefusedMutation {
    let late_ms = now.0.saturating_sub(deadline.unwrap_or(now.0)) / 1000;
    pb::RefusedMutation {
        index: u32::try_from(index).unwrap_or(u32::MAX),
        reason: pb::RefusalReason::Expired.into(),
        message: format!("read {late_ms} ms after the coordinator's deadline: dropped unapplied"),
    }
}

/// Serves `Internode` from a node's context.
#[derive(Clone)]
pub struct InternodeService {
    context: Arc<NodeContext>,
    /// Turns true when the node stops: open apply streams then end, or the
    /// server's graceful shutdown would wait for them forever.
    stopped: watch::Receiver<bool>,
}

impl InternodeService {
    /// The service of `context`'s node, whose streams end once `stopped`
    /// turns true.
    pub fn new(context: Arc<NodeContext>, stopped: watch::Receiver<bool>) -> InternodeService {
        InternodeService { context, stopped }
    }

    /// One `Apply` call: every mutation applied, or refused on its own if
    /// it can never be applied.
    async fn apply_request(&self, request: pb::ApplyRequest) -> Result<pb::ApplyResponse, Status> {
        self.context.check_serving()?;
        let _stage = self.context.metrics.stage(Stage::InternodeApply);
        let started = Instant::now();
        let mut accepted = Accepted::default();
        let mut refused = Vec::new();
        let members = ring_lag::answer_for(&self.context.view(), request.ring_checksum);
        // A mutation its coordinator stopped waiting for is dropped:
        // applying it now helps nobody, and it is hinted instead.
        let now = self.context.clock.now();
        let bound = Duration::from_millis(self.context.config.max_clock_offset_ms);
        for (index, mutation) in request.mutations.into_iter().enumerate() {
            if deadline::replica_write_expired(mutation.deadline_micros, now, bound) {
                self.context.metrics.dropped_expired(Expired::Mutation);
                refused.push(expired(index, mutation.deadline_micros, now));
                continue;
            }
            match self.replica_write(mutation) {
                Ok(write) => accepted.push(index, write),
                Err(error) => refused.push(refusal(index, &error)),
            }
        }
        // The store may know of a drop that the schema has not shown yet:
        // refuse that keyspace's mutations and apply the rest again
        // (re-applying is harmless: last write wins).
        loop {
            match self.context.store.apply_many(&accepted.writes).await {
                Ok(_) => break,
                Err(StorageError::KeyspaceDropped { keyspace }) => {
                    let error = NodeError::KeyspaceNotFound(keyspace.to_string());
                    let removed = accepted.remove_keyspace(keyspace);
                    if removed.is_empty() {
                        return Err(error.into());
                    }
                    refused.extend(removed.into_iter().map(|index| refusal(index, &error)));
                }
                Err(error) => return Err(NodeError::from(error).into()),
            }
        }
        refused.sort_by_key(|r| r.index);
        // Each applied mutation is recorded with the whole call's latency.
        let elapsed = started.elapsed();
        for (id, key, _) in &accepted.writes {
            let name = self.context.keyspace_name(*id);
            self.context
                .served_locally(*id, &name, LocalOp::Write, key, elapsed);
        }
        Ok(pb::ApplyResponse { refused, members })
    }

    /// One mutation of an `Apply` as a write; an error if it can never be
    /// applied (a dropped keyspace, an invalid id, key or cell).
    fn replica_write(&self, mutation: pb::ReplicaMutation) -> Result<Write> {
        let id = self.context.live_keyspace(&mutation.keyspace_id)?;
        check_key(&mutation.key)?;
        let cell = mutation
            .cell
            .ok_or(RequestError::NoCell { what: "mutation" })?;
        Ok((id, mutation.key, cell_from_pb(cell)))
    }
}

#[tonic::async_trait]
impl Internode for InternodeService {
    async fn apply(
        &self,
        request: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyResponse>, Status> {
        Ok(Response::new(
            self.apply_request(request.into_inner()).await?,
        ))
    }

    type ApplyStreamStream = apply_stream::Answers;

    async fn apply_stream(
        &self,
        request: Request<Streaming<pb::ApplyFrame>>,
    ) -> Result<Response<Self::ApplyStreamStream>, Status> {
        if self.context.config.test_without_apply_stream {
            return Err(Status::unimplemented(
                "ApplyStream: test_without_apply_stream is set (as on a build without it)",
            ));
        }
        // Without a cluster secret there is no caller to check.
        let caller = request.extensions().get::<Caller>().cloned();
        let admitted = move || caller.as_ref().map_or(Ok(()), Caller::admitted);
        let service = self.clone();
        let apply = move |request| {
            let service = service.clone();
            async move { service.apply_request(request).await }
        };
        let mut stopped = self.stopped.clone();
        let stop = async move {
            let _ = stopped.wait_for(|&stopped| stopped).await;
        };
        Ok(Response::new(apply_stream::answers(
            request.into_inner(),
            admitted,
            apply,
            stop,
        )))
    }

    async fn read(
        &self,
        request: Request<pb::ReadRequest>,
    ) -> Result<Response<pb::ReadResponse>, Status> {
        let _stage = self.context.metrics.stage(Stage::InternodeRead);
        let request = request.into_inner();
        let read = pb::ReplicaRead {
            keyspace_id: request.keyspace_id,
            key: request.key,
            digest_only: request.digest_only,
        };
        let (cell, digest) = replica_reads::read_one(&self.context, &read)?;
        let members = ring_lag::answer_for(&self.context.view(), request.ring_checksum);
        Ok(Response::new(pb::ReadResponse {
            cell,
            digest,
            members,
        }))
    }

    async fn read_many(
        &self,
        request: Request<pb::ReadManyRequest>,
    ) -> Result<Response<pb::ReadManyResponse>, Status> {
        if self.context.config.test_without_read_many {
            return Err(Status::unimplemented(
                "ReadMany: test_without_read_many is set (as on a build without it)",
            ));
        }
        let _stage = self.context.metrics.stage(Stage::InternodeRead);
        let request = request.into_inner();
        let results = replica_reads::read_many(&self.context, &request.reads)?;
        let members = ring_lag::answer_for(&self.context.view(), request.ring_checksum);
        Ok(Response::new(pb::ReadManyResponse { results, members }))
    }

    async fn push_schema(
        &self,
        request: Request<pb::SchemaSnapshot>,
    ) -> Result<Response<pb::SchemaAck>, Status> {
        let entries = request
            .into_inner()
            .entries
            .into_iter()
            .map(schema_entry_from_pb)
            .collect::<Result<Vec<_>>>()?;
        merge_and_publish(self.context.as_ref(), entries).await?;
        Ok(Response::new(pb::SchemaAck {
            schema_version: self.context.schema.current().version().to_string(),
        }))
    }

    async fn pull_schema(
        &self,
        _: Request<pb::PullSchemaRequest>,
    ) -> Result<Response<pb::SchemaSnapshot>, Status> {
        Ok(Response::new(snapshot_of(&self.context.schema.current())))
    }

    async fn read_range(
        &self,
        request: Request<pb::ReadRangeRequest>,
    ) -> Result<Response<pb::ReadRangeResponse>, Status> {
        let _stage = self.context.metrics.stage(Stage::InternodeRead);
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let (page, last) = crate::scan::replica::request_from_pb(&request)?;
        let page = crate::scan::replica::read_range(
            &self.context.store,
            keyspace,
            page.0,
            last,
            page.1,
            request.max_bytes,
        )
        .await?;
        let rows = page
            .rows
            .into_iter()
            .map(|row| pb::StreamEntry {
                key: row.key,
                cell: Some(cell_to_pb(&row.cell)),
            })
            .collect();
        Ok(Response::new(pb::ReadRangeResponse {
            rows,
            complete: page.complete,
        }))
    }

    type StreamRangeStream = ReceiverStream<Result<pb::StreamChunk, Status>>;

    async fn stream_range(
        &self,
        request: Request<pb::StreamRangeRequest>,
    ) -> Result<Response<Self::StreamRangeStream>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let range = range_from_pb(request.range)?;
        let peer = request.requester_host_id.parse().ok().map(HostId);
        let operation = stream_operation(&request.operation)?;
        // What this replica holds unfinished in the range is finished first,
        // so the range's new replica does not miss a chosen version
        // (`coordinator/cas/repair.rs`). A damaged Paxos state must not stop
        // the data from moving: it is logged, and the stream goes on.
        if let Some(def) = self
            .context
            .keyspaces()
            .into_iter()
            .find(|k| k.id == keyspace)
            && let Err(error) = finish_range(&self.context, &def, range).await
        {
            tracing::warn!(%range, %error, "cannot finish the compare-and-sets of a range before streaming it");
        }
        let chunks = send_range(self.context.clone(), keyspace, range, peer, operation);
        Ok(Response::new(ReceiverStream::new(chunks)))
    }

    async fn fetch_ranges(
        &self,
        request: Request<pb::FetchRangesRequest>,
    ) -> Result<Response<pb::FetchRangesResponse>, Status> {
        let request = request.into_inner();
        let operation = stream_operation(&request.operation)?;
        let mut fetches = Vec::with_capacity(request.ranges.len());
        for fetch in request.ranges {
            let sources = fetch
                .sources
                .iter()
                .map(|s| {
                    s.parse().map(HostId).map_err(|source| {
                        RequestError::BadHostId {
                            field: "source",
                            text: s.clone(),
                            source,
                        }
                        .into()
                    })
                })
                .collect::<Result<Vec<HostId>>>()?;
            fetches.push(RangeFetch {
                keyspace: self.context.live_keyspace(&fetch.keyspace_id)?,
                range: range_from_pb(fetch.range)?,
                sources,
            });
        }
        let totals = fetch_ranges(&self.context, operation, fetches).await?;
        Ok(Response::new(pb::FetchRangesResponse {
            bytes: totals.bytes,
            entries: totals.entries,
        }))
    }

    async fn range_stats(
        &self,
        request: Request<pb::RangeStatsRequest>,
    ) -> Result<Response<pb::RangeStatsResponse>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let ranges = ranges_from_pb(request.ranges)?;
        let ranges = estimate_ranges(&self.context.store, keyspace, ranges)
            .await
            .map_err(NodeError::from)?
            .into_iter()
            .map(|estimate| pb::RangeStats {
                estimated_bytes: estimate.bytes,
                estimated_keys: estimate.keys,
            })
            .collect();
        Ok(Response::new(pb::RangeStatsResponse { ranges }))
    }

    async fn cleanup_keyspace(
        &self,
        request: Request<pb::CleanupKeyspaceRequest>,
    ) -> Result<Response<pb::CleanupKeyspaceResponse>, Status> {
        let id = keyspace_id_from_pb(&request.into_inner().keyspace_id)?;
        let keyspace = self
            .context
            .schema
            .current()
            .keyspace_by_id(id)
            .cloned()
            .ok_or_else(|| NodeError::KeyspaceNotFound(id.to_string()))?;
        let _operation = self
            .context
            .operation
            .try_lock()
            .map_err(|_| OperatorError::OperationRunning)?;
        let cleaned = clean_keyspace(&self.context, &keyspace).await?;
        Ok(Response::new(pb::CleanupKeyspaceResponse {
            keys_removed: cleaned.keys_removed,
            bytes_removed: cleaned.bytes_removed,
            keys_kept: cleaned.keys_kept,
        }))
    }

    async fn metadata_seen(
        &self,
        request: Request<pb::MetadataSeenRequest>,
    ) -> Result<Response<pb::MetadataSeenResponse>, Status> {
        let host_id = request.into_inner().host_id;
        let host = host_id
            .parse()
            .map(HostId)
            .map_err(|source| RequestError::BadHostId {
                field: "host_id",
                text: host_id.clone(),
                source,
            })?;
        let view = self.context.view();
        let response = match view.member(host) {
            Some(member) => pb::MetadataSeenResponse {
                known: true,
                generation: member.metadata.stamp.generation.0,
                version: member.metadata.stamp.version,
                removed: view.removed.contains(&host),
            },
            None => pb::MetadataSeenResponse {
                removed: view.removed.contains(&host),
                ..Default::default()
            },
        };
        Ok(Response::new(response))
    }

    async fn members_seen(
        &self,
        _request: Request<pb::MembersSeenRequest>,
    ) -> Result<Response<pb::MembersSeenResponse>, Status> {
        let members = ring_lag::member_stamps(&self.context.view());
        Ok(Response::new(pb::MembersSeenResponse { members }))
    }

    async fn finish_proposals(
        &self,
        request: Request<pb::FinishProposalsRequest>,
    ) -> Result<Response<pb::FinishProposalsResponse>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let def = self
            .context
            .keyspaces()
            .into_iter()
            .find(|k| k.id == keyspace)
            .ok_or_else(|| NodeError::KeyspaceNotFound(keyspace.to_string()))?;
        let mut answer = pb::FinishProposalsResponse::default();
        for range in ranges_from_pb(request.ranges)? {
            let (finished, failed) = finish_range(&self.context, &def, range).await?;
            answer.finished += finished;
            answer.failed += failed;
        }
        Ok(Response::new(answer))
    }

    async fn take_hints(
        &self,
        request: Request<pb::TakeHintsRequest>,
    ) -> Result<Response<pb::TakeHintsResponse>, Status> {
        let mut hints = Vec::new();
        for hint in request.into_inner().hints {
            let target = hint.target_host_id.parse().map(HostId).map_err(|source| {
                RequestError::BadHostId {
                    field: "target_host_id",
                    text: hint.target_host_id.clone(),
                    source,
                }
            })?;
            check_key(&hint.key)?;
            let cell = hint.cell.ok_or(RequestError::NoCell { what: "hint" })?;
            hints.push(Hint {
                target,
                keyspace: keyspace_id_from_pb(&hint.keyspace_id)?,
                key: hint.key,
                cell: cell_from_pb(cell),
                created_at: Timestamp(hint.created_at_micros),
            });
        }
        let stored = self.context.handoff.take(&*self.context, &hints).await?;
        Ok(Response::new(pb::TakeHintsResponse { stored }))
    }

    async fn build_tree(
        &self,
        request: Request<pb::BuildTreeRequest>,
    ) -> Result<Response<pb::BuildTreeResponse>, Status> {
        let request = request.into_inner();
        let session = session_from_pb(&request.session_id)?;
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let range = range_from_pb(request.range)?;
        let depth = u8::try_from(request.depth)
            .ok()
            .filter(|&d| d <= MAX_DEPTH)
            .ok_or(RequestError::TreeTooDeep {
                depth: request.depth,
                max: MAX_DEPTH,
            })?;
        let tree =
            replica::build_tree(self.context.as_ref(), session, keyspace, range, depth).await?;
        Ok(Response::new(pb::BuildTreeResponse {
            root: tree.root(),
            rows: tree.rows(),
            bytes: tree.bytes(),
        }))
    }

    async fn tree_nodes(
        &self,
        request: Request<pb::TreeNodesRequest>,
    ) -> Result<Response<pb::TreeNodesResponse>, Status> {
        let request = request.into_inner();
        let session = session_from_pb(&request.session_id)?;
        let keyspace = keyspace_id_from_pb(&request.keyspace_id)?;
        let range = range_from_pb(request.range)?;
        let hashes = replica::tree_nodes(
            self.context.as_ref(),
            session,
            keyspace,
            range,
            &request.nodes,
        )?;
        Ok(Response::new(pb::TreeNodesResponse { hashes }))
    }

    type ListRowsStream = ReceiverStream<Result<pb::ListRowsPage, Status>>;

    async fn list_rows(
        &self,
        request: Request<pb::ListRowsRequest>,
    ) -> Result<Response<Self::ListRowsStream>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        let ranges = ranges_from_pb(request.ranges)?;
        let pages = replica::list_rows(self.context.as_ref(), keyspace, ranges);
        Ok(Response::new(ReceiverStream::new(pages)))
    }

    async fn read_cells(
        &self,
        request: Request<pb::ReadCellsRequest>,
    ) -> Result<Response<pb::ReadCellsResponse>, Status> {
        let request = request.into_inner();
        let keyspace = self.context.live_keyspace(&request.keyspace_id)?;
        for key in &request.keys {
            check_key(key)?;
        }
        let cells = replica::read_cells(self.context.as_ref(), keyspace, request.keys)
            .await?
            .into_iter()
            .map(|(key, cell)| pb::KeyCell {
                key,
                cell: cell.as_ref().map(cell_to_pb),
            })
            .collect();
        Ok(Response::new(pb::ReadCellsResponse { cells }))
    }

    async fn end_repair_session(
        &self,
        request: Request<pb::EndRepairSessionRequest>,
    ) -> Result<Response<pb::EndRepairSessionResponse>, Status> {
        let request = request.into_inner();
        let session = session_from_pb(&request.session_id)?;
        let repaired = request
            .repaired
            .into_iter()
            .map(|r| {
                Ok((
                    keyspace_id_from_pb(&r.keyspace_id)?,
                    range_from_pb(r.range)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let began = Timestamp(request.began_micros);
        replica::end_session(self.context.as_ref(), session, &repaired, began).await?;
        Ok(Response::new(pb::EndRepairSessionResponse {}))
    }

    async fn paxos_prepare(
        &self,
        request: Request<pb::PaxosPrepareRequest>,
    ) -> Result<Response<pb::PaxosPrepareResponse>, Status> {
        let (ks, key, ballot) = paxos_wire::prepare_request_from_pb(request.into_inner())?;
        let answer = paxos::prepare(self.context.as_ref(), ks, &key, ballot).await?;
        Ok(Response::new(paxos_wire::prepare_answer_to_pb(&answer)))
    }

    async fn paxos_accept(
        &self,
        request: Request<pb::PaxosAcceptRequest>,
    ) -> Result<Response<pb::PaxosAcceptResponse>, Status> {
        let (ks, key, proposal) = paxos_wire::accept_request_from_pb(request.into_inner())?;
        let reply = paxos::accept(self.context.as_ref(), ks, &key, proposal).await?;
        Ok(Response::new(paxos_wire::accept_reply_to_pb(reply)))
    }

    async fn paxos_commit(
        &self,
        request: Request<pb::PaxosCommitRequest>,
    ) -> Result<Response<pb::PaxosCommitResponse>, Status> {
        let (ks, key, proposal) = paxos_wire::commit_request_from_pb(request.into_inner())?;
        paxos::commit(self.context.as_ref(), ks, &key, proposal).await?;
        Ok(Response::new(pb::PaxosCommitResponse {}))
    }
}

/// The stream operation a request names; anything else is refused.
fn stream_operation(name: &str) -> Result<StreamOperation> {
    name.parse()
        .map_err(|e: ringstore_streaming::UnknownOperation| RequestError::from(e).into())
}

/// A repair session id from its wire form.
fn session_from_pb(id: &str) -> Result<uuid::Uuid> {
    id.parse().map_err(|source| {
        RequestError::BadSessionId {
            text: id.to_string(),
            source,
        }
        .into()
    })
}
