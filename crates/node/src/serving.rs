//! Whether this node takes writes and gossips, and if not, why.
//!
//! A node stops taking writes and gossiping (so the cluster sees it down and
//! hints its writes) for one of two reasons: an operator drained it
//! ([`crate::drain`]), or its storage failed for good and its
//! `disk_failure_policy` is `stop` ([`crate::disk_failure`]). Either way only
//! a restart brings it back, so the state only moves away from
//! [`Serving::Normal`]; a drain never hides a disk failure.

/// Whether the node takes writes (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Serving {
    /// Writes taken, gossip running.
    Normal,
    /// `ringstore drain` ran: writes refused, storage synced, gossip stopped.
    Drained,
    /// The storage failed (the engine's error) and the policy stopped the
    /// node: writes refused, gossip stopped.
    DiskFailed(String),
}

impl Serving {
    /// Whether writes are taken and gossip runs.
    pub fn is_normal(&self) -> bool {
        *self == Serving::Normal
    }
}
