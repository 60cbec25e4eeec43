//! Why a topology change (bootstrap, replace, join, decommission,
//! removenode, cleanup, keyspace alter, or the preview of one) was refused
//! or failed, with the hosts, keyspaces and counts involved; and the range
//! movements under way that such a refusal names.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use std::fmt;

use ringstore_membership::{Movement, NodeState};
use ringstore_placement::{HostId, PlacementError, ReplicationStrategy, TokenRange};
use tonic::Code;

/// The range movements under way that stand in the way of another: those
/// gossip shows (joins, leaves, removals, replacements) and the keyspace
/// alters the schema shows. Displayed as a comma-separated list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MovementsUnderway {
    /// The movements of other live nodes, as gossip shows them.
    pub ring: Vec<Movement>,
    /// The keyspace alters under way: each keyspace's name and the
    /// replication it is moving to.
    pub alters: Vec<(String, ReplicationStrategy)>,
}

impl MovementsUnderway {
    /// Whether nothing is under way.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.alters.is_empty()
    }
}

impl fmt::Display for MovementsUnderway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ring = self.ring.iter().map(|m| m.to_string());
        let alters = self
            .alters
            .iter()
            .map(|(keyspace, to)| format!("alter of keyspace {keyspace} to {to}"));
        let all: Vec<String> = ring.chain(alters).collect();
        f.write_str(&all.join(", "))
    }
}

/// Why a topology change was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// This node already runs a topology change (a decommission, removenode,
    /// cleanup or alter): one at a time per node.
    #[error("another topology operation is running on this node")]
    OperationRunning,

    /// A range movement is under way in the cluster: one at a time.
    #[error(
        "another range movement is under way ({0}); only one at a time: try again once it is done"
    )]
    AnotherMovementUnderway(MovementsUnderway),

    /// The change would leave fewer nodes than `keyspace` replicates to (in
    /// some data center; its pending replication included).
    #[error(
        "keyspace {keyspace} replicates to more nodes than would remain ({remaining}): \
         lower its replication first"
    )]
    TooFewNodesWouldRemain {
        /// The keyspace.
        keyspace: String,
        /// The nodes the ring would keep.
        remaining: usize,
    },

    /// An alter whose announcement was refused, reported to a caller that
    /// already had the reason (through the announcement channel).
    #[error("the alter of keyspace {keyspace} was refused")]
    AlterRefused {
        /// The keyspace.
        keyspace: String,
    },

    /// The keyspace is being altered to another replication than the one
    /// asked for.
    #[error(
        "keyspace {keyspace} is being altered to {pending}; finish that alter first \
         (ask for it again to resume it)"
    )]
    AlterPending {
        /// The keyspace.
        keyspace: String,
        /// The replication the pending alter moves to.
        pending: ReplicationStrategy,
    },

    /// The ring has too few nodes (in some data center) for the replication.
    #[error("replication {0} needs more nodes (in some data center) than the ring has")]
    StrategyDoesNotFit(ReplicationStrategy),

    /// An alter needs every node of the ring up; these are down.
    #[error("a keyspace alter needs every node up; down: {}", join(down))]
    AlterNeedsEveryNode {
        /// The nodes of the ring not up.
        down: Vec<HostId>,
    },

    /// An alter moved the data and committed the new replication, but not
    /// every node confirmed the committed schema, so no copy was deleted.
    #[error(
        "the data has moved and the new replication is committed, but not every \
         node confirmed it, so no copy was deleted: run `cleanup` on each node \
         once `keyspace list` shows the new replication everywhere ({source})"
    )]
    AlterCommittedUnconfirmed {
        /// Why the schema push did not reach agreement.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// This node announced a movement (`doing`: joining, leaving,
    /// removing), but its view has no pending ring.
    #[error("{doing}, but gossip shows no pending ring yet")]
    NoPendingRing {
        /// The movement, as a present participle.
        doing: &'static str,
    },

    /// The node to replace owns no tokens.
    #[error("node {dead} ({address}) owns no tokens: there is nothing to replace")]
    NothingToReplace {
        /// The node to replace.
        dead: HostId,
        /// Its `replace_address`, as configured.
        address: String,
    },

    /// `replace_address` is neither a host id nor an IP address.
    #[error("replace_address {address:?} is neither a host id nor an IP address")]
    BadReplaceAddress {
        /// The setting.
        address: String,
    },

    /// The node `replace_address` names is up: only a dead node is replaced.
    #[error("node {host} ({address}) is up: only a dead node can be replaced")]
    ReplacedNodeUp {
        /// The node.
        host: HostId,
        /// `replace_address`, as configured.
        address: String,
    },

    /// Gossip knows no node `replace_address` names.
    #[error("no node {address} is known to the cluster: nothing to replace")]
    UnknownReplaceAddress {
        /// `replace_address`, as configured.
        address: String,
    },

    /// `replace_address` and `initial_token` are both set.
    #[error(
        "replace_address and initial_token exclude each other: a replacement takes the dead \
         node's tokens"
    )]
    ReplaceWithInitialToken,

    /// Tokens `initial_token` lists are owned by other nodes.
    #[error("{taken} of the initial_token tokens are already owned by other nodes")]
    InitialTokensTaken {
        /// How many of them.
        taken: usize,
    },

    /// `initial_token` differs from the tokens this node saved at its first
    /// start.
    #[error(
        "initial_token lists {configured} tokens that differ from the {saved} this node saved \
         at its first start; a node cannot change its tokens (remove initial_token, or use a \
         fresh data directory)"
    )]
    InitialTokensChanged {
        /// How many tokens `initial_token` lists.
        configured: usize,
        /// How many this node saved.
        saved: usize,
    },

    /// Every attempt to choose tokens collided with tokens other nodes took.
    #[error("could not choose tokens that no other node holds ({attempts} attempts)")]
    NoFreeTokens {
        /// The attempts made.
        attempts: u32,
    },

    /// The token allocation settings (the local data center and its
    /// replication factor) make no replication strategy.
    #[error("{0}")]
    AllocationSettings(#[source] PlacementError),

    /// The balanced allocator could not choose tokens for a planned join.
    #[error("cannot allocate tokens: {0}")]
    TokensNotAllocated(#[source] PlacementError),

    /// A preview asked of a node whose ring is empty.
    #[error("the ring is empty: there is nothing to plan yet")]
    NothingToPlan,

    /// The node a change names is not in the ring.
    #[error("node {0} is not in the ring")]
    NotInRing(HostId),

    /// `removenode` asked to remove the node running it.
    #[error("a node cannot remove itself: use decommission")]
    CannotRemoveSelf,

    /// No member of that host id is known to gossip.
    #[error("no node {0} is known to the cluster")]
    UnknownNode(HostId),

    /// `removenode` of a node that is up.
    #[error("node {0} is up: removenode is for dead nodes; decommission a live one")]
    LiveNodeCannotBeRemoved(HostId),

    /// `removenode` of a node already removed, or that never joined.
    #[error("node {0} is not in the ring (already removed or never joined)")]
    AlreadyRemoved(HostId),

    /// A decommission of a node that is not `Normal` (`None`: not in its own
    /// view).
    #[error(
        "only a NORMAL node can be decommissioned; this one is {}",
        state.map_or("unknown".into(), |s| s.to_string().to_uppercase())
    )]
    NotNormal {
        /// The node's state.
        state: Option<NodeState>,
    },

    /// A cleanup on a node that has not joined (its ring is empty).
    #[error("the ring is empty: this node has not joined yet")]
    CleanupBeforeJoin,

    /// A cleanup while a range movement is under way.
    #[error(
        "cleanup is refused while a range movement is under way ({0}): run it once the \
         movement is done"
    )]
    CleanupDuringMovement(MovementsUnderway),

    /// A cleanup while the ring has a pending ring.
    #[error(
        "cleanup is refused while the ring has pending ranges: run it once the movement is done"
    )]
    CleanupWithPendingRanges,

    /// The ring changed while a keyspace was cleaned: the cleanup stopped.
    #[error(
        "the ring changed while cleaning keyspace {keyspace}: stopped after removing \
         {keys_removed} keys; run cleanup again once the ring is settled"
    )]
    RingChangedDuringCleanup {
        /// The keyspace being cleaned.
        keyspace: String,
        /// The keys it had removed.
        keys_removed: u64,
    },

    /// A removenode or replace whose dead node's ranges still have
    /// survivors that did not finish their compare-and-sets there
    /// (`topology/proposals.rs`).
    #[error(
        "range {range} of keyspace {keyspace}: survivors {} did not finish their \
         compare-and-sets there, so a value the dead node helped choose could be lost: \
         bring them up and run the change again",
        join(unfinished)
    )]
    ProposalsUnfinished {
        /// The keyspace.
        keyspace: String,
        /// The first range short of survivors.
        range: TokenRange,
        /// Its survivors that did not finish (down, unreachable, or a
        /// round failed).
        unfinished: Vec<HostId>,
    },

    /// A cleanup of a keyspace being altered.
    #[error(
        "cleanup of keyspace {keyspace} is refused while it is being altered to {pending}: \
         run it once the alter is done"
    )]
    CleanupDuringAlter {
        /// The keyspace.
        keyspace: String,
        /// The replication it is moving to.
        pending: ReplicationStrategy,
    },
}

