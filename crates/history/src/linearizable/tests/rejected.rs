//! Histories with no linearization, and the counter-example each gets.

use super::*;

/// The indices of the attempts and why each failed.
fn attempts(counterexample: &CounterExample) -> Vec<(usize, Failed)> {
    counterexample
        .attempts
        .iter()
        .map(|a| (a.index, a.failed))
        .collect()
}

#[test]
fn a_stale_read_after_an_acknowledged_write_is_caught() {
    let history = [
        write(1, 0, 10, "a"),
        write(2, 20, 30, "b"),
        read(3, 40, 50, Some("a")),
    ];
    let counterexample = counterexample(&history);
    assert_eq!(counterexample.placed, 2, "{counterexample}");
    assert_eq!(counterexample.state, Some(v("b")));
    assert_eq!(counterexample.blocking.as_ref().map(|b| b.0), Some(2));
    assert_eq!(
        attempts(&counterexample),
        [(2, Failed::Refused(Refusal::ReadOther))]
    );
    // The write that set the register is shown; the older one is not.
    let context: Vec<usize> = counterexample.context.iter().map(|c| c.0).collect();
    assert_eq!(context, [1]);
    let text = counterexample.to_string();
    println!("{text}");
    assert!(text.contains("leaving the register \"b\""), "{text}");
    assert!(
        text.contains("op #2 client3 [0.040s–0.050s] read = \"a\""),
        "{text}"
    );
    assert!(
        text.contains("op #1 client2 [0.020s–0.030s] write \"b\" = ok"),
        "{text}"
    );
}

#[test]
fn two_cas_from_absent_both_applied_are_caught() {
    let history = [
        cas(1, 0, 10, None, "a", CasOutcome::Applied),
        cas(2, 5, 15, None, "b", CasOutcome::Applied),
        read(3, 20, 21, Some("b")),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(counterexample.placed, 1);
    assert_eq!(counterexample.state, Some(v("a")));
    assert_eq!(counterexample.blocking.as_ref().map(|b| b.0), Some(1));
    assert_eq!(
        attempts(&counterexample),
        [(1, Failed::Refused(Refusal::AppliedWithoutMatch))]
    );
    assert!(
        counterexample
            .to_string()
            .contains("cas(absent -> \"b\") = applied"),
        "{counterexample}"
    );
}

#[test]
fn a_cas_not_applied_with_a_current_value_that_never_existed_is_caught() {
    let history = [
        write(1, 0, 10, "a"),
        cas(2, 20, 30, None, "b", not_applied(Some("ghost"))),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(counterexample.state, Some(v("a")));
    assert_eq!(
        attempts(&counterexample),
        [(1, Failed::Refused(Refusal::WrongCurrent))]
    );
}

#[test]
fn a_read_of_a_value_nobody_wrote_is_caught() {
    let history = [
        write(1, 0, 10, "a"),
        write(2, 5, 15, "b"),
        read(3, 8, 30, Some("ghost")),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    // Every order fails at the read; the furthest places both writes.
    assert_eq!(counterexample.placed, 2);
    assert_eq!(counterexample.blocking.as_ref().map(|b| b.0), Some(2));
    assert_eq!(
        attempts(&counterexample),
        [(2, Failed::Refused(Refusal::ReadOther))]
    );
}

#[test]
fn a_lost_update_of_a_counter_built_from_cas_is_caught() {
    // Two clients read 0 and both CAS 0 -> 1 successfully: one increment
    // is lost.
    let history = [
        write(1, 0, 1, "0"),
        read(1, 2, 3, Some("0")),
        read(2, 2, 3, Some("0")),
        cas(1, 4, 10, Some("0"), "1", CasOutcome::Applied),
        cas(2, 5, 11, Some("0"), "1", CasOutcome::Applied),
        read(3, 20, 21, Some("1")),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(counterexample.placed, 4);
    assert_eq!(counterexample.state, Some(v("1")));
    assert_eq!(
        attempts(&counterexample),
        [(4, Failed::Refused(Refusal::AppliedWithoutMatch))]
    );
    // Done right, the second CAS does not apply and reports "1".
    let mut fixed = history.to_vec();
    fixed[4] = cas(2, 5, 11, Some("0"), "1", not_applied(Some("1")));
    assert!(matches!(verdict(&fixed), Verdict::Linearizable));
}

#[test]
fn an_unknown_write_cannot_explain_a_value_read_before_it_was_invoked() {
    let history = [
        write(1, 0, 1, "a"),
        read(2, 5, 6, Some("u")),
        op(
            3,
            10,
            11,
            RegisterCall::Write {
                value: v("u"),
                ack: WriteAck::Unknown,
            },
        ),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(
        attempts(&counterexample),
        [(1, Failed::Refused(Refusal::ReadOther))]
    );
}

#[test]
fn the_furthest_order_is_reported() {
    // Either write may come first, but the reads need "a" then "b" then
    // "a" again.
    let history = [
        write(1, 0, 10, "a"),
        write(2, 0, 10, "b"),
        read(3, 11, 12, Some("a")),
        read(3, 13, 14, Some("b")),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(counterexample.placed, 3);
    assert!(counterexample.to_string().contains("read = \"b\""));
}

#[test]
fn an_unknown_write_that_leads_nowhere_is_a_dead_end() {
    let history = [
        write(1, 0, 10, "a"),
        op(
            2,
            0,
            1,
            RegisterCall::Write {
                value: v("u"),
                ack: WriteAck::Unknown,
            },
        ),
        read(3, 20, 21, Some("b")),
        read(3, 30, 31, Some("u")),
    ];
    let counterexample = counterexample(&history);
    println!("{counterexample}");
    assert_eq!(counterexample.placed, 1);
    assert_eq!(
        attempts(&counterexample),
        [
            (2, Failed::Refused(Refusal::ReadOther)),
            (1, Failed::DeadEnd)
        ]
    );
    assert!(
        counterexample
            .to_string()
            .contains("[0.000s–…] write \"u\" = unknown")
    );
}

#[test]
fn only_the_broken_key_is_reported() {
    let mut good = write(1, 0, 10, "x");
    good.key = "good".into();
    let report = check(
        &[write(1, 0, 10, "a"), good, read(2, 20, 21, None)],
        Budget::default(),
    );
    let broken: Vec<&str> = report.counterexamples().map(|c| c.key.as_str()).collect();
    assert_eq!(broken, ["k"], "{report}");
}

#[test]
fn an_exhausted_budget_gives_unknown_not_a_verdict() {
    let stale = [
        write(1, 0, 10, "a"),
        write(2, 20, 30, "b"),
        read(3, 40, 50, Some("a")),
    ];
    let fine = [write(1, 0, 10, "a"), read(3, 40, 50, Some("a"))];
    for history in [&stale[..], &fine[..]] {
        let report = check(history, Budget::steps(1));
        match &report.keys[0].verdict {
            Verdict::Unknown(exhausted) => {
                assert_eq!(exhausted.steps, 1);
                assert_eq!(exhausted.known, history.len());
            }
            other => panic!("expected unknown, got {other:?}"),
        }
        assert_eq!(report.undecided().count(), 1);
        assert!(!report.is_linearizable());
        println!("{report}");
    }
}
