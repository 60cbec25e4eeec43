//! The `Client` service: puts, gets, deletes and unlogged batches, each
//! checked, then coordinated at its consistency level. Every request with a
//! valid consistency level is counted and timed by operation and level (a
//! request whose level does not parse has no level to count it under); a
//! drained node refuses writes, and so does a node whose clock is off from
//! the majority ([`crate::clock_guard`]). A write read after its client's
//! deadline is refused before it is stamped ([`crate::deadline`]); every
//! mutation of a batch is stamped when the batch is read, not when its turn
//! to be sent comes. `Pipeline` carries the same
//! requests on one stream ([`super::pipeline`]) and answers each one as its
//! unary RPC would.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use ringstore_client_auth::Principal;
use ringstore_metrics::{Expired, Operation, Stage};
use ringstore_paxos::{Operation as PaxosOperation, SerialConsistency};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_server::Client;
use ringstore_proto::v1::pipeline_request::Request as PipelinedRequest;
use ringstore_proto::v1::pipeline_response::Response as PipelinedAnswer;
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::{Cell, Timestamp};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use super::cas;
use super::pipeline;
use crate::client_auth::{Gate, StreamAuth};
use crate::clock::check_client_timestamp;
use crate::convert::level_from_pb;
use crate::coordinator;
use crate::coordinator::cas::CasRequest;
use crate::deadline::ClientDeadline;
use crate::error::{NodeError, RequestError, Result};
use crate::limits::{MAX_TTL_SECONDS, check_key};
use crate::schema::KeyspaceDef;
use crate::schema::sync::keyspace_catching_up;
use crate::services::client_host::{ClientHost, ClientSettings};

/// Serves `Client` from a node (its [`ClientHost`]).
pub(crate) struct ClientService<H> {
    context: Arc<H>,
    /// The client port's login gate (`authenticator = "password"`), for the
    /// per-message checks of a pipeline.
    gate: Option<Arc<Gate>>,
    /// Turns true when the node stops: open pipelines then end, or the
    /// server's graceful shutdown would wait for them forever.
    stopped: watch::Receiver<bool>,
}

impl<H> Clone for ClientService<H> {
    fn clone(&self) -> Self {
        ClientService {
            context: self.context.clone(),
            gate: self.gate.clone(),
            stopped: self.stopped.clone(),
        }
    }
}

