//! PostObject: an upload from an HTML form (`multipart/form-data`), as a
//! browser sends it.
//!
//! s3s parses the form, checks the policy's SigV4 signature (over the
//! base64 policy), its expiration and its conditions, and holds the file
//! in memory up to [`crate::body_limits::MAX_POST_OBJECT_BODY`] bytes (its
//! `post_object_max_file_size`) before the operation is called. The form
//! fields arrive here as PutObject's; the object is stored through the
//! same path as a PutObject, with the form's Content-Type, system headers
//! and `x-amz-meta-*` fields in place of request headers. s3s answers the
//! `success_action_status` / `success_action_redirect` itself. The error
//! answers s3s gives for a refused policy are rewritten as S3 words them
//! in [`crate::post_errors`].

use http::{HeaderMap, HeaderValue};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;

impl S3Api {
    pub(crate) async fn do_post_object(
        &self,
        req: S3Request<PostObjectInput>,
    ) -> S3Result<S3Response<PostObjectOutput>> {
        // A form signed with Signature Version 2 (`AWSAccessKeyId`,
        // `signature`) has a key but no credential scope, so no region; its
        // time is bounded by the policy's expiration, as a V4 form's.
        if req.credentials.is_some() && req.region.is_none() && !self.settings.allow_signature_v2 {
            return Err(s3s::S3Error::with_message(
                s3s::S3ErrorCode::InvalidRequest,
                crate::request_time::V2_REFUSED,
            ));
        }
        let mut req = req;
        // Read by the POST gate from the fields and the file part's header.
        let extras = req
            .extensions
            .get::<crate::post_gate::PostFormExtras>()
            .cloned()
            .unwrap_or_default();
        if req
            .input
            .key
            .contains(crate::post_gate::FILENAME_PLACEHOLDER)
        {
            req.input.key = crate::post_gate::with_filename(&req.input.key, &extras.filename);
        }
        if let Some(acl) = extras.acl {
            if req.input.acl.is_some() {
                return Err(both("acl", "x-amz-acl"));
            }
            req.input.acl = Some(ObjectCannedACL::from(acl));
        }
        if let Some(xml) = extras.tagging {
            if req.input.tagging.is_some() {
                return Err(both("tagging", "x-amz-tagging"));
            }
            req.input.tagging = Some(crate::tagging::header_of_xml(&xml)?);
        }
        let S3Request {
            input,
            method,
            uri,
            extensions,
            credentials,
            region,
            service,
            ..
        } = req;
        let headers = form_headers(&input);
        let redirects = input.success_action_redirect.is_some();
        let put = S3Request {
            input: put_input(input)?,
            method,
            uri,
            headers,
            extensions,
            credentials,
            region,
            service,
            trailing_headers: None,
        };
        let (bucket, key) = (put.input.bucket.clone(), put.input.key.clone());
        let out = self.do_put_object(put).await?.output;
        // S3 sends these with every answer to a POST, the 204 one too.
        let mut headers = HeaderMap::new();
        if let Some(v) = out
            .e_tag
            .as_ref()
            .and_then(|e| HeaderValue::from_str(&format!("\"{}\"", e.value())).ok())
        {
            headers.insert(http::header::ETAG, v);
        }
        let location = format!(
            "/{}/{}",
            urlencoding::encode(&bucket),
            urlencoding::encode(&key).replace("%2F", "/")
        );
        // With a redirect, s3s's `Location` (the redirect) is the one.
        if !redirects && let Ok(v) = HeaderValue::from_str(&location) {
            headers.insert(http::header::LOCATION, v);
        }
        if let Some(v) = out
            .version_id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert("x-amz-version-id", v);
        }
        // Like the version id, s3s does not write these for a POST.
        if let Some(v) = out
            .server_side_encryption
            .as_ref()
            .and_then(|v| HeaderValue::from_str(v.as_str()).ok())
        {
            headers.insert("x-amz-server-side-encryption", v);
        }
        if let Some(v) = out
            .ssekms_key_id
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert("x-amz-server-side-encryption-aws-kms-key-id", v);
        }
        let mut resp = S3Response::new(PostObjectOutput {
            e_tag: out.e_tag,
            version_id: out.version_id,
            checksum_crc32: out.checksum_crc32,
            checksum_crc32c: out.checksum_crc32c,
            checksum_crc64nvme: out.checksum_crc64nvme,
            checksum_sha1: out.checksum_sha1,
            checksum_sha256: out.checksum_sha256,
            checksum_type: out.checksum_type,
            size: out.size,
            ..Default::default()
        });
        resp.headers = headers;
        Ok(resp)
    }
}

/// A form that says one thing twice, in S3's field and in its header's.
fn both(field: &str, header: &str) -> s3s::S3Error {
    s3_error!(
        InvalidArgument,
        "A POST form may give either the field '{field}' or '{header}', not both."
    )
}

/// The headers a PutObject of the form's file would carry: its length and
/// the system headers given as form fields.
fn form_headers(input: &PostObjectInput) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::CONTENT_LENGTH,
        HeaderValue::from(input.content_length.unwrap_or(0).max(0)),
    );
    let expires = input.expires.as_ref().map(|t| {
        httpdate::fmt_http_date(
            std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(crate::time::secs(t).max(0) as u64),
        )
    });
    let fields = [
        ("content-type", input.content_type.as_deref()),
        ("content-encoding", input.content_encoding.as_deref()),
        ("content-disposition", input.content_disposition.as_deref()),
        ("content-language", input.content_language.as_deref()),
        ("cache-control", input.cache_control.as_deref()),
        ("expires", expires.as_deref()),
        ("x-amz-checksum-crc32", input.checksum_crc32.as_deref()),
        ("x-amz-checksum-crc32c", input.checksum_crc32c.as_deref()),
        (
            "x-amz-checksum-crc64nvme",
            input.checksum_crc64nvme.as_deref(),
        ),
        ("x-amz-checksum-sha1", input.checksum_sha1.as_deref()),
        ("x-amz-checksum-sha256", input.checksum_sha256.as_deref()),
    ];
    for (name, value) in fields {
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            h.insert(name, v);
        }
    }
    h
}

/// The PutObject the form amounts to.
fn put_input(p: PostObjectInput) -> S3Result<PutObjectInput> {
    let mut b = PutObjectInput::builder();
    b.set_bucket(p.bucket);
    b.set_key(p.key);
    b.set_body(p.body);
    b.set_content_length(p.content_length);
    b.set_content_md5(p.content_md5);
    b.set_content_type(p.content_type);
    b.set_metadata(p.metadata);
    b.set_tagging(p.tagging);
    b.set_acl(p.acl);
    b.set_if_match(p.if_match);
    b.set_if_none_match(p.if_none_match);
    b.set_sse_customer_algorithm(p.sse_customer_algorithm);
    b.set_sse_customer_key(p.sse_customer_key);
    b.set_sse_customer_key_md5(p.sse_customer_key_md5);
    b.set_server_side_encryption(p.server_side_encryption);
    b.set_ssekms_key_id(p.ssekms_key_id);
    b.build()
        .map_err(|e| s3_error!(InvalidRequest, "invalid POST form: {e}"))
}
