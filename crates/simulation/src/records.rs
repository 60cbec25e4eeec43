//! Client requests as the history checker records them: what a client
//! does next, drawn from its generator ([`Request::draw`]: gets, puts with
//! and without a TTL, deletes, batches), each made at `QUORUM` and timed on
//! the caller's clock, its answer or failure classified, and the cells a
//! final read finds. Shared by the simulation's clients and the
//! process fault suite (`tests/faults.rs`), so both judge alike.

use std::time::Duration;

use rand::RngExt;
use rand::rngs::StdRng;
use ringstore_history::{
    ClientId, Failure, FailureKind, HeldCell, Level, Mutation, NodeId, Op, OpKind, ReadOutcome,
    Timestamp, Version, Write, WriteOutcome,
};
use ringstore_proto::SENT_AT_HEADER;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

/// The key with index `i` (`k000`, `k001`, …).
pub fn key_name(i: usize) -> String {
    format!("k{i:03}")
}

/// The longest TTL a client gives a value: short against a run, so that
/// many values expire within it (between 1 s and this).
pub const MAX_TTL: Duration = Duration::from_secs(4);

/// The most keys a batch writes (at least two).
pub const MAX_BATCH: usize = 4;

/// A request a client makes, with its keys.
pub enum Request {
    /// A get of the key.
    Get(String),
    /// A put of the key, with a TTL or not (its value is made when it is
    /// sent).
    Put(String, Option<Duration>),
    /// A delete of the key.
    Delete(String),
    /// Distinct keys, each with what is done to it.
    Batch(Vec<(String, Draft)>),
}

/// A batch part before its value is made.
pub enum Draft {
    /// A put, with a TTL or not.
    Put(Option<Duration>),
    /// A delete.
    Delete,
}

impl Draft {
    fn with_value(self, value: String) -> Mutation {
        match self {
            Draft::Put(ttl) => Mutation::Put {
                value: value.into_bytes(),
                ttl,
            },
            Draft::Delete => Mutation::Delete,
        }
    }
}

impl Request {
    /// Half gets; of the writes, two in five plain puts, one in five puts
    /// with a TTL (1 s to [`MAX_TTL`]), one in five deletes, one in five
    /// batches of 2 to [`MAX_BATCH`] distinct keys of `keys` (`key` first)
    /// mixing the three. Every draw from `rng`.
    pub fn draw(rng: &mut StdRng, keys: usize, key: String) -> Request {
        let ttl =
            |rng: &mut StdRng| Some(Duration::from_secs(rng.random_range(1..=MAX_TTL.as_secs())));
        match rng.random_range(0..10) {
            0..5 => Request::Get(key),
            5..7 => Request::Put(key, None),
            7 => Request::Put(key, ttl(rng)),
            8 => Request::Delete(key),
            _ => {
                let size = rng.random_range(2..=MAX_BATCH).min(keys);
                let mut chosen = vec![key];
                while chosen.len() < size {
                    let other = key_name(rng.random_range(0..keys));
                    if !chosen.contains(&other) {
                        chosen.push(other);
                    }
                }
                let parts = chosen
                    .into_iter()
                    .map(|key| {
                        let draft = match rng.random_range(0..4) {
                            0 | 1 => Draft::Put(None),
                            2 => Draft::Put(ttl(rng)),
                            _ => Draft::Delete,
                        };
                        (key, draft)
                    })
                    .collect();
                Request::Batch(parts)
            }
        }
    }
}

/// Who makes a request, through which node, of which keyspace, waiting how
/// long, on which clock (offsets from the start of the run), telling the
/// node its wall clock.
pub struct Requester<'a, C: Fn() -> Duration> {
    /// The client.
    pub client: ClientId,
    /// The coordinator.
    pub node: NodeId,
    /// The keyspace.
    pub keyspace: &'a str,
    /// How long the client waits for an answer.
    pub timeout: Duration,
    /// The run's clock.
    pub now: &'a C,
    /// The client's wall clock, µs since the epoch: each write tells the
    /// node when it was sent, with the timeout as its gRPC deadline, as the
    /// client library does.
    pub wall: &'a (dyn Fn() -> i64 + Sync),
}

