//! The node's errors, and their mapping to gRPC status codes — in one place.
//!
//! Each subsystem's refusals and failures are an enum of their own in a file
//! of this folder, carrying the hosts, keyspaces and counts involved, with
//! their message and their gRPC code beside them; [`NodeError`] holds each
//! as one variant and asks it for its code. The files of this folder import
//! nothing else of the node crate, since every module imports them.
//!
//! - `request.rs`: malformed or out-of-bounds requests (sizes, ids, levels).
//! - `deadline.rs`: a request that arrived after its sender stopped waiting.
//! - `keyspace_request.rs`: a keyspace definition that cannot be created.
//! - `users.rs`: users, grants and permission refusals.
//! - `scan.rs`: scans, their pages and resume tokens.
//! - `operator.rs`: operator settings and samplings out of bounds.
//! - `coordinator.rs`: a coordinated read or write, or a call to a replica,
//!   that fell short (the replication crate's own errors are kept whole).
//! - `topology.rs`: range movements, bootstrap, replace, join,
//!   decommission, removenode, cleanup, keyspace alters, previews.
//! - `streaming.rs`: a range with no source, a stream's sending side.
//! - `repair.rs`: a repair's coordinator and its replicas.
//! - `schema.rs`: schema agreement, keyspaces a joining node has not learned.
//! - `snapshot.rs`: taking, clearing, restoring snapshots.
//! - `operations.rs`: operator commands (log levels, drain, secret reloads).
//! - `serving.rs`: a node that does not take requests for now.
//! - `timestamp.rs`: client-supplied write timestamps.
//! - `startup.rs`: settings a node on a simulated network cannot honour.
//! - `paxos.rs`: a replica's part in a Paxos round (corrupt acceptor state,
//!   a malformed request, a keyspace not learned yet).
//! - `cas.rs`: a compare-and-set or serial read the coordinator could not
//!   answer, and whether it was certainly not applied.

pub mod cas;
pub mod coordinator;
pub mod deadline;
pub mod keyspace_request;
pub mod operations;
pub mod operator;
pub mod paxos;
pub mod repair;
pub mod request;
pub mod scan;
pub mod schema;
pub mod serving;
pub mod snapshot;
pub mod startup;
pub mod streaming;
pub mod timestamp;
pub mod topology;
pub mod users;

use std::sync::Arc;

pub use self::deadline::ExpiredRequest;
pub use self::keyspace_request::{KeyspaceNameRule, KeyspaceRequestError};
pub use self::operator::OperatorError;
pub use self::request::RequestError;
pub use self::scan::{ResumeTokenFault, ScanError};
pub use self::users::UserError;

use tonic::{Code, Status};

pub use self::cas::{CasError, CasRound};
pub use self::coordinator::CoordinatorError;
pub use self::operations::{FilterError, OperationError};
pub use self::paxos::PaxosReplicaError;
pub use self::repair::RangeRepairError;
pub use self::schema::SchemaError;
pub use self::serving::ServingError;
pub use self::snapshot::SnapshotError;
pub use self::startup::StartupError;
pub use self::streaming::RangeStreamError;
pub use self::timestamp::ClientTimestampError;
pub use self::topology::{MovementsUnderway, TopologyError};

