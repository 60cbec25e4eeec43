//! The label values of the recorded families, as types.

/// A client request, by RPC (the `operation` label of the client families).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `Get`.
    Get,
    /// `Put`.
    Put,
    /// `Delete`.
    Delete,
    /// `Batch` (one sample per batch, whatever its size).
    Batch,
    /// `Scan` (one sample per page).
    Scan,
    /// `PutIf`: a compare-and-set.
    PutIf,
    /// `DeleteIf`: a conditional delete.
    DeleteIf,
    /// `GetSerial`: a linearizable read.
    GetSerial,
}

impl Operation {
    /// Every operation, in label order.
    pub const ALL: [Operation; 8] = [
        Operation::Get,
        Operation::Put,
        Operation::Delete,
        Operation::Batch,
        Operation::Scan,
        Operation::PutIf,
        Operation::DeleteIf,
        Operation::GetSerial,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Operation::Get => "get",
            Operation::Put => "put",
            Operation::Delete => "delete",
            Operation::Batch => "batch",
            Operation::Scan => "scan",
            Operation::PutIf => "put_if",
            Operation::DeleteIf => "delete_if",
            Operation::GetSerial => "get_serial",
        }
    }

    /// Its position in [`Operation::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a coordinator runs for one key: a read or a write (a put, a delete,
/// or one mutation of a batch). The `operation` label of the coordinator
/// families, and the columns of `proxyhistograms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoordinatorOp {
    /// A read of one key.
    Read,
    /// A write of one key.
    Write,
}

impl CoordinatorOp {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            CoordinatorOp::Read => "read",
            CoordinatorOp::Write => "write",
        }
    }
}

/// What a replica does locally for one key of a keyspace (the `operation`
/// label of the keyspace families, `tablestats`' read and write counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalOp {
    /// A read (data or digest) of one key.
    Read,
    /// A write (applied mutation) of one key.
    Write,
}

impl LocalOp {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            LocalOp::Read => "read",
            LocalOp::Write => "write",
        }
    }
}

/// An internode call this node makes (the `rpc` label of the internode
/// latency family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InternodeRpc {
    /// `Apply`: replica writes.
    Apply,
    /// `Read`: replica reads and digests.
    Read,
    /// `ReadMany`: replica reads and digests that queued behind busy call
    /// slots, sent together.
    ReadMany,
    /// `ReadRange`: replica pages of a scan.
    ReadRange,
    /// `Apply` of a batch of hints, replayed to the node they were kept for.
    HintReplay,
    /// `TakeHints`: hints handed to another node by a node that leaves.
    TakeHints,
    /// `StreamRange`, until the source answers with the start of the stream.
    StreamRange,
    /// A repair call (`BuildTree`, `TreeNodes`, `ReadCells`, `Apply` of
    /// repaired rows).
    Repair,
    /// `PaxosPrepare`: round 1 of a compare-and-set or serial read.
    PaxosPrepare,
    /// `PaxosAccept`: round 2 of a compare-and-set.
    PaxosAccept,
    /// `PaxosCommit`: a chosen proposal sent to a replica.
    PaxosCommit,
}

impl InternodeRpc {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            InternodeRpc::Apply => "apply",
            InternodeRpc::Read => "read",
            InternodeRpc::ReadMany => "read_many",
            InternodeRpc::ReadRange => "read_range",
            InternodeRpc::HintReplay => "hint_replay",
            InternodeRpc::TakeHints => "take_hints",
            InternodeRpc::StreamRange => "stream_range",
            InternodeRpc::Repair => "repair",
            InternodeRpc::PaxosPrepare => "paxos_prepare",
            InternodeRpc::PaxosAccept => "paxos_accept",
            InternodeRpc::PaxosCommit => "paxos_commit",
        }
    }
}

/// A stage of work, as `tpstats` lists them (the `stage` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Client requests being coordinated (every `Client` RPC).
    ClientRequest,
    /// Replica writes received from coordinators (`Internode.Apply`,
    /// read repairs and replayed hints included).
    InternodeApply,
    /// Replica reads received from coordinators (`Internode.Read`,
    /// `Internode.ReadMany`).
    InternodeRead,
    /// Blocking read repairs a coordinator runs.
    ReadRepair,
    /// Hint deliveries (sampled: pending hints and hints replayed).
    HintDelivery,
    /// Range streams (sampled: sessions running, bytes moved).
    Streaming,
    /// Passes over stored cells: garbage collection of a keyspace and the
    /// building of a repair's Merkle tree (Cassandra's compactions and
    /// validations).
    Compaction,
}

impl Stage {
    /// Every stage, in `tpstats` order.
    pub const ALL: [Stage; 7] = [
        Stage::ClientRequest,
        Stage::InternodeApply,
        Stage::InternodeRead,
        Stage::ReadRepair,
        Stage::HintDelivery,
        Stage::Streaming,
        Stage::Compaction,
    ];

    /// The label value, and the pool name `tpstats` prints.
    pub fn label(self) -> &'static str {
        match self {
            Stage::ClientRequest => "ClientRequest",
            Stage::InternodeApply => "InternodeApply",
            Stage::InternodeRead => "InternodeRead",
            Stage::ReadRepair => "ReadRepair",
            Stage::HintDelivery => "HintDelivery",
            Stage::Streaming => "Streaming",
            Stage::Compaction => "CompactionExecutor",
        }
    }

    /// Whether the node counts this stage itself ([`crate::StageGuard`])
    /// rather than sampling it from another part of the node.
    pub fn is_recorded(self) -> bool {
        !matches!(self, Stage::HintDelivery | Stage::Streaming)
    }
}

/// What a node dropped undone because whoever waited for it had stopped
/// waiting (the `kind` label of `ringstore_dropped_expired_total`; the
/// dropped counts of `tpstats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expired {
    /// A client write read after its client's deadline: refused unstamped.
    ClientRequest,
    /// A replica write read after its coordinator's deadline: not applied
    /// (the coordinator hints it).
    Mutation,
}

impl Expired {
    /// Every kind, in label order.
    pub const ALL: [Expired; 2] = [Expired::ClientRequest, Expired::Mutation];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Expired::ClientRequest => "client_request",
            Expired::Mutation => "mutation",
        }
    }
}

/// Why a client request was refused by client authentication (the
/// `reason` label of `ringstore_client_auth_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthRefusal {
    /// The request carried no user name or no password.
    MissingCredentials,
    /// An unknown user or a wrong password (not told apart: a failed login).
    BadCredentials,
    /// Authenticated, but without the permission the request needs.
    PermissionDenied,
    /// Refused without a password check: too many failed logins from its
    /// source or as its user, or too many checks pending.
    Throttled,
}

impl AuthRefusal {
    /// Every reason, in label order.
    pub const ALL: [AuthRefusal; 4] = [
        AuthRefusal::MissingCredentials,
        AuthRefusal::BadCredentials,
        AuthRefusal::PermissionDenied,
        AuthRefusal::Throttled,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            AuthRefusal::MissingCredentials => "missing_credentials",
            AuthRefusal::BadCredentials => "bad_credentials",
            AuthRefusal::PermissionDenied => "permission_denied",
            AuthRefusal::Throttled => "throttled",
        }
    }
}
