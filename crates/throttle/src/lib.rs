//! A byte-rate token bucket driven by the caller's clock.
//!
//! Hint replay (`ringstore-hints`) and range streaming (`ringstore-streaming`)
//! both pace the bytes they send with it. It lives in a crate of its own, at
//! the bottom of the workspace with no dependencies at all, so that neither
//! borrows it from the other.
//!
//! # Design
//! Tokens accrue at `bytes_per_second` up to a bucket of [`BURST`] worth
//! (100 ms), so after any idle period at most 100 ms of extra traffic goes out
//! at once and the rate holds over short windows too. A send may be larger
//! than the bucket (a 64 KiB batch at 100 KiB/s): it is allowed once the
//! bucket is full (or holds `bytes`, whichever is less), and
//! [`consume`](Throttle::consume) may then drive the balance negative — a
//! debt repaid at the current rate before the next send.
//!
//! Tokens are kept as integer micro-bytes (10⁻⁶ byte), because a rate in
//! bytes per second is exactly micro-bytes per microsecond: refills and waits
//! are exact integer arithmetic, and simulations are deterministic.
//!
//! Time is a [`Duration`](std::time::Duration) since any fixed start the
//! caller chooses (sans-IO): the bucket never reads a clock and never sleeps;
//! [`ready_at`](Throttle::ready_at) says when a send may go and the caller
//! waits however it likes (a tokio sleep, a simulated clock).
//!
//! # Runtime changes
//! [`set_rate`](Throttle::set_rate) takes effect at once: tokens earned so
//! far are kept (clipped to the new bucket), and any wait computed afterwards —
//! including the repayment of an outstanding debt — runs at the new rate.
//! A rate of `0` means unthrottled.
//!
//! # Invariants
//! - Over any interval `T`, at most `rate × (T + BURST) + one send` bytes go
//!   out, for a caller that sends only at or after `ready_at`.
//! - The balance never exceeds one full bucket, whatever the idle time or the
//!   refunds.
//! - A `now` earlier than one seen before counts as no time passing: a clock
//!   that steps back cannot mint tokens.
//!
//! # Caveats
//! - One bucket is one rate: fairness between senders sharing it (which
//!   target, which stream goes next) is the caller's business.
//! - Not thread-safe by itself; a shared throttle wraps it in a short-lived
//!   `std::sync::Mutex` (as the node's stream throttle does).
//! - Rates are whole bytes per second; arithmetic saturates rather than
//!   overflowing for absurd rates or durations.

#![deny(missing_docs)]

mod bucket;

pub use bucket::{BURST, Throttle};
