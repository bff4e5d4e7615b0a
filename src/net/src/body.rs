//! Streamed bodies: bulk bytes that travel after a call's message as a
//! sequence of chunks, so a block is never one big in-memory message.
//!
//! Body frames (see doc/rpc.md): a tag byte, then for DATA a `u32` length and
//! the bytes, for ERROR a `u32` length and a MessagePack string, for END
//! nothing.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, Stream, StreamExt};
use prometheus_client::metrics::counter::Counter;
use quinn::{RecvStream, SendStream};

use crate::error::NetError;
use crate::frame::{MAX_HEADER_LEN, decode, encode, read_frame};
use crate::priority::{BACKGROUND_PIECE, Priority, PriorityGate};

/// Body frame tag: the body is complete.
pub(crate) const TAG_END: u8 = 0;
/// Body frame tag: a chunk of data follows.
pub(crate) const TAG_DATA: u8 = 1;
/// Body frame tag: the producer failed; the body is cut short.
pub(crate) const TAG_ERROR: u8 = 2;
/// Largest DATA frame; larger pieces are split by the sender.
pub const MAX_CHUNK_LEN: usize = 1024 * 1024;

/// A streamed body: an ordered sequence of byte chunks that may fail.
///
/// Sending reads chunks as the network takes them (QUIC flow control is the
/// backpressure); receiving yields chunks as they arrive. Dropping a received
/// body tells the sender to stop.
pub struct Body {
    stream: BoxStream<'static, Result<Bytes, NetError>>,
}

impl Body {
    /// A body holding these bytes (split into chunks on the wire).
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Body {
        let bytes = bytes.into();
        Body::from_stream(futures::stream::once(async move { Ok(bytes) }))
    }

    /// A body read from a stream of chunks. An `Err` item cuts the body
    /// short and reaches the receiver as an error.
    pub fn from_stream<S>(stream: S) -> Body
    where
        S: Stream<Item = Result<Bytes, NetError>> + Send + 'static,
    {
        Body {
            stream: stream.boxed(),
        }
    }

