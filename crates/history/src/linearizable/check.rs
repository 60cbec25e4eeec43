//! A whole history, key by key, and the report.

use std::collections::BTreeMap;
use std::fmt;

use super::budget::Budget;
use super::counterexample::CounterExample;
use super::op::RegisterOp;
use super::search::{Found, Search};

/// Whether one key's history is linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Some order of its operations, each at a point within its interval,
    /// is legal for the register.
    Linearizable,
    /// None is: why, told small.
    NotLinearizable(Box<CounterExample>),
    /// The budget ran out before either was shown.
    Unknown(Exhausted),
}

/// How far a search got before its budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    /// The steps taken (the budget).
    pub steps: u64,
    /// The most operations of known outcome any order tried placed.
    pub deepest: usize,
    /// Of how many operations of known outcome.
    pub known: usize,
}

/// One key's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyReport {
    /// The key.
    pub key: String,
    /// Its operations.
    pub ops: usize,
    /// Of which of unknown outcome.
    pub unknown: usize,
    /// Of which set aside before the search: unknown ones that could only
    /// have set a value nobody observed (see the module's essay).
    pub set_aside: usize,
    /// Search steps taken.
    pub steps: u64,
    /// Configurations in Lowe's cache at the end.
    pub cached: usize,
    /// The verdict.
    pub verdict: Verdict,
}

/// What [`check`] found, key by key, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every key with at least one operation.
    pub keys: Vec<KeyReport>,
}

impl Report {
    /// Whether every key was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        self.keys
            .iter()
            .all(|k| matches!(k.verdict, Verdict::Linearizable))
    }

    /// The keys shown not linearizable, with why.
    pub fn counterexamples(&self) -> impl Iterator<Item = &CounterExample> {
        self.keys.iter().filter_map(|k| match &k.verdict {
            Verdict::NotLinearizable(counterexample) => Some(counterexample.as_ref()),
            _ => None,
        })
    }

    /// The keys whose budget ran out.
    pub fn undecided(&self) -> impl Iterator<Item = &KeyReport> {
        self.keys
            .iter()
            .filter(|k| matches!(k.verdict, Verdict::Unknown(_)))
    }

    /// Search steps over all keys.
    pub fn steps(&self) -> u64 {
        self.keys.iter().map(|k| k.steps).sum()
    }
}

/// Checks that each key's operations are linearizable for a
/// compare-and-set register, each key on its own (linearizability is
/// compositional: a history is linearizable exactly when each key's is),
/// each within `budget`.
pub fn check(ops: &[RegisterOp], budget: Budget) -> Report {
    let mut keys: BTreeMap<&str, Vec<(usize, &RegisterOp)>> = BTreeMap::new();
    for (index, op) in ops.iter().enumerate() {
        keys.entry(op.key.as_str()).or_default().push((index, op));
    }
    Report {
        keys: keys
            .into_iter()
            .map(|(key, ops)| check_key(key, &ops, budget))
            .collect(),
    }
}

/// One key's operations (with their indices in the history).
fn check_key(key: &str, ops: &[(usize, &RegisterOp)], budget: Budget) -> KeyReport {
    let refs: Vec<&RegisterOp> = ops.iter().map(|&(_, op)| op).collect();
    let mut search = Search::compile(&refs);
    let (found, steps, cached) = search.run(budget.max_steps);
    let unknown = refs.iter().filter(|op| op.call.is_unknown()).count();
    let verdict = match found {
        Found::Linearizable => Verdict::Linearizable,
        Found::Stuck(stuck) => {
            Verdict::NotLinearizable(Box::new(CounterExample::new(key, ops, stuck)))
        }
        Found::Exhausted { deepest } => Verdict::Unknown(Exhausted {
            steps,
            deepest,
            known: ops.len() - unknown,
        }),
    };
    KeyReport {
        key: key.to_string(),
        ops: ops.len(),
        unknown,
        set_aside: search.set_aside,
        steps,
        cached,
        verdict,
    }
}

impl fmt::Display for Report {
    /// A line of totals, then each key that is not linearizable (with its
    /// counter-example) or undecided.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bad = self.counterexamples().count();
        let undecided = self.undecided().count();
        writeln!(
            f,
            "{} keys, {} operations ({} of unknown outcome), {} search steps: {} not linearizable, {} undecided",
            self.keys.len(),
            self.keys.iter().map(|k| k.ops).sum::<usize>(),
            self.keys.iter().map(|k| k.unknown).sum::<usize>(),
            self.steps(),
            bad,
            undecided
        )?;
        for counterexample in self.counterexamples() {
            write!(f, "{counterexample}")?;
        }
        for key in self.undecided() {
            if let Verdict::Unknown(exhausted) = &key.verdict {
                writeln!(
                    f,
                    "key {:?} undecided: the budget of {} steps ran out with at most {} of {} known operations placed",
                    key.key, exhausted.steps, exhausted.deepest, exhausted.known
                )?;
            }
        }
        Ok(())
    }
}
