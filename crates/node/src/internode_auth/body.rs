//! The request bodies that add message tags (the caller's) and check and
//! strip them (the receiver's): see `ringstore_internode_auth::messages`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use ringstore_internode_auth::{MessageOpener, MessageSealer, MessageSplitter, Refusal};
use tonic::Status;
use tonic::body::Body;

/// The most bytes of one message, tag included (a 64 MiB gRPC message).
const MAX_SEALED_MESSAGE: usize = 64 * 1024 * 1024 + ringstore_internode_auth::messages::TAG_LEN;
/// A message this small is handed on in one piece with its header (one
/// copy); a larger one as two, without copying it.
const JOIN_BELOW: usize = 16 * 1024;

/// What a sealing or opening body does with each whole message.
pub(super) trait Transform: Unpin {
    /// The frames that replace message `message` (flag `flag`).
    fn transform(&mut self, flag: u8, message: Bytes) -> Result<Vec<Bytes>, Refusal>;
}

impl Transform for MessageSealer {
    fn transform(&mut self, flag: u8, message: Bytes) -> Result<Vec<Bytes>, Refusal> {
        Ok(vec![self.seal(flag, &message)])
    }
}

impl Transform for MessageOpener {
    fn transform(&mut self, flag: u8, sealed: Bytes) -> Result<Vec<Bytes>, Refusal> {
        let (header, message) = self.open(flag, sealed)?;
        if message.len() < JOIN_BELOW {
            let mut frame = BytesMut::with_capacity(header.len() + message.len());
            frame.put_slice(&header);
            frame.put_slice(&message);
            return Ok(vec![frame.freeze()]);
        }
        Ok(vec![header, message])
    }
}

/// A request body whose gRPC messages are replaced one by one by `T`.
pub(super) struct Transformed<T> {
    inner: Body,
    splitter: MessageSplitter,
    transform: T,
    out: VecDeque<Bytes>,
    ended: bool,
    /// Why the body is refused: reported once the frames transformed
    /// before the bad one are handed on (a stream answers those first).
    refused: Option<Refusal>,
}

/// The caller's body: each message sealed.
pub(super) type SealedBody = Transformed<MessageSealer>;
/// The receiver's body: each message checked and unsealed.
pub(super) type OpenedBody = Transformed<MessageOpener>;

impl<T: Transform> Transformed<T> {
    /// `inner` with its messages transformed by `transform`.
    pub(super) fn new(inner: Body, transform: T) -> Transformed<T> {
        Transformed {
            inner,
            splitter: MessageSplitter::new(MAX_SEALED_MESSAGE),
            transform,
            out: VecDeque::new(),
            ended: false,
            refused: None,
        }
    }

    /// Stops reading: the frames already transformed go on, then `refusal`.
    fn refuse(&mut self, refusal: Refusal) {
        self.ended = true;
        self.refused = Some(refusal);
    }
}

impl<T: Transform> http_body::Body for Transformed<T> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if let Some(bytes) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            if let Some(refusal) = this.refused.take() {
                return Poll::Ready(Some(Err(Status::unauthenticated(refusal.to_string()))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => {
                    this.ended = true;
                    if let Err(refusal) = this.splitter.finish() {
                        this.refuse(refusal);
                    }
                }
                Some(Err(status)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(status)));
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        this.splitter.push(data);
                        loop {
                            match this.splitter.next_frame() {
                                Ok(None) => break,
                                Ok(Some((flag, message))) => {
                                    match this.transform.transform(flag, message) {
                                        Ok(frames) => this.out.extend(frames),
                                        Err(refusal) => {
                                            this.refuse(refusal);
                                            break;
                                        }
                                    }
                                }
                                Err(refusal) => {
                                    this.refuse(refusal);
                                    break;
                                }
                            }
                        }
                    }
                    // Trailers pass as they are.
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.out.is_empty() && self.refused.is_none()
    }
}