impl<C: Fn() -> Duration> Requester<'_, C> {
    /// Makes `request` through `coordinator`, each value it puts unique
    /// per key: `{key}=c{client}n{n}` (`n` the client's count of its
    /// operations); the operation as recorded.
    pub async fn run(&self, coordinator: ClientClient<Channel>, request: Request, n: u64) -> Op {
        let value = |key: &str| format!("{key}=c{}n{n}", self.client.0);
        match request {
            Request::Get(key) => self.get(coordinator, key).await,
            Request::Put(key, ttl) => {
                let value = value(&key);
                self.put(coordinator, key, value, ttl).await
            }
            Request::Delete(key) => self.delete(coordinator, key).await,
            Request::Batch(parts) => {
                let parts = parts
                    .into_iter()
                    .map(|(key, draft)| {
                        let value = value(&key);
                        (key, draft.with_value(value))
                    })
                    .collect();
                self.batch(coordinator, parts).await
            }
        }
    }

    /// Puts `value` under `key` at `QUORUM` (the server stamps it), with
    /// `ttl` (whole seconds) if given, through `coordinator`; the operation
    /// as recorded.
    pub async fn put(
        &self,
        mut coordinator: ClientClient<Channel>,
        key: String,
        value: String,
        ttl: Option<Duration>,
    ) -> Op {
        let request = pb::PutRequest {
            keyspace: self.keyspace.into(),
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
            timestamp_micros: None,
            ttl_seconds: ttl.map(ttl_seconds),
        };
        let call = self.call(request);
        let invoked = (self.now)();
        let answer = tokio::time::timeout(self.timeout, coordinator.put(call)).await;
        let outcome = match answered(answer) {
            Ok(put) => WriteOutcome::Acked(Timestamp(put.timestamp_micros)),
            Err(failure) => WriteOutcome::Failed(failure),
        };
        let write = Write {
            key,
            mutation: Mutation::Put {
                value: value.into_bytes(),
                ttl,
            },
            outcome,
        };
        self.op(invoked, OpKind::Write(write))
    }

    /// Deletes `key` at `QUORUM` (the server stamps the tombstone) through
    /// `coordinator`; the operation as recorded.
    pub async fn delete(&self, mut coordinator: ClientClient<Channel>, key: String) -> Op {
        let request = pb::DeleteRequest {
            keyspace: self.keyspace.into(),
            key: key.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
            timestamp_micros: None,
        };
        let call = self.call(request);
        let invoked = (self.now)();
        let call = coordinator.delete(call);
        let answer = tokio::time::timeout(self.timeout, call).await;
        let outcome = match answered(answer) {
            Ok(deleted) => WriteOutcome::Acked(Timestamp(deleted.timestamp_micros)),
            Err(failure) => WriteOutcome::Failed(failure),
        };
        let write = Write {
            key,
            mutation: Mutation::Delete,
            outcome,
        };
        self.op(invoked, OpKind::Write(write))
    }

    /// Writes `parts` (key and mutation each; a put's TTL in whole
    /// seconds) in one `Batch` at `QUORUM` through `coordinator`; the
    /// operation as recorded, each part with the outcome the batch answered
    /// for it (every part failed when the batch did, or answered a wrong
    /// number of results).
    pub async fn batch(
        &self,
        mut coordinator: ClientClient<Channel>,
        parts: Vec<(String, Mutation)>,
    ) -> Op {
        let mutations = parts
            .iter()
            .map(|(key, mutation)| match mutation {
                Mutation::Put { value, ttl } => pb::Mutation {
                    key: key.as_bytes().to_vec(),
                    value: Some(value.clone()),
                    ttl_seconds: ttl.map(ttl_seconds),
                    ..Default::default()
                },
                Mutation::Delete => pb::Mutation {
                    key: key.as_bytes().to_vec(),
                    ..Default::default()
                },
            })
            .collect();
        let request = pb::BatchRequest {
            keyspace: self.keyspace.into(),
            mutations,
            consistency: pb::ConsistencyLevel::Quorum as i32,
        };
        let call = self.call(request);
        let invoked = (self.now)();
        let call = coordinator.batch(call);
        let answer = answered(tokio::time::timeout(self.timeout, call).await);
        let results = answer.and_then(|batch| {
            if batch.results.len() == parts.len() {
                Ok(batch.results)
            } else {
                Err(Failure {
                    kind: FailureKind::Other,
                    message: format!(
                        "the batch answered {} results for {} mutations",
                        batch.results.len(),
                        parts.len()
                    ),
                })
            }
        });
        let writes = parts
            .into_iter()
            .enumerate()
            .map(|(i, (key, mutation))| {
                let outcome = match &results {
                    Ok(results) => mutation_outcome(&results[i]),
                    Err(failure) => WriteOutcome::Failed(failure.clone()),
                };
                Write {
                    key,
                    mutation,
                    outcome,
                }
            })
            .collect();
        self.op(invoked, OpKind::Batch(writes))
    }

    /// Gets `key` at `QUORUM` through `coordinator`; the operation as
    /// recorded.
    pub async fn get(&self, mut coordinator: ClientClient<Channel>, key: String) -> Op {
        let request = pb::GetRequest {
            keyspace: self.keyspace.into(),
            key: key.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
        };
        let invoked = (self.now)();
        let answer = tokio::time::timeout(self.timeout, coordinator.get(request)).await;
        let outcome = read_outcome(answered(answer));
        self.op(invoked, OpKind::Read { key, outcome })
    }

    /// A write's call: the timeout as its gRPC deadline, and the client's
    /// wall clock as its send time, as the client library sends them. Made
    /// before the operation's invoke time is taken, so that the deadline a
    /// node enforces is no later than the invoke time plus the timeout (the
    /// checker's stamp deadline counts from the invoke time).
    fn call<T>(&self, request: T) -> tonic::Request<T> {
        let mut call = tonic::Request::new(request);
        call.set_timeout(self.timeout);
        if let Ok(sent_at) = (self.wall)().to_string().parse() {
            call.metadata_mut().insert(SENT_AT_HEADER, sent_at);
        }
        call
    }

    fn op(&self, invoked: Duration, kind: OpKind) -> Op {
        Op {
            client: self.client,
            coordinator: self.node,
            level: Level::Quorum,
            invoked,
            completed: (self.now)(),
            kind,
        }
    }
}

