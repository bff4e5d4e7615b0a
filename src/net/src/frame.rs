//! The bytes on one RPC stream (doc/rpc.md is the reference for this file).
//!
//! A call is one QUIC bidirectional stream. The caller writes a request
//! (version byte, header frame, message frame, optional body), the callee
//! answers with a response (version byte, header frame, message frame if the
//! status is OK, optional body). A frame is a big-endian `u32` length then
//! that many bytes of MessagePack (rmp-serde, structs as arrays).

use bytes::Bytes;
use quinn::SendStream;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::NetError;

/// First byte of every request and response stream.
pub const WIRE_VERSION: u8 = 1;
/// Largest accepted header frame.
pub const MAX_HEADER_LEN: usize = 64 * 1024;
/// Largest accepted message frame. Bulk data goes in the streamed body.
pub const MAX_MESSAGE_LEN: usize = 16 * 1024 * 1024;

/// Response status: the call succeeded, a message frame follows.
pub(crate) const STATUS_OK: u8 = 0;
/// The callee has no endpoint by that path (or no handler set on it).
pub(crate) const STATUS_NO_SUCH_ENDPOINT: u8 = 1;
/// The handler's queue is full; the caller should retry later or elsewhere.
pub(crate) const STATUS_OVERLOADED: u8 = 2;
/// The handler returned an error; `message` says which.
pub(crate) const STATUS_HANDLER_ERROR: u8 = 3;
/// The request could not be decoded into the endpoint's message type.
pub(crate) const STATUS_BAD_REQUEST: u8 = 4;
/// The handler did not finish before the call's deadline.
pub(crate) const STATUS_TIMEOUT: u8 = 5;

/// QUIC application error code used to reset/stop a stream whose call was
/// abandoned (deadline passed or caller gone).
pub(crate) const CODE_CANCELLED: u32 = 1;

/// What the caller asks for; sent before the message.
#[derive(Debug, Serialize, Deserialize)]
pub struct RequestHeader {
    /// Endpoint path, e.g. `hangar/ping`.
    pub path: String,
    /// Time left before the caller's deadline, in milliseconds, when sent.
    pub timeout_ms: u64,
    /// 0 background, 1 foreground, 2 control (ping, peer exchange).
    pub priority: u8,
    /// Whether body frames follow the message.
    pub has_body: bool,
}

/// How the callee answers; sent before the response message.
#[derive(Debug, Serialize, Deserialize)]
pub struct ResponseHeader {
    /// One of the `STATUS_*` constants.
    pub status: u8,
    /// Whether body frames follow the message (only with `STATUS_OK`).
    pub has_body: bool,
    /// Error text for non-OK statuses.
    pub message: Option<String>,
}

/// Encodes a value as a MessagePack frame payload.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, NetError> {
    Ok(rmp_serde::to_vec(value)?)
}

/// Decodes a MessagePack frame payload.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, NetError> {
    Ok(rmp_serde::from_slice(bytes)?)
}

/// How much of a frame is allocated before its bytes arrive: a frame grows
/// as it is read, so a length prefix alone (a forged or truncated frame)
/// never makes the reader allocate that length.
const FRAME_READ_STEP: usize = 64 * 1024;

/// Reads one length-prefixed frame, refusing frames longer than `max`.
///
/// The buffer grows with the bytes received, [`FRAME_READ_STEP`] at a
/// time, not with the length the sender claims.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    recv: &mut R,
    max: usize,
) -> Result<Vec<u8>, NetError> {
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await.map_err(read_error)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(NetError::Protocol(format!(
            "frame of {len} bytes over the limit of {max}"
        )));
    }
    let mut buf = Vec::with_capacity(len.min(FRAME_READ_STEP));
    while buf.len() < len {
        let want = (len - buf.len()).min(FRAME_READ_STEP);
        buf.reserve(want);
        let n = (&mut *recv)
            .take(want as u64)
            .read_buf(&mut buf)
            .await
            .map_err(read_error)?;
        if n == 0 {
            return Err(NetError::UnexpectedEnd);
        }
    }
    Ok(buf)
}

