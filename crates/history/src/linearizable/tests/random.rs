//! Random histories from a sequential simulation: every one must pass;
//! with one observed answer changed, small ones must get exactly the
//! verdict of a brute-force oracle, and large ones must never pass when
//! the change is certainly wrong.

use super::*;

/// SplitMix64: a seeded generator, enough for tests.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// The shape of a generated history.
pub(super) struct Shape {
    pub(super) ops: usize,
    pub(super) clients: usize,
    /// Chance that a write, delete or set has an unknown outcome.
    pub(super) unknown_percent: u64,
    /// The longest an operation lasts on either side of its
    /// linearization point (µs).
    pub(super) spread: u64,
}

/// A linearizable history: operations take effect one at a time, in
/// order, each at a point inside its interval; clients make one operation
/// at a time. Unknown operations take effect at their point or never.
pub(super) fn linearizable_history(rng: &mut Rng, shape: &Shape) -> Vec<RegisterOp> {
    let mut state: Option<Vec<u8>> = None;
    let mut written: Vec<Vec<u8>> = Vec::new();
    let mut free_at = vec![0u64; shape.clients];
    let mut point = 0u64;
    let mut history = Vec::with_capacity(shape.ops);
    for _ in 0..shape.ops {
        point += 1 + rng.below(3);
        let earliest = free_at.iter().copied().min().unwrap_or(0);
        point = point.max(earliest + 1);
        let free: Vec<usize> = (0..shape.clients).filter(|&c| free_at[c] < point).collect();
        let client = free[rng.below(free.len() as u64) as usize];
        let invoked = point - rng.below((point - free_at[client]).min(shape.spread));
        let completed = point + rng.below(shape.spread);
        free_at[client] = completed;
        let fresh = |written: &mut Vec<Vec<u8>>| {
            let value = format!("v{}", written.len()).into_bytes();
            written.push(value.clone());
            value
        };
        let unknown = rng.percent(shape.unknown_percent);
        let takes_effect = !unknown || rng.percent(50);
        let kind = rng.below(100);
        let call = if kind < 30 {
            RegisterCall::Read {
                observed: state.clone(),
            }
        } else if kind < 45 {
            let value = fresh(&mut written);
            let ack = if unknown {
                WriteAck::Unknown
            } else {
                WriteAck::Acked
            };
            if takes_effect {
                state = Some(value.clone());
            }
            RegisterCall::Write { value, ack }
        } else if kind < 50 {
            if takes_effect {
                state = None;
            }
            let ack = if unknown {
                WriteAck::Unknown
            } else {
                WriteAck::Acked
            };
            RegisterCall::Delete { ack }
        } else {
            let expected = match rng.below(4) {
                0 => Expected::Absent,
                1 => Expected::Any,
                2 if !written.is_empty() => {
                    Expected::Value(written[rng.below(written.len() as u64) as usize].clone())
                }
                _ => state.clone().map_or(Expected::Absent, Expected::Value),
            };
            let new = if rng.percent(10) {
                None
            } else {
                Some(fresh(&mut written))
            };
            let applies = expected.matches(state.as_ref());
            let outcome = if unknown {
                CasOutcome::Unknown
            } else if applies {
                CasOutcome::Applied
            } else {
                CasOutcome::NotApplied {
                    current: state.clone(),
                }
            };
            if applies && takes_effect {
                state = new.clone();
            }
            RegisterCall::Cas {
                expected,
                new,
                outcome,
            }
        };
        history.push(RegisterOp {
            key: "k".into(),
            client: ClientId(client),
            invoked: Duration::from_micros(invoked),
            completed: Duration::from_micros(completed),
            call,
        });
    }
    history
}

