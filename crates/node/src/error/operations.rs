//! Why an operator's command to a running node was refused: changing its
//! log levels, draining it, reloading its secrets.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use ringstore_membership::NodeState;
use tonic::Code;

/// Why an operator's command was refused.
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    /// The process installed no log level control (a test embedding nodes).
    #[error("this process's log levels cannot be changed")]
    LogLevelsFixed,

    /// Not a log level.
    #[error("unknown log level {level:?}: one of {}", known.join(", "))]
    UnknownLogLevel {
        /// The level asked for.
        level: String,
        /// The levels there are.
        known: &'static [&'static str],
    },

    /// A log target that is not a module path.
    #[error("{0:?} is not a module path (letters, digits, _ and ::)")]
    NotAModulePath(String),

    /// The log filter made from the request does not parse.
    #[error("log filter {filter:?}: {source}")]
    BadLogFilter {
        /// The filter.
        filter: String,
        /// Why the process's log control refused it.
        #[source]
        source: FilterError,
    },

    /// A drain of a node that is joining or leaving the ring: it would
    /// abort that and stop the node.
    #[error(
        "this node is {}: draining it now would abort that and stop the node; drain it once \
         `status` shows it UN",
        moving(*state)
    )]
    DrainWhileMoving {
        /// The node's state (joining or leaving).
        state: NodeState,
    },

    /// A secret reload on a node that started without a cluster secret.
    #[error("this node started without a cluster secret: restart it to add one")]
    NoClusterSecret,
}

impl OperationError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            OperationError::UnknownLogLevel { .. }
            | OperationError::NotAModulePath(_)
            | OperationError::BadLogFilter { .. } => Code::InvalidArgument,
            OperationError::LogLevelsFixed
            | OperationError::DrainWhileMoving { .. }
            | OperationError::NoClusterSecret => Code::FailedPrecondition,
        }
    }
}

/// What a node in `state` is doing to the ring.
fn moving(state: NodeState) -> String {
    match state {
        NodeState::Joining => "joining the ring (bootstrap or replace under way)".into(),
        NodeState::Leaving => "leaving the ring (decommission under way)".into(),
        other => format!(
            "{} (a range movement under way)",
            other.to_string().to_uppercase()
        ),
    }
}

/// Why the process's log control refused a filter: the logging library's
/// own error (the binary installs the control, so the node cannot name its
/// type).
pub type FilterError = Box<dyn std::error::Error + Send + Sync>;
