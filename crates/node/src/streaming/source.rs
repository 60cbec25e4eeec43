//! The sending side: a range's cells in token order, as throttled chunks.

use std::sync::Arc;

use ringstore_placement::{HostId, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_storage::KeyspaceId;
use ringstore_storage::offload::{self, Feed};
use tokio::sync::mpsc;
use tonic::Status;

use crate::convert::cell_to_pb;
use crate::error::streaming::SendFailure;
use crate::error::{NodeError, RangeStreamError};
use crate::streaming::host::StreamHost;
use ringstore_streaming::{
    Chunk, Chunker, Direction, EntryChecksum, Session, SessionInfo, StreamOperation,
};

/// The most a chunk holds (it may exceed this by the cells of one token).
pub const CHUNK_BYTES: u64 = 256 * 1024;

/// Starts sending `range` of `keyspace` to `peer` (who asked for it):
/// returns the receiving end of the chunks, which a task fills, throttled.
/// The task stops when the receiver goes away.
pub fn send_range<H: StreamHost + 'static>(
    context: Arc<H>,
    keyspace: KeyspaceId,
    range: TokenRange,
    peer: Option<HostId>,
    operation: StreamOperation,
) -> mpsc::Receiver<Result<pb::StreamChunk, Status>> {
    let (sender, receiver) = mpsc::channel(2);
    tokio::spawn(async move {
        let session = context.streams().open(SessionInfo {
            operation: operation.kind().to_string(),
            direction: Direction::Sending,
            peer: peer.unwrap_or(HostId::from_u128(0)),
            peer_address: peer
                .and_then(|p| context.view().member(p).map(|m| m.metadata.client_addr)),
            keyspace: context.keyspace_name(keyspace),
            ranges_total: 1,
            bytes_total: 0,
        });
        let outcome = match stream(&*context, keyspace, range, &sender, &session).await {
            Ok(()) => {
                session.range_done();
                Ok(())
            }
            Err(source) => {
                let error = NodeError::from(RangeStreamError::Send { range, source });
                tracing::debug!(%range, %error, "stopped sending a range");
                let outcome = Err(error.to_string());
                let _ = sender.send(Err(Status::from(error))).await;
                outcome
            }
        };
        session.finish(outcome);
    });
    receiver
}

/// What the scanning thread hands to the sending task.
enum Scanned {
    /// A full chunk.
    Chunk(Chunk),
    /// The scan is over: the whole stream's checksum.
    Done(EntryChecksum),
}

async fn stream(
    context: &impl StreamHost,
    keyspace: KeyspaceId,
    range: TokenRange,
    sender: &mpsc::Sender<Result<pb::StreamChunk, Status>>,
    session: &Session,
) -> Result<(), SendFailure> {
    // The scan and the chunking run on the blocking pool (sled may block on
    // I/O), at most two chunks ahead of the throttled sender.
    let (chunks, mut scanned) = offload::channel(2);
    let store = context.store().clone();
    let scan = offload::spawn_blocking(move || scan_chunks(&store, keyspace, range, &chunks));
    let total = loop {
        match scanned.recv().await {
            Some(Scanned::Chunk(chunk)) => send_chunk(context, chunk, sender, session).await?,
            Some(Scanned::Done(total)) => break total,
            None => {
                // The scan stopped early: its error says why.
                return Err(match scan.await {
                    Ok(Err(error)) => error,
                    Ok(Ok(())) => SendFailure::NoChecksum,
                    Err(error) => SendFailure::ScanTask(error),
                });
            }
        }
    };
    let end = pb::StreamChunk {
        entries: Vec::new(),
        checksum: EntryChecksum::default().value(),
        last_token: range.end.0,
        last: true,
        total_entries: total.entries(),
        total_checksum: total.value(),
    };
    sender
        .send(Ok(end))
        .await
        .map_err(|_| SendFailure::ReceiverGone)
}

/// Scans `range` of `keyspace` in token order and hands its chunks, then the
/// stream's checksum, to `chunks`. Blocking; stops when the receiver is gone.
fn scan_chunks(
    store: &ringstore_storage::Store,
    keyspace: KeyspaceId,
    range: TokenRange,
    chunks: &Feed<Scanned>,
) -> Result<(), SendFailure> {
    let gone = |_| SendFailure::SenderGone;
    let mut chunker = Chunker::new(CHUNK_BYTES);
    for entry in store.scan(keyspace, range).map_err(SendFailure::Scan)? {
        // A cell that does not read back (counted and logged by the store)
        // fails the stream, naming its key, rather than leave a hole in
        // what the receiver is told is the whole range: the receiver's
        // fetch resumes after its last chunk from another replica once
        // this one has failed a few times (`ringstore_streaming::fetch`).
        let (token, key, cell) = entry.map_err(SendFailure::Scan)?;
        if let Some(chunk) = chunker.push(token, key, cell) {
            chunks.send(Scanned::Chunk(chunk)).map_err(gone)?;
        }
    }
    if let Some(chunk) = chunker.finish() {
        chunks.send(Scanned::Chunk(chunk)).map_err(gone)?;
    }
    chunks
        .send(Scanned::Done(chunker.total().clone()))
        .map_err(gone)
}

/// Sends one chunk through the node's stream throttle.
async fn send_chunk(
    context: &impl StreamHost,
    chunk: Chunk,
    sender: &mpsc::Sender<Result<pb::StreamChunk, Status>>,
    session: &Session,
) -> Result<(), SendFailure> {
    let bytes = chunk.bytes;
    context.stream_throttle().acquire(bytes).await;
    let message = pb::StreamChunk {
        checksum: chunk.checksum,
        last_token: chunk.last_token.0,
        entries: chunk
            .entries
            .into_iter()
            .map(|(key, cell)| pb::StreamEntry {
                cell: Some(cell_to_pb(&cell)),
                key,
            })
            .collect(),
        ..pb::StreamChunk::default()
    };
    sender
        .send(Ok(message))
        .await
        .map_err(|_| SendFailure::ReceiverGone)?;
    session.add_bytes(bytes);
    Ok(())
}
