//! [`Pipeline`]: many requests to one node on one stream (`Client/Pipeline`).
//!
//! A unary call opens an HTTP/2 stream per request; a pipeline opens one and
//! sends every request on it as a message tagged with an id, and the node
//! answers each as it finishes. Requests from many tasks share the stream:
//! each call takes the next id, parks a one-shot receiver under it, and
//! hands its message to the stream's sender; one reader task takes the
//! responses off the stream and wakes the call whose id each one carries.
//! On a loaded connection many messages then go out in one frame and one
//! system call, which is where a unary call's cost went (#13's notes).
//!
//! # Invariants
//! - Ids from one pipeline are distinct (a counter), so a response wakes
//!   exactly the call that sent its request.
//! - Once the stream has ended, every parked call is woken with the
//!   stream's end (its status, or `UNAVAILABLE` if it ended cleanly), and
//!   no call parks any more: the `closed` flag and the parked calls share
//!   one lock.
//! - A call that gives up (its timeout, or its future dropped) takes its
//!   id out; the node's late answer to it is dropped.
//!
//! # Caveats
//! - One node, no retries, no routing: the node coordinates every request
//!   (token-unaware), and a broken stream fails its requests in flight;
//!   open another pipeline (the [`Client`] picks the next node). For
//!   routing and retries, use the [`Client`]'s unary calls.
//! - Writes are stamped with client timestamps as [`Client::put`] stamps
//!   them (when [`crate::ClientConfig::client_timestamps`] is on).
//! - Compare-and-sets and serial reads are coordinated by the pipeline's
//!   node, not by their key's first replica as [`Client::put_if`] routes
//!   them: rivals on one key through pipelines to different nodes
//!   pre-empt each other's ballots. A failure says whether it certainly
//!   did not apply (the response's `cas_not_applied`, kept as the unary
//!   status's metadata entry).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::pipeline_request::Request;
use ringstore_proto::v1::pipeline_response::Response as Answer;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use crate::client::{AbortOnDrop, Client};
use crate::error::{ClientError, Result};
use crate::retry::{CAS_NOT_APPLIED_HEADER, CAS_NOT_APPLIED_VALUE};
use crate::sent_at;

/// Requests queued for the stream before a call waits for room.
const QUEUE: usize = 1024;

/// A stream of requests to one node. Cheap to clone; clones share the
/// stream, which ends when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Pipeline {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    node: SocketAddr,
    /// Stamps writes as the client does.
    client: Client,
    sender: mpsc::Sender<pb::PipelineRequest>,
    next_id: AtomicU64,
    /// Shared with the reader task.
    calls: Arc<Mutex<Calls>>,
    timeout: Duration,
    /// Ends the reader task when the last clone is dropped.
    _reader: AbortOnDrop,
}

/// The parked calls, held only to park, unpark or close, never across an
/// await.
#[derive(Debug, Default)]
struct Calls {
    waiting: HashMap<u64, oneshot::Sender<pb::PipelineResponse>>,
    /// Why the stream ended, once it has.
    closed: Option<tonic::Status>,
}

impl Calls {
    fn lock(calls: &Mutex<Calls>) -> std::sync::MutexGuard<'_, Calls> {
        calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Client {
    /// Opens a [`Pipeline`] to the next node this client would send an
    /// untargeted request to.
    pub async fn pipeline(&self) -> Result<Pipeline> {
        let node = *self
            .plan_any_demoted()
            .nodes
            .first()
            .ok_or(ClientError::NoNode)?;
        Pipeline::open(self.clone(), node).await
    }
}

impl Pipeline {
    async fn open(client: Client, node: SocketAddr) -> Result<Pipeline> {
        let timeout = client.config().request_timeout;
        let mut grpc = client.pool_client(node)?;
        let (sender, outgoing) = mpsc::channel(QUEUE);
        let opened = tokio::time::timeout(timeout, grpc.pipeline(ReceiverStream::new(outgoing)))
            .await
            .map_err(|_| ClientError::Timeout { node, timeout })?
            .map_err(|source| ClientError::Status { node, source })?;
        let calls = Arc::new(Mutex::new(Calls::default()));
        let reader = tokio::spawn(read_responses(opened.into_inner(), calls.clone()));
        Ok(Pipeline {
            shared: Arc::new(Shared {
                node,
                client,
                sender,
                next_id: AtomicU64::new(0),
                calls,
                timeout,
                _reader: AbortOnDrop(reader),
            }),
        })
    }

    /// The node this pipeline sends to.
    pub fn node(&self) -> SocketAddr {
        self.shared.node
    }

    /// Writes a value, stamped as [`Client::put`] stamps.
    pub async fn put(&self, mut request: pb::PutRequest) -> Result<pb::PutResponse> {
        self.shared.client.stamp(&mut request.timestamp_micros);
        match self.call(Request::Put(request)).await? {
            Answer::Put(response) => Ok(response),
            other => Err(self.mismatched("put", &other)),
        }
    }

    /// Reads a key at its consistency level.
    pub async fn get(&self, request: pb::GetRequest) -> Result<pb::GetResponse> {
        match self.call(Request::Get(request)).await? {
            Answer::Get(response) => Ok(response),
            other => Err(self.mismatched("get", &other)),
        }
    }

    /// Deletes a key (a tombstone), stamped as [`Client::put`] stamps.
    pub async fn delete(&self, mut request: pb::DeleteRequest) -> Result<pb::DeleteResponse> {
        self.shared.client.stamp(&mut request.timestamp_micros);
        match self.call(Request::Delete(request)).await? {
            Answer::Delete(response) => Ok(response),
            other => Err(self.mismatched("delete", &other)),
        }
    }