/// Why a request (or the node) failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A malformed or out-of-bounds request field.
    #[error(transparent)]
    Request(#[from] RequestError),

    /// A request read after its client's deadline.
    #[error(transparent)]
    Expired(#[from] ExpiredRequest),

    /// A keyspace that cannot be created or altered as asked.
    #[error(transparent)]
    KeyspaceRequest(#[from] KeyspaceRequestError),

    /// A request of the `Users` service that its rules refuse.
    #[error(transparent)]
    User(#[from] UserError),

    /// A scan that cannot be served.
    #[error(transparent)]
    Scan(#[from] ScanError),

    /// An operator's request (admin, topology, repair) refused.
    #[error(transparent)]
    Operator(#[from] OperatorError),

    /// The empty key, which has no token.
    #[error("key must not be empty")]
    EmptyKey,

    /// A key longer than the limit ([`crate::limits::MAX_KEY_BYTES`]).
    #[error("key is {len} bytes; the limit is {max} bytes")]
    KeyTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// No keyspace of that name.
    #[error("keyspace {0:?} does not exist")]
    KeyspaceNotFound(String),

    /// A replica taking part in a repair went down or restarted while the
    /// repair ran (a call to it may never answer; its trees are gone). The
    /// range can be tried again once the replica is back.
    #[error("replica {0} went down or restarted during the repair")]
    ReplicaLost(ringstore_placement::HostId),

    /// A peer failed a call, or could not be reached: `peer` names it (an
    /// address or a host id), `doing` what was asked of it.
    #[error("{peer}: {doing}: {}", describe(status))]
    Peer {
        /// The peer.
        peer: String,
        /// What this node asked of it.
        doing: &'static str,
        /// What the call returned.
        #[source]
        status: Box<tonic::Status>,
    },

    /// A replica's answer showed that this node's ring is behind the
    /// replica's (see [`crate::ring_lag`]): the answer does not count.
    #[error(
        "{replica}: this node's ring is behind the replica's ({members} members changed state)"
    )]
    RingBehind {
        /// The replica.
        replica: std::net::SocketAddr,
        /// Members it knows in a newer state.
        members: usize,
    },

    /// Gossip knows no address for a member this node needs to call.
    #[error("no address known for host {0}")]
    NoAddress(ringstore_placement::HostId),

    /// A record this node persisted does not decode (corrupt, or of an
    /// unknown format version). Nothing was changed.
    #[error("{record} is corrupt{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    CorruptRecord {
        /// Which record.
        record: &'static str,
        /// What is wrong with it, when known.
        detail: Option<String>,
    },

    /// A blocking task (a scan, a storage call kept off the async workers)
    /// panicked or was cancelled.
    #[error("{what} failed: {source}")]
    Task {
        /// What the task was doing.
        what: &'static str,
        /// Why it did not finish.
        #[source]
        source: tokio::task::JoinError,
    },

    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, and to which file or address.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// A ring could not be built, or tokens not allocated.
    #[error("{doing}: {source}")]
    Placement {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: ringstore_placement::PlacementError,
    },

    /// The hint store failed.
    #[error("{doing}: {source}")]
    Hints {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: ringstore_hints::HintsError,
    },

    /// The storage engine failed.
    #[error("storage: {0}")]
    Storage(#[from] ringstore_storage::StorageError),

    /// Membership failed.
    #[error("membership: {0}")]
    Membership(#[from] ringstore_membership::MembershipError),

    /// Range streaming failed (checkpoints, estimates, or a fetch that ran
    /// out of attempts).
    #[error("streaming: {0}")]
    Streaming(#[from] ringstore_streaming::StreamingError),

    /// A repair step failed (a replica's malformed answer, a bad setting).
    #[error("repair: {0}")]
    Repair(#[from] ringstore_repair::RepairError),

    /// TLS could not be set up from the node's certificates.
    #[error("tls: {0}")]
    Tls(#[from] crate::tls::TlsError),

    /// The metrics port could not be set up (its token or TLS files).
    #[error("metrics port: {0}")]
    MetricsHttp(#[from] crate::start_refusals::MetricsHttpError),

    /// The metrics page could not be made.
    #[error("metrics: {0}")]
    Metrics(#[from] ringstore_metrics::MetricsError),

    /// This node's clock is off from the majority of the live members by
    /// more than `max_clock_offset`: it does not stamp writes.
    #[error(
        "this node's clock is {} the majority of the live members' by {:.3} s \
         ({beyond} of the {members} live members, this one included, are further than \
         max_clock_offset = {:.3} s from it): \
         it does not coordinate writes until its clock is back within the bound; send the \
         write to another node, and fix this node's clock (NTP)",
        if *offset_micros >= 0 { "ahead of" } else { "behind" },
        offset_micros.unsigned_abs() as f64 / 1e6,
        max_offset.as_secs_f64()
    )]
    ClockSkewed {
        /// This node's clock minus the median of the live members', in µs.
        offset_micros: i64,
        /// The bound, `max_clock_offset_ms`.
        max_offset: std::time::Duration,
        /// How many live peers are further than the bound.
        beyond: usize,
        /// How many members were compared (this node included).
        members: usize,
    },
    /// This node has issued write timestamps further ahead of the
    /// majority's clock than `max_clock_offset` (its clock ran ahead, and
    /// has stepped back): it does not stamp writes until its clock passes
    /// them.
    #[error(
        "this node has issued write timestamps up to {:.3} s ahead of the clocks of the \
         majority of the live members (its clock ran ahead and stepped back); it does not \
         coordinate writes until its clock passes them, so that writes through other nodes are \
         not ordered before them (max_clock_offset = {:.3} s); send the write to another node",
        *ahead_micros as f64 / 1e6,
        max_offset.as_secs_f64()
    )]
    TimestampsAhead {
        /// The latest timestamp issued minus the majority's clock, in µs.
        ahead_micros: i64,
        /// The bound, `max_clock_offset_ms`.
        max_offset: std::time::Duration,
    },

    /// A bad user name, password or permission, or an unreadable user record.
    #[error("{0}")]
    Access(#[from] ringstore_client_auth::AccessError),

    /// No user of that name.
    #[error("user {0:?} does not exist")]
    UserNotFound(String),

    /// The node is being shut down.
    #[error("the node is shutting down")]
    ShuttingDown,

    /// This node left the cluster for good (decommissioned): started again
    /// on the same data directory, it refuses to run.
    #[error(
        "this node was decommissioned: its ranges were streamed away and its data in {data_dir} \
         is stale; to join the cluster again, start it with an empty data directory"
    )]
    Decommissioned {
        /// Its data directory.
        data_dir: std::path::PathBuf,
    },

    /// The node's identity key cannot be read or made.
    #[error("identity: {0}")]
    Identity(#[from] ringstore_identity::IdentityError),

    /// The key file does not make the host id the node record holds: the
    /// node would speak as somebody else.
    #[error(
        "{key_file} does not belong to host {host} (its node.json): restore the key file \
         from a copy of this data directory, or start with an empty data directory to \
         join as a new node"
    )]
    ForeignIdentity {
        /// The key file.
        key_file: std::path::PathBuf,
        /// The host id of the node record.
        host: ringstore_placement::HostId,
    },

    /// The node would start open on a network, or with a weak secret.
    #[error("{0}")]
    Insecure(#[from] crate::start_refusals::InsecureStart),

    /// A consistency level that does not apply, or too few replicas for it.
    #[error(transparent)]
    Replication(#[from] ringstore_replication::ReplicationError),

    /// A coordinated request, or one of its replica calls, fell short.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),

    /// A compare-and-set or serial read without an answer.
    #[error(transparent)]
    Cas(#[from] CasError),

    /// An error shared by several waiters (see `From<Arc<NodeError>>`): it
    /// answers as the error it shares.
    #[error(transparent)]
    Shared(Arc<NodeError>),
    /// A topology change was refused or failed.
    #[error(transparent)]
    Topology(#[from] TopologyError),

    /// A range could not be fetched or sent.
    #[error(transparent)]
    RangeStream(#[from] RangeStreamError),

    /// A repair, or a replica's part in one, was refused or failed.
    #[error(transparent)]
    RangeRepair(#[from] RangeRepairError),

    /// A schema change did not reach agreement, or a keyspace is not known
    /// yet.
    #[error(transparent)]
    Schema(#[from] SchemaError),

    /// A snapshot could not be taken, cleared or restored.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),

    /// An operator's command was refused.
    #[error(transparent)]
    Operation(#[from] OperationError),

    /// This node does not take requests for now.
    #[error(transparent)]
    Serving(#[from] ServingError),

    /// A client-supplied timestamp was refused.
    #[error(transparent)]
    ClientTimestamp(#[from] ClientTimestampError),

    /// A setting the node cannot honour where it runs.
    #[error(transparent)]
    Startup(#[from] StartupError),

    /// This replica's part in a Paxos round failed.
    #[error(transparent)]
    Paxos(#[from] PaxosReplicaError),
}

/// An error several waiters share (one replica round answering many
/// coalesced reads, one internode call carrying many replica requests):
/// the waiter that holds the last reference gets the error itself, the
/// others [`NodeError::Shared`].
impl From<Arc<NodeError>> for NodeError {
    fn from(shared: Arc<NodeError>) -> NodeError {
        Arc::try_unwrap(shared).unwrap_or_else(NodeError::Shared)
    }
}

impl NodeError {
    /// A peer's failed call, as a `map_err` argument.
    pub fn peer(
        peer: impl ToString,
        doing: &'static str,
    ) -> impl FnOnce(tonic::Status) -> NodeError {
        move |status| NodeError::Peer {
            peer: peer.to_string(),
            doing,
            status: Box::new(status),
        }
    }

    /// A blocking task that did not finish, as a `map_err` argument.
    pub fn task(what: &'static str) -> impl FnOnce(tokio::task::JoinError) -> NodeError {
        move |source| NodeError::Task { what, source }
    }

    /// A failed hint-store call, as a `map_err` argument.
    pub fn hints(doing: &'static str) -> impl FnOnce(ringstore_hints::HintsError) -> NodeError {
        move |source| NodeError::Hints { doing, source }
    }

    /// A failed placement step, as a `map_err` argument.
    pub fn placement(
        doing: &'static str,
    ) -> impl FnOnce(ringstore_placement::PlacementError) -> NodeError {
        move |source| NodeError::Placement { doing, source }
    }

    /// A corrupt record without more detail.
    pub fn corrupt(record: &'static str) -> NodeError {
        NodeError::CorruptRecord {
            record,
            detail: None,
        }
    }

    /// Whether the error says that a replica's own copy of a cell does not
    /// read back (a damaged cell): this node's store reporting corruption,
    /// or a peer answering `DATA_LOSS`, which is how a replica reports it.
    /// A coordinator treats such a replica as failed for the read and stale
    /// for its read repair (`coordinator/`), never as unavailable.
    pub fn is_damaged_replica(&self) -> bool {
        match self {
            NodeError::Shared(shared) => shared.is_damaged_replica(),
            NodeError::Storage(error) => error.is_corruption(),
            NodeError::Paxos(error) => error.is_corruption(),
            NodeError::Peer { status, .. } => status.code() == Code::DataLoss,
            _ => false,
        }
    }

    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            // A stored cell that does not read back: DATA_LOSS, which a
            // coordinator tells from UNAVAILABLE (`is_damaged_replica`).
            NodeError::Storage(error) if error.is_corruption() => Code::DataLoss,
            NodeError::Shared(shared) => shared.code(),
            NodeError::Coordinator(error) => error.code(),
            NodeError::Cas(error) => error.code(),
            NodeError::Replication(error) => replication_code(error),
            NodeError::Topology(error) => error.code(),
            NodeError::RangeStream(error) => error.code(),
            NodeError::RangeRepair(error) => error.code(),
            NodeError::Schema(error) => error.code(),
            NodeError::Snapshot(error) => error.code(),
            NodeError::Operation(error) => error.code(),
            NodeError::Serving(error) => error.code(),
            NodeError::ClientTimestamp(error) => error.code(),
            NodeError::Startup(error) => error.code(),
            NodeError::Paxos(error) => error.code(),
            NodeError::Request(error) => error.code(),
            NodeError::Expired(error) => error.code(),
            NodeError::KeyspaceRequest(error) => error.code(),
            NodeError::User(error) => error.code(),
            NodeError::Scan(error) => error.code(),
            NodeError::Operator(error) => error.code(),
            NodeError::EmptyKey
            | NodeError::KeyTooLong { .. }
            | NodeError::Repair(ringstore_repair::RepairError::UnknownGcMode(_)) => {
                Code::InvalidArgument
            }
            NodeError::KeyspaceNotFound(_) | NodeError::UserNotFound(_) => Code::NotFound,
            NodeError::Access(error) => match error {
                ringstore_client_auth::AccessError::CorruptRecord(_)
                | ringstore_client_auth::AccessError::UnknownVersion(_)
                | ringstore_client_auth::AccessError::Hashing(_) => Code::Internal,
                _ => Code::InvalidArgument,
            },
            // UNAVAILABLE, not FAILED_PRECONDITION: nothing was applied, the
            // condition is this node's alone and clears by itself, so the
            // client should retry — on another coordinator.
            NodeError::ReplicaLost(_)
            | NodeError::RingBehind { .. }
            | NodeError::ShuttingDown
            | NodeError::ClockSkewed { .. }
            | NodeError::TimestampsAhead { .. } => Code::Unavailable,
            NodeError::Decommissioned { .. } => Code::FailedPrecondition,
            NodeError::Peer { .. }
            | NodeError::NoAddress(_)
            | NodeError::CorruptRecord { .. }
            | NodeError::Task { .. }
            | NodeError::Io { .. }
            | NodeError::Placement { .. }
            | NodeError::Hints { .. }
            | NodeError::Storage(_)
            | NodeError::Membership(_)
            | NodeError::Streaming(_)
            | NodeError::Repair(_)
            | NodeError::Tls(_)
            | NodeError::Identity(_)
            | NodeError::ForeignIdentity { .. }
            | NodeError::Insecure(_)
            | NodeError::MetricsHttp(_)
            | NodeError::Metrics(_) => Code::Internal,
        }
    }
}

impl NodeError {
    /// The gRPC status code's name, as a metrics label (`UNAVAILABLE`).
    pub fn code_label(&self) -> &'static str {
        match self.code() {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::Unavailable => "UNAVAILABLE",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Internal => "INTERNAL",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::DataLoss => "DATA_LOSS",
            Code::Aborted => "ABORTED",
            _ => "UNKNOWN",
        }
    }
}

impl NodeError {
    /// Whether this is a compare-and-set that was certainly not applied
    /// ([`CasError::is_definitely_not_applied`]).
    pub fn is_cas_not_applied(&self) -> bool {
        match self {
            NodeError::Cas(error) => error.is_definitely_not_applied(),
            NodeError::Shared(shared) => shared.is_cas_not_applied(),
            _ => false,
        }
    }
}

impl From<NodeError> for Status {
    /// The error's code and message; a compare-and-set that was certainly
    /// not applied says so in the status's metadata
    /// ([`cas::NOT_APPLIED_HEADER`]).
    fn from(error: NodeError) -> Status {
        let mut status = Status::new(error.code(), error.to_string());
        if error.is_cas_not_applied() {
            status.metadata_mut().insert(
                cas::NOT_APPLIED_HEADER,
                tonic::metadata::MetadataValue::from_static(cas::NOT_APPLIED_VALUE),
            );
        }
        status
    }
}

/// The gRPC code of a replication error: a request that can never succeed
/// is `INVALID_ARGUMENT`; too few replicas up `UNAVAILABLE`; too few
/// answers in time `DEADLINE_EXCEEDED` (for a write: it may still apply).
fn replication_code(error: &ringstore_replication::ReplicationError) -> Code {
    use ringstore_replication::ReplicationError as E;
    match error {
        error if error.is_invalid_request() => Code::InvalidArgument,
        E::WriteTimeout(_) => Code::DeadlineExceeded,
        E::ReadFailure(failure) if failure.timed_out => Code::DeadlineExceeded,
        _ => Code::Unavailable,
    }
}

/// A domain error goes back to a gRPC client as its [`NodeError`] would.
macro_rules! status_as_node_error {
    ($($domain:ty),* $(,)?) => {$(
        impl From<$domain> for Status {
            fn from(error: $domain) -> Status {
                NodeError::from(error).into()
            }
        }
    )*};
}

status_as_node_error!(
    RequestError,
    ExpiredRequest,
    KeyspaceRequestError,
    UserError,
    ScanError,
    OperatorError,
);

/// What went wrong with a peer's call: the status message and, for a
/// failure in the transport (refused connection, TLS handshake), its
/// innermost cause, which says what the message ("transport error") does not.
fn describe(status: &tonic::Status) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    let mut innermost = None;
    while let Some(error) = cause {
        innermost = Some(error);
        cause = error.source();
    }
    match innermost {
        Some(root) => format!("{}: {root}", status.message()),
        None => status.message().to_string(),
    }
}

/// The node's result type.
pub type Result<T, E = NodeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use ringstore_membership::{Movement, NodeState};
    use ringstore_placement::{HostId, ReplicationStrategy};

    use super::*;

    fn host(n: u128) -> HostId {
        HostId::from_u128(n)
    }

    /// Each typed error keeps the code and the wording its call site's
    /// String variant had (clients and tests match on both).
    #[test]
    fn typed_errors_keep_the_codes_and_wording_of_the_string_variants_they_replace() {
        let rf3 = ReplicationStrategy::simple(3).expect("a valid strategy");
        let cases: Vec<(NodeError, Code, &str)> = vec![
            (
                TopologyError::OperationRunning.into(),
                Code::FailedPrecondition,
                "another topology operation is running on this node",
            ),
            (
                TopologyError::AnotherMovementUnderway(MovementsUnderway {
                    ring: vec![Movement::Leaving(host(1))],
                    alters: vec![("ks".into(), rf3.clone())],
                })
                .into(),
                Code::FailedPrecondition,
                "another range movement is under way (00000000-0000-0000-0000-000000000001 is \
                 leaving, alter of keyspace ks to SimpleStrategy:3); only one at a time",
            ),
            (
                TopologyError::LiveNodeCannotBeRemoved(host(2)).into(),
                Code::FailedPrecondition,
                "is up: removenode is for dead nodes",
            ),
            (
                TopologyError::NotInRing(host(2)).into(),
                Code::InvalidArgument,
                "is not in the ring",
            ),
            (
                TopologyError::NotNormal {
                    state: Some(NodeState::Joining),
                }
                .into(),
                Code::FailedPrecondition,
                "only a NORMAL node can be decommissioned; this one is JOINING",
            ),
            (
                TopologyError::AlterNeedsEveryNode {
                    down: vec![host(1), host(2)],
                }
                .into(),
                Code::Unavailable,
                "down: 00000000-0000-0000-0000-000000000001, 00000000-0000-0000-0000-000000000002",
            ),
            (
                TopologyError::NoPendingRing { doing: "joining" }.into(),
                Code::Internal,
                "joining, but gossip shows no pending ring yet",
            ),
            (
                RangeRepairError::AlreadyRunning { job: None }.into(),
                Code::FailedPrecondition,
                "a repair is running on this node",
            ),
            (
                RangeRepairError::ListingTimedOut(host(3)).into(),
                Code::DeadlineExceeded,
                "did not list its rows in time",
            ),
            (
                SchemaError::NotAgreed {
                    failures: vec![schema::UnconfirmedPush {
                        address: "10.0.0.1:7100".parse().expect("an address"),
                        failure: schema::PushFailure::NoAnswer(std::time::Duration::from_secs(2)),
                    }],
                }
                .into(),
                Code::DeadlineExceeded,
                "not yet on every live node (it will spread): 10.0.0.1:7100: no answer within 2s",
            ),
            (
                SnapshotError::TagTaken("t".into()).into(),
                Code::AlreadyExists,
                "snapshot t exists already",
            ),
            (
                SnapshotError::NoFiles {
                    tag: "t".into(),
                    keyspace: Some("ks".into()),
                    dir: "/d/snapshots/t".into(),
                }
                .into(),
                Code::InvalidArgument,
                "snapshot t has no files for keyspace ks in /d/snapshots/t",
            ),
            (
                OperationError::DrainWhileMoving {
                    state: NodeState::Leaving,
                }
                .into(),
                Code::FailedPrecondition,
                "this node is leaving the ring (decommission under way): draining it now",
            ),
            (
                ServingError::ClusterStarting {
                    joining: 1,
                    members: 1,
                }
                .into(),
                Code::Unavailable,
                "the cluster is still starting",
            ),
            (
                ClientTimestampError::Negative(-1).into(),
                Code::InvalidArgument,
                "timestamp -1 is negative",
            ),
            (
                StartupError::TlsOnSimulatedNetwork.into(),
                Code::InvalidArgument,
                "TLS needs the operating system's network",
            ),
            (
                RangeStreamError::NoSource(ringstore_placement::TokenRange::new(
                    ringstore_placement::Token(0),
                    ringstore_placement::Token(10),
                ))
                .into(),
                Code::Unavailable,
                "no replica to fetch range",
            ),
        ];
        for (error, code, wording) in cases {
            assert_eq!(error.code(), code, "{error}");
            assert!(error.to_string().contains(wording), "{error}");
        }
    }
}