impl<H: ClientHost + 'static> ClientService<H> {
    /// The service of `context`'s node, behind `gate` if logins are on,
    /// until `stopped` turns true.
    pub fn new(
        context: Arc<H>,
        gate: Option<Arc<Gate>>,
        stopped: watch::Receiver<bool>,
    ) -> ClientService<H> {
        ClientService {
            context,
            gate,
            stopped,
        }
    }

    async fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        if name.is_empty() {
            return Err(RequestError::EmptyKeyspaceName.into());
        }
        keyspace_catching_up(self.context.as_ref(), name).await
    }

    /// Refuses a write whose client's `deadline` had passed, allowing the
    /// clock bound, by `at` (counted): the node's clock, or the timestamp
    /// it would stamp the write with, which is never later than that.
    fn check_deadline(&self, deadline: Option<ClientDeadline>, at: Timestamp) -> Result<()> {
        let Some(deadline) = deadline else {
            return Ok(());
        };
        if self.context.client_settings().ignore_client_deadlines {
            return Ok(());
        }
        let bound = self.context.client_settings().max_clock_offset;
        let checked = deadline.check(at, bound);
        if checked.is_err() {
            self.context
                .metrics()
                .dropped_expired(Expired::ClientRequest);
        }
        checked
    }

    /// A value within `max_value_bytes`.
    fn check_value(&self, value: &[u8]) -> Result<()> {
        let max = self.context.client_settings().max_value_bytes;
        if value.len() > max {
            return Err(RequestError::ValueTooLong {
                len: value.len(),
                max,
            }
            .into());
        }
        Ok(())
    }

    /// A checked write: key and value limits, TTL or absolute expiry, and
    /// the timestamp to use, unless its client's `deadline` has passed by
    /// the time it would be stamped.
    fn prepare_write(
        &self,
        key: &[u8],
        value: Option<Vec<u8>>,
        timestamp: Option<i64>,
        ttl: Option<u32>,
        expires_at: Option<i64>,
        deadline: Option<ClientDeadline>,
    ) -> Result<Cell> {
        check_key(key)?;
        if let Some(value) = &value {
            self.check_value(value)?;
        }
        let ttl = check_ttl(ttl)?;
        // A client timestamp is bounded but never moves the node's clock.
        // A server timestamp is judged against the deadline itself: it may
        // run ahead of the clock (it never repeats), and it is what a later
        // write must beat.
        let timestamp = match timestamp {
            Some(micros) => {
                let max_skew = self.context.client_settings().max_client_timestamp_skew;
                check_client_timestamp(micros, self.context.now(), max_skew)?;
                self.check_deadline(deadline, self.context.now())?;
                Timestamp(micros)
            }
            None => {
                let stamped = self.context.next_timestamp();
                self.check_deadline(deadline, stamped)?;
                stamped
            }
        };
        // TTLs and tombstones count from the node's clock (the test offset
        // included), as timestamps do.
        let now = self.context.now();
        let expires_at = check_expiry(expires_at, ttl, value.is_some(), now)?;
        Ok(match value {
            Some(value) => match (ttl, expires_at) {
                (Some(ttl), _) => Cell::expiring(timestamp, value, ttl, now),
                (None, Some(at)) => Cell {
                    timestamp,
                    expires_at: Some(at),
                    value: Some(value),
                },
                (None, None) => Cell::live(timestamp, value),
            },
            None => Cell::deletion(timestamp, now),
        })
    }
}

/// A TTL within [`MAX_TTL_SECONDS`]; 0 means none.
fn check_ttl(ttl: Option<u32>) -> Result<Option<u32>> {
    match ttl {
        None | Some(0) => Ok(None),
        Some(ttl) if ttl > MAX_TTL_SECONDS => Err(RequestError::TtlTooLong {
            ttl,
            max: MAX_TTL_SECONDS,
        }
        .into()),
        Some(ttl) => Ok(Some(ttl)),
    }
}

/// Checks an absolute expiry (µs since the epoch, as a scan reports it):
/// only on a value, not with a TTL, positive, and at most
/// [`MAX_TTL_SECONDS`] after `now`. An expiry already past is accepted: the
/// cell is written expired (it hides older versions, as the original did).
fn check_expiry(
    expires_at: Option<i64>,
    ttl: Option<u32>,
    has_value: bool,
    now: Timestamp,
) -> Result<Option<Timestamp>> {
    let Some(at) = expires_at else {
        return Ok(None);
    };
    if !has_value {
        return Err(RequestError::ExpiryOnDelete.into());
    }
    if ttl.is_some_and(|t| t > 0) {
        return Err(RequestError::TtlAndExpiry.into());
    }
    let latest = now.plus_seconds(MAX_TTL_SECONDS);
    if at <= 0 || Timestamp(at) > latest {
        return Err(RequestError::ExpiryOutOfRange {
            at,
            max_seconds: MAX_TTL_SECONDS,
            latest,
        }
        .into());
    }
    Ok(Some(Timestamp(at)))
}

/// Checks a batch against `max_batch_mutations` and `max_batch_bytes`
/// (keys plus values).
fn check_batch_size(config: &ClientSettings, mutations: &[pb::Mutation]) -> Result<()> {
    if mutations.len() > config.max_batch_mutations {
        return Err(RequestError::TooManyMutations {
            count: mutations.len(),
            max: config.max_batch_mutations,
        }
        .into());
    }
    let bytes: usize = mutations
        .iter()
        .map(|m| m.key.len() + m.value.as_ref().map_or(0, Vec::len))
        .sum();
    if bytes > config.max_batch_bytes {
        return Err(RequestError::BatchTooLarge {
            bytes,
            max: config.max_batch_bytes,
        }
        .into());
    }
    Ok(())
}

