//! Counters of gossip traffic and of what was dropped.

use crate::envelope::Rejection;

/// What one node's gossip sent, received and dropped since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MembershipStats {
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Bytes sent (whole datagrams).
    pub bytes_sent: u64,
    /// Datagrams received, good or bad.
    pub packets_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Dropped: too short, unknown format, undecodable body.
    pub dropped_malformed: u64,
    /// Dropped: another cluster's.
    pub dropped_foreign_cluster: u64,
    /// Dropped: failed authentication.
    pub dropped_bad_auth: u64,
    /// Dropped: replayed.
    pub dropped_replay: u64,
    /// Packets foca refused (stale, from ourselves, undecodable member data).
    pub swim_errors: u64,
    /// Metadata chunks or blobs that were inconsistent or undecodable.
    pub metadata_rejected: u64,
    /// Records refused as forgeries: not signed by the keys they name, or
    /// by keys that may not speak for their host id.
    pub metadata_forged: u64,
    /// Records of removed nodes refused.
    pub metadata_refused: u64,
    /// Claims about a node seen up (or about this node) refused.
    pub claims_refused: u64,
    /// Packets from removed nodes dropped.
    pub dropped_removed: u64,
    /// Rings built: for a record new to this node, or one whose tokens,
    /// state, generation, location or takeovers changed; not for a load
    /// or address update.
    pub ring_builds: u64,
}

impl MembershipStats {
    pub(crate) fn count_rejection(&mut self, rejection: Rejection) {
        let counter = match rejection {
            Rejection::Malformed => &mut self.dropped_malformed,
            Rejection::ForeignCluster => &mut self.dropped_foreign_cluster,
            Rejection::BadAuth => &mut self.dropped_bad_auth,
            Rejection::Replay => &mut self.dropped_replay,
        };
        *counter += 1;
    }

    /// All packets dropped before reaching the protocol.
    pub fn dropped(&self) -> u64 {
        self.dropped_malformed
            + self.dropped_foreign_cluster
            + self.dropped_bad_auth
            + self.dropped_replay
            + self.dropped_removed
    }
}
