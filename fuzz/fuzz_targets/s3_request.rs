//! S3 requests through the whole S3 endpoint of an in-process node
//! (`hangar_fuzz::s3_node`, `hangar_api_s3::server::call`: what the endpoint
//! does once hyper has parsed a request): routing, header and query-string parsing,
//! SigV4 (header and presigned forms, parsed and checked by s3s), aws-chunked
//! bodies (signed and unsigned-with-trailer), XML bodies, and Hangar's
//! operations with their own header handling (checksums, conditions,
//! ranges, metadata, copy sources, part numbers, listings).
//!
//! The fuzzer chooses a request; the harness signs it with the node's key
//! (or not, or badly) so that it gets past authentication. Besides a panic,
//! a `500 InternalError` is a finding: a request alone never makes a
//! healthy node fail.

#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use bytes::Bytes;
use hangar_fuzz::s3_node::{BUCKET, Node, ROOT_DOMAIN};
use hangar_fuzz::sigv4::{self, KEY_ID};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Method {
    Get,
    Put,
    Post,
    Delete,
    Head,
}

#[derive(Arbitrary, Debug)]
enum Bucket {
    Fuzz,
    Other(String),
    None,
}

/// Query parameters S3 operations read, or any other name.
#[derive(Arbitrary, Debug)]
enum QueryName {
    Uploads,
    UploadId,
    PartNumber,
    Delete,
    ListType,
    MaxKeys,
    MaxParts,
    MaxUploads,
    PartNumberMarker,
    Prefix,
    Delimiter,
    Marker,
    ContinuationToken,
    StartAfter,
    EncodingType,
    FetchOwner,
    VersionId,
    Location,
    Tagging,
    Versioning,
    ResponseContentType,
    Raw(String),
}