impl<H: ClientHost + 'static> ClientService<H> {
    /// Runs `run` at the consistency level `consistency` names, as
    /// operation `op`: counted in the client stage and recorded (count,
    /// latency, and the error's code if it fails). A level that does not
    /// parse is refused uncounted (there is no level to count it under).
    async fn counted<T, Fut>(
        &self,
        op: Operation,
        consistency: i32,
        run: impl FnOnce(ConsistencyLevel) -> Fut,
    ) -> Result<T, Status>
    where
        Fut: Future<Output = Result<T>>,
    {
        let level = level_from_pb(consistency)?;
        let metrics = self.context.metrics();
        let _stage = metrics.stage(Stage::ClientRequest);
        let started = Instant::now();
        let result = run(level).await;
        metrics.request(op, level.name()).record(started.elapsed());
        if let Err(error) = &result {
            metrics.client_error(op, level.name(), error.code_label());
        }
        Ok(result?)
    }

    /// Runs a lightweight transaction `run` at the serial level `serial`
    /// names, counted and recorded as [`Self::counted`] does, under the
    /// serial level's name.
    async fn counted_serial<T, Fut>(
        &self,
        op: Operation,
        serial: i32,
        run: impl FnOnce(SerialConsistency) -> Fut,
    ) -> Result<T, Status>
    where
        Fut: Future<Output = Result<T>>,
    {
        let serial = cas::serial_from_pb(serial)?;
        let metrics = self.context.metrics();
        let _stage = metrics.stage(Stage::ClientRequest);
        let started = Instant::now();
        let result = run(serial).await;
        metrics.request(op, serial.name()).record(started.elapsed());
        if let Err(error) = &result {
            metrics.client_error(op, serial.name(), error.code_label());
        }
        Ok(result?)
    }

    /// The checks of a lightweight transaction's write: the node serves,
    /// its clock is within the bound, the key within the limit, the
    /// client's deadline not passed.
    async fn admit_cas(
        &self,
        keyspace: &str,
        key: &[u8],
        deadline: Option<ClientDeadline>,
    ) -> Result<KeyspaceDef> {
        self.context.check_serving()?;
        self.context.check_clock()?;
        let keyspace = self.keyspace(keyspace).await?;
        check_key(key)?;
        self.check_deadline(deadline, self.context.now())?;
        Ok(keyspace)
    }

    async fn run_put_if(
        &self,
        r: pb::PutIfRequest,
        deadline: Option<ClientDeadline>,
        serial: SerialConsistency,
    ) -> Result<pb::CasResponse> {
        let keyspace = self.admit_cas(&r.keyspace, &r.key, deadline).await?;
        self.check_value(&r.value)?;
        let ttl = check_ttl(r.ttl_seconds)?;
        let request = CasRequest {
            keyspace,
            operation: cas::put_if(cas::expected_from_pb(r.expected)?, r.value, ttl),
            key: r.key,
            serial,
            commit: cas::commit_level_from_pb(r.commit_consistency)?,
        };
        let answer = coordinator::cas::cas(&self.context, request).await?;
        Ok(cas::cas_response(answer, self.context.now()))
    }

    async fn run_delete_if(
        &self,
        r: pb::DeleteIfRequest,
        deadline: Option<ClientDeadline>,
        serial: SerialConsistency,
    ) -> Result<pb::CasResponse> {
        let keyspace = self.admit_cas(&r.keyspace, &r.key, deadline).await?;
        let request = CasRequest {
            keyspace,
            operation: PaxosOperation::DeleteIf {
                expected: cas::expected_from_pb(r.expected)?,
            },
            key: r.key,
            serial,
            commit: cas::commit_level_from_pb(r.commit_consistency)?,
        };
        let answer = coordinator::cas::cas(&self.context, request).await?;
        Ok(cas::cas_response(answer, self.context.now()))
    }

    /// A serial read: checked as a write is but for the clock (it stamps
    /// nothing of its own; a proposal it finishes keeps its timestamp).
    async fn run_get_serial(
        &self,
        r: pb::GetSerialRequest,
        serial: SerialConsistency,
    ) -> Result<pb::GetResponse> {
        self.context.check_serving()?;
        let keyspace = self.keyspace(&r.keyspace).await?;
        check_key(&r.key)?;
        let request = CasRequest {
            keyspace,
            operation: PaxosOperation::SerialRead,
            key: r.key,
            serial,
            commit: cas::commit_level_from_pb(r.commit_consistency)?,
        };
        let answer = coordinator::cas::cas(&self.context, request).await?;
        Ok(cas::read_response(answer, self.context.now()))
    }

    async fn run_put(
        &self,
        r: pb::PutRequest,
        deadline: Option<ClientDeadline>,
        level: ConsistencyLevel,
    ) -> Result<pb::PutResponse> {
        self.context.check_serving()?;
        self.context.check_clock()?;
        let keyspace = self.keyspace(&r.keyspace).await?;
        let cell = self.prepare_write(
            &r.key,
            Some(r.value),
            r.timestamp_micros,
            r.ttl_seconds,
            None,
            deadline,
        )?;
        let timestamp = cell.timestamp;
        coordinator::write(&self.context, &keyspace, r.key, cell, level).await?;
        Ok(pb::PutResponse {
            timestamp_micros: timestamp.0,
        })
    }

    async fn run_get(&self, r: pb::GetRequest, level: ConsistencyLevel) -> Result<pb::GetResponse> {
        let keyspace = self.keyspace(&r.keyspace).await?;
        check_key(&r.key)?;
        let winner = coordinator::read(&self.context, &keyspace, r.key, level).await?;
        let now = self.context.now();
        Ok(
            match winner
                .as_ref()
                .and_then(|cell| cell.visible_value(now).map(|v| (cell, v)))
            {
                Some((cell, value)) => pb::GetResponse {
                    found: true,
                    value: value.to_vec(),
                    timestamp_micros: cell.timestamp.0,
                },
                None => pb::GetResponse::default(),
            },
        )
    }

    async fn run_delete(
        &self,
        r: pb::DeleteRequest,
        deadline: Option<ClientDeadline>,
        level: ConsistencyLevel,
    ) -> Result<pb::DeleteResponse> {
        self.context.check_serving()?;
        self.context.check_clock()?;
        let keyspace = self.keyspace(&r.keyspace).await?;
        let cell = self.prepare_write(&r.key, None, r.timestamp_micros, None, None, deadline)?;
        let timestamp = cell.timestamp;
        coordinator::write(&self.context, &keyspace, r.key, cell, level).await?;
        Ok(pb::DeleteResponse {
            timestamp_micros: timestamp.0,
        })
    }

    async fn run_batch(
        &self,
        r: pb::BatchRequest,
        deadline: Option<ClientDeadline>,
        level: ConsistencyLevel,
    ) -> Result<pb::BatchResponse> {
        self.context.check_serving()?;
        self.context.check_clock()?;
        let keyspace = self.keyspace(&r.keyspace).await?;
        check_batch_size(&self.context.client_settings(), &r.mutations)?;
        // Past its deadline the whole batch is refused, not each mutation.
        self.check_deadline(deadline, self.context.now())?;
        // Every mutation is stamped now, before any is sent: one whose turn
        // comes late must not get a later timestamp than the batch's
        // deadline allowed.
        let prepared: Vec<_> = r
            .mutations
            .into_iter()
            .map(|m| {
                let cell = self.prepare_write(
                    &m.key,
                    m.value,
                    m.timestamp_micros,
                    m.ttl_seconds,
                    m.expires_at_micros,
                    deadline,
                );
                (m.key, cell)
            })
            .collect();
        let writes = prepared.into_iter().map(|(key, prepared)| {
            let (context, keyspace) = (&self.context, &keyspace);
            async move {
                let cell = prepared?;
                let timestamp = cell.timestamp;
                coordinator::write(context, keyspace, key, cell, level).await?;
                Ok::<_, NodeError>(timestamp)
            }
        });
        // At most `batch_concurrency` mutations in flight, results in order.
        let results = futures::stream::iter(writes)
            .buffered(self.context.client_settings().batch_concurrency)
            .map(|result| match result {
                Ok(timestamp) => pb::MutationResult {
                    code: 0,
                    message: String::new(),
                    timestamp_micros: timestamp.0,
                },
                Err(error) => pb::MutationResult {
                    code: error.code() as i32,
                    message: error.to_string(),
                    timestamp_micros: 0,
                },
            })
            .collect()
            .await;
        Ok(pb::BatchResponse { results })
    }
}

