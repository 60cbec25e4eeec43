//! Wing & Gong's search with Lowe's cache, over one key's register.
//!
//! The history becomes a doubly linked list of call and return entries in
//! time order (a call before a return at the same instant: closed
//! intervals, so touching operations count as concurrent). The operations
//! that may come next in a linearization are those whose call comes
//! before the first return left in the list: the first return belongs to
//! the operation that completed earliest among those not yet placed, and
//! everything placed after it must have been invoked before it completed.
//! Placing an operation unlinks its entries; backtracking links them back
//! (in reverse order, as dancing links do). Operations of unknown outcome
//! have no return entry: they never force anything to come before them.
//!
//! The search is depth-first with an explicit stack of frames (no
//! recursion: 2,000 operations deep must not overflow a thread's stack),
//! each frame holding the state it reached and the candidates it has yet
//! to try: those of known outcome first, in call order, then those of
//! unknown outcome (placed only when nothing known fits, since most of them
//! never took effect).

use std::collections::{HashMap, HashSet};

use super::cache::{Cache, Linearized};
use super::model::{Expected, RegisterCall, step};
use super::op::RegisterOp;

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// One key's operations, compiled for the search: values interned, unknown
/// operations nobody can have observed set aside, entries linked.
pub(crate) struct Search<'a> {
    /// The distinct values, by interned id.
    values: Vec<&'a [u8]>,
    /// The operations searched, as indices into the key's operations.
    pub(crate) active: Vec<usize>,
    /// How many unknown operations were set aside (see `compile`).
    pub(crate) set_aside: usize,
    calls: Vec<RegisterCall<u32>>,
    known: Vec<bool>,
    /// Per entry (0 is the head): its operation and whether it is a call.
    entries: Vec<(u32, bool)>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Per operation: its call entry and its return entry (`NIL`: none).
    call_entry: Vec<u32>,
    return_entry: Vec<u32>,
}

/// What the search found.
pub(crate) enum Found {
    /// Every operation of known outcome placed in a legal order.
    Linearizable,
    /// No legal order exists: the deepest point reached.
    Stuck(Stuck),
    /// The budget ran out first, with at most `deepest` known operations
    /// placed in any order tried.
    Exhausted { deepest: usize },
}

/// Where the search got furthest before every way on failed. Operations
/// are indices into the key's operations.
pub(crate) struct Stuck {
    /// The longest legal order found, in order.
    pub(crate) prefix: Vec<usize>,
    /// The register after it.
    pub(crate) state: Option<Vec<u8>>,
    /// The operations that could have come next (invoked before `blocking`
    /// completed), none of which led anywhere.
    pub(crate) candidates: Vec<usize>,
    /// The not-yet-placed operation that completed first: it, or one
    /// concurrent with it, had to come next.
    pub(crate) blocking: Option<usize>,
}

/// A frame of the depth-first search.
struct Frame {
    /// The register here (an interned value).
    state: Option<u32>,
    /// The operation placed to get here (`None`: the root).
    placed: Option<u32>,
    /// The operations that may come next, and how many were tried.
    candidates: Vec<u32>,
    tried: usize,
    /// The operation whose return ended the candidates.
    blocking: u32,
}

