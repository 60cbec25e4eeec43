//! The ring a change has just replaced, kept for `ring_delay` after the
//! change: writes go to its replicas too meanwhile.
//!
//! # Why
//! A range movement ends when its node gossips its new state (`Normal`
//! after a join, `Left` after a decommission), and coordinators learn it at
//! different moments. A coordinator that has switched sends a write to the
//! new ring's replicas and waits for a quorum of them; one that has not
//! yet reads a quorum of the old ring's. The two quorums need not share a
//! replica, so with a replica that missed the write the read returns an
//! older value than one acknowledged before it began. The whole-cluster
//! simulation found exactly that at the end of a join and of a
//! decommission (soak seeds 459 and 507). So for `ring_delay` after a
//! switch — the time every node is given to see a gossiped change, as
//! before a movement's streaming starts — a write also goes to the replaced
//! ring's live replicas, waiting for one more acknowledgement per replica
//! only that ring has, as it does for pending replicas during the movement
//! itself: any write acknowledged then is on a quorum of both rings. A
//! replica only the replaced ring has that is down is skipped, not waited
//! for: a reader still on the old ring cannot count it either, so its
//! quorum holds the other two, which any quorum of the new ring meets.
//!
//! # Caveats
//! - A coordinator cut off from gossip for longer than `ring_delay` at the
//!   switch still places requests with the old ring once it is back; its
//!   replicas' answers tell it so, and it waits for gossip and tries again
//!   ([`crate::ring_lag`]).
//! - Availability pays for it: a live replica only the replaced ring has is
//!   pending, so a write needs its acknowledgement or one more from the
//!   others. After a decommission that replica is the node that left; it
//!   stays up until every live node has seen its `Left` (asked, not
//!   assumed), and one `ring_delay` more, so that every coordinator has
//!   closed its window by then (the simulation found writes failing when it
//!   stopped one `ring_delay` after `Left` (seed 179), and when `Left` took
//!   longer than that to reach a node (seed 1815)), and once it is seen down
//!   it is skipped (seed 703: a coordinator still counting on it after it
//!   stopped, with a disk full elsewhere, failed its writes). Between its
//!   stop and that verdict a `QUORUM` write needs every natural replica.
//! - "Down" is this coordinator's verdict: a replaced-ring replica it cannot
//!   reach but an old-ring reader can would be missed (two faults at once:
//!   a late view and a partial partition).
//! - Each change replaces the one before: two switches within `ring_delay`
//!   keep only the later one's predecessor.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringstore_placement::Ring;
use tokio::time::Instant;

/// The ring replaced last, and when.
#[derive(Default)]
pub struct SettlingRing {
    /// Held only to read or replace, never across an await.
    replaced: Mutex<Option<(Arc<Ring>, Instant)>>,
}

impl SettlingRing {
    /// The ring `current` replaced, if that was less than `settle` ago.
    pub fn previous(&self, current: &Ring, settle: Duration) -> Option<Arc<Ring>> {
        let replaced = self.replaced.lock().unwrap_or_else(PoisonError::into_inner);
        let (ring, at) = replaced.as_ref()?;
        let recent = at.elapsed() < settle;
        (recent && ring.checksum() != current.checksum()).then(|| Arc::clone(ring))
    }

    /// Notes that `old` was replaced now (the node's task that watches its
    /// view calls it at every ring switch).
    pub fn replaced(&self, old: Arc<Ring>) {
        *self.replaced.lock().unwrap_or_else(PoisonError::into_inner) = Some((old, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::{HostId, Location, RingMember, Token};

    fn ring(tokens: &[i64]) -> Ring {
        let location = Location {
            dc: "dc1".into(),
            rack: "rack1".into(),
        };
        let tokens = tokens.iter().map(|&t| Token(t)).collect();
        let member = RingMember::new(HostId::from_u128(1), location, tokens);
        Ring::new(1, [member]).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn the_replaced_ring_counts_for_the_settle_time_only() {
        let settling = SettlingRing::default();
        let (old, new) = (Arc::new(ring(&[1, 2])), ring(&[1, 2, 3]));
        let settle = Duration::from_secs(3);
        assert!(settling.previous(&new, settle).is_none(), "no switch yet");
        settling.replaced(old.clone());
        let previous = settling.previous(&new, settle).expect("just replaced");
        assert_eq!(previous.checksum(), old.checksum());
        assert!(
            settling.previous(&old, settle).is_none(),
            "not while current"
        );
        tokio::time::advance(settle).await;
        assert!(settling.previous(&new, settle).is_none(), "settled");
    }
}
