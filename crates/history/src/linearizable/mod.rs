//! A linearizability checker for a compare-and-set register, key by key
//! (issue 42): the judge of ringstore's lightweight transactions.
//!
//! The last-write-wins checker beside it (the crate's [`check`](crate::check))
//! judges what Cassandra-style quorums promise, which is less than
//! linearizability. Lightweight transactions promise more: every
//! operation on a key appears to take effect at one instant between its
//! invocation and its completion, in an order legal for a register. This
//! module decides exactly that, for histories the clients record as
//! [`RegisterOp`]s: which key, which client, invoked and completed when (on
//! one monotonic clock, as offsets from the start of the run), what was
//! asked and what came back.
//!
//! # The model
//! Each key is a register, `Option<Vec<u8>>`: absent, or a value. The
//! operations ([`RegisterCall`]) are a linearizable read (`GetSerial`),
//! which must return the register; a plain put or delete, which is a
//! compare-and-set expecting anything; and a compare-and-set
//! (`PutIf`/`DeleteIf`) expecting the register absent, holding a given
//! value, or anything ([`Expected`]), setting a value or deleting. A set
//! applies exactly when its expectation holds; when it does not apply it
//! reports the register's current value (Cassandra's `[applied]` row),
//! which must then equal the register. [`step`] is this, as a pure
//! function: the register after an operation, or the [`Refusal`] that
//! makes its recorded answer impossible from that register.
//!
//! # The algorithm
//! Wing & Gong's search with Lowe's memoization, as Porcupine and Knossos's
//! `wgl` implement it (`search.rs`): walk the history as a linked list of
//! call and return entries in time order; any operation whose call comes
//! before the first remaining return may be placed next, if the model
//! accepts its answer from the current state; place it (unlink it), go on
//! from the new state, and backtrack when the first remaining return
//! belongs to an operation that cannot be placed. Lowe's cache
//! (`cache.rs`) remembers every configuration entered, the set of placed
//! operations (a bitset with an incrementally kept hash) with the register
//! state, and never enters one twice: what remains to place, and from
//! which state, is then the same, so a second visit fails where the first
//! did. Keys are checked independently (Herlihy & Wing's locality, which
//! Horn & Kroening's P-compositionality exploits): a history is
//! linearizable exactly when each key's is, and the cost of the search,
//! exponential in the worst case, stays that of one key's concurrency.
//!
//! **Sound and complete for this model.** Every order the search accepts
//! respects real time (an operation is placed only while no unplaced
//! operation completed before it was invoked) and every answer in it
//! (each step is the model's), so a `Linearizable` verdict exhibits a
//! linearization. Conversely the search tries, at every configuration,
//! every operation that may come next, and prunes only configurations
//! already explored, operations of unknown outcome that would change
//! nothing (as if not placed), and unknown operations set aside up front
//! (below): none of these removes the last legal order, so
//! `NotLinearizable` is only said of a history that has none. Intervals
//! are closed: operations that touch (one completes at the instant
//! another is invoked) count as concurrent, the benefit of the doubt.
//!
//! # Operations of unknown outcome
//! A write or set that timed out or lost its connection may or may not
//! have taken effect, and if it did, at any time after its invocation:
//! it completes at +∞, as Knossos's `:info` and Porcupine's unknown
//! outputs do. It has no return entry, so it never forces anything to be
//! placed before it; it is never refused (it applies exactly when its
//! expectation holds then); and the search succeeds once every operation
//! of known outcome is placed, since the rest can all be placed after
//! everything, where nothing observes them. Unknown operations are tried
//! last at each point: most never took effect. Two reductions keep them
//! cheap, both exact: placing one that would change nothing is skipped;
//! and one that could only set a value nobody observed (no read returned
//! it, no set expected it or reported it current) is set aside before the
//! search, since the next operation to look at the register would have
//! had to see that value, and those that do not look behave the same from
//! any state. A read of unknown outcome tells nothing and is left out of
//! the history (it has no variant).
//!
//! # The budget
//! Deciding linearizability is NP-complete (Gibbons & Korach), so the
//! search is bounded by a [`Budget`] of steps per key (one step: one
//! attempt to place an operation); past it the key's [`Verdict`] is
//! `Unknown`, never a guess. Steps rather than time keep a verdict the
//! same on any machine; the cache grows by at most one entry per step, so
//! the budget bounds memory too.
//!
//! Measured (`tests/speed.rs`, the test profile at `opt-level = 1`, on a
//! shared 2-core machine): a key of 2,000 operations by 10 clients, ~30 %
//! reads, ~50 % compare-and-sets, 3 % of unknown outcome (32–56 unknown, of
//! which about half set aside), each operation overlapping up to ~9
//! others, is shown linearizable in 9–38 ms (0.1–0.65 M steps, 20–66 k
//! configurations cached): 10–20 M steps a second. Refuting is costlier:
//! the search must exhaust every configuration before the broken
//! operation, so the same key with one read of a value nobody wrote, in
//! its middle, is left `Unknown` by the default budget of 2 M steps
//! (0.1–0.2 s, ~300 k configurations), while keys of 50–300 operations
//! (`tests/random.rs`) are refuted well within it.
//!
//! # The counter-example
//! A history with no linearization gets a [`CounterExample`]: the longest
//! legal order the search found and the register it leaves, the end of
//! that order that matters (operations concurrent with what follows, and
//! the one that set the register), the operation that completed first of
//! the rest, and every operation that could have come next, each with why
//! it cannot: its answer is impossible from that register (and which
//! [`Refusal`]), or it is legal there but nothing works after it. That
//! window, a handful of operations around one instant, is what cannot be
//! ordered: for a stale read, the read and the acknowledged write it
//! missed; for two applied `PutIf(absent)`, the second of them.
//!
//! # Where its histories will come from
//! A CAS workload (future wiring, issue 42) records one [`RegisterOp`] per
//! request, in the simulation (`crates/simulation`, on its simulated clock,
//! every seed) and in the process fault suite (`tests/faults.rs`, on the
//! test's monotonic clock, under every fault kind, joins and decommissions
//! included): `PutIf`/`DeleteIf` as [`RegisterCall::Cas`], `GetSerial` as
//! [`RegisterCall::Read`], a timeout or broken connection as an unknown
//! outcome (a failed read dropped), then calls [`check`] with a budget and
//! prints each [`CounterExample`] with the seed or the run's log.
//! Workloads keep values unique per key (a client id and a counter), so
//! that a value read names its write and unobserved unknown writes can be
//! set aside; and they spread load over keys, since each key's search is
//! exponential in its own concurrency only.
//!
//! # Caveats
//! - Refuting a long key can exhaust the budget (above). What would fix it,
//!   and is not built yet: refute a time window alone. Keep the operations
//!   that overlap `[t0, t1]`, make those that cross either end optional
//!   (placed or skipped, as unknown ones are), and start from an
//!   unconstrained register (fixed by the first operation that looks). A
//!   linearization of the whole, cut to the stretch between the window's
//!   first and last inner operations, is one of the window, so a window
//!   with none refutes the whole history, and its counter-example is
//!   small by construction. Windows around where the full search got
//!   furthest are the ones to try first.
//! - The counter-example's order is one of possibly several of the same
//!   length; it shows where the furthest attempt failed, not the only
//!   explanation, and it is not minimised further (a smaller failing
//!   sub-history may exist: dropping writes changes what reads may see).
//! - Only reads that are themselves linearizable belong here: a `QUORUM`
//!   read may legitimately miss an in-flight set, and would be reported.
//! - No TTLs: a value with one would expire outside any operation.

mod budget;
mod cache;
mod check;
mod counterexample;
mod model;
mod op;
mod search;

#[cfg(test)]
mod tests;

pub use budget::Budget;
pub use check::{Exhausted, KeyReport, Report, Verdict, check};
pub use counterexample::{Attempt, CounterExample, Failed};
pub use model::{CasOutcome, Expected, Refusal, RegisterCall, WriteAck, step};
pub use op::RegisterOp;
