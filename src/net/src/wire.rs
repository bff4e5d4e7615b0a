//! The parsers of the RPC stream format (doc/rpc.md), exactly as a node
//! runs them on a call's stream, for fuzzing (`fuzz/`) and for tests that
//! speak the wire format by hand. Nothing here is needed to make calls:
//! [`crate::Endpoint`] does that.

use serde::de::DeserializeOwned;
use tokio::io::AsyncRead;

use crate::error::NetError;
use crate::frame::{self, STATUS_OK};
pub use crate::frame::{
    MAX_HEADER_LEN, MAX_MESSAGE_LEN, RequestHeader, ResponseHeader, WIRE_VERSION,
};

/// Reads what a callee reads from a call's stream before the handler runs:
/// the version byte, the request header frame and the message frame.
pub async fn read_request<R: AsyncRead + Unpin>(
    recv: &mut R,
) -> Result<(RequestHeader, Vec<u8>), NetError> {
    let head: RequestHeader = frame::read_head(recv).await?;
    let msg = frame::read_frame(recv, MAX_MESSAGE_LEN).await?;
    Ok((head, msg))
}

/// Reads what a caller reads from a call's stream before the body: the
/// version byte, the response header frame and, for an OK status, the
/// message frame.
pub async fn read_response<R: AsyncRead + Unpin>(
    recv: &mut R,
) -> Result<(ResponseHeader, Option<Vec<u8>>), NetError> {
    let head: ResponseHeader = frame::read_head(recv).await?;
    if head.status != STATUS_OK {
        return Ok((head, None));
    }
    let msg = frame::read_frame(recv, MAX_MESSAGE_LEN).await?;
    Ok((head, Some(msg)))
}

/// Decodes a message frame as an endpoint of message type `T` does.
pub fn decode_message<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, NetError> {
    frame::decode(bytes)
}

/// Encodes a header or message as a frame payload (MessagePack), as a node
/// sends it.
pub fn encode_message<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, NetError> {
    frame::encode(value)
}