/// Headers S3 operations read, or any other name.
#[derive(Arbitrary, Debug)]
enum HeaderName {
    ContentLength,
    ContentType,
    ContentMd5,
    ContentEncoding,
    Range,
    IfMatch,
    IfNoneMatch,
    IfModifiedSince,
    IfUnmodifiedSince,
    CopySource,
    CopySourceRange,
    CopySourceIfMatch,
    MetadataDirective,
    DecodedContentLength,
    Trailer,
    ChecksumAlgorithm,
    ChecksumCrc32,
    ChecksumCrc32c,
    ChecksumSha1,
    ChecksumSha256,
    ChecksumCrc64Nvme,
    Meta(String),
    Expect,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Payload {
    /// `UNSIGNED-PAYLOAD`.
    Unsigned,
    /// The body's SHA-256.
    Sha256,
    /// A hash that is not the body's.
    WrongSha256,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: the body is the raw aws-chunked
    /// stream the fuzzer wrote.
    StreamingUnsignedTrailer,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` with the fuzzer's raw stream
    /// (its chunk signatures are whatever it wrote).
    StreamingSignedRaw,
    /// The same, framed by the harness with real chunk signatures: the
    /// fuzzer picks the chunk sizes.
    StreamingSignedFramed(Vec<u16>),
}

#[derive(Arbitrary, Debug)]
enum Auth {
    Anonymous,
    Header(Payload),
    Presigned { expires: u32 },
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    method: Method,
    bucket: Bucket,
    virtual_host: bool,
    key: String,
    query: Vec<(QueryName, String)>,
    headers: Vec<(HeaderName, String)>,
    auth: Auth,
    body: Vec<u8>,
}

fn query_name(q: &QueryName) -> &str {
    match q {
        QueryName::Uploads => "uploads",
        QueryName::UploadId => "uploadId",
        QueryName::PartNumber => "partNumber",
        QueryName::Delete => "delete",
        QueryName::ListType => "list-type",
        QueryName::MaxKeys => "max-keys",
        QueryName::MaxParts => "max-parts",
        QueryName::MaxUploads => "max-uploads",
        QueryName::PartNumberMarker => "part-number-marker",
        QueryName::Prefix => "prefix",
        QueryName::Delimiter => "delimiter",
        QueryName::Marker => "marker",
        QueryName::ContinuationToken => "continuation-token",
        QueryName::StartAfter => "start-after",
        QueryName::EncodingType => "encoding-type",
        QueryName::FetchOwner => "fetch-owner",
        QueryName::VersionId => "versionId",
        QueryName::Location => "location",
        QueryName::Tagging => "tagging",
        QueryName::Versioning => "versioning",
        QueryName::ResponseContentType => "response-content-type",
        QueryName::Raw(s) => s,
    }
}

fn header_name(h: &HeaderName) -> String {
    match h {
        HeaderName::ContentLength => "content-length".into(),
        HeaderName::ContentType => "content-type".into(),
        HeaderName::ContentMd5 => "content-md5".into(),
        HeaderName::ContentEncoding => "content-encoding".into(),
        HeaderName::Range => "range".into(),
        HeaderName::IfMatch => "if-match".into(),
        HeaderName::IfNoneMatch => "if-none-match".into(),
        HeaderName::IfModifiedSince => "if-modified-since".into(),
        HeaderName::IfUnmodifiedSince => "if-unmodified-since".into(),
        HeaderName::CopySource => "x-amz-copy-source".into(),
        HeaderName::CopySourceRange => "x-amz-copy-source-range".into(),
        HeaderName::CopySourceIfMatch => "x-amz-copy-source-if-match".into(),
        HeaderName::MetadataDirective => "x-amz-metadata-directive".into(),
        HeaderName::DecodedContentLength => "x-amz-decoded-content-length".into(),
        HeaderName::Trailer => "x-amz-trailer".into(),
        HeaderName::ChecksumAlgorithm => "x-amz-sdk-checksum-algorithm".into(),
        HeaderName::ChecksumCrc32 => "x-amz-checksum-crc32".into(),
        HeaderName::ChecksumCrc32c => "x-amz-checksum-crc32c".into(),
        HeaderName::ChecksumSha1 => "x-amz-checksum-sha1".into(),
        HeaderName::ChecksumSha256 => "x-amz-checksum-sha256".into(),
        HeaderName::ChecksumCrc64Nvme => "x-amz-checksum-crc64nvme".into(),
        HeaderName::Meta(s) => format!("x-amz-meta-{s}"),
        HeaderName::Expect => "expect".into(),
        HeaderName::Raw(s) => s.clone(),
    }
}

/// The harness's own aws-chunked framing with real chunk signatures.
fn frame_signed(body: &[u8], sizes: &[u16], stamp: &str, date: &str, seed: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut previous = seed.to_owned();
    let mut rest = body;
    let mut sizes = sizes.iter();
    loop {
        let n = sizes
            .next()
            .map_or(rest.len(), |s| usize::from(*s))
            .min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        let sig = sigv4::chunk_signature(stamp, date, &previous, chunk);
        out.extend_from_slice(format!("{:x};chunk-signature={sig}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
        previous = sig;
        rest = tail;
        if chunk.is_empty() {
            return out;
        }
    }
}

fn node() -> &'static Node {
    static NODE: OnceLock<Node> = OnceLock::new();
    NODE.get_or_init(Node::start)
}

fn build(input: Input) -> Option<http::Request<s3s::Body>> {
    let method = match input.method {
        Method::Get => "GET",
        Method::Put => "PUT",
        Method::Post => "POST",
        Method::Delete => "DELETE",
        Method::Head => "HEAD",
    };
    let bucket = match &input.bucket {
        Bucket::Fuzz => Some(BUCKET),
        Bucket::Other(b) => Some(b.as_str()),
        Bucket::None => None,
    };
    let key = sigv4::uri_encode(&input.key, true);
    let (host, path) = match (bucket, input.virtual_host) {
        (Some(b), true) => (format!("{b}.{ROOT_DOMAIN}"), format!("/{key}")),
        (Some(b), false) => (
            "127.0.0.1:3900".to_owned(),
            format!("/{}/{key}", sigv4::uri_encode(b, false)),
        ),
        (None, _) => ("127.0.0.1:3900".to_owned(), "/".to_owned()),
    };
    let mut query: Vec<(String, String)> = input
        .query
        .iter()
        .map(|(k, v)| (query_name(k).to_owned(), v.clone()))
        .collect();
    let mut headers: Vec<(String, String)> = input
        .headers
        .iter()
        .map(|(k, v)| (header_name(k), v.clone()))
        .filter(|(k, v)| {
            http::HeaderName::from_bytes(k.as_bytes()).is_ok()
                && http::HeaderValue::from_str(v).is_ok()
                && !k.eq_ignore_ascii_case("host")
                && !k.eq_ignore_ascii_case("authorization")
                && !k.eq_ignore_ascii_case("content-length")
        })
        .collect();
    headers.push(("host".into(), host));
    let (stamp, date) = sigv4::now_stamp();
    let mut body = input.body;
    let mut authorization = None;
    match input.auth {
        Auth::Anonymous => {}
        Auth::Raw(a) => authorization = Some(a),
        Auth::Header(payload) => {
            let hash = match &payload {
                Payload::Unsigned => "UNSIGNED-PAYLOAD".to_owned(),
                Payload::Sha256 => sigv4::sha256_hex(&body),
                Payload::WrongSha256 => sigv4::sha256_hex(b"not the body"),
                Payload::StreamingUnsignedTrailer => "STREAMING-UNSIGNED-PAYLOAD-TRAILER".into(),
                Payload::StreamingSignedRaw | Payload::StreamingSignedFramed(_) => {
                    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD".into()
                }
            };
            headers.push(("x-amz-date".into(), stamp.clone()));
            headers.push(("x-amz-content-sha256".into(), hash.clone()));
            let seed = sigv4::sign(method, &path, &query, &headers, &hash, &stamp, &date);
            if let Payload::StreamingSignedFramed(sizes) = &payload {
                body = frame_signed(&body, sizes, &stamp, &date, &seed);
            }
            let signed: Vec<String> = {
                let mut s: Vec<String> = headers
                    .iter()
                    .map(|(k, _)| k.to_ascii_lowercase())
                    .collect();
                s.sort();
                s
            };
            authorization = Some(format!(
                "AWS4-HMAC-SHA256 Credential={KEY_ID}/{},SignedHeaders={},Signature={seed}",
                sigv4::scope(&date),
                signed.join(";")
            ));
        }
        Auth::Presigned { expires } => {
            query.extend([
                ("X-Amz-Algorithm".to_owned(), "AWS4-HMAC-SHA256".to_owned()),
                (
                    "X-Amz-Credential".to_owned(),
                    format!("{KEY_ID}/{}", sigv4::scope(&date)),
                ),
                ("X-Amz-Date".to_owned(), stamp.clone()),
                ("X-Amz-Expires".to_owned(), expires.to_string()),
                ("X-Amz-SignedHeaders".to_owned(), "host".to_owned()),
            ]);
            let host_only: Vec<(String, String)> = headers
                .iter()
                .filter(|(k, _)| k == "host")
                .cloned()
                .collect();
            let sig = sigv4::sign(
                method,
                &path,
                &query,
                &host_only,
                "UNSIGNED-PAYLOAD",
                &stamp,
                &date,
            );
            query.push(("X-Amz-Signature".to_owned(), sig));
        }
    }
    // The length hyper hands the service: the body's own (a client cannot
    // send another over HTTP/1.1).
    if !body.is_empty() || matches!(method, "PUT" | "POST") {
        headers.push(("content-length".into(), body.len().to_string()));
    }
    let qs = query
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                sigv4::uri_encode(k, false),
                sigv4::uri_encode(v, false)
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let uri = if qs.is_empty() {
        path
    } else {
        format!("{path}?{qs}")
    };
    let mut req = http::Request::builder().method(method).uri(uri);
    for (k, v) in &headers {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Some(a) = authorization {
        let v = http::HeaderValue::from_str(&a).ok()?;
        req = req.header("authorization", v);
    }
    req.body(s3s::Body::from(Bytes::from(body))).ok()
}

fuzz_target!(|input: Input| {
    let node = node();
    let Some(req) = build(input) else {
        return;
    };
    node.rt.block_on(async {
        if let Ok(resp) = hangar_api_s3::server::call(&node.service, req).await {
            // A request alone, on a healthy node, is never an internal
            // error: what is wrong with it is the client's to hear.
            let status = resp.status();
            // Read the whole response, as a client would.
            let body = http_body_util::BodyExt::collect(resp.into_body()).await;
            assert!(
                status != http::StatusCode::INTERNAL_SERVER_ERROR,
                "500 for this request: {:?}",
                body.map(|b| b.to_bytes())
            );
        }
    });
});
