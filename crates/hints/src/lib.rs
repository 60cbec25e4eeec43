//! Hinted handoff: a coordinator keeps the writes a replica missed and
//! replays them when it is back.
//!
//! # What it does
//! When a coordinator cannot deliver a write to a replica — known down, or it
//! did not answer in time — it stores a [`Hint`] (the write, for that target)
//! in its own `hints` tree, and replays it once the target is up again,
//! throttled so a returning node is not swamped. Hints make a short outage
//! cheap to heal; long outages are left to repair.
//!
//! # Pieces (all sans-IO: time is passed in, nothing sleeps or sends)
//! - [`Hint`] (`hint.rs`): the versioned on-disk format of one hint.
//! - [`HintStore`] (`hint_store.rs`): hints in the node's `hints` tree keyed by
//!   [`HintId`] (`target ++ created_at ++ sequence`, so a target's hints are
//!   one range scan, oldest first), with per-target accounting rebuilt on
//!   open, a per-target byte cap that evicts the oldest, and expiry by age.
//! - [`HintWindow`] (`window.rs`): whether a target has been down too long to
//!   be worth hinting (default three hours).
//! - The throttle is [`ringstore_throttle::Throttle`] (a token bucket in
//!   bytes, runtime-adjustable), in a crate of its own because range
//!   streaming paces its sends with it too.
//! - [`ReplayScheduler`] (`replay.rs`): which target gets the next batch and
//!   when — round-robin, one batch in flight per target, exponential backoff
//!   on failure, throttled.
//!
//! # Protocol (what the node does)
//! 1. A write to replica `r` fails or times out: if
//!    [`HintWindow::should_hint`] says so (given the age of `r`'s oldest
//!    pending hint, [`HintStore::oldest_hint`]), [`HintStore::store`] a hint
//!    (with `created_at` = now); otherwise [`HintStore::note_outside_window`].
//! 2. Membership says `r` is up or down: [`ReplayScheduler::set_liveness`]
//!    and [`HintWindow::mark_up`] / [`mark_down`](HintWindow::mark_down),
//!    from the membership view (rescanned whole, so a missed event is not a
//!    missed target).
//! 3. The replay task loops on [`ReplayScheduler::poll`]: for each
//!    [`ReplayAction::Deliver`] it reads [`HintStore::next_batch`] (passing the
//!    keyspace's `gc_grace` as `max_age`), sends it, and only after the
//!    target's acknowledgement calls [`HintStore::delete`] and
//!    [`ReplayScheduler::delivered`]; on failure it calls
//!    [`ReplayScheduler::failed`] and the hints stay. A hint that can never
//!    be applied (its keyspace dropped, or refused for good by the target)
//!    is [`HintStore::discard`]ed with its [`Undeliverable`] reason, so it
//!    does not block the hints behind it.
//!
//! # Invariants
//! - A hint is deleted only after its target acknowledged it, or when it is
//!   dropped for a counted reason (cap, age, truncation, corruption, dropped
//!   keyspace, refusal by the target): every
//!   hint that leaves the store is counted once in [`HintCounters`].
//! - No hint older than `max_age` is ever returned for replay: replaying a
//!   write older than `gc_grace` could resurrect data whose tombstone has
//!   since been purged.
//! - Replaying a hint twice is harmless: cells merge by last-write-wins.
//! - Every persisted byte is versioned: hint values start with
//!   [`HINT_FORMAT`]; the key layout is version 1 of the `hints` tree.
//!
//! # Caveats
//! - Hint writes bypass the store's durability policy: the node calls
//!   `Store::sync` when it wants them durable; a crash may lose the newest.
//! - Age expiry uses one `max_age` per `next_batch` call; a node replaying
//!   keyspaces with different `gc_grace` should pass the smallest.
//! - Counters are not persisted; they restart at zero with the process.
//! - Under concurrent `store`s to one target the cap is approximate (see
//!   `hint_store.rs`).
//! - The window is the longer of how long this coordinator has seen the
//!   target down and the age of its oldest pending hint (which survives
//!   restarts); a target down since before this node started, with no hint
//!   pending here, gets a fresh window.

#![deny(missing_docs)]

mod error;
mod hint;
mod hint_id;
mod hint_store;
mod replay;
mod stats;
mod window;

pub use error::{HintsError, Result};
pub use hint::{HINT_FORMAT, Hint};
pub use hint_id::HintId;
pub use hint_store::{HintLimits, HintStore, StoreOutcome};
pub use replay::{ReplayAction, ReplayConfig, ReplayScheduler};
pub use stats::{HintCounters, TargetStats, Undeliverable};
pub use window::{DEFAULT_HINT_WINDOW, HintWindow};