/// Changes one observed answer (a read's value, or a set's outcome).
/// `certain`: only to a value nobody wrote, which no order explains.
/// Returns `false` if the history has nothing to change.
pub(super) fn mutate(rng: &mut Rng, history: &mut [RegisterOp], certain: bool) -> bool {
    let observing: Vec<usize> = (0..history.len())
        .filter(|&i| {
            matches!(
                history[i].call,
                RegisterCall::Read { .. }
                    | RegisterCall::Cas {
                        outcome: CasOutcome::Applied | CasOutcome::NotApplied { .. },
                        ..
                    }
            )
        })
        .collect();
    if observing.is_empty() {
        return false;
    }
    let index = observing[rng.below(observing.len() as u64) as usize];
    let other = match rng.below(3) {
        _ if certain => Some(v("phantom")),
        0 => None,
        1 => Some(format!("v{}", rng.below(4)).into_bytes()),
        _ => Some(v("phantom")),
    };
    match &mut history[index].call {
        RegisterCall::Read { observed } => {
            if *observed == other {
                *observed = Some(v("phantom"));
            } else {
                *observed = other;
            }
        }
        RegisterCall::Cas { outcome, .. } => {
            *outcome = match outcome {
                CasOutcome::NotApplied { .. } if !certain && rng.percent(50) => CasOutcome::Applied,
                _ => CasOutcome::NotApplied { current: other },
            };
        }
        _ => return false,
    }
    true
}

/// Brute force: tries every order that respects real time.
fn oracle(history: &[RegisterOp]) -> bool {
    fn go(history: &[RegisterOp], placed: &mut [bool], state: Option<Vec<u8>>) -> bool {
        let done = (0..history.len()).all(|i| placed[i] || history[i].call.is_unknown());
        if done {
            return true;
        }
        for i in 0..history.len() {
            if placed[i] {
                continue;
            }
            let preceded = (0..history.len()).any(|j| {
                !placed[j]
                    && j != i
                    && history[j]
                        .deadline()
                        .is_some_and(|d| d < history[i].invoked)
            });
            if preceded {
                continue;
            }
            if let Ok(next) = step(state.as_ref(), &history[i].call) {
                placed[i] = true;
                if go(history, placed, next) {
                    return true;
                }
                placed[i] = false;
            }
        }
        false
    }
    go(history, &mut vec![false; history.len()], None)
}

#[test]
fn small_random_histories_agree_with_a_brute_force_oracle() {
    let mut rng = Rng::new(42);
    let (mut rejected, mut mutated) = (0, 0);
    for round in 0..3_000 {
        let shape = Shape {
            ops: 1 + rng.below(7) as usize,
            clients: 1 + rng.below(3) as usize,
            unknown_percent: 20,
            spread: 6,
        };
        let mut history = linearizable_history(&mut rng, &shape);
        let report = check(&history, Budget::default());
        assert!(
            report.is_linearizable(),
            "round {round}: {report}\n{history:#?}"
        );
        if !mutate(&mut rng, &mut history, false) {
            continue;
        }
        mutated += 1;
        let report = check(&history, Budget::default());
        let expected = oracle(&history);
        assert_eq!(
            report.is_linearizable(),
            expected,
            "round {round}: the oracle says {expected}: {report}\n{history:#?}"
        );
        assert_eq!(report.undecided().count(), 0);
        if !expected {
            rejected += 1;
        }
    }
    println!("{mutated} mutated histories, {rejected} not linearizable");
    assert!(rejected > mutated / 3, "{rejected} of {mutated}");
}

#[test]
fn random_histories_pass_and_never_pass_once_provably_broken() {
    let mut rng = Rng::new(7);
    let (mut caught, mut undecided) = (0, 0);
    for round in 0..60 {
        let shape = Shape {
            ops: 50 + rng.below(250) as usize,
            clients: 2 + rng.below(8) as usize,
            unknown_percent: 3,
            spread: 20,
        };
        let mut history = linearizable_history(&mut rng, &shape);
        let report = check(&history, Budget::default());
        assert!(report.is_linearizable(), "round {round}: {report}");
        assert!(mutate(&mut rng, &mut history, true));
        let report = check(&history, Budget::default());
        assert!(!report.is_linearizable(), "round {round}: a phantom passed");
        caught += report.counterexamples().count();
        undecided += report.undecided().count();
    }
    println!("{caught} caught, {undecided} undecided by the budget");
    assert!(caught >= 50, "{caught} caught, {undecided} undecided");
}