/// The error of a failed stream read: the end of the stream is
/// [`NetError::UnexpectedEnd`] and a QUIC read error keeps its own variant,
/// as quinn's own `read_exact` reports them.
fn read_error(e: std::io::Error) -> NetError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        return NetError::UnexpectedEnd;
    }
    if e.get_ref()
        .is_some_and(|inner| inner.is::<quinn::ReadError>())
    {
        let inner = e.into_inner().expect("checked above");
        return NetError::Read(*inner.downcast().expect("checked above"));
    }
    NetError::Io(e)
}

/// Writes the version byte, the header frame and the message frame of a
/// request, in one go.
pub(crate) async fn write_request(
    send: &mut SendStream,
    header: &RequestHeader,
    msg: Vec<u8>,
) -> Result<(), NetError> {
    write_head(send, encode(header)?, Some(msg)).await
}

/// Writes the version byte, header frame and (for OK) message frame of a
/// response.
pub(crate) async fn write_response(
    send: &mut SendStream,
    header: &ResponseHeader,
    msg: Option<Vec<u8>>,
) -> Result<(), NetError> {
    write_head(send, encode(header)?, msg).await
}

async fn write_head(
    send: &mut SendStream,
    header: Vec<u8>,
    msg: Option<Vec<u8>>,
) -> Result<(), NetError> {
    let mut head = Vec::with_capacity(1 + 4 + header.len() + 4);
    head.push(WIRE_VERSION);
    head.extend_from_slice(&(header.len() as u32).to_be_bytes());
    head.extend_from_slice(&header);
    let mut chunks = Vec::with_capacity(2);
    if let Some(msg) = msg {
        let len = u32::try_from(msg.len())
            .ok()
            .filter(|l| (*l as usize) <= MAX_MESSAGE_LEN)
            .ok_or_else(|| NetError::Protocol("message over the 16 MiB limit".into()))?;
        head.extend_from_slice(&len.to_be_bytes());
        chunks.push(Bytes::from(head));
        chunks.push(Bytes::from(msg));
    } else {
        chunks.push(Bytes::from(head));
    }
    send.write_all_chunks(&mut chunks).await?;
    Ok(())
}

/// Reads the version byte and the header frame of a request or response.
pub(crate) async fn read_head<H: DeserializeOwned, R: AsyncRead + Unpin>(
    recv: &mut R,
) -> Result<H, NetError> {
    let mut version = [0u8; 1];
    recv.read_exact(&mut version).await.map_err(read_error)?;
    if version[0] != WIRE_VERSION {
        return Err(NetError::Protocol(format!(
            "wire version {} (this node speaks {WIRE_VERSION})",
            version[0]
        )));
    }
    decode(&read_frame(recv, MAX_HEADER_LEN).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact bytes doc/rpc.md shows for these headers.
    #[test]
    fn headers_encode_as_documented() {
        let req = RequestHeader {
            path: "hangar/net/ping".into(),
            timeout_ms: 1000,
            priority: 2,
            has_body: false,
        };
        let mut want = vec![0x94, 0xaf];
        want.extend_from_slice(b"hangar/net/ping");
        want.extend_from_slice(&[0xcd, 0x03, 0xe8, 0x02, 0xc2]);
        assert_eq!(encode(&req).unwrap(), want);

        let ok = ResponseHeader {
            status: STATUS_OK,
            has_body: true,
            message: None,
        };
        assert_eq!(encode(&ok).unwrap(), vec![0x93, 0x00, 0xc3, 0xc0]);

        let overloaded = ResponseHeader {
            status: STATUS_OVERLOADED,
            has_body: false,
            message: Some("full".into()),
        };
        assert_eq!(
            encode(&overloaded).unwrap(),
            vec![0x93, 0x02, 0xc2, 0xa4, b'f', b'u', b'l', b'l']
        );
        let back: RequestHeader = decode(&encode(&req).unwrap()).unwrap();
        assert_eq!(back.path, "hangar/net/ping");
    }
}
