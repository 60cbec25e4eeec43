//! The clock a [`Membership`](crate::Membership) reads: injected, so the
//! node's test offset and the simulation's per-node skew reach gossip too.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A wall-clock reading: microseconds since the Unix epoch, as the node's
/// clock (the one its write timestamps come from) reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WallTime(pub i64);

/// What membership needs from a clock: the node's wall time, which the
/// offsets are estimated between, and a monotonic time, which round trips and
/// sample ages are measured with (so a wall clock that steps does not make a
/// round trip negative or a sample young again).
pub trait Clock: Send + Sync {
    /// The node's wall time.
    fn wall(&self) -> WallTime;
    /// Time since an arbitrary origin; never goes back.
    fn monotonic(&self) -> Duration;
}

/// The operating system's clocks.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// The system clock, as a shareable [`Clock`].
    pub fn shared() -> Arc<dyn Clock> {
        Arc::new(SystemClock {
            origin: Instant::now(),
        })
    }
}

impl Clock for SystemClock {
    fn wall(&self) -> WallTime {
        WallTime(system_micros())
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The system's wall clock in microseconds since the epoch (0 before it).
pub fn system_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
