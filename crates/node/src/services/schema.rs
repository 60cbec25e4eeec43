//! The `Schema` service: create, drop, alter and list keyspaces.
//!
//! It takes the node as the schema's host ([`SchemaHost`]: read, stamp,
//! merge and push the schema) and, for an alter, which moves data, as
//! topology's ([`TopologyHost`]).

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::schema_server::Schema as SchemaApi;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

use crate::convert::{speculative_retry_from_pb, strategy_from_pb};
use crate::error::{KeyspaceRequestError, NodeError};
use crate::schema::sync::{keyspace, merge_and_publish, push_with_retries};
use crate::schema::wire::keyspace_to_pb;
use crate::schema::{
    DEFAULT_GC_GRACE_SECONDS, KeyspaceDef, SchemaEntry, SchemaHost, validate_keyspace_name,
};
use crate::topology::alter::alter;
use crate::topology::host::TopologyHost;

/// Attempts at pushing a created or dropped keyspace to every live node
/// before the caller hears that not every node has it yet (it spreads by
/// the background exchange anyway).
const CREATE_DROP_PUSH_ATTEMPTS: u32 = 3;

/// Serves `Schema` from a node, its host (see the module docs).
pub struct SchemaService<H> {
    /// In an `Arc`: an alter runs in a task of its own.
    host: Arc<H>,
}

impl<H: SchemaHost + TopologyHost + 'static> SchemaService<H> {
    /// The service of `host`'s node.
    pub fn new(host: Arc<H>) -> SchemaService<H> {
        SchemaService { host }
    }

    /// Stamps `keyspace` (created, or dropped), merges it into this node's
    /// schema and pushes the schema to every live node.
    async fn change(&self, keyspace: KeyspaceDef, dropped: bool) -> Result<(), NodeError> {
        let entry = SchemaEntry {
            keyspace,
            timestamp: self.host.change_timestamp()?,
            dropped,
        };
        merge_and_publish(self.host.as_ref(), vec![entry]).await?;
        push_with_retries(self.host.as_ref(), CREATE_DROP_PUSH_ATTEMPTS).await
    }
}

#[tonic::async_trait]
impl<H: SchemaHost + TopologyHost + 'static> SchemaApi for SchemaService<H> {
    async fn create_keyspace(
        &self,
        request: Request<pb::CreateKeyspaceRequest>,
    ) -> Result<Response<pb::CreateKeyspaceResponse>, Status> {
        let request = request.into_inner();
        validate_keyspace_name(&request.name)?;
        let strategy = strategy_from_pb(request.replication)?;
        let speculative_retry = speculative_retry_from_pb(request.speculative_retry.as_deref())?;
        let schema = self.host.schema().current();
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
        self.change(keyspace.clone(), false).await?;
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
        let keyspace = keyspace(self.host.as_ref(), &name)?;
        self.change(keyspace.clone(), true).await?;
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
        let host = self.host.clone();
        let name = request.name.clone();
        let task = tokio::spawn(async move { alter(&host, &name, target, announced).await });
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
        let schema = self.host.schema().current();
        Ok(Response::new(pb::ListKeyspacesResponse {
            keyspaces: schema.keyspaces().map(keyspace_to_pb).collect(),
        }))
    }
}