impl TopologyError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        use TopologyError as E;
        match self {
            E::BadReplaceAddress { .. }
            | E::ReplaceWithInitialToken
            | E::InitialTokensTaken { .. }
            | E::InitialTokensChanged { .. }
            | E::AllocationSettings(_)
            | E::TokensNotAllocated(_)
            | E::NotInRing(_)
            | E::UnknownNode(_) => Code::InvalidArgument,
            E::AlterNeedsEveryNode { .. } | E::AlterCommittedUnconfirmed { .. } => {
                Code::Unavailable
            }
            E::NoPendingRing { .. } | E::NoFreeTokens { .. } => Code::Internal,
            E::OperationRunning
            | E::AnotherMovementUnderway(_)
            | E::TooFewNodesWouldRemain { .. }
            | E::AlterRefused { .. }
            | E::AlterPending { .. }
            | E::StrategyDoesNotFit(_)
            | E::NothingToReplace { .. }
            | E::ReplacedNodeUp { .. }
            | E::UnknownReplaceAddress { .. }
            | E::NothingToPlan
            | E::CannotRemoveSelf
            | E::LiveNodeCannotBeRemoved(_)
            | E::AlreadyRemoved(_)
            | E::NotNormal { .. }
            | E::CleanupBeforeJoin
            | E::CleanupDuringMovement(_)
            | E::CleanupWithPendingRanges
            | E::RingChangedDuringCleanup { .. }
            | E::CleanupDuringAlter { .. } => Code::FailedPrecondition,
            E::ProposalsUnfinished { .. } => Code::Unavailable,
        }
    }
}

/// `hosts` as a comma-separated list.
fn join(hosts: &[HostId]) -> String {
    hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
