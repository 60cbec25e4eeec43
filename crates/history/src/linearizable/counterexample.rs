//! Why a key's history is not linearizable, told small: where the search
//! got furthest, and the few operations that could not be ordered there.

use std::fmt;

use super::model::{CasOutcome, Refusal, RegisterCall, show, step};
use super::op::RegisterOp;
use super::search::Stuck;

/// At most this many operations of the longest legal order are shown
/// (besides the one that set the register).
const CONTEXT: usize = 8;

/// Why a key's history cannot be linearized.
///
/// The search's furthest point: the longest legal order it found (`placed`
/// operations, leaving the register at `state`), then the operations that
/// could have come next, each with the reason it could not. `blocking`
/// completed first among the operations not yet placed, so it, or one of
/// the operations invoked before it completed, had to come next: those
/// are the window that cannot be ordered. `context` is the tail of the
/// legal order that matters for reading it: the operations concurrent
/// with the window, and the one that set the register to `state`.
/// Operations are named by their index in the history given to the
/// checker.
///
/// The legal order shown is one of possibly many of that length: another
/// may fail at another operation. Every legal order fails somewhere, and
/// this is the furthest any got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterExample {
    /// The key.
    pub key: String,
    /// The key's operations (unknown ones included).
    pub ops: usize,
    /// How many the longest legal order found places.
    pub placed: usize,
    /// The register after that order (`None`: absent).
    pub state: Option<Vec<u8>>,
    /// The end of that order, in order: operations concurrent with the
    /// window and the last one that set the register (at most a few).
    pub context: Vec<(usize, RegisterOp)>,
    /// The operation that completed first among those not placed.
    pub blocking: Option<(usize, RegisterOp)>,
    /// Every operation that could have come next, and why it did not.
    pub attempts: Vec<Attempt>,
}

/// An operation that could have come next, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// Its index in the history.
    pub index: usize,
    /// The operation.
    pub op: RegisterOp,
    /// Why it did not lead to a linearization.
    pub failed: Failed,
}

/// Why an operation placed next did not lead to a linearization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Its answer is impossible from the register's state.
    Refused(Refusal),
    /// Legal here, but no order of the rest works after it.
    DeadEnd,
    /// Of unknown outcome and changing nothing here: as if not placed.
    NoEffect,
}

impl CounterExample {
    /// Builds it from where the search stuck. `ops` are the key's
    /// operations with their indices in the history.
    pub(crate) fn new(key: &str, ops: &[(usize, &RegisterOp)], stuck: Stuck) -> CounterExample {
        let entry = |local: usize| (ops[local].0, ops[local].1.clone());
        let attempts: Vec<Attempt> = stuck
            .candidates
            .iter()
            .map(|&local| {
                let (index, op) = entry(local);
                let failed = match step(stuck.state.as_ref(), &op.call) {
                    Err(refusal) => Failed::Refused(refusal),
                    Ok(next) if op.call.is_unknown() && next == stuck.state => Failed::NoEffect,
                    Ok(_) => Failed::DeadEnd,
                };
                Attempt { index, op, failed }
            })
            .collect();
        // The window opens when its first operation was invoked.
        let opens = stuck
            .candidates
            .iter()
            .map(|&local| ops[local].1.invoked)
            .min();
        let concurrent = |op: &RegisterOp| match (op.deadline(), opens) {
            (Some(deadline), Some(opens)) => deadline >= opens,
            _ => true,
        };
        let setter = stuck
            .prefix
            .iter()
            .rposition(|&local| sets(&ops[local].1.call));
        let mut shown: Vec<usize> = (0..stuck.prefix.len())
            .rev()
            .filter(|&position| concurrent(ops[stuck.prefix[position]].1))
            .take(CONTEXT)
            .collect();
        if let Some(setter) = setter.filter(|s| !shown.contains(s)) {
            shown.push(setter);
        }
        shown.sort_unstable();
        let shown = shown.into_iter().map(|position| stuck.prefix[position]);
        CounterExample {
            key: key.to_string(),
            ops: ops.len(),
            placed: stuck.prefix.len(),
            state: stuck.state,
            context: shown.map(entry).collect(),
            blocking: stuck.blocking.map(entry),
            attempts,
        }
    }
}

/// Whether a placed operation set the register (rather than only looking).
fn sets(call: &RegisterCall) -> bool {
    !matches!(
        call,
        RegisterCall::Read { .. }
            | RegisterCall::Cas {
                outcome: CasOutcome::NotApplied { .. },
                ..
            }
    )
}

impl fmt::Display for CounterExample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = show(self.state.as_deref());
        writeln!(
            f,
            "key {:?} is not linearizable ({} operations)",
            self.key, self.ops
        )?;
        writeln!(
            f,
            "  the longest legal order found places {} of them, leaving the register {state}",
            self.placed
        )?;
        if !self.context.is_empty() {
            match self.placed - self.context.len() {
                0 => writeln!(f, "  in order:")?,
                earlier => writeln!(f, "  its end (after {earlier} earlier operations):")?,
            }
            for (index, op) in &self.context {
                writeln!(f, "    op #{index} {op}")?;
            }
        }
        match &self.blocking {
            Some((index, _)) => writeln!(
                f,
                "  then op #{index} completed first of the rest, so it or an operation invoked before it completed must come next; none can:"
            )?,
            None => writeln!(f, "  then none of the rest can come next:")?,
        }
        for attempt in &self.attempts {
            let why = match attempt.failed {
                Failed::Refused(refusal) => {
                    format!("impossible with the register {state}: {refusal}")
                }
                Failed::DeadEnd => {
                    "legal here, but no order of the rest works after it".to_string()
                }
                Failed::NoEffect => "would change nothing here".to_string(),
            };
            writeln!(f, "    op #{} {}\n        {why}", attempt.index, attempt.op)?;
        }
        Ok(())
    }
}
