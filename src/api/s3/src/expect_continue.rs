//! `Expect: 100-continue` made safe for botocore.
//!
//! hyper writes `100 Continue` when the request body is first polled, and
//! never for an empty body (`Content-Length: 0`), nor when the answer comes
//! before the body is read (an authentication error). Answering with a final
//! status is legal, but botocore (aws-cli, boto3) then keeps a stale
//! response parser on the pooled connection: the next `Expect` request on it
//! stalls until the client's read timeout (measured here: 3 s per request
//! after each empty PUT; 60 s with aws-cli's defaults). Such a connection is
//! therefore closed after its response (`Connection: close`), which resets
//! botocore's state; the cost is one new TCP connection per empty upload.

use http::HeaderValue;

/// Whether the request asks for `100 Continue`.
pub fn expects_continue<B>(req: &http::Request<B>) -> bool {
    header_expects_continue(req.headers())
}

/// Whether request headers `h` ask for `100 Continue`.
pub fn header_expects_continue(h: &http::HeaderMap) -> bool {
    h.get(http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// Whether a response to a request that expected `100 Continue` may have
/// gone out without one: its body was empty, or it was refused.
pub fn needs_close(body_was_empty: bool, status: http::StatusCode) -> bool {
    body_was_empty || status.is_client_error() || status.is_server_error()
}

/// Marks `resp` so that hyper closes the connection after it.
pub fn close_after<B>(resp: &mut http::Response<B>) {
    resp.headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
}
