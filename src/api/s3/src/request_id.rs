//! Request ids: every answer of the S3 endpoint carries one, in the
//! `x-amz-request-id` header and, for an error, in the `<RequestId>` of its
//! XML body — the same value, as AWS gives it (SDKs log it and show it in
//! their exceptions; the node logs the id of each request it answers with
//! a server error, so an operator finds it from what a user reports).
//!
//! An id is 16 upper-case hex digits of a random 64-bit number: unique
//! enough to tell requests apart in a log, and the shape AWS's ids have.

/// A new request id.
pub fn new_id() -> String {
    format!("{:016X}", rand::random::<u64>())
}

/// Stamps `resp` with request id `id`: the header, and the body's
/// `<RequestId>` when the answer is an error whose XML body is in memory
/// and has none (errors made anywhere — by s3s's parsing and signature
/// checks, by Hangar's operations, by the gates before them — go through
/// here, so no error answer lacks it).
pub fn stamp(resp: &mut http::Response<s3s::Body>, id: &str) {
    if let Ok(v) = http::HeaderValue::from_str(id) {
        resp.headers_mut().insert("x-amz-request-id", v);
    }
    if !(resp.status().is_client_error() || resp.status().is_server_error()) {
        return;
    }
    let Some(body) = resp.body().bytes() else {
        return;
    };
    let Some(stamped) = with_request_id(&body, id) else {
        return;
    };
    resp.headers_mut().insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(stamped.len()),
    );
    *resp.body_mut() = s3s::Body::from(stamped);
}

/// `body` with `<RequestId>id</RequestId>` added as the last child of its
/// `<Error>` element, or `None` when it is not an S3 error document or
/// already has a request id.
fn with_request_id(body: &[u8], id: &str) -> Option<Vec<u8>> {
    const END: &[u8] = b"</Error>";
    let text = body;
    if text
        .windows(b"<RequestId>".len())
        .any(|w| w == b"<RequestId>")
    {
        return None;
    }
    let at = text.windows(END.len()).rposition(|w| w == END)?;
    let mut out = Vec::with_capacity(body.len() + 32 + id.len());
    out.extend_from_slice(&text[..at]);
    out.extend_from_slice(b"<RequestId>");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"</RequestId>");
    out.extend_from_slice(&text[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_gets_the_id_once_and_other_bodies_none() {
        let e = b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>m</Message></Error>";
        let s = with_request_id(e, "00000000000000AB").unwrap();
        assert_eq!(
            std::str::from_utf8(&s).unwrap(),
            "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>m</Message>\
<RequestId>00000000000000AB</RequestId></Error>"
        );
        assert!(with_request_id(&s, "00000000000000CD").is_none());
        assert!(with_request_id(b"<ListBucketResult/>", "1").is_none());
        let id = new_id();
        assert_eq!(id.len(), 16);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
        );
    }
}
