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
//! # Sync window
//! With [`CommitLogOptions::sync_window`] set, a batch starts no sooner than
//! the window after the previous one began: the thread sleeps out the rest
//! of the window before taking what was appended, so syncs per second are
//! at most one per window and each covers more writes. A log that is
//! stopping does not wait.
//!
//! [`CommitLogOptions::sync_window`]: super::CommitLogOptions::sync_window
//!
//! # Segments
//! Each synced part of a batch is one section: a sync marker, then its
//! records (`record.rs`), so replay can tell damage from a torn tail.
//! Records never span segments. A batch that does not fit in the active
//! segment is split at a record boundary: the part that fits is written and
//! synced, the segment is closed (handed to the checkpointer's list), and
//! the rest goes to a fresh one. A single record longer than a segment gets
//! a segment of its own, which grows the file.
//!
//! # Spare segments
//! Creating a segment file writes it full of zeros and syncs it: 10–20 ms
//! on the benchmark machine, likely far more when the disk is busy, and every
//! write waits while the writer does it. So once the active segment is
//! half full and no free slot is left, a short-lived thread creates one
//! spare slot in the background; a roll creates a file itself only when
//! writes outran that thread. (Half full, not at once: a node that writes
//! little never needs a second file.) A spare left half-written by a crash
//! is an ordinary slot shorter than the rest: writes beyond its end grow
//! it.

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::record::{
    HEADER_LEN, Layout, MARKER_LEN, SegmentHeader, encode_marker, record_len, seal_record,
};
use super::segment::Slot;
use super::{Shared, State};

/// The segment being written.
pub(super) struct Active {
    slot: Slot,
    header: SegmentHeader,
    /// Where the next record goes.
    offset: u64,
    /// Whether a spare was asked for since this segment began.
    spare_asked: bool,
    /// Kept inline only: the log position up to which records are written,
    /// synced or not (see [`write_appended`]).
    written: u64,
}

