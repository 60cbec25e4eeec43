//! How fast: a key of 2,000 operations by 10 clients with a few dozen of
//! unknown outcome, and the same with one answer broken (a value nobody
//! wrote, somewhere in the middle), which the default budget does not
//! always decide: it must then say `Unknown`, never pass.

use std::time::Instant;

use super::random::{Rng, Shape, linearizable_history, mutate};
use super::*;

const SHAPE: Shape = Shape {
    ops: 2_000,
    clients: 10,
    unknown_percent: 3,
    spread: 40,
};

#[test]
fn two_thousand_operations_by_ten_clients_check_well_under_a_second() {
    let mut rng = Rng::new(2_000);
    let mut total = Duration::ZERO;
    for seed in 0..5 {
        let history = linearizable_history(&mut rng, &SHAPE);
        let unknown = history.iter().filter(|op| op.call.is_unknown()).count();
        let started = Instant::now();
        let report = check(&history, Budget::default());
        let took = started.elapsed();
        total += took;
        let key = &report.keys[0];
        println!(
            "seed {seed}: {} ops, {unknown} unknown ({} set aside): {:?} in {took:?}, {} steps, {} cached",
            key.ops,
            key.set_aside,
            matches!(key.verdict, Verdict::Linearizable),
            key.steps,
            key.cached
        );
        assert!(report.is_linearizable(), "{report}");
    }
    // Loose: debug builds on a loaded machine.
    assert!(total < Duration::from_secs(10), "{total:?}");
}

#[test]
fn a_broken_history_of_two_thousand_operations_never_passes() {
    let mut rng = Rng::new(2_001);
    for seed in 0..5 {
        let mut history = linearizable_history(&mut rng, &SHAPE);
        assert!(mutate(&mut rng, &mut history, true));
        let started = Instant::now();
        let report = check(&history, Budget::default());
        let took = started.elapsed();
        let key = &report.keys[0];
        println!(
            "seed {seed}: {took:?}, {} steps, {} cached, caught: {}",
            key.steps,
            key.cached,
            report.counterexamples().count()
        );
        if seed == 0 {
            println!("{report}");
        }
        assert!(!report.is_linearizable());
    }
}
