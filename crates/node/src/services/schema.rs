//! The `Schema` service: create, drop, alter and list keyspaces.

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::schema_server::Schema as SchemaApi;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

use crate::context::NodeContext;
use crate::convert::{speculative_retry_from_pb, strategy_from_pb};
use crate::error::{KeyspaceRequestError, NodeError};
use crate::schema::sync::{merge_and_publish, push_with_retries};
use crate::schema::wire::keyspace_to_pb;
use crate::schema::{DEFAULT_GC_GRACE_SECONDS, KeyspaceDef, SchemaEntry, validate_keyspace_name};

/// Attempts at pushing a created or dropped keyspace to every live node
/// before the caller hears that not every node has it yet (it spreads by
/// the background exchange anyway).
const CREATE_DROP_PUSH_ATTEMPTS: u32 = 3;
use crate::topology::alter::alter;

/// Serves `Schema` from a node's context.
pub struct SchemaService {
    context: Arc<NodeContext>,
}

impl SchemaService {
    /// The service of `context`'s node.
    pub fn new(context: Arc<NodeContext>) -> SchemaService {
        SchemaService { context }
    }
}

#[tonic::async_trait]
impl SchemaApi for SchemaService {
    async fn create_keyspace(
        &self,
        request: Request<pb::CreateKeyspaceRequest>,
    ) -> Result<Response<pb::CreateKeyspaceResponse>, Status> {
        let request = request.into_inner();
        validate_keyspace_name(&request.name)?;
        let strategy = strategy_from_pb(request.replication)?;
        let speculative_retry = speculative_retry_from_pb(request.speculative_retry.as_deref())?;
        let schema = self.context.schema.current();
        if let Some(existing) = schema.keyspace(&request.name) {
            // As Cassandra's IF NOT EXISTS: the existing keyspace stands, whatever its settings.
            if request.if_not_exists {
                return Ok(Response::new(pb::CreateKeyspaceResponse {
                    keyspace: Some(keyspace_to_pb(existing)),
                }));
            }
            return Err(KeyspaceRequestError::AlreadyExists {
                name: existing.name.clone(),
                strategy: existing.strategy.clone(),
            }
            .into());
        }
        let keyspace = KeyspaceDef {
            id: schema.id_for_new_keyspace(&request.name),
            name: request.name,
            strategy,
            gc_grace_seconds: request.gc_grace_seconds.unwrap_or(DEFAULT_GC_GRACE_SECONDS),
            speculative_retry,
            pending_strategy: None,
        };
        self.context.check_clock()?;
        let entry = SchemaEntry {
            keyspace: keyspace.clone(),
            timestamp: self.context.clock.next(),
            dropped: false,
        };
        merge_and_publish(self.context.as_ref(), vec![entry]).await?;
        push_with_retries(self.context.as_ref(), CREATE_DROP_PUSH_ATTEMPTS).await?;
        tracing::info!(name = %keyspace.name, id = %keyspace.id, strategy = %keyspace.strategy, "keyspace created");
        Ok(Response::new(pb::CreateKeyspaceResponse {
            keyspace: Some(keyspace_to_pb(&keyspace)),
        }))
    }

    async fn drop_keyspace(
        &self,
        request: Request<pb::DropKeyspaceRequest>,
    ) -> Result<Response<pb::DropKeyspaceResponse>, Status> {
        let name = request.into_inner().name;
        let keyspace = self.context.keyspace(&name)?;
        self.context.check_clock()?;
        let entry = SchemaEntry {
            keyspace: keyspace.clone(),
            timestamp: self.context.clock.next(),
            dropped: true,
        };
        merge_and_publish(self.context.as_ref(), vec![entry]).await?;
        push_with_retries(self.context.as_ref(), CREATE_DROP_PUSH_ATTEMPTS).await?;
        tracing::info!(name = %keyspace.name, id = %keyspace.id, "keyspace dropped");
        Ok(Response::new(pb::DropKeyspaceResponse {}))
    }

    async fn alter_keyspace(
        &self,
        request: Request<pb::AlterKeyspaceRequest>,
    ) -> Result<Response<pb::AlterKeyspaceResponse>, Status> {
        let request = request.into_inner();
        let target = strategy_from_pb(request.replication)?;
        // The alter runs in a task of its own, so that a client that gives
        // up waiting does not cut it short between two of its steps.
        let (announced, announcement) = oneshot::channel();
        let announced = request.return_at_once.then_some(announced);
        let context = self.context.clone();
        let name = request.name.clone();
        let task = tokio::spawn(async move { alter(&context, &name, target, announced).await });
        if request.return_at_once {
            let keyspace = announcement
                .await
                .map_err(|_| KeyspaceRequestError::AlterNotAnnounced)??;
            return Ok(Response::new(pb::AlterKeyspaceResponse {
                keyspace: Some(keyspace_to_pb(&keyspace)),
                ..Default::default()
            }));
        }
        let altered = task
            .await
            .map_err(NodeError::task("the keyspace alter"))??;
        Ok(Response::new(pb::AlterKeyspaceResponse {
            keyspace: Some(keyspace_to_pb(&altered.keyspace)),
            ranges_streamed: altered.streamed.ranges,
            bytes_streamed: altered.streamed.bytes,
            keys_removed: altered.keys_removed,
        }))
    }

    async fn list_keyspaces(
        &self,
        _: Request<pb::ListKeyspacesRequest>,
    ) -> Result<Response<pb::ListKeyspacesResponse>, Status> {
        let schema = self.context.schema.current();
        Ok(Response::new(pb::ListKeyspacesResponse {
            keyspaces: schema.keyspaces().map(keyspace_to_pb).collect(),
        }))
    }
}