impl Active {
    /// Starts a new use of `slot` as segment `sequence`.
    pub(super) fn begin(slot: Slot, sequence: u64) -> io::Result<Active> {
        let header = SegmentHeader {
            sequence,
            nonce: fresh_nonce(),
            layout: Layout::Sections,
        };
        slot.begin(header)?;
        Ok(Active {
            slot,
            header,
            offset: HEADER_LEN as u64,
            spare_asked: false,
            written: 0,
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
    let shared = &shared;
    let mut spare = Vec::new();
    let mut last_began: Option<Instant> = None;
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
            let rest = window_rest(shared.options.sync_window, last_began);
            if !rest.is_zero() && !state.stopping {
                drop(state);
                std::thread::sleep(rest);
                state = shared.lock();
            }
            (std::mem::replace(&mut state.buffer, spare), state.appended)
        };
        let began = Instant::now();
        last_began = Some(began);
        if let Err(error) = write_batch(shared, &mut active, &mut batch, LastSync::Now) {
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

/// Writes and syncs everything appended so far, on the caller's thread:
/// the writer of a log kept inline (a deterministic simulation, see
/// `CommitLog::inline`). A failure fails the log for good, as the thread's
/// would.
///
/// The last section's sync comes [`INLINE_SYNC_TIME`] after its write, in
/// the simulation's time, so a crash may find it written and not synced.
///
///
/// Cancel-safe: the waiter running it may be dropped at the sleep (its
/// request timed out). The batch it wrote is then written and not synced,
/// and no longer in the buffer; `active.written` remembers it, so the next
/// waiter syncs it instead of finding nothing to write and waiting forever.
///
/// [`INLINE_SYNC_TIME`]: super::INLINE_SYNC_TIME
pub(super) async fn write_appended(shared: &Arc<Shared>, active: &mut Active) {
    let batch = {
        let mut state = shared.lock();
        if state.failure.is_some() {
            return;
        }
        (!state.buffer.is_empty()).then(|| (std::mem::take(&mut state.buffer), state.appended))
    };
    if let Some((mut batch, upto)) = batch {
        if let Err(error) = write_batch(shared, active, &mut batch, LastSync::Deferred) {
            shared.fail(error);
            return;
        }
        active.written = upto;
    }
    let upto = active.written;
    if upto <= shared.progress.borrow().durable {
        return;
    }
    tokio::time::sleep(super::INLINE_SYNC_TIME).await;
    if let Err(error) = active.slot.sync() {
        shared.fail(error);
        return;
    }
    shared
        .progress
        .send_modify(|progress| progress.durable = progress.durable.max(upto));
}

/// Whether [`write_batch`] syncs the batch's last section itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LastSync {
    /// Synced before `write_batch` returns.
    Now,
    /// Left for the caller to sync.
    Deferred,
}

/// What is left of the sync window that began with the batch started at
/// `last_began` (zero without a window or a previous batch).
fn window_rest(window: Duration, last_began: Option<Instant>) -> Duration {
    last_began.map_or(Duration::ZERO, |began| {
        window.saturating_sub(began.elapsed())
    })
}

/// Seals, writes and syncs `batch` (whole records), rolling to new
/// segments where it does not fit; the last section's sync as `last_sync`
/// says.
fn write_batch(
    shared: &Arc<Shared>,
    active: &mut Active,
    batch: &mut [u8],
    last_sync: LastSync,
) -> io::Result<()> {
    let segment_bytes = shared.options.segment_bytes;
    let (mut start, mut at) = (0, 0);
    while at < batch.len() {
        let len = record_len(&batch[at..]);
        let end = active.offset + (MARKER_LEN + at + len - start) as u64;
        let segment_is_empty = active.offset == HEADER_LEN as u64 && at == start;
        if end > segment_bytes && !segment_is_empty {
            write_part(active, &batch[start..at])?;
            active.slot.sync()?;
            roll(shared, active)?;
            start = at;
            continue;
        }
        seal_record(&mut batch[at..at + len], active.header.nonce);
        at += len;
    }
    write_part(active, &batch[start..])?;
    if last_sync == LastSync::Now {
        active.slot.sync()?;
    }
    if !active.spare_asked && active.offset > segment_bytes / 2 {
        active.spare_asked = true;
        prepare_spare(shared);
    }
    Ok(())
}

/// Writes `bytes` (sealed records) as one section at the active segment's
/// end, behind its sync marker; the caller syncs them before it writes
/// anything else (the next section must not be durable before this one).
fn write_part(active: &mut Active, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let marker = encode_marker(active.header.nonce, active.offset, bytes.len());
    active.slot.write_at(&marker, active.offset)?;
    active
        .slot
        .write_at(bytes, active.offset + MARKER_LEN as u64)?;
    active.offset += (MARKER_LEN + bytes.len()) as u64;
    Ok(())
}

/// Closes the active segment (its records are all synced) and begins the
/// next, in a free slot or a new one.
fn roll(shared: &Arc<Shared>, active: &mut Active) -> io::Result<()> {
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
        None => Slot::create(
            shared.files.as_ref(),
            &shared.options.dir,
            number,
            shared.options.segment_bytes,
        )?,
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

/// Starts creating a spare slot in the background if the free list is
/// empty, no spare is being created already and the log is not stopping
/// (see "Spare segments"). A failure is only logged: the next roll then
/// creates its slot itself, and fails the log if that fails too.
fn prepare_spare(shared: &Arc<Shared>) {
    let number = {
        let mut state = shared.lock();
        // Inline (a simulation), a roll creates its slot itself.
        if !state.free.is_empty()
            || state.preparing_spare
            || state.stopping
            || crate::offload::runs_inline()
        {
            return;
        }
        state.preparing_spare = true;
        state.highest_slot += 1;
        state.highest_slot
    };
    let spare_shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("commit-log-spare".into())
        .spawn(move || create_spare(&spare_shared, number));
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not start creating a spare commit log segment");
        shared.lock().preparing_spare = false;
    }
}

/// Creates slot `number` and adds it to the free list.
fn create_spare(shared: &Shared, number: u32) {
    let options = &shared.options;
    let created = Slot::create(
        shared.files.as_ref(),
        &options.dir,
        number,
        options.segment_bytes,
    );
    let mut state = shared.lock();
    state.preparing_spare = false;
    match created {
        Ok(slot) => state.free.push(slot),
        Err(error) => {
            drop(state);
            tracing::warn!(%error, slot = number, "could not create a spare commit log segment");
        }
    }
}
