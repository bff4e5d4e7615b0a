//! Evidence that a peer is alive besides its pings.
//!
//! Two signs prove that both directions of the link work and that the
//! peer's process runs and reads what this node sends: an answer to any of
//! this node's calls (any response header: a result, an error,
//! "overloaded"; `Peer::answers`), and new flow-control credit from the
//! peer (QUIC `MAX_DATA` / `MAX_STREAM_DATA` frames, which it sends only
//! after its application read this node's data; [`credit_frames`]). The
//! failure detector (`ping.rs`) counts a ping that timed out as a
//! failure only when neither came since the ping was sent: a peer busy
//! enough to answer its pings late (they wait behind the calls' data) is
//! slow, not dead, and closing its connection would fail every call in
//! flight on it. A killed, paused or cut-off peer (either direction) shows
//! neither, so it is still declared down within the same bound.

/// Flow-control credit frames received on `conn` so far: a count that
/// grows only while the peer reads this node's data.
pub(crate) fn credit_frames(conn: &quinn::Connection) -> u64 {
    let rx = conn.stats().frame_rx;
    rx.max_data + rx.max_stream_data
}
