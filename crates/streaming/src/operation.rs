//! The topology operations that stream ranges, as one type.
//!
//! An operation's name does three jobs: it keys its checkpoints in the
//! meta tree (`stream:<name>`), it marks an unfinished bootstrap so a
//! restarted node resumes the same one, and it travels in `FetchRanges` and
//! `StreamRange` requests so the source can show what it is sending for.
//! The text form is therefore part of the storage and wire formats and must
//! not change: `bootstrap`, `replace:<host id>`, `decommission:<host id>`,
//! `removenode:<host id>`, `alter:<keyspace id>`. Everything inside the node handles the enum;
//! text is parsed once, at the edge, and anything else is refused.

use std::fmt;
use std::str::FromStr;

use ringstore_cell::KeyspaceId;
use ringstore_placement::HostId;

/// A topology operation that streams ranges to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamOperation {
    /// A fresh node streams the ranges its new tokens gain.
    Bootstrap,
    /// A node takes over a dead node's tokens and streams its ranges.
    Replace {
        /// The dead node.
        replaced: HostId,
    },
    /// A node leaves; the nodes that gain its ranges stream them.
    Decommission {
        /// The leaving node.
        leaving: HostId,
    },
    /// A dead node is removed; the nodes that gain its ranges stream them
    /// from the survivors.
    RemoveNode {
        /// The removed node.
        removed: HostId,
    },
    /// A keyspace's replication changes; every node streams the ranges the
    /// new placement gives it. A later alter of the same keyspace reuses
    /// the name, which is safe because a finished fetch clears its
    /// checkpoints.
    Alter {
        /// The altered keyspace.
        keyspace: KeyspaceId,
    },
}

impl StreamOperation {
    /// The operation's kind without its host, as `netstats` shows it
    /// (`bootstrap`, `replace`, `decommission`, `removenode`, `alter`).
    pub fn kind(self) -> &'static str {
        match self {
            StreamOperation::Bootstrap => "bootstrap",
            StreamOperation::Replace { .. } => "replace",
            StreamOperation::Decommission { .. } => "decommission",
            StreamOperation::RemoveNode { .. } => "removenode",
            StreamOperation::Alter { .. } => "alter",
        }
    }

    /// What the operation is about, after the kind in its name: the node
    /// it concerns, or the altered keyspace; `None` for a bootstrap.
    fn subject(self) -> Option<String> {
        match self {
            StreamOperation::Bootstrap => None,
            StreamOperation::Replace { replaced: host }
            | StreamOperation::Decommission { leaving: host }
            | StreamOperation::RemoveNode { removed: host } => Some(host.to_string()),
            StreamOperation::Alter { keyspace } => Some(keyspace.to_string()),
        }
    }
}

impl fmt::Display for StreamOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.subject() {
            None => f.write_str(self.kind()),
            Some(subject) => write!(f, "{}:{subject}", self.kind()),
        }
    }
}

/// A text that names no stream operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a stream operation (bootstrap, replace:<host id>, decommission:<host id>, \
     removenode:<host id> or alter:<keyspace id>)"
)]
pub struct UnknownOperation(pub String);

impl FromStr for StreamOperation {
    type Err = UnknownOperation;

    fn from_str(text: &str) -> Result<StreamOperation, UnknownOperation> {
        let unknown = || UnknownOperation(text.chars().take(200).collect());
        if text == "bootstrap" {
            return Ok(StreamOperation::Bootstrap);
        }
        let (kind, subject) = text.split_once(':').ok_or_else(unknown)?;
        if kind == "alter" {
            let keyspace = subject.parse::<uuid::Uuid>().map_err(|_| unknown())?;
            return Ok(StreamOperation::Alter {
                keyspace: KeyspaceId(keyspace),
            });
        }
        let host: HostId = subject.parse().map_err(|_| unknown())?;
        match kind {
            "replace" => Ok(StreamOperation::Replace { replaced: host }),
            "decommission" => Ok(StreamOperation::Decommission { leaving: host }),
            "removenode" => Ok(StreamOperation::RemoveNode { removed: host }),
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_round_trips_through_its_stored_name() {
        let host = HostId::from_u128(7);
        for operation in [
            StreamOperation::Bootstrap,
            StreamOperation::Replace { replaced: host },
            StreamOperation::Decommission { leaving: host },
            StreamOperation::RemoveNode { removed: host },
            StreamOperation::Alter {
                keyspace: KeyspaceId(uuid::Uuid::from_u128(9)),
            },
        ] {
            let name = operation.to_string();
            assert_eq!(name.parse::<StreamOperation>(), Ok(operation), "{name}");
        }
    }

    #[test]
    fn the_stored_names_keep_their_format() {
        let host = HostId::from_u128(7);
        assert_eq!(StreamOperation::Bootstrap.to_string(), "bootstrap");
        assert_eq!(
            StreamOperation::Decommission { leaving: host }.to_string(),
            format!("decommission:{host}")
        );
        assert_eq!(
            StreamOperation::RemoveNode { removed: host }.kind(),
            "removenode"
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for text in [
            "",
            "stream",
            "bootstrap:",
            "replace",
            "replace:not-a-uuid",
            "leave:00000000-0000-0000-0000-000000000007",
            "alter:",
            "alter:users",
        ] {
            assert!(text.parse::<StreamOperation>().is_err(), "{text:?}");
        }
    }
}
