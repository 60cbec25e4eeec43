//! Paused coordinators in the simulation (issue 47): a node whose every
//! message, its clients' included, is held for 3–7 s reads the writes its
//! clients sent meanwhile only after they gave up (a 1 s timeout) and wrote
//! the same keys again through other nodes. The writes it then reads are
//! past their deadline: it must refuse them, not stamp them with its clock
//! of then, which would put them above the newer, acknowledged values. The
//! history checker's `LateWrite` rule judges it.
//!
//! Each test is one simulation; nextest runs each in a process of its own,
//! as a seed's replay must be (see `ringstore_simulation::entropy`).

use ringstore_history::ViolationKind;
use ringstore_simulation::scenario::{Outcome, Scenario, run};
use ringstore_simulation::verdict::{judge, timeline};

ringstore_simulation::interpose_getrandom!();

const SEED: u64 = 4701;

/// How many writes failed and were written again by the same client.
fn rewrites(outcome: &Outcome) -> usize {
    outcome.report.writes_failed
}

#[test]
fn a_paused_coordinator_refuses_the_writes_its_clients_gave_up_on() {
    let outcome = run(&Scenario::paused_coordinators(SEED))
        .unwrap_or_else(|error| panic!("seed {SEED} did not finish: {error}"));
    let pauses = outcome.faults.len();
    eprintln!(
        "seed {SEED}: {pauses} pauses, {} writes failed; {}",
        rewrites(&outcome),
        outcome.report
    );
    assert!(pauses >= 3, "only {pauses} pauses were scheduled");
    // The load overlapped the pauses: writes failed and were retried.
    assert!(
        rewrites(&outcome) >= 10,
        "only {} writes failed: the pauses caught too few",
        rewrites(&outcome)
    );
    if let Err(problems) = judge(&outcome) {
        panic!("seed {SEED} failed:\n{problems}\n{}", timeline(&outcome));
    }
}

#[test]
fn with_the_deadline_check_planted_away_the_checker_finds_late_writes() {
    let scenario = Scenario {
        ignore_client_deadlines: true,
        ..Scenario::paused_coordinators(SEED)
    };
    let outcome = run(&scenario).unwrap_or_else(|error| panic!("did not finish: {error}"));
    let late: Vec<_> = outcome
        .report
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::LateWrite)
        .collect();
    eprintln!("planted: {}", outcome.report);
    assert!(
        !late.is_empty(),
        "nodes that stamp writes read after their deadline went unnoticed: {}",
        outcome.report
    );
}
