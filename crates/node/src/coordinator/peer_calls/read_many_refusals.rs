//! Peers that answered `ReadMany` with `UNIMPLEMENTED` (a build from before
//! it existed, during a rolling upgrade), remembered for a while so that
//! the coordinator's coalesced reads to them go alone at once, as `Read`s,
//! instead of paying a refused call first every time.
//!
//! # Invariants
//! - A peer is remembered only after it refused; a peer never seen refusing
//!   is always offered `ReadMany`.
//! - The memory expires [`RECHECK_AFTER`] after the refusal: the next
//!   coalesced call offers `ReadMany` again, so a peer upgraded in place
//!   (same address) gets its reads coalesced again within that time.
//!
//! # Caveats
//! - Keyed by internode address, not host id: a new build at the old
//!   address is the same peer until the memory expires, which only costs
//!   coalescing, never a read.
//! - Time comes from the caller (sans-IO): tests pass their own instants.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a refusal is remembered before `ReadMany` is offered again.
pub(crate) const RECHECK_AFTER: Duration = Duration::from_secs(60);

/// The peers seen refusing `ReadMany`, with when.
#[derive(Debug, Default)]
pub(crate) struct ReadManyRefusals {
    refused_at: Mutex<HashMap<SocketAddr, Instant>>,
}

impl ReadManyRefusals {
    /// Records that `peer` refused `ReadMany` at `now`.
    pub(crate) fn refused(&self, peer: SocketAddr, now: Instant) {
        self.lock().insert(peer, now);
    }

    /// Whether `peer` refused `ReadMany` less than [`RECHECK_AFTER`] before
    /// `now`; an older refusal is forgotten.
    pub(crate) fn lacks_read_many(&self, peer: SocketAddr, now: Instant) -> bool {
        let mut refused_at = self.lock();
        match refused_at.get(&peer) {
            Some(&at) if now.saturating_duration_since(at) < RECHECK_AFTER => true,
            Some(_) => {
                refused_at.remove(&peer);
                false
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Instant>> {
        self.refused_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(i: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, i], 7101))
    }

    #[test]
    fn a_refusal_is_remembered_for_its_peer_only_until_the_recheck() {
        let refusals = ReadManyRefusals::default();
        let start = Instant::now();
        assert!(!refusals.lacks_read_many(peer(1), start));
        refusals.refused(peer(1), start);
        assert!(refusals.lacks_read_many(peer(1), start + RECHECK_AFTER / 2));
        assert!(!refusals.lacks_read_many(peer(2), start));
        assert!(!refusals.lacks_read_many(peer(1), start + RECHECK_AFTER));
        // Forgotten: offered again until it refuses again.
        assert!(!refusals.lacks_read_many(peer(1), start));
    }
}
