//! Lightweight transactions in a simulated run: `PutIf`, `DeleteIf` and
//! `GetSerial` on a few keys of their own, recorded for the
//! linearizability checker (`ringstore_history::linearizable`) as
//! [`RegisterOp`]s.
//!
//! # Keys of their own
//! The compare-and-set keys (`x000`, `x001`, …: [`cas_key`]) are never
//! written by plain puts, deletes or batches, and the plain keys are never
//! compare-and-set. Mixing them is a question of its own: a plain write
//! that reached fewer than a quorum (a failure) sits in one replica's data
//! and is seen by a Paxos round whose quorum includes that replica and not
//! by the next one, so the register seems to flip back — behaviour
//! Cassandra leaves undefined and the register model cannot express even
//! as a write of unknown outcome (that takes effect once). Kept apart,
//! every operation on a CAS key is one the model describes exactly, and
//! the plain keys stay judged by the last-write-wins checker, which knows
//! nothing of conditions. The plain-write-after-CAS rule of issue 42 is
//! tested by `tests/cas.rs`, not here.
//!
//! # What a worker does
//! A worker draws a CAS operation instead of a plain one with the run's
//! share ([`CasSettings::share`], drawn from the seed), on one of the few
//! CAS keys (so that rivals on different coordinators meet), through a
//! random coordinator (not the key's first replica, as the client library
//! would route it: racing coordinators are what Paxos must survive):
//! - a serial read, 3 in 10;
//! - a `PutIf`, 1 in 2, expecting the value the worker last saw on the key
//!   (from a read or an answer; absent if it saw the key absent), or
//!   absent, or anything;
//! - a `DeleteIf`, 1 in 5, expecting the value last seen or anything.
//!
//! After an operation of unknown outcome the worker reads the key
//! serially next, as an application must to learn what happened. Every
//! value is unique per key and operation (`{key}=c{client}n{n}`), so a
//! value read or reported current names the one operation that set it. No
//! TTLs: the register model has none.
//!
//! # How each answer is recorded
//! - `PutIf`/`DeleteIf` answered: [`CasOutcome::Applied`], or
//!   [`CasOutcome::NotApplied`] with the value the answer says the key
//!   holds;
//! - failed with the metadata `x-ringstore-cas: not-applied`: certainly not
//!   applied, so left out of the checker's history (nothing of it can be
//!   observed);
//! - failed otherwise (a timeout, the client's own, a broken connection):
//!   [`CasOutcome::Unknown`], which the checker lets take effect at any
//!   time after its invocation, or never;
//! - `GetSerial` answered: a [`RegisterCall::Read`]; failed: left out (an
//!   unknown read tells nothing).
//!
//! Every operation, left out or not, stays a [`CasRecord`] with its
//! coordinator and failure, for the verdict's rule that a fault must
//! excuse every failure.

use std::time::Duration;

use rand::RngExt;
use rand::rngs::StdRng;
use ringstore_history::linearizable::{CasOutcome, Expected, RegisterCall, RegisterOp};
use ringstore_history::{ClientId, Failure, FailureKind, NodeId};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

use crate::records::{answered, failure_of};

/// The metadata entry of a failed compare-and-set that was certainly not
/// applied (the node's `error::cas::NOT_APPLIED_HEADER`).
const NOT_APPLIED_HEADER: &str = "x-ringstore-cas";
/// Its value.
const NOT_APPLIED_VALUE: &str = "not-applied";

/// The CAS key with index `i` (`x000`, `x001`, …), apart from the plain
/// keys ([`key_name`](crate::records::key_name): `k000`, …).
pub fn cas_key(i: usize) -> String {
    format!("x{i:03}")
}

/// How much of a run's load is lightweight transactions.
#[derive(Clone, Copy, Debug)]
pub struct CasSettings {
    /// Keys compare-and-set (and read serially) by every worker; none: no
    /// CAS load.
    pub keys: usize,
    /// Of each worker's operations, the share (per mille) that are CAS
    /// operations.
    pub share: u32,
}

impl CasSettings {
    /// No CAS load.
    pub const NONE: CasSettings = CasSettings { keys: 0, share: 0 };

    /// Whether a worker's next operation is a CAS one: with `share` per
    /// mille, when there are CAS keys.
    pub fn draw(&self, rng: &mut StdRng) -> bool {
        self.keys > 0 && rng.random_range(0..1000) < self.share
    }
}

