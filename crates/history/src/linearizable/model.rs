//! The model: one register, `Option<V>` (absent, or a value), and the
//! operations a compare-and-set store offers on it. [`step`] is pure: the
//! register after an operation, or why the operation's recorded answer is
//! impossible from that register.
//!
//! The types are generic over the value so that the search can run them on
//! interned values (`u32`, one per distinct byte string) with the very same
//! step function that the tests and the reports use on `Vec<u8>`.

use std::fmt;

/// What a compare-and-set expects the register to hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expected<V = Vec<u8>> {
    /// Nothing (`IF NOT EXISTS`).
    Absent,
    /// Exactly this value (`IF value = …`).
    Value(V),
    /// Anything: the set always applies (a plain linearizable put).
    Any,
}

impl<V: PartialEq> Expected<V> {
    /// Whether a register holding `state` meets the expectation.
    pub fn matches(&self, state: Option<&V>) -> bool {
        match (self, state) {
            (Expected::Any, _) | (Expected::Absent, None) => true,
            (Expected::Value(expected), Some(held)) => expected == held,
            (Expected::Absent, Some(_)) | (Expected::Value(_), None) => false,
        }
    }
}

/// How a plain write or delete ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteAck {
    /// Acknowledged: it took effect between its invocation and completion.
    Acked,
    /// Indeterminate (timed out, connection lost): it may or may not have
    /// taken effect, at any time after its invocation.
    Unknown,
}

/// How a compare-and-set ended (Cassandra's `[applied]` row).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CasOutcome<V = Vec<u8>> {
    /// The expectation held and the new value (or the delete) took effect.
    Applied,
    /// The expectation did not hold; `current` is what the store said the
    /// register held instead (`None`: absent).
    NotApplied {
        /// The register as the store reported it.
        current: Option<V>,
    },
    /// Indeterminate: it may or may not have taken effect, at any time
    /// after its invocation (and, if it did, it applied exactly when its
    /// expectation held then).
    Unknown,
}

/// One operation on the register with the answer its client recorded.
///
/// A read whose outcome is unknown tells nothing (it changes nothing, and
/// nothing was observed), so it has no variant: leave it out of the history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegisterCall<V = Vec<u8>> {
    /// A linearizable read (`GetSerial`) and what it returned.
    Read {
        /// The value read; `None`: absent.
        observed: Option<V>,
    },
    /// A plain linearizable put: a compare-and-set expecting anything.
    Write {
        /// The value written.
        value: V,
        /// How it ended.
        ack: WriteAck,
    },
    /// A plain linearizable delete: a compare-and-set expecting anything.
    Delete {
        /// How it ended.
        ack: WriteAck,
    },
    /// A compare-and-set (`PutIf`, `DeleteIf`).
    Cas {
        /// What it expected the register to hold.
        expected: Expected<V>,
        /// What it sets when the expectation holds: a value, or `None`
        /// for a delete.
        new: Option<V>,
        /// How it ended.
        outcome: CasOutcome<V>,
    },
}

impl<V> RegisterCall<V> {
    /// Whether its outcome is unknown (it may never have taken effect).
    pub fn is_unknown(&self) -> bool {
        matches!(
            self,
            RegisterCall::Write {
                ack: WriteAck::Unknown,
                ..
            } | RegisterCall::Delete {
                ack: WriteAck::Unknown
            } | RegisterCall::Cas {
                outcome: CasOutcome::Unknown,
                ..
            }
        )
    }

    /// The same call with every value mapped by `f` (the search interns
    /// values this way).
    pub(crate) fn map<'s, W>(&'s self, mut f: impl FnMut(&'s V) -> W) -> RegisterCall<W> {
        let expected = |expected: &'s Expected<V>, f: &mut dyn FnMut(&'s V) -> W| match expected {
            Expected::Absent => Expected::Absent,
            Expected::Value(v) => Expected::Value(f(v)),
            Expected::Any => Expected::Any,
        };
        match self {
            RegisterCall::Read { observed } => RegisterCall::Read {
                observed: observed.as_ref().map(&mut f),
            },
            RegisterCall::Write { value, ack } => RegisterCall::Write {
                value: f(value),
                ack: *ack,
            },
            RegisterCall::Delete { ack } => RegisterCall::Delete { ack: *ack },
            RegisterCall::Cas {
                expected: e,
                new,
                outcome,
            } => RegisterCall::Cas {
                expected: expected(e, &mut f),
                new: new.as_ref().map(&mut f),
                outcome: match outcome {
                    CasOutcome::Applied => CasOutcome::Applied,
                    CasOutcome::NotApplied { current } => CasOutcome::NotApplied {
                        current: current.as_ref().map(&mut f),
                    },
                    CasOutcome::Unknown => CasOutcome::Unknown,
                },
            },
        }
    }
}