    /// An unlogged batch; mutations without a timestamp are stamped as
    /// [`Client::put`] stamps.
    pub async fn batch(&self, mut request: pb::BatchRequest) -> Result<pb::BatchResponse> {
        for mutation in &mut request.mutations {
            self.shared.client.stamp(&mut mutation.timestamp_micros);
        }
        match self.call(Request::Batch(request)).await? {
            Answer::Batch(response) => Ok(response),
            other => Err(self.mismatched("batch", &other)),
        }
    }

    /// A compare-and-set write on the stream, as [`Client::put_if`] but
    /// coordinated by this pipeline's node whatever the key (not its first
    /// replica: rivals on one key through different pipelines pre-empt
    /// each other) and never retried. A failure the node marked as
    /// certainly not applied keeps the mark
    /// ([`ClientError::is_cas_unknown`] is false for it).
    pub async fn put_if(&self, request: pb::PutIfRequest) -> Result<pb::CasResponse> {
        match self.call(Request::PutIf(request)).await? {
            Answer::PutIf(response) => Ok(response),
            other => Err(self.mismatched("put_if", &other)),
        }
    }

    /// A compare-and-set delete on the stream, as [`Pipeline::put_if`].
    pub async fn delete_if(&self, request: pb::DeleteIfRequest) -> Result<pb::CasResponse> {
        match self.call(Request::DeleteIf(request)).await? {
            Answer::DeleteIf(response) => Ok(response),
            other => Err(self.mismatched("delete_if", &other)),
        }
    }

    /// A serial read on the stream, as [`Client::get_serial`] (coordinated
    /// by this pipeline's node).
    pub async fn get_serial(&self, request: pb::GetSerialRequest) -> Result<pb::GetResponse> {
        match self.call(Request::GetSerial(request)).await? {
            Answer::GetSerial(response) => Ok(response),
            other => Err(self.mismatched("get_serial", &other)),
        }
    }

    /// A no-op round trip on the stream (the transport's ceiling).
    pub async fn noop(&self) -> Result<()> {
        match self.call(Request::Noop(pb::NoopRequest {})).await? {
            Answer::Noop(_) => Ok(()),
            other => Err(self.mismatched("noop", &other)),
        }
    }

    /// Sends `request` and waits for its answer, within the request timeout.
    async fn call(&self, request: Request) -> Result<Answer> {
        let shared = &*self.shared;
        let node = shared.node;
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (answered, answer) = oneshot::channel();
        {
            let mut calls = Calls::lock(&shared.calls);
            if let Some(status) = &calls.closed {
                return Err(ClientError::Status {
                    node,
                    source: status.clone(),
                });
            }
            calls.waiting.insert(id, answered);
        }
        // Takes the id out however the call ends early (its timeout, its
        // future dropped, the stream closed).
        let _parked = Parked {
            calls: &shared.calls,
            id,
        };
        let message = pb::PipelineRequest {
            id,
            request: Some(request),
            sent_at_micros: Some(sent_at::now_micros()),
            timeout_ms: Some(u32::try_from(shared.timeout.as_millis()).unwrap_or(u32::MAX)),
        };
        let exchange = async {
            shared
                .sender
                .send(message)
                .await
                .map_err(|_| ended(&shared.calls))?;
            answer.await.map_err(|_| ended(&shared.calls))
        };
        let response = tokio::time::timeout(shared.timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                node,
                timeout: shared.timeout,
            })?
            .map_err(|source| ClientError::Status { node, source })?;
        if response.code != 0 {
            let code = tonic::Code::from_i32(response.code);
            let mut status = tonic::Status::new(code, response.message);
            if response.cas_not_applied {
                // As the unary call's status says it.
                status.metadata_mut().insert(
                    CAS_NOT_APPLIED_HEADER,
                    tonic::metadata::MetadataValue::from_static(CAS_NOT_APPLIED_VALUE),
                );
            }
            return Err(ClientError::Status {
                node,
                source: status,
            });
        }
        response.response.ok_or_else(|| ClientError::Status {
            node,
            source: tonic::Status::internal(format!(
                "the node answered pipelined request {id} with OK and no response"
            )),
        })
    }

    fn mismatched(&self, asked: &str, answer: &Answer) -> ClientError {
        ClientError::Status {
            node: self.shared.node,
            source: tonic::Status::internal(format!(
                "the node answered a pipelined {asked} with {answer:?}"
            )),
        }
    }
}

/// A parked call's id, taken out when the call ends.
struct Parked<'a> {
    calls: &'a Mutex<Calls>,
    id: u64,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        Calls::lock(self.calls).waiting.remove(&self.id);
    }
}

/// Why a call could not finish: the stream's end.
fn ended(calls: &Mutex<Calls>) -> tonic::Status {
    Calls::lock(calls)
        .closed
        .clone()
        .unwrap_or_else(|| tonic::Status::unavailable("the pipeline's stream ended"))
}

/// Wakes each parked call with its response until the stream ends, then
/// closes the pipeline and wakes every call still parked.
async fn read_responses(
    mut incoming: tonic::Streaming<pb::PipelineResponse>,
    calls: Arc<Mutex<Calls>>,
) {
    let end = loop {
        match incoming.message().await {
            Ok(Some(response)) => {
                let waiting = Calls::lock(&calls).waiting.remove(&response.id);
                if let Some(waiting) = waiting {
                    let _ = waiting.send(response);
                }
            }
            Ok(None) => break tonic::Status::unavailable("the node ended the pipeline's stream"),
            Err(status) => break status,
        }
    };
    let mut calls = Calls::lock(&calls);
    calls.closed = Some(end);
    // Dropping the senders wakes their calls, which read `closed`.
    calls.waiting.clear();
}