/// A CAS operation a worker makes, before its value is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CasRequest {
    /// A serial read.
    GetSerial,
    /// Put a new value if the key meets the expectation.
    PutIf(Expected),
    /// Delete the key if it meets the expectation.
    DeleteIf(Expected),
}

impl CasRequest {
    /// Draws the next operation on a key of which the worker last saw
    /// `seen` (`None`: it knows nothing; `Some(None)`: absent); see the
    /// module docs for the shares.
    pub fn draw(rng: &mut StdRng, seen: Option<&Option<Vec<u8>>>) -> CasRequest {
        let last_seen = || match seen {
            Some(Some(value)) => Expected::Value(value.clone()),
            Some(None) | None => Expected::Absent,
        };
        match rng.random_range(0..10) {
            0..3 => CasRequest::GetSerial,
            3..8 => CasRequest::PutIf(match rng.random_range(0..6) {
                0..3 => last_seen(),
                3 | 4 => Expected::Absent,
                _ => Expected::Any,
            }),
            _ => CasRequest::DeleteIf(if rng.random_range(0..4) == 0 {
                Expected::Any
            } else {
                last_seen()
            }),
        }
    }
}

/// One CAS operation as the run recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CasRecord {
    /// Its coordinator.
    pub coordinator: NodeId,
    /// Its key.
    pub key: String,
    /// When the client sent it (the run's clock).
    pub invoked: Duration,
    /// When it had its answer or gave up.
    pub completed: Duration,
    /// Why it failed, if it did.
    pub failure: Option<Failure>,
    /// Whether it failed as certainly not applied (the node said so).
    pub not_applied: bool,
    /// Whether the node's answer is one a rival can cause: `ABORTED`
    /// (pre-empted until its time ran out, or queued behind a slow
    /// operation on the key), or `DEADLINE_EXCEEDED` from the node (a
    /// round that ended short of a quorum of accepts, as a rival's newer
    /// promise makes it, or ran out of time).
    pub contendable: bool,
    /// What the checker judges; `None` when left out (certainly not
    /// applied, or a failed serial read).
    pub register: Option<RegisterOp>,
}

impl CasRecord {
    /// What the key was seen holding by this operation, if it showed it:
    /// a read's value, a not-applied answer's current value, or the value
    /// an applied one set (`new`).
    pub fn observed(&self) -> Option<Option<Vec<u8>>> {
        match &self.register.as_ref()?.call {
            RegisterCall::Read { observed } => Some(observed.clone()),
            RegisterCall::Cas {
                outcome: CasOutcome::NotApplied { current },
                ..
            } => Some(current.clone()),
            RegisterCall::Cas {
                outcome: CasOutcome::Applied,
                new,
                ..
            } => Some(new.clone()),
            _ => None,
        }
    }

    /// Whether its outcome is unknown (it may or may not have applied).
    pub fn is_unknown(&self) -> bool {
        self.register
            .as_ref()
            .is_some_and(|op| op.call.is_unknown())
    }

    /// Whether it had an answer.
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

/// Who makes a CAS request, through which node, waiting how long, on
/// which clock (offsets from the start of the run).
pub struct CasRequester<'a, C: Fn() -> Duration> {
    /// The client.
    pub client: ClientId,
    /// The coordinator.
    pub node: NodeId,
    /// The keyspace.
    pub keyspace: &'a str,
    /// How long the client waits for an answer (also the gRPC deadline).
    pub timeout: Duration,
    /// The run's clock.
    pub now: &'a C,
}

