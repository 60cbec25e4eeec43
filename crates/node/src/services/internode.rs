//! The `Internode` service: replica reads and writes, and schema exchange.

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::internode_server::Internode;
use ringstore_replication::Digest;
use tonic::{Request, Response, Status};

use crate::context::NodeContext;
use crate::convert::{cell_from_pb, cell_to_pb, keyspace_id_from_pb, schema_entry_from_pb};
use crate::error::{NodeError, Result};
use crate::schema_store::snapshot_of;
use crate::schema_sync::merge_and_publish;
use crate::services::client::check_key;

/// Serves `Internode` from a node's context.
pub struct InternodeService {
    context: Arc<NodeContext>,
}

impl InternodeService {
    /// The service of `context`'s node.
    pub fn new(context: Arc<NodeContext>) -> InternodeService {
        InternodeService { context }
    }

    /// A keyspace id the schema has not dropped. An id this node does not
    /// know yet is accepted: its schema may lag, and data lives by id.
    fn live_keyspace(&self, id: &str) -> Result<ringstore_storage::KeyspaceId> {
        let id = keyspace_id_from_pb(id)?;
        let schema = self.context.schema.current();
        let dropped = schema.entries().any(|e| e.dropped && e.keyspace.id == id);
        if dropped {
            return Err(NodeError::KeyspaceNotFound(id.to_string()));
        }
        Ok(id)
    }
}

#[tonic::async_trait]
impl Internode for InternodeService {
    async fn apply(
        &self,
        request: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyResponse>, Status> {
        let mut writes = Vec::new();
        for mutation in request.into_inner().mutations {
            let id = self.live_keyspace(&mutation.keyspace_id)?;
            check_key(&mutation.key)?;
            let cell = mutation
                .cell
                .ok_or_else(|| NodeError::InvalidArgument("mutation without a cell".into()))?;
            writes.push((id, mutation.key, cell_from_pb(cell)));
        }
        self.context
            .store
            .apply_many(&writes)
            .await
            .map_err(NodeError::from)?;
        Ok(Response::new(pb::ApplyResponse {}))
    }

    async fn read(
        &self,
        request: Request<pb::ReadRequest>,
    ) -> Result<Response<pb::ReadResponse>, Status> {
        let request = request.into_inner();
        let id = self.live_keyspace(&request.keyspace_id)?;
        check_key(&request.key)?;
        let cell = self
            .context
            .store
            .read(id, &request.key)
            .map_err(NodeError::from)?;
        let response = if request.digest_only {
            pb::ReadResponse {
                cell: None,
                digest: Digest::of(cell.as_ref()).0,
            }
        } else {
            pb::ReadResponse {
                cell: cell.as_ref().map(cell_to_pb),
                digest: 0,
            }
        };
        Ok(Response::new(response))
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
        merge_and_publish(&self.context, entries).await?;
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
}
