//! Client requests as the history checker records them: a put or a get
//! timed on the caller's clock, its answer or failure classified, and the
//! cells a final read finds. Shared by the simulation's clients and the
//! process fault suite (`tests/faults.rs`), so both judge alike.

use std::time::Duration;

use ringstore_history::{
    ClientId, Failure, FailureKind, Level, NodeId, Op, OpKind, ReadOutcome, Timestamp, Version,
    WriteOutcome,
};
use ringstore_proto::SENT_AT_HEADER;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

/// The key with index `i` (`k000`, `k001`, …).
pub fn key_name(i: usize) -> String {
    format!("k{i:03}")
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
    /// Puts `value` under `key` at `QUORUM` (the server stamps it) through
    /// `coordinator`, sent at the client's wall clock with its timeout as
    /// the deadline; the operation as recorded.
    pub async fn put(
        &self,
        mut coordinator: ClientClient<Channel>,
        key: String,
        value: String,
    ) -> Op {
        let request = pb::PutRequest {
            keyspace: self.keyspace.into(),
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
            timestamp_micros: None,
            ttl_seconds: None,
        };
        let invoked = (self.now)();
        let mut call = tonic::Request::new(request);
        call.set_timeout(self.timeout);
        if let Ok(sent_at) = (self.wall)().to_string().parse() {
            call.metadata_mut().insert(SENT_AT_HEADER, sent_at);
        }
        let answer = tokio::time::timeout(self.timeout, coordinator.put(call)).await;
        let outcome = match answered(answer) {
            Ok(put) => WriteOutcome::Acked(Timestamp(put.timestamp_micros)),
            Err(failure) => WriteOutcome::Failed(failure),
        };
        let kind = OpKind::Write {
            value: value.into_bytes(),
            outcome,
        };
        self.op(key, invoked, kind)
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
        self.op(key, invoked, OpKind::Read { outcome })
    }

    fn op(&self, key: String, invoked: Duration, kind: OpKind) -> Op {
        Op {
            client: self.client,
            coordinator: self.node,
            key,
            level: Level::Quorum,
            invoked,
            completed: (self.now)(),
            kind,
        }
    }
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

/// The version a replica's cell holds (`None`: no cell, or a tombstone).
pub fn held(cell: Option<pb::Cell>) -> Option<Version> {
    cell.and_then(|c| {
        Some(Version {
            timestamp: Timestamp(c.timestamp_micros),
            value: c.value?,
        })
    })
}