/// A TTL in the whole seconds the API takes (at least one).
fn ttl_seconds(ttl: Duration) -> u32 {
    u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX).max(1)
}

/// What a batch answered for one mutation: a status code of its own (the
/// coordinator's, so `UNAVAILABLE` and `DEADLINE_EXCEEDED` keep their
/// kinds) and its timestamp.
fn mutation_outcome(result: &pb::MutationResult) -> WriteOutcome {
    let kind = match tonic::Code::from_i32(result.code) {
        tonic::Code::Ok => return WriteOutcome::Acked(Timestamp(result.timestamp_micros)),
        tonic::Code::Unavailable => FailureKind::Unavailable,
        tonic::Code::DeadlineExceeded => FailureKind::Timeout,
        _ => FailureKind::Other,
    };
    WriteOutcome::Failed(Failure {
        kind,
        message: format!(
            "{:?}: {}",
            tonic::Code::from_i32(result.code),
            result.message
        ),
    })
}

/// A request's answer, or its failure classified (the client's own
/// timeout included).
pub fn answered<T>(
    answer: Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>,
) -> Result<T, Failure> {
    match answer {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(failure_of(&status)),
        Err(_) => Err(Failure {
            kind: FailureKind::ClientTimeout,
            message: "no answer within the client's timeout".into(),
        }),
    }
}

/// What kind of failure `status` is: one the server sent carries no
/// source error; a transport failure (refused, reset) does, and so does
/// tonic's own end of a call at its gRPC deadline, which is the client's
/// timeout.
pub fn failure_of(status: &tonic::Status) -> Failure {
    let from_transport = std::error::Error::source(status).is_some();
    let kind = match status.code() {
        _ if ringstore_proto::deadline_expired(status) => FailureKind::ClientTimeout,
        _ if from_transport => FailureKind::Unreachable,
        tonic::Code::Unavailable => FailureKind::Unavailable,
        tonic::Code::DeadlineExceeded => FailureKind::Timeout,
        _ => FailureKind::Other,
    };
    Failure {
        kind,
        message: format!("{:?}: {}", status.code(), status.message()),
    }
}

/// What a get answered, as the checker records it.
pub fn read_outcome(answer: Result<pb::GetResponse, Failure>) -> ReadOutcome {
    match answer {
        Ok(get) if get.found => ReadOutcome::Found(Version {
            timestamp: Timestamp(get.timestamp_micros),
            value: get.value,
        }),
        Ok(_) => ReadOutcome::NotFound,
        Err(failure) => ReadOutcome::Failed(failure),
    }
}

/// A replica's cell as the checker records it (`None`: no cell).
pub fn held(cell: Option<pb::Cell>) -> Option<HeldCell> {
    cell.map(|c| HeldCell {
        timestamp: Timestamp(c.timestamp_micros),
        value: c.value,
        expires_at: c.expires_at_micros.map(Timestamp),
    })
}
