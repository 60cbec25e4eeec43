//! The coordinator's replica writes to each peer on one long-lived
//! `Internode/ApplyStream`, instead of a unary `Apply` call per batch.
//!
//! # Why
//! A unary gRPC call is an HTTP/2 stream of its own: HEADERS with the path
//! and this node's proof, DATA, trailers, HPACK on both sides, and a task
//! per stream in the peer's hyper. At moderate load a call carries only a
//! few writes (about four at half of the 3-node maximum), so that overhead
//! is paid about once per two client puts. A stream pays it once; each call
//! is then one message tagged with an id, answered by a message with the
//! same id (`services/apply_stream.rs` is the replica's side).
//!
//! # Shape
//! - One stream per peer address, opened by the first call that finds none
//!   and kept until it ends: the peer stops or restarts, the connection
//!   drops (keep-alive pings find a vanished peer), or the peer refuses it.
//!   When it ends, every call waiting on it fails with its status, as the
//!   calls in flight on a broken connection would, and the next call opens
//!   a new one.
//! - Calls keep their shape: the per-peer queues (`peer_calls/mod.rs`) still
//!   send one batch at a time per peer (a scan's repair writes are calls of
//!   their own on the same stream), and each waits for its own answer,
//!   given up after the write timeout as before. A call that gave up is
//!   forgotten; its answer, if it comes, is dropped.
//! - A peer that does not know `ApplyStream` (an older build, during a
//!   rolling upgrade) answers the opening with `UNIMPLEMENTED`: its calls
//!   go back as [`Streamed::Unsupported`] (the caller makes the unary
//!   call), and it gets unary calls for [`RETRY_UNSUPPORTED_AFTER`] before
//!   a stream is tried again. Until a stream is known open, each call keeps
//!   a copy of its request for that case.
//! - The stream is authenticated once, when it opens (the proof is on its
//!   headers); the peer checks at each call that this node is still a
//!   member.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use ringstore_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Code, Status};

use crate::peers::PeerClient;

/// How long a peer that does not serve `ApplyStream` gets unary calls
/// before a stream is tried again (it may have been upgraded meanwhile).
pub const RETRY_UNSUPPORTED_AFTER: Duration = Duration::from_secs(60);

/// The outcome of a call on a peer's stream.
#[derive(Debug)]
pub enum Streamed {
    /// The peer's answer, or why there is none (the call failed, or the
    /// stream ended before the answer came).
    Answered(Result<pb::ApplyResponse, Status>),
    /// The peer does not serve `ApplyStream`: make a unary call with this
    /// request.
    Unsupported(pb::ApplyRequest),
}

/// Every peer's apply stream.
#[derive(Default)]
pub struct ApplyStreams {
    /// Held only to look up, insert or remove a stream, never across an
    /// await.
    peers: Mutex<HashMap<SocketAddr, PeerStream>>,
}

/// What this node knows of one peer's stream.
enum PeerStream {
    /// Opening or open.
    Live(Arc<OpenStream>),
    /// The peer answered an opening with `UNIMPLEMENTED` at `since`.
    Unsupported { since: Instant },
}

/// One stream: where calls go out, and who waits for which answer.
struct OpenStream {
    frames: mpsc::UnboundedSender<pb::ApplyFrame>,
    /// Set once the peer has answered the opening: from then on the peer
    /// is known to serve the stream, and calls keep no copy of their
    /// request.
    confirmed: AtomicBool,
    /// Held only to register or settle a call, never across an await.
    calls: Mutex<Calls>,
}

/// The calls of one stream.
#[derive(Default)]
struct Calls {
    next_id: u64,
    waiting: HashMap<u64, oneshot::Sender<Outcome>>,
    /// Why the stream ended, once it has: later calls fail at once.
    ended: Option<Outcome>,
}

/// What a waiting call is told.
#[derive(Clone, Debug)]
enum Outcome {
    Answered(Result<pb::ApplyResponse, Status>),
    Unsupported,
}

impl ApplyStreams {
    /// Sends `request` to the peer at `address` on its stream (opened with
    /// a client from `open` if it has none) and waits for the answer.
    pub async fn call(
        self: &Arc<Self>,
        address: SocketAddr,
        open: impl FnOnce() -> PeerClient,
        request: pb::ApplyRequest,
    ) -> Streamed {
        let Some((stream, opening)) = self.stream_for(address) else {
            return Streamed::Unsupported(request);
        };
        if let Some(frames) = opening {
            tokio::spawn(run(
                Arc::downgrade(self),
                address,
                open(),
                frames,
                Arc::clone(&stream),
            ));
        }
        let spare = (!stream.confirmed.load(Ordering::Acquire)).then(|| request.clone());
        let outcome = stream.call(request).await;
        match (outcome, spare) {
            (Outcome::Answered(result), _) => Streamed::Answered(result),
            (Outcome::Unsupported, Some(request)) => Streamed::Unsupported(request),
            // Only an opening is refused as unsupported, and every call
            // made before the opening was answered keeps a copy.
            (Outcome::Unsupported, None) => Streamed::Answered(Err(Status::internal(format!(
                "{address}: the apply stream was refused after it opened"
            )))),
        }
    }