#[tonic::async_trait]
impl<H: ClientHost + 'static> Client for ClientService<H> {
    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        let deadline = ClientDeadline::from_metadata(request.metadata())?;
        let r = request.into_inner();
        let answer = self.counted(Operation::Put, r.consistency, |level| {
            self.run_put(r, deadline, level)
        });
        Ok(Response::new(answer.await?))
    }

    async fn get(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::GetResponse>, Status> {
        let r = request.into_inner();
        let answer = self.counted(Operation::Get, r.consistency, |level| {
            self.run_get(r, level)
        });
        Ok(Response::new(answer.await?))
    }

    async fn delete(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let deadline = ClientDeadline::from_metadata(request.metadata())?;
        let r = request.into_inner();
        let answer = self.counted(Operation::Delete, r.consistency, |level| {
            self.run_delete(r, deadline, level)
        });
        Ok(Response::new(answer.await?))
    }

    async fn batch(
        &self,
        request: Request<pb::BatchRequest>,
    ) -> Result<Response<pb::BatchResponse>, Status> {
        let deadline = ClientDeadline::from_metadata(request.metadata())?;
        let r = request.into_inner();
        let answer = self.counted(Operation::Batch, r.consistency, |level| {
            self.run_batch(r, deadline, level)
        });
        Ok(Response::new(answer.await?))
    }

    async fn scan(
        &self,
        request: Request<pb::ScanRequest>,
    ) -> Result<Response<pb::ScanResponse>, Status> {
        let r = request.into_inner();
        let answer = self.counted(Operation::Scan, r.consistency, |level| {
            crate::services::scan::run(&self.context, r, level)
        });
        Ok(Response::new(answer.await?))
    }

    async fn put_if(
        &self,
        request: Request<pb::PutIfRequest>,
    ) -> Result<Response<pb::CasResponse>, Status> {
        let deadline = ClientDeadline::from_metadata(request.metadata())?;
        let r = request.into_inner();
        let answer = self.counted_serial(Operation::PutIf, r.serial_consistency, |serial| {
            self.run_put_if(r, deadline, serial)
        });
        Ok(Response::new(answer.await?))
    }

    async fn delete_if(
        &self,
        request: Request<pb::DeleteIfRequest>,
    ) -> Result<Response<pb::CasResponse>, Status> {
        let deadline = ClientDeadline::from_metadata(request.metadata())?;
        let r = request.into_inner();
        let answer = self.counted_serial(Operation::DeleteIf, r.serial_consistency, |serial| {
            self.run_delete_if(r, deadline, serial)
        });
        Ok(Response::new(answer.await?))
    }

    async fn get_serial(
        &self,
        request: Request<pb::GetSerialRequest>,
    ) -> Result<Response<pb::GetResponse>, Status> {
        let r = request.into_inner();
        let answer = self.counted_serial(Operation::GetSerial, r.serial_consistency, |serial| {
            self.run_get_serial(r, serial)
        });
        Ok(Response::new(answer.await?))
    }

    async fn noop(
        &self,
        _: Request<pb::NoopRequest>,
    ) -> Result<Response<pb::NoopResponse>, Status> {
        Ok(Response::new(pb::NoopResponse {}))
    }

    type PipelineStream = pipeline::Responses;

    async fn pipeline(
        &self,
        request: Request<Streaming<pb::PipelineRequest>>,
    ) -> Result<Response<Self::PipelineStream>, Status> {
        let auth = match (&self.gate, request.extensions().get::<Principal>()) {
            (None, _) => None,
            (Some(gate), Some(principal)) => {
                Some(Arc::new(StreamAuth::new(gate.clone(), principal.clone())))
            }
            // The layer admits no request without a principal; fail closed.
            (Some(_), None) => {
                return Err(Status::unauthenticated("the stream was not logged in"));
            }
        };
        let service = self.clone();
        let open = self.context.metrics().pipeline_opened();
        let answer = move |request, deadline| {
            // The stream, which owns this closure, counts as open until
            // it is dropped.
            let _ = &open;
            let (service, auth) = (service.clone(), auth.clone());
            async move { service.answer(request, deadline, auth.as_deref()).await }
        };
        let mut stopped = self.stopped.clone();
        let stop = async move {
            let _ = stopped.wait_for(|&stopped| stopped).await;
        };
        Ok(Response::new(pipeline::responses(
            request.into_inner(),
            answer,
            stop,
        )))
    }
}

