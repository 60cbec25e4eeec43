//! The linearizability checker on hand-made histories (accepted and
//! rejected, with their counter-examples), on random ones checked against a
//! brute-force oracle, and for speed.

use std::time::Duration;

use super::*;
use crate::history::ClientId;

mod accepted;
mod random;
mod rejected;
mod speed;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn op(client: usize, from: u64, to: u64, call: RegisterCall) -> RegisterOp {
    RegisterOp {
        key: "k".into(),
        client: ClientId(client),
        invoked: ms(from),
        completed: ms(to),
        call,
    }
}

fn read(client: usize, from: u64, to: u64, observed: Option<&str>) -> RegisterOp {
    op(
        client,
        from,
        to,
        RegisterCall::Read {
            observed: observed.map(v),
        },
    )
}

fn write(client: usize, from: u64, to: u64, value: &str) -> RegisterOp {
    op(
        client,
        from,
        to,
        RegisterCall::Write {
            value: v(value),
            ack: WriteAck::Acked,
        },
    )
}

fn cas(
    client: usize,
    from: u64,
    to: u64,
    expected: Option<&str>,
    new: &str,
    outcome: CasOutcome,
) -> RegisterOp {
    op(
        client,
        from,
        to,
        RegisterCall::Cas {
            expected: expected.map_or(Expected::Absent, |e| Expected::Value(v(e))),
            new: Some(v(new)),
            outcome,
        },
    )
}

fn not_applied(current: Option<&str>) -> CasOutcome {
    CasOutcome::NotApplied {
        current: current.map(v),
    }
}

/// The one key's verdict.
fn verdict(ops: &[RegisterOp]) -> Verdict {
    let report = check(ops, Budget::default());
    assert_eq!(report.keys.len(), 1, "{report}");
    report.keys[0].verdict.clone()
}

fn counterexample(ops: &[RegisterOp]) -> CounterExample {
    match verdict(ops) {
        Verdict::NotLinearizable(counterexample) => *counterexample,
        other => panic!("expected not linearizable, got {other:?}"),
    }
}
