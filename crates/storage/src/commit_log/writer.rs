//! The log's writer thread: takes what writers appended, seals and writes it
//! to the active segment, syncs, and announces the new durable position.
//!
//! # Wake-ups
//! A writer appends under a mutex and wakes the thread (a condition
//! variable) only if it sleeps; while the thread writes and syncs one batch,
//! the next accumulates, so under load one `fdatasync` covers every write
//! that arrived during the previous one (group commit) and the thread is
//! not woken per write. Waiters are woken through one watch channel.
//!
//! # Segments
//! Records never span segments. A batch that does not fit in the active
//! segment is split at a record boundary: the part that fits is written and
//! synced, the segment is closed (handed to the checkpointer's list), and
//! the rest goes to a fresh one. A single record longer than a segment gets
//! a segment of its own, which grows the file.

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::record::{HEADER_LEN, SegmentHeader, record_len, seal_record};
use super::segment::Slot;
use super::{Shared, State};

/// The segment being written.
pub(super) struct Active {
    slot: Slot,
    header: SegmentHeader,
    /// Where the next record goes.
    offset: u64,
}

impl Active {
    /// Starts a new use of `slot` as segment `sequence`.
    pub(super) fn begin(slot: Slot, sequence: u64) -> io::Result<Active> {
        let header = SegmentHeader {
            sequence,
            nonce: fresh_nonce(),
        };
        slot.begin(header)?;
        Ok(Active {
            slot,
            header,
            offset: HEADER_LEN as u64,
        })
    }
}

/// A nonce no earlier use of a file is likely to have had.
fn fresh_nonce() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

/// The writer thread's loop, until the log stops (after writing everything
/// appended) or a write fails (the log is then failed for good).
pub(super) fn run(shared: Arc<Shared>, mut active: Active) {
    let mut spare = Vec::new();
    loop {
        let (mut batch, upto) = {
            let mut state = shared.lock();
            while state.buffer.is_empty() && !state.stopping {
                state.writer_idle = true;
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            state.writer_idle = false;
            if state.buffer.is_empty() {
                return; // stopping, and everything is written
            }
            (std::mem::replace(&mut state.buffer, spare), state.appended)
        };
        let began = Instant::now();
        if let Err(error) = write_batch(&shared, &mut active, &mut batch) {
            shared.fail(error);
            return;
        }
        if let Some(observe) = shared.observer.get() {
            observe(began.elapsed());
        }
        shared
            .progress
            .send_modify(|progress| progress.durable = upto);
        batch.clear();
        spare = batch;
    }
}

/// Seals, writes and syncs `batch` (whole records), rolling to new
/// segments where it does not fit.
fn write_batch(shared: &Shared, active: &mut Active, batch: &mut [u8]) -> io::Result<()> {
    let segment_bytes = shared.options.segment_bytes;
    let (mut start, mut at) = (0, 0);
    while at < batch.len() {
        let len = record_len(&batch[at..]);
        let end = active.offset + (at + len - start) as u64;
        let segment_is_empty = active.offset == HEADER_LEN as u64 && at == start;
        if end > segment_bytes && !segment_is_empty {
            write_part(active, &batch[start..at])?;
            roll(shared, active)?;
            start = at;
            continue;
        }
        seal_record(&mut batch[at..at + len], active.header.nonce);
        at += len;
    }
    write_part(active, &batch[start..])
}

/// Writes `bytes` at the active segment's end and syncs them.
fn write_part(active: &mut Active, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    active.slot.write_at(bytes, active.offset)?;
    active.offset += bytes.len() as u64;
    active.slot.sync()
}

/// Closes the active segment (its records are all synced) and begins the
/// next, in a free slot or a new one.
fn roll(shared: &Shared, active: &mut Active) -> io::Result<()> {
    let (free, number) = {
        let mut state = shared.lock();
        let free = state.free.pop();
        if free.is_none() {
            state.highest_slot += 1;
        }
        (free, state.highest_slot)
    };
    let slot = match free {
        Some(slot) => slot,
        None => Slot::create(&shared.options.dir, number, shared.options.segment_bytes)?,
    };
    let next = Active::begin(slot, active.header.sequence + 1)?;
    let closed = std::mem::replace(active, next);
    let full = {
        let mut state: MutexGuard<'_, State> = shared.lock();
        state.closed.push(closed.slot);
        state.closed.len()
    };
    shared.full_segments.send_replace(full);
    Ok(())
}