impl<H: ClientHost + 'static> ClientService<H> {
    /// One pipelined request, checked against its unary RPC's permission
    /// (under `authenticator = "password"`), then run and counted as that
    /// RPC would be.
    async fn answer(
        &self,
        request: PipelinedRequest,
        deadline: Option<ClientDeadline>,
        auth: Option<&StreamAuth>,
    ) -> Result<PipelinedAnswer, Status> {
        if let Some(auth) = auth {
            let (path, keyspace) = pipeline::stands_for(&request);
            auth.admit(path, keyspace)
                .await
                .map_err(|refused| refused.status())?;
        }
        Ok(match request {
            PipelinedRequest::Put(r) => PipelinedAnswer::Put(
                self.counted(Operation::Put, r.consistency, |level| {
                    self.run_put(r, deadline, level)
                })
                .await?,
            ),
            PipelinedRequest::Get(r) => PipelinedAnswer::Get(
                self.counted(Operation::Get, r.consistency, |level| {
                    self.run_get(r, level)
                })
                .await?,
            ),
            PipelinedRequest::Delete(r) => PipelinedAnswer::Delete(
                self.counted(Operation::Delete, r.consistency, |level| {
                    self.run_delete(r, deadline, level)
                })
                .await?,
            ),
            PipelinedRequest::Batch(r) => PipelinedAnswer::Batch(
                self.counted(Operation::Batch, r.consistency, |level| {
                    self.run_batch(r, deadline, level)
                })
                .await?,
            ),
            PipelinedRequest::Noop(_) => PipelinedAnswer::Noop(pb::NoopResponse {}),
            PipelinedRequest::PutIf(r) => PipelinedAnswer::PutIf(
                self.counted_serial(Operation::PutIf, r.serial_consistency, |serial| {
                    self.run_put_if(r, deadline, serial)
                })
                .await?,
            ),
            PipelinedRequest::DeleteIf(r) => PipelinedAnswer::DeleteIf(
                self.counted_serial(Operation::DeleteIf, r.serial_consistency, |serial| {
                    self.run_delete_if(r, deadline, serial)
                })
                .await?,
            ),
            PipelinedRequest::GetSerial(r) => PipelinedAnswer::GetSerial(
                self.counted_serial(Operation::GetSerial, r.serial_consistency, |serial| {
                    self.run_get_serial(r, serial)
                })
                .await?,
            ),
        })
    }
}