/// Why an operation's recorded answer is impossible from a register state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// A read returned something other than what the register held.
    ReadOther,
    /// A compare-and-set applied, but the register did not meet its
    /// expectation.
    AppliedWithoutMatch,
    /// A compare-and-set did not apply, but the register met its
    /// expectation.
    NotAppliedDespiteMatch,
    /// A compare-and-set did not apply and rightly so, but reported a
    /// current value other than what the register held.
    WrongCurrent,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::ReadOther => "a read returns what the register holds",
            Refusal::AppliedWithoutMatch => {
                "it applied, but the register did not hold what it expected"
            }
            Refusal::NotAppliedDespiteMatch => {
                "it did not apply, but the register held what it expected"
            }
            Refusal::WrongCurrent => {
                "it did not apply, but reported another current value than the register held"
            }
        })
    }
}

/// The register after `call` took effect on `state`, or why its recorded
/// answer cannot come from `state`. Pure. An operation of unknown outcome
/// is never refused: it applies exactly when its expectation holds (a
/// plain write or delete always does).
pub fn step<V: PartialEq + Clone>(
    state: Option<&V>,
    call: &RegisterCall<V>,
) -> Result<Option<V>, Refusal> {
    match call {
        RegisterCall::Read { observed } => {
            if observed.as_ref() == state {
                Ok(state.cloned())
            } else {
                Err(Refusal::ReadOther)
            }
        }
        RegisterCall::Write { value, .. } => Ok(Some(value.clone())),
        RegisterCall::Delete { .. } => Ok(None),
        RegisterCall::Cas {
            expected,
            new,
            outcome,
        } => {
            let matches = expected.matches(state);
            match outcome {
                CasOutcome::Applied if matches => Ok(new.clone()),
                CasOutcome::Applied => Err(Refusal::AppliedWithoutMatch),
                CasOutcome::NotApplied { .. } if matches => Err(Refusal::NotAppliedDespiteMatch),
                CasOutcome::NotApplied { current } if current.as_ref() == state => {
                    Ok(state.cloned())
                }
                CasOutcome::NotApplied { .. } => Err(Refusal::WrongCurrent),
                CasOutcome::Unknown if matches => Ok(new.clone()),
                CasOutcome::Unknown => Ok(state.cloned()),
            }
        }
    }
}

/// A register state for a report: `"v7"` or `absent`.
pub(crate) fn show(state: Option<&[u8]>) -> String {
    state.map_or_else(
        || "absent".to_string(),
        |v| format!("{:?}", String::from_utf8_lossy(v)),
    )
}

impl fmt::Display for RegisterCall {
    /// `read = "v3"`, `write "v9" = ok`, `cas(absent -> "v7") = applied`,
    /// `cas("v1" -> delete) = not applied, current "v2"`, `delete = unknown`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |v: &Option<Vec<u8>>| show(v.as_deref());
        let ack = |ack: &WriteAck| match ack {
            WriteAck::Acked => "ok",
            WriteAck::Unknown => "unknown",
        };
        match self {
            RegisterCall::Read { observed } => write!(f, "read = {}", value(observed)),
            RegisterCall::Write { value: v, ack: a } => {
                write!(f, "write {} = {}", show(Some(v)), ack(a))
            }
            RegisterCall::Delete { ack: a } => write!(f, "delete = {}", ack(a)),
            RegisterCall::Cas {
                expected,
                new,
                outcome,
            } => {
                let expected = match expected {
                    Expected::Absent => "absent".to_string(),
                    Expected::Value(v) => show(Some(v)),
                    Expected::Any => "any".to_string(),
                };
                let new = new
                    .as_deref()
                    .map_or_else(|| "delete".to_string(), |v| show(Some(v)));
                write!(f, "cas({expected} -> {new}) = ")?;
                match outcome {
                    CasOutcome::Applied => f.write_str("applied"),
                    CasOutcome::NotApplied { current } => {
                        write!(f, "not applied, current {}", value(current))
                    }
                    CasOutcome::Unknown => f.write_str("unknown"),
                }
            }
        }
    }
}