    /// The peer's stream, and the receiving end of its frames if this call
    /// must open it; `None` while the peer is known not to serve streams.
    fn stream_for(
        &self,
        address: SocketAddr,
    ) -> Option<(
        Arc<OpenStream>,
        Option<mpsc::UnboundedReceiver<pb::ApplyFrame>>,
    )> {
        let mut peers = self.lock();
        match peers.get(&address) {
            Some(PeerStream::Live(stream)) if !stream.has_ended() => {
                return Some((Arc::clone(stream), None));
            }
            Some(PeerStream::Unsupported { since })
                if since.elapsed() < RETRY_UNSUPPORTED_AFTER =>
            {
                return None;
            }
            _ => {}
        }
        let (frames, receiver) = mpsc::unbounded_channel();
        let stream = Arc::new(OpenStream {
            frames,
            confirmed: AtomicBool::new(false),
            calls: Mutex::default(),
        });
        peers.insert(address, PeerStream::Live(Arc::clone(&stream)));
        Some((stream, Some(receiver)))
    }

    /// Forgets `stream` (ended with `outcome`), unless a newer one has
    /// taken its place.
    fn ended(&self, address: SocketAddr, stream: &Arc<OpenStream>, outcome: &Outcome) {
        let mut peers = self.lock();
        if let Some(PeerStream::Live(current)) = peers.get(&address)
            && Arc::ptr_eq(current, stream)
        {
            match outcome {
                Outcome::Unsupported => {
                    let since = Instant::now();
                    peers.insert(address, PeerStream::Unsupported { since });
                }
                Outcome::Answered(_) => {
                    peers.remove(&address);
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SocketAddr, PeerStream>> {
        self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl OpenStream {
    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn has_ended(&self) -> bool {
        self.lock().ended.is_some()
    }

    /// Sends `request` as a frame of its own and waits for its answer.
    async fn call(&self, request: pb::ApplyRequest) -> Outcome {
        let (id, answer) = {
            let mut calls = self.lock();
            if let Some(ended) = &calls.ended {
                return ended.clone();
            }
            let id = calls.next_id;
            calls.next_id += 1;
            let (sender, answer) = oneshot::channel();
            calls.waiting.insert(id, sender);
            (id, answer)
        };
        // Forgets the call if it is dropped (its caller gave up) before
        // the answer came.
        struct Forget<'a>(&'a OpenStream, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.lock().waiting.remove(&self.1);
            }
        }
        let _forget = Forget(self, id);
        let frame = pb::ApplyFrame {
            id,
            request: Some(request),
        };
        if self.frames.send(frame).is_err() {
            return Outcome::Answered(Err(Status::unavailable("the apply stream has ended")));
        }
        answer.await.unwrap_or_else(|_| {
            Outcome::Answered(Err(Status::unavailable("the apply stream has ended")))
        })
    }

    /// Hands the answer with `id` to its call, if it still waits.
    fn answered(&self, answer: pb::ApplyAnswer) {
        let Some(waiting) = self.lock().waiting.remove(&answer.id) else {
            return;
        };
        let result = match Code::from_i32(answer.code) {
            Code::Ok => Ok(answer.response.unwrap_or_default()),
            code => Err(Status::new(code, answer.message)),
        };
        // The caller may have stopped waiting: nobody listening is fine.
        let _ = waiting.send(Outcome::Answered(result));
    }

    /// Ends the stream with `outcome`: every call waiting gets it, and so
    /// does every later one.
    fn end(&self, outcome: &Outcome) {
        let waiting = {
            let mut calls = self.lock();
            calls.ended = Some(outcome.clone());
            std::mem::take(&mut calls.waiting)
        };
        for (_, sender) in waiting {
            let _ = sender.send(outcome.clone());
        }
    }
}

/// Opens `stream` to `address` with `client`, sending `frames`, and hands
/// out its answers until it ends; then ends `stream` and forgets it.
async fn run(
    streams: Weak<ApplyStreams>,
    address: SocketAddr,
    mut client: PeerClient,
    frames: mpsc::UnboundedReceiver<pb::ApplyFrame>,
    stream: Arc<OpenStream>,
) {
    let outcome = match client
        .apply_stream(UnboundedReceiverStream::new(frames))
        .await
    {
        Err(status) if status.code() == Code::Unimplemented => Outcome::Unsupported,
        Err(status) => Outcome::Answered(Err(status)),
        Ok(answers) => {
            stream.confirmed.store(true, Ordering::Release);
            let mut answers = answers.into_inner();
            loop {
                match answers.message().await {
                    Ok(Some(answer)) => stream.answered(answer),
                    Ok(None) => {
                        break Outcome::Answered(Err(Status::unavailable(format!(
                            "{address}: the peer ended the apply stream"
                        ))));
                    }
                    Err(status) => break Outcome::Answered(Err(status)),
                }
            }
        }
    };
    if let Some(streams) = streams.upgrade() {
        streams.ended(address, &stream, &outcome);
    }
    stream.end(&outcome);
}
