//! `HintWindow`: whether a write for an unreachable replica is still worth
//! hinting.
//!
//! A replica that has been down for a long time will be rebuilt or repaired
//! anyway; piling up hints for it only fills the coordinator's disk. So each
//! coordinator remembers since when *it* has seen each target down, and stops
//! hinting for a target once it has been down for longer than the window
//! (Cassandra's `max_hint_window`).
//!
//! # Across a coordinator restart
//! The down-since times live in memory: a restarted coordinator would give a
//! target that has been down for days a fresh window. So, as Cassandra 4.1
//! does with `hint_window_persistent_enabled`, the window is also measured
//! from the creation time of the oldest hint still pending for the target,
//! which the hint store keeps on disk anyway (it is the first key of the
//! target's range). The choice over persisting down-since times: nothing new
//! to persist, version or clean up, and the hints themselves are what the
//! window bounds. The consequence, also Cassandra's: a target whose hints
//! stay undelivered for a whole window (delivery paused, say) stops getting
//! new ones even while up, until its backlog drains.
//!
//! Time is a [`Duration`] since any fixed start the caller chooses (sans-IO).

use std::collections::HashMap;
use std::time::Duration;

use ringstore_placement::HostId;

/// The default window: three hours.
pub const DEFAULT_HINT_WINDOW: Duration = Duration::from_secs(3 * 60 * 60);

/// Per target, since when this coordinator has seen it down.
#[derive(Clone, Debug)]
pub struct HintWindow {
    /// How long after going down a target still gets hints.
    pub max_window: Duration,
    down_since: HashMap<HostId, Duration>,
}

impl Default for HintWindow {
    /// A [`DEFAULT_HINT_WINDOW`] of three hours.
    fn default() -> HintWindow {
        HintWindow::new(DEFAULT_HINT_WINDOW)
    }
}

impl HintWindow {
    /// A window of `max_window`, with every target up.
    pub fn new(max_window: Duration) -> HintWindow {
        HintWindow {
            max_window,
            down_since: HashMap::new(),
        }
    }

    /// `host` is seen down at `now`. Repeated calls keep the first time: the
    /// window runs from when it went down, not from the latest report.
    pub fn mark_down(&mut self, host: HostId, now: Duration) {
        self.down_since.entry(host).or_insert(now);
    }

    /// `host` is seen up: its window closes, and a later `mark_down` starts a
    /// new one.
    pub fn mark_up(&mut self, host: HostId) {
        self.down_since.remove(&host);
    }

    /// Since when `host` has been seen down, if it is.
    pub fn down_since(&self, host: HostId) -> Option<Duration> {
        self.down_since.get(&host).copied()
    }

    /// Whether a write for `host` that could not be delivered at `now` should
    /// be hinted: no if `host` has been seen down for the window or longer, or
    /// if the oldest hint still pending for it is that old
    /// (`oldest_hint_age`, from [`HintStore::oldest_hint`](crate::HintStore::oldest_hint));
    /// yes otherwise — an up target that merely timed out included.
    pub fn should_hint(
        &self,
        host: HostId,
        now: Duration,
        oldest_hint_age: Option<Duration>,
    ) -> bool {
        let down_for = self
            .down_since(host)
            .map_or(Duration::ZERO, |since| now.saturating_sub(since));
        down_for.max(oldest_hint_age.unwrap_or_default()) < self.max_window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_default_window_is_three_hours() {
        assert_eq!(HintWindow::default().max_window, 3 * HOUR);
    }

    #[test]
    fn a_target_that_merely_timed_out_is_always_hinted() {
        let window = HintWindow::default();
        assert!(window.should_hint(HostId::from_u128(1), 100 * HOUR, None));
    }

    #[test]
    fn hints_stop_once_the_target_has_been_down_longer_than_the_window() {
        let host = HostId::from_u128(1);
        let mut window = HintWindow::new(3 * HOUR);
        window.mark_down(host, HOUR);
        assert!(window.should_hint(host, HOUR, None));
        assert!(window.should_hint(host, 4 * HOUR - Duration::from_micros(1), None));
        assert!(!window.should_hint(host, 4 * HOUR, None));
        assert!(!window.should_hint(host, 40 * HOUR, None));
    }

    #[test]
    fn repeated_down_reports_do_not_restart_the_window() {
        let host = HostId::from_u128(1);
        let mut window = HintWindow::new(3 * HOUR);
        window.mark_down(host, Duration::ZERO);
        window.mark_down(host, 2 * HOUR);
        assert!(!window.should_hint(host, 3 * HOUR, None));
    }

    #[test]
    fn coming_back_up_closes_the_window_and_a_new_outage_opens_a_new_one() {
        let host = HostId::from_u128(1);
        let mut window = HintWindow::new(3 * HOUR);
        window.mark_down(host, Duration::ZERO);
        assert!(!window.should_hint(host, 5 * HOUR, None));
        window.mark_up(host);
        assert!(window.should_hint(host, 5 * HOUR, None));
        window.mark_down(host, 5 * HOUR);
        assert!(window.should_hint(host, 7 * HOUR, None));
        assert!(!window.should_hint(host, 8 * HOUR, None));
        assert!(window.should_hint(HostId::from_u128(2), 8 * HOUR, None));
    }

    #[test]
    fn after_a_restart_the_window_is_measured_from_the_oldest_pending_hint() {
        // A fresh window (the coordinator just restarted) has no down time
        // for the target, but its oldest hint is four hours old.
        let host = HostId::from_u128(1);
        let window = HintWindow::new(3 * HOUR);
        assert!(!window.should_hint(host, Duration::ZERO, Some(4 * HOUR)));
        assert!(window.should_hint(host, Duration::ZERO, Some(2 * HOUR)));
        assert!(!window.should_hint(host, Duration::ZERO, Some(3 * HOUR)));
    }

    #[test]
    fn the_longer_of_the_down_time_and_the_oldest_hint_age_counts() {
        let host = HostId::from_u128(1);
        let mut window = HintWindow::new(3 * HOUR);
        window.mark_down(host, Duration::ZERO);
        // Down for four hours, but its hints were delivered meanwhile: still out.
        assert!(!window.should_hint(host, 4 * HOUR, Some(HOUR)));
        // Down for one hour, oldest hint from before a restart four hours ago: out.
        assert!(!window.should_hint(host, HOUR, Some(4 * HOUR)));
        assert!(window.should_hint(host, HOUR, Some(2 * HOUR)));
    }
}
