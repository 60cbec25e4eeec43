//! Where a worker's requests go: a [`Client`]'s unary calls (routed and
//! retried as the client decides), or a [`Pipeline`] (`--pipeline`: one
//! stream per connection to a coordinator, many requests in flight on it).

use ringstore_client::{Client, ClientError, Pipeline};
use ringstore_proto::v1 as pb;

/// A worker's way to the cluster.
#[derive(Clone, Debug)]
pub enum Target {
    /// One unary call per request.
    Unary(Client),
    /// Requests multiplexed on a stream.
    Pipelined(Pipeline),
}

impl Target {
    /// `connections` pipelines of each client, or the clients themselves.
    pub async fn of(
        clients: &[Client],
        pipelined: bool,
        connections: usize,
    ) -> Result<Vec<Target>, ClientError> {
        if !pipelined {
            return Ok(clients.iter().cloned().map(Target::Unary).collect());
        }
        let mut targets = Vec::with_capacity(clients.len() * connections);
        for client in clients {
            for _ in 0..connections {
                targets.push(Target::Pipelined(client.pipeline().await?));
            }
        }
        Ok(targets)
    }

    /// Writes a value.
    pub async fn put(&self, request: pb::PutRequest) -> Result<(), ClientError> {
        match self {
            Target::Unary(client) => client.put(request).await.map(drop),
            Target::Pipelined(pipeline) => pipeline.put(request).await.map(drop),
        }
    }

    /// Reads a key.
    pub async fn get(&self, request: pb::GetRequest) -> Result<(), ClientError> {
        match self {
            Target::Unary(client) => client.get(request).await.map(drop),
            Target::Pipelined(pipeline) => pipeline.get(request).await.map(drop),
        }
    }

    /// A compare-and-set write; its answer.
    pub async fn put_if(&self, request: pb::PutIfRequest) -> Result<pb::CasResponse, ClientError> {
        match self {
            Target::Unary(client) => client.put_if(request).await,
            Target::Pipelined(pipeline) => pipeline.put_if(request).await,
        }
    }

    /// A no-op round trip.
    pub async fn noop(&self) -> Result<(), ClientError> {
        match self {
            Target::Unary(client) => client.noop().await,
            Target::Pipelined(pipeline) => pipeline.noop().await,
        }
    }
}
