//! Why this node does not take a request now, though another node may: the
//! cluster is still starting (no node owns a token yet), or this node was
//! drained or stopped by a disk failure. Each is `UNAVAILABLE`: nothing was
//! applied, and the client should retry, elsewhere or later.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use tonic::Code;

/// Why this node refuses requests for now.
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    /// No node owns a token yet: the cluster is starting (or every owner
    /// was removed).
    #[error(
        "the cluster is still starting: no node owns a token yet ({joining} of {members} known \
         node(s) joining the ring, none UN); retry once `ringstore status` shows a node UN"
    )]
    ClusterStarting {
        /// The nodes joining the ring.
        joining: usize,
        /// The members gossip knows.
        members: usize,
    },

    /// An operator drained this node (`ringstore drain`).
    #[error(
        "this node is drained (ringstore drain): it accepts no writes; send them to another \
         node, or restart this one"
    )]
    Drained,

    /// This node's storage failed and `disk_failure_policy = stop` stopped
    /// it taking writes.
    #[error(
        "this node's storage failed ({error}) and it stopped taking writes \
         (disk_failure_policy = stop); send them to another node, and restart this one once \
         its disk is mended"
    )]
    DiskFailed {
        /// The storage engine's error, as the node recorded it.
        error: String,
    },
}

impl ServingError {
    /// The gRPC status code of this error: always `UNAVAILABLE`.
    pub fn code(&self) -> Code {
        Code::Unavailable
    }
}