    /// Reads the whole body into memory, failing if it is longer than
    /// `limit` bytes.
    pub async fn collect(mut self, limit: usize) -> Result<Bytes, NetError> {
        let mut out = BytesMut::new();
        while let Some(chunk) = self.stream.next().await {
            let chunk = chunk?;
            if out.len() + chunk.len() > limit {
                return Err(NetError::BodyTooLarge(limit));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out.freeze())
    }
}

impl Stream for Body {
    type Item = Result<Bytes, NetError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}

/// How sending a body ended, when the stream itself did not fail.
pub(crate) enum BodyEnd {
    /// Every byte went out, then END.
    Sent,
    /// The body's own stream failed: its error went out as an ERROR frame
    /// behind the data already written. The caller must finish the stream,
    /// not reset it: a reset drops every byte not yet sent, that frame
    /// included, and the other side would see a bare reset instead of the
    /// cause.
    Failed(NetError),
}

/// Writes `body` as body frames, ending with END (or ERROR if the body
/// failed: [`BodyEnd::Failed`]). An `Err` is the stream's own failure.
///
/// `gate` and `priority` apply the per-peer write priority
/// (see `priority.rs`): a foreground body holds the gate while it is sent; a
/// background body is written in small pieces, each waiting for the gate.
pub(crate) async fn send_body(
    send: &mut SendStream,
    mut body: Body,
    sent: &Counter,
    gate: &Arc<PriorityGate>,
    priority: Priority,
) -> Result<BodyEnd, NetError> {
    let background = priority == Priority::Background;
    let _urgent = (!background).then(|| gate.urgent());
    while let Some(item) = body.stream.next().await {
        match item {
            Ok(mut bytes) => {
                while !bytes.is_empty() {
                    let mut piece = bytes.split_to(bytes.len().min(MAX_CHUNK_LEN));
                    let mut prefix = [TAG_DATA, 0, 0, 0, 0];
                    prefix[1..].copy_from_slice(&(piece.len() as u32).to_be_bytes());
                    let n = piece.len() as u64;
                    if background {
                        // Same DATA frame on the wire, written in pieces
                        // so foreground bodies can slip in between.
                        gate.wait_clear().await;
                        send.write_all(&prefix).await?;
                        while !piece.is_empty() {
                            let part = piece.split_to(piece.len().min(BACKGROUND_PIECE));
                            gate.wait_clear().await;
                            send.write_all_chunks(&mut [part]).await?;
                        }
                    } else {
                        send.write_all_chunks(&mut [Bytes::copy_from_slice(&prefix), piece])
                            .await?;
                    }
                    sent.inc_by(n);
                }
            }
            Err(e) => {
                let msg = encode(&e.to_string())?;
                let mut frame = Vec::with_capacity(5 + msg.len());
                frame.push(TAG_ERROR);
                frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                frame.extend_from_slice(&msg);
                send.write_all(&frame).await?;
                return Ok(BodyEnd::Failed(e));
            }
        }
    }
    send.write_all(&[TAG_END]).await?;
    Ok(BodyEnd::Sent)
}

/// State of a body being received.
struct RecvState {
    recv: RecvStream,
    /// Bytes left in the current DATA frame.
    remaining: usize,
    /// Longest wait for the next piece of the body.
    idle_timeout: Duration,
    received: Counter,
}

/// A [`Body`] reading body frames from `recv`. Each read waits at most
/// `idle_timeout`; a stalled sender thus fails the body with a timeout
/// instead of hanging the reader.
pub(crate) fn recv_body(
    recv: RecvStream,
    idle_timeout: Duration,
    received: Counter,
    endpoint: String,
) -> Body {
    let state = RecvState {
        recv,
        remaining: 0,
        idle_timeout,
        received,
    };
    let stream = futures::stream::unfold(Some(state), move |state| {
        let endpoint = endpoint.clone();
        async move {
            let mut st = state?;
            let step = tokio::time::timeout(st.idle_timeout, next_chunk(&mut st)).await;
            match step {
                Ok(Ok(Some(bytes))) => Some((Ok(bytes), Some(st))),
                Ok(Ok(None)) => None,
                Ok(Err(e)) => Some((Err(e), None)),
                Err(_) => {
                    let _ = st.recv.stop(crate::frame::CODE_CANCELLED.into());
                    Some((
                        Err(NetError::Timeout {
                            endpoint,
                            after: st.idle_timeout,
                        }),
                        None,
                    ))
                }
            }
        }
    });
    Body::from_stream(stream)
}

/// The next chunk of data, `None` at END.
async fn next_chunk(st: &mut RecvState) -> Result<Option<Bytes>, NetError> {
    loop {
        if st.remaining > 0 {
            let chunk = st
                .recv
                .read_chunk(st.remaining, true)
                .await?
                .ok_or(NetError::UnexpectedEnd)?;
            st.remaining -= chunk.bytes.len();
            st.received.inc_by(chunk.bytes.len() as u64);
            return Ok(Some(chunk.bytes));
        }
        let mut tag = [0u8; 1];
        st.recv.read_exact(&mut tag).await?;
        match tag[0] {
            TAG_END => return Ok(None),
            TAG_DATA => {
                let mut len = [0u8; 4];
                st.recv.read_exact(&mut len).await?;
                let len = u32::from_be_bytes(len) as usize;
                if len == 0 || len > MAX_CHUNK_LEN {
                    return Err(NetError::Protocol(format!("DATA frame of {len} bytes")));
                }
                st.remaining = len;
            }
            TAG_ERROR => {
                let msg: String = decode(&read_frame(&mut st.recv, MAX_HEADER_LEN).await?)?;
                return Err(NetError::Body(msg));
            }
            t => return Err(NetError::Protocol(format!("unknown body frame tag {t}"))),
        }
    }
}
