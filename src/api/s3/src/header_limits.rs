//! The bound on a request's header section.
//!
//! hyper refuses a request head past `hangar_util::conn_limits::MAX_HEAD_BYTES` (96
//! KiB) or `MAX_HEAD_LINES` (1024 lines) with a bare `431` before Hangar
//! sees the request. Below that, without a bound of Hangar's own, the headers a
//! client chose would be kept per request and some of them (`Content-Type`,
//! `Content-Disposition`, `Cache-Control`…) in the object's row on every
//! replica. S3 bounds a PUT's header section at 8 KB; Hangar accepts twice
//! that (SigV4, SSE-C, tagging and 2 KB of metadata fit several times over)
//! and answers more with S3's `400 RequestHeaderSectionTooLarge`, before
//! any body is read.

use s3s::{S3Error, s3_error};

/// Most bytes of request headers accepted: names, values and the four
/// bytes of `": "` and CRLF of each line.
pub const MAX_HEADER_SECTION: usize = 16 * 1024;

/// The size of `headers` as sent on the wire (without the request line).
pub fn section_len(headers: &http::HeaderMap) -> usize {
    headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum()
}

/// The error for `headers` past [`MAX_HEADER_SECTION`], if they are.
pub fn check(headers: &http::HeaderMap) -> Option<S3Error> {
    let len = section_len(headers);
    (len > MAX_HEADER_SECTION).then(|| {
        s3_error!(
            RequestHeaderSectionTooLarge,
            "Your request header section exceeds the maximum allowed size: {len} bytes, at most {MAX_HEADER_SECTION}."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_counts_names_values_and_line_overhead_up_to_the_bound() {
        let mut h = http::HeaderMap::new();
        h.insert("host", "a".parse().unwrap());
        assert_eq!(section_len(&h), 4 + 1 + 4);
        assert!(check(&h).is_none());
        // One more header bringing the section to exactly the bound.
        let rest = MAX_HEADER_SECTION - section_len(&h) - ("x-big".len() + 4);
        h.insert("x-big", "v".repeat(rest).parse().unwrap());
        assert_eq!(section_len(&h), MAX_HEADER_SECTION);
        assert!(check(&h).is_none());
        h.insert("x", "".parse().unwrap());
        let err = check(&h).expect("one byte over");
        assert_eq!(*err.code(), s3s::S3ErrorCode::RequestHeaderSectionTooLarge);
    }
}