impl<C: Fn() -> Duration> CasRequester<'_, C> {
    /// Makes `request` on `key` through `coordinator`, a value it puts
    /// being `{key}=c{client}n{n}`; the operation as recorded.
    pub async fn run(
        &self,
        mut coordinator: ClientClient<Channel>,
        key: String,
        request: CasRequest,
        n: u64,
    ) -> CasRecord {
        let key_bytes = key.as_bytes().to_vec();
        let value = format!("{key}=c{}n{n}", self.client.0).into_bytes();
        let invoked = (self.now)();
        let (expected, new, answer) = match request {
            CasRequest::GetSerial => {
                let request = pb::GetSerialRequest {
                    keyspace: self.keyspace.into(),
                    key: key_bytes,
                    ..Default::default()
                };
                let answer = self.timed(coordinator.get_serial(self.call(request))).await;
                let call = |read: &pb::GetResponse| RegisterCall::Read {
                    observed: read.found.then(|| read.value.clone()),
                };
                return self.record(key, invoked, answer.map(|read| call(&read)));
            }
            CasRequest::PutIf(expected) => {
                let request = pb::PutIfRequest {
                    keyspace: self.keyspace.into(),
                    key: key_bytes,
                    expected: Some(to_proto(&expected)),
                    value: value.clone(),
                    ..Default::default()
                };
                let answer = self.timed(coordinator.put_if(self.call(request))).await;
                (expected, Some(value), answer)
            }
            CasRequest::DeleteIf(expected) => {
                let request = pb::DeleteIfRequest {
                    keyspace: self.keyspace.into(),
                    key: key_bytes,
                    expected: Some(to_proto(&expected)),
                    ..Default::default()
                };
                let answer = self.timed(coordinator.delete_if(self.call(request))).await;
                (expected, None, answer)
            }
        };
        let outcome = match answer {
            Ok(cas) if cas.applied => Ok(CasOutcome::Applied),
            Ok(cas) => Ok(CasOutcome::NotApplied {
                current: cas.found.then_some(cas.value),
            }),
            Err(failed) if failed.not_applied => Err(failed),
            Err(failed) => {
                // Of unknown outcome: judged, and the failure kept.
                let call = RegisterCall::Cas {
                    expected,
                    new,
                    outcome: CasOutcome::Unknown,
                };
                let mut record = self.record(key, invoked, Ok(call));
                record.failure = Some(failed.failure);
                record.contendable = failed.contendable;
                return record;
            }
        };
        let call = outcome.map(|outcome| RegisterCall::Cas {
            expected,
            new,
            outcome,
        });
        self.record(key, invoked, call)
    }

    /// A call with the timeout as its gRPC deadline.
    fn call<T>(&self, request: T) -> tonic::Request<T> {
        let mut call = tonic::Request::new(request);
        call.set_timeout(self.timeout);
        call
    }

    /// `call`'s answer within the timeout, or its failure classified.
    async fn timed<T>(
        &self,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Failed> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Err(status)) => Err(Failed {
                contendable: matches!(
                    status.code(),
                    tonic::Code::Aborted | tonic::Code::DeadlineExceeded
                ) && failure_of(&status).kind != FailureKind::ClientTimeout
                    && std::error::Error::source(&status).is_none(),
                not_applied: status
                    .metadata()
                    .get(NOT_APPLIED_HEADER)
                    .is_some_and(|v| v == NOT_APPLIED_VALUE),
                failure: failure_of(&status),
            }),
            other => answered(other).map_err(|failure| Failed {
                failure,
                not_applied: false,
                contendable: false,
            }),
        }
    }

    /// The record of an operation on `key` invoked at `invoked`, completed
    /// now, with `call` judged, or failed (then left out of the checker's
    /// history).
    fn record(
        &self,
        key: String,
        invoked: Duration,
        call: Result<RegisterCall, Failed>,
    ) -> CasRecord {
        let completed = (self.now)();
        let (register, failure, not_applied, contendable) = match call {
            Ok(call) => {
                let op = RegisterOp {
                    key: key.clone(),
                    client: self.client,
                    invoked,
                    completed,
                    call,
                };
                (Some(op), None, false, false)
            }
            Err(failed) => (
                None,
                Some(failed.failure),
                failed.not_applied,
                failed.contendable,
            ),
        };
        CasRecord {
            coordinator: self.node,
            key,
            invoked,
            completed,
            failure,
            not_applied,
            contendable,
            register,
        }
    }
}

/// A failed CAS request.
struct Failed {
    failure: Failure,
    /// Whether the node marked it certainly not applied.
    not_applied: bool,
    /// See [`CasRecord::contendable`].
    contendable: bool,
}

/// `expected` as the API takes it.
fn to_proto(expected: &Expected) -> pb::Expected {
    use pb::expected::Condition;
    let condition = match expected {
        Expected::Absent => Condition::Absent(pb::ExpectAbsent {}),
        Expected::Value(value) => Condition::Value(value.clone()),
        Expected::Any => Condition::Any(pb::ExpectAny {}),
    };
    pb::Expected {
        condition: Some(condition),
    }
}