impl<'a> Search<'a> {
    /// Compiles `ops` (all of one key).
    ///
    /// An operation of unknown outcome that can only set a value nobody
    /// ever observed (no read returned it, no compare-and-set expected it
    /// or reported it current) is set aside: any legal order that places
    /// it stays legal without it, since the next operation to look at the
    /// register would have had to see that value, and the operations that
    /// do not look (writes, deletes, sets expecting anything, and unknown
    /// sets, which may as well not be placed) behave the same from any
    /// state.
    pub(crate) fn compile(ops: &[&'a RegisterOp]) -> Search<'a> {
        let mut observed: HashSet<&[u8]> = HashSet::new();
        for op in ops {
            match &op.call {
                RegisterCall::Read { observed: Some(v) } => {
                    observed.insert(v);
                }
                RegisterCall::Cas {
                    expected, outcome, ..
                } => {
                    if let Expected::Value(v) = expected {
                        observed.insert(v);
                    }
                    if let super::model::CasOutcome::NotApplied { current: Some(v) } = outcome {
                        observed.insert(v);
                    }
                }
                _ => {}
            }
        }
        let unobservable = |op: &RegisterOp| {
            op.call.is_unknown()
                && match &op.call {
                    RegisterCall::Write { value, .. } => !observed.contains(value.as_slice()),
                    RegisterCall::Cas { new: Some(v), .. } => !observed.contains(v.as_slice()),
                    _ => false,
                }
        };
        let active: Vec<usize> = (0..ops.len()).filter(|&i| !unobservable(ops[i])).collect();
        let set_aside = ops.len() - active.len();

        let mut ids: HashMap<&[u8], u32> = HashMap::new();
        let mut values: Vec<&[u8]> = Vec::new();
        let calls: Vec<RegisterCall<u32>> = active
            .iter()
            .map(|&i| {
                ops[i].call.map(|v: &Vec<u8>| {
                    *ids.entry(v.as_slice()).or_insert_with(|| {
                        values.push(v);
                        (values.len() - 1) as u32
                    })
                })
            })
            .collect();
        let known: Vec<bool> = calls.iter().map(|c| !c.is_unknown()).collect();

        // Events in time order; a call before a return at the same instant.
        let mut events: Vec<(std::time::Duration, bool, u32)> = Vec::new();
        for (local, &i) in active.iter().enumerate() {
            let op = ops[i];
            events.push((op.invoked, false, local as u32));
            if let Some(deadline) = op.deadline() {
                events.push((deadline, true, local as u32));
            }
        }
        events.sort_unstable();
        let n = events.len();
        let mut entries = Vec::with_capacity(n + 1);
        entries.push((NIL, false));
        let mut call_entry = vec![NIL; active.len()];
        let mut return_entry = vec![NIL; active.len()];
        for (index, &(_, is_return, op)) in events.iter().enumerate() {
            let entry = (index + 1) as u32;
            entries.push((op, !is_return));
            if is_return {
                return_entry[op as usize] = entry;
            } else {
                call_entry[op as usize] = entry;
            }
        }
        let next = (0..=n)
            .map(|e| if e == n { NIL } else { (e + 1) as u32 })
            .collect();
        let prev = (0..=n)
            .map(|e| if e == 0 { NIL } else { (e - 1) as u32 })
            .collect();
        Search {
            values,
            active,
            set_aside,
            calls,
            known,
            entries,
            next,
            prev,
            call_entry,
            return_entry,
        }
    }

    fn unlink(&mut self, entry: u32) {
        let (p, n) = (self.prev[entry as usize], self.next[entry as usize]);
        self.next[p as usize] = n;
        if n != NIL {
            self.prev[n as usize] = p;
        }
    }

    fn relink(&mut self, entry: u32) {
        let (p, n) = (self.prev[entry as usize], self.next[entry as usize]);
        self.next[p as usize] = entry;
        if n != NIL {
            self.prev[n as usize] = entry;
        }
    }

    fn lift(&mut self, op: u32) {
        self.unlink(self.call_entry[op as usize]);
        if self.return_entry[op as usize] != NIL {
            self.unlink(self.return_entry[op as usize]);
        }
    }

    fn unlift(&mut self, op: u32) {
        if self.return_entry[op as usize] != NIL {
            self.relink(self.return_entry[op as usize]);
        }
        self.relink(self.call_entry[op as usize]);
    }

    /// A frame at `state`: the candidates (calls before the first return),
    /// known ones first.
    fn frame(&self, state: Option<u32>, placed: Option<u32>) -> Frame {
        let mut candidates = Vec::new();
        let mut unknown = Vec::new();
        let mut blocking = NIL;
        let mut entry = self.next[HEAD as usize];
        while entry != NIL {
            let (op, is_call) = self.entries[entry as usize];
            if !is_call {
                blocking = op;
                break;
            }
            if self.known[op as usize] {
                candidates.push(op);
            } else {
                unknown.push(op);
            }
            entry = self.next[entry as usize];
        }
        candidates.append(&mut unknown);
        Frame {
            state,
            placed,
            candidates,
            tried: 0,
            blocking,
        }
    }

    /// Searches within `max_steps`; returns what it found and the steps
    /// taken.
    pub(crate) fn run(&mut self, max_steps: u64) -> (Found, u64, usize) {
        let known_total = self.known.iter().filter(|&&k| k).count();
        let mut known_left = known_total;
        let mut steps = 0u64;
        if known_left == 0 {
            return (Found::Linearizable, steps, 0);
        }
        let mut linearized = Linearized::new(self.calls.len());
        let mut cache = Cache::new(self.calls.len());
        let mut stack = vec![self.frame(None, None)];
        let mut stuck: Option<(usize, Stuck)> = None;
        while let Some(top) = stack.last_mut() {
            if top.tried == top.candidates.len() {
                // Every way on from here failed.
                // The furthest point: the most known operations placed,
                // then the fewest unknown ones (fewer guesses to read).
                let depth = known_total - known_left;
                let further = stuck.as_ref().is_none_or(|(deepest, s)| {
                    depth > *deepest || (depth == *deepest && stack.len() - 1 < s.prefix.len())
                });
                if further {
                    stuck = self.stuck(&stack).map(|s| (depth, s));
                }
                let Some(frame) = stack.pop() else {
                    break;
                };
                if let Some(op) = frame.placed {
                    linearized.flip(op as usize);
                    self.unlift(op);
                    if self.known[op as usize] {
                        known_left += 1;
                    }
                }
                continue;
            }
            let op = top.candidates[top.tried];
            top.tried += 1;
            if steps == max_steps {
                let deepest = stuck
                    .map_or(0, |(deepest, _)| deepest)
                    .max(known_total - known_left);
                return (Found::Exhausted { deepest }, steps, cache.len());
            }
            steps += 1;
            let Ok(state) = step(top.state.as_ref(), &self.calls[op as usize]) else {
                continue;
            };
            let known = self.known[op as usize];
            if !known && state == top.state {
                // Changes nothing and observed nothing: as if never placed.
                continue;
            }
            linearized.flip(op as usize);
            if !cache.insert(&linearized, state.map_or(0, |v| v + 1)) {
                linearized.flip(op as usize);
                continue;
            }
            self.lift(op);
            if known {
                known_left -= 1;
                if known_left == 0 {
                    return (Found::Linearizable, steps, cache.len());
                }
            }
            let frame = self.frame(state, Some(op));
            stack.push(frame);
        }
        let found = match stuck {
            Some((_, stuck)) => Found::Stuck(stuck),
            // Unreachable: the root frame is exhausted before the stack
            // empties, and that records where the search stood.
            None => Found::Exhausted { deepest: 0 },
        };
        (found, steps, cache.len())
    }

    /// Where the search stands, with `stack` about to be unwound from its
    /// top frame.
    fn stuck(&self, stack: &[Frame]) -> Option<Stuck> {
        let top = stack.last()?;
        Some(Stuck {
            prefix: stack
                .iter()
                .filter_map(|f| f.placed)
                .map(|op| self.active[op as usize])
                .collect(),
            state: top.state.map(|v| self.values[v as usize].to_vec()),
            candidates: top
                .candidates
                .iter()
                .map(|&op| self.active[op as usize])
                .collect(),
            blocking: self.active.get(top.blocking as usize).copied(),
        })
    }
}
