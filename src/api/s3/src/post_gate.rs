//! A browser POST form is authorised before its file is read.
//!
//! s3s checks a form's signature once it has read the fields before the
//! file part, but then reads the whole file into memory (up to
//! [`MAX_POST_OBJECT_BODY`]) before it asks [`crate::auth::KeyAccess`]
//! whether the request is allowed: an anonymous form to a private bucket
//! made the node hold 64 MiB per connection before answering
//! `AccessDenied`. So the endpoint reads the fields first, at most
//! [`MAX_FORM_HEAD`] bytes of the body, and decides as the access check
//! would:
//!
//! - a form signed with Signature Version 2 is refused (`400
//!   InvalidRequest`) unless `[s3_api] allow_signature_v2`;
//! - a form without a signature is anonymous; a form whose signature
//!   (SigV4 or V2, over its `policy`) is valid for its key is that key's;
//!   any other form is left to s3s, which refuses it before reading its
//!   file;
//! - a missing bucket is answered `404 NoSuchBucket`, and a caller the
//!   bucket's permissions, ACL and policy do not let write the form's
//!   `key` `403 AccessDenied`, without reading the file (the connection is
//!   closed after the answer);
//! - an allowed form is handed to s3s with the fields read put back in
//!   front of the body; the file s3s then holds is counted against
//!   [`MAX_POST_BUFFERED_TOTAL`] for the node, past which the form is
//!   answered `503 SlowDown` before its file is read.

use std::sync::Arc;

use bytes::BytesMut;
use futures::StreamExt;
use hangar_model::Model;
use hangar_model::key::KeyRow;
use hmac::{KeyInit, Mac};
use s3s::{S3Result, s3_error};
use tokio::sync::Semaphore;

use crate::access::{Caller, Need, PeerAddr};
use crate::body_limits::MAX_POST_OBJECT_BODY;
use crate::error::OrS3;
use crate::held_body::Prefixed;
use crate::presign::{hmac, signing_key};

/// Most bytes of a form read before its file's content starts: the
/// boundaries, part headers and field values (s3s's own bound on the
/// values is [`crate::body_limits::MAX_FORM_FIELDS`]).
pub const MAX_FORM_HEAD: usize = 64 * 1024;

/// Most bytes of authorised POST forms' files held in memory at once on a
/// node (s3s reads each whole before it is stored).
pub const MAX_POST_BUFFERED_TOTAL: u64 = 256 << 20;

/// The unit the buffered bytes are counted in.
const UNIT: u64 = 64 * 1024;

/// The check in front of s3s for POST forms.
pub(crate) struct PostGate {
    model: Arc<Model>,
    root_domain: Option<String>,
    /// `[s3_api] allow_signature_v2`: without it a V2 form is refused
    /// before its file is read, as every V2 request is.
    allow_signature_v2: bool,
    /// Units of [`MAX_POST_BUFFERED_TOTAL`] left.
    buffered: Arc<Semaphore>,
}

/// What a form's fields say about who sends it.
enum Signer {
    Anonymous,
    Key(Box<KeyRow>),
    /// A signature that does not verify here (or a key that does not
    /// exist): s3s refuses it, before reading the file.
    LeftToS3s,
}

/// How far the fields of a form were read.
#[derive(Debug, PartialEq)]
enum Form {
    /// The fields before the file part, names lower-cased, and where the
    /// file's content starts.
    File {
        fields: Vec<(String, String)>,
        content_at: usize,
        /// The file part's `filename`, if it has one.
        filename: Option<String>,
    },
    /// More bytes are needed.
    Partial,
    /// No file part: s3s answers it, there is nothing more to read.
    NoFile,
}

impl PostGate {
    pub(crate) fn new(
        model: Arc<Model>,
        root_domain: Option<String>,
        allow_signature_v2: bool,
    ) -> Self {
        PostGate {
            model,
            root_domain: root_domain.map(|d| d.trim_start_matches('.').to_owned()),
            allow_signature_v2,
            buffered: Arc::new(Semaphore::new((MAX_POST_BUFFERED_TOTAL / UNIT) as usize)),
        }
    }

    /// `req`, a POST form, with its fields read and put back, if it may be
    /// handed to s3s; else the error to answer without reading more.
    pub(crate) async fn admit(
        &self,
        req: http::Request<s3s::Body>,
    ) -> S3Result<http::Request<s3s::Body>> {
        let Some(boundary) = boundary(req.headers()) else {
            return Ok(req);
        };
        let (parts, mut body) = req.into_parts();
        let mut buf = BytesMut::new();
        let form = loop {
            match parse_form(&buf, &boundary) {
                Form::Partial => {}
                done => break done,
            }
            if buf.len() > MAX_FORM_HEAD {
                return Err(s3_error!(
                    MaxMessageLengthExceeded,
                    "The form fields before the file exceed {MAX_FORM_HEAD} bytes."
                ));
            }
            match body.next().await {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    return Err(s3_error!(IncompleteBody, "The form was not received: {e}"));
                }
                None => break Form::NoFile,
            }
        };
        let prefix = buf.freeze();
        let rebuilt = |parts, body| {
            http::Request::from_parts(
                parts,
                s3s::Body::http_body_unsync(Prefixed::new(prefix, body)),
            )
        };
        let Form::File {
            fields, filename, ..
        } = form
        else {
            return Ok(rebuilt(parts, body));
        };
        let fields = Fields(fields);
        let filename = filename.unwrap_or_default();
        let mut parts = parts;
        parts.extensions.insert(PostFormExtras {
            filename: filename.clone(),
            acl: fields.get("acl").map(str::to_owned),
            tagging: fields.get("tagging").map(str::to_owned),
        });
        let Some(bucket) = self.bucket(&parts) else {
            return Ok(rebuilt(parts, body));
        };
        let Some(object) = fields.get("key") else {
            return Err(s3_error!(
                InvalidArgument,
                "Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields."
            ));
        };
        let object = &with_filename(object, &filename);
        let key = match self.signer(&fields).await? {
            Signer::LeftToS3s => return Ok(rebuilt(parts, body)),
            Signer::Anonymous => None,
            Signer::Key(k) => Some(*k),
        };
        let row = self
            .model
            .buckets()
            .get_bucket_as(&bucket, key.as_ref().map(|k| k.access_key_id.as_str()))
            .await
            .or_s3()?
            .ok_or_else(|| {
                s3_error!(
                    NoSuchBucket,
                    "The specified bucket does not exist: {bucket}"
                )
            })?;
        let peer = parts.extensions.get::<PeerAddr>().map(|p| p.0.ip());
        let query = parts.uri.query().unwrap_or("");
        let caller = Caller::new(key, "PostObject", &parts.headers, query, peer);
        if !caller.may(&row, Need::Write, "s3:PutObject", Some(object)) {
            return Err(s3_error!(AccessDenied, "Access Denied"));
        }
        let announced = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .unwrap_or(MAX_POST_OBJECT_BODY)
            .min(MAX_POST_OBJECT_BODY);
        let units = u32::try_from(announced.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX);
        let permit = self
            .buffered
            .clone()
            .try_acquire_many_owned(units)
            .map_err(|_| {
                crate::admission::slow_down_because(
                    "Please reduce your request rate: the node holds as many POST uploads as it may.",
                )
            })?;
        let mut req = rebuilt(parts, body);
        // Carried to the operation, dropped once the file is stored.
        req.extensions_mut()
            .insert(crate::body_limits::HeldBytes(Arc::new(permit)));
        Ok(req)
    }

    /// The bucket a POST names: by its host (`<bucket>.<root_domain>`),
    /// else the path's first segment.
    fn bucket(&self, parts: &http::request::Parts) -> Option<String> {
        let host = parts
            .headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let name = host.split(':').next().unwrap_or(host);
        if let Some(root) = &self.root_domain
            && let Some(b) = name.strip_suffix(root.as_str())
            && b.len() > 1
            && b.ends_with('.')
        {
            return Some(b[..b.len() - 1].to_ascii_lowercase());
        }
        let path = parts.uri.path().trim_start_matches('/');
        let first = path.split('/').next().unwrap_or("");
        let decoded = urlencoding::decode(first).ok()?;
        (!decoded.is_empty()).then(|| decoded.into_owned())
    }

    /// Who signed the form, if its signature verifies here.
    async fn signer(&self, fields: &Fields) -> S3Result<Signer> {
        let field = |name: &str| fields.get(name);
        let policy = field("policy").unwrap_or("");
        if let Some(sig) = field("x-amz-signature") {
            let Some(cred) = field("x-amz-credential") else {
                return Ok(Signer::LeftToS3s);
            };
            let scope: Vec<&str> = cred.split('/').collect();
            let [id, date, region, service, "aws4_request"] = scope[..] else {
                return Ok(Signer::LeftToS3s);
            };
            let Some(key) = self.key(id).await? else {
                return Ok(Signer::LeftToS3s);
            };
            let k = signing_key(&key.secret.value, date, region, service);
            let expected = hex::encode(hmac(&k, policy));
            return Ok(if same(expected.as_bytes(), sig.as_bytes()) {
                Signer::Key(Box::new(key))
            } else {
                Signer::LeftToS3s
            });
        }
        if let Some(sig) = field("signature") {
            if !self.allow_signature_v2 {
                return Err(s3s::S3Error::with_message(
                    s3s::S3ErrorCode::InvalidRequest,
                    crate::request_time::V2_REFUSED,
                ));
            }
            let Some(id) = field("awsaccesskeyid") else {
                return Ok(Signer::LeftToS3s);
            };
            let Some(key) = self.key(id).await? else {
                return Ok(Signer::LeftToS3s);
            };
            let mut mac =
                <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key.secret.value.as_bytes())
                    .expect("HMAC takes any key");
            mac.update(policy.as_bytes());
            use base64::Engine as _;
            let expected =
                base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
            return Ok(if same(expected.as_bytes(), sig.as_bytes()) {
                Signer::Key(Box::new(key))
            } else {
                Signer::LeftToS3s
            });
        }
        Ok(Signer::Anonymous)
    }

    /// The key `id`, if it exists and has not expired (s3s answers for the
    /// others).
    async fn key(&self, id: &str) -> S3Result<Option<KeyRow>> {
        Ok(self.model.keys().signing_key(id).await.ok().flatten())
    }
}

/// A form's fields before its file, names lower-cased.
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Equality that takes as long whatever the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The boundary of a `multipart/form-data` Content-Type.
fn boundary(headers: &http::HeaderMap) -> Option<String> {
    let ct = headers.get(http::header::CONTENT_TYPE)?.to_str().ok()?;
    ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// The form's `key` placeholder S3 replaces by the file's name.
pub(crate) const FILENAME_PLACEHOLDER: &str = "${filename}";

/// `key` with `${filename}` replaced by `filename`, the name of the form's
/// file (AWS S3 API reference, POST Object, `key`: "the variable
/// ${filename} is automatically replaced with the name of the file
/// provided by the user"); none is the empty name.
pub(crate) fn with_filename(key: &str, filename: &str) -> String {
    key.replace(FILENAME_PLACEHOLDER, filename)
}

/// What a POST form says that s3s does not pass on (AWS S3 API reference,
/// POST Object): put in the request's extensions by [`PostGate::admit`].
#[derive(Debug, Clone, Default)]
pub(crate) struct PostFormExtras {
    /// The name of the form's file (its part's `filename`), which replaces
    /// `${filename}` in the form's key.
    pub filename: String,
    /// The `acl` field: a canned ACL (s3s reads only `x-amz-acl`).
    pub acl: Option<String>,
    /// The `tagging` field: an XML `Tagging` document (s3s reads only
    /// `x-amz-tagging`, the header's form).
    pub tagging: Option<String>,
}

/// The `name` of a part's `Content-Disposition` header among `headers`.
fn part_name(headers: &[u8]) -> Option<String> {
    part_param(headers, "name")
}

/// The parameter `param` (`name`, `filename`) of a part's
/// `Content-Disposition` header among `headers`, unquoted.
fn part_param(headers: &[u8], param: &str) -> Option<String> {
    let text = std::str::from_utf8(headers).ok()?;
    let cd = text.split("\r\n").find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(v)
    })?;
    cd.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k.trim() == param).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// Reads the fields of a form up to its file part, as s3s does: the part
/// named `file` (in any case) is the file.
fn parse_form(buf: &[u8], boundary: &str) -> Form {
    let delim = format!("--{boundary}");
    let delim = delim.as_bytes();
    let Some(mut at) = find(buf, delim, 0) else {
        return Form::Partial;
    };
    let mut fields = Vec::new();
    loop {
        at += delim.len();
        if buf.len() < at + 2 {
            return Form::Partial;
        }
        if &buf[at..at + 2] == b"--" {
            return Form::NoFile;
        }
        let Some(head_end) = find(buf, b"\r\n\r\n", at) else {
            return Form::Partial;
        };
        let name = part_name(&buf[at..head_end]).unwrap_or_default();
        let content_at = head_end + 4;
        if name.eq_ignore_ascii_case("file") {
            let filename = part_param(&buf[at..head_end], "filename");
            return Form::File {
                fields,
                content_at,
                filename,
            };
        }
        let mut end_delim = b"\r\n".to_vec();
        end_delim.extend_from_slice(delim);
        let Some(end) = find(buf, &end_delim, content_at) else {
            return Form::Partial;
        };
        let value = String::from_utf8_lossy(&buf[content_at..end]).into_owned();
        fields.push((name.to_ascii_lowercase(), value));
        at = end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"Key\"\r\n\r\na/b\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\neyJ9\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.txt\"\r\n\
Content-Type: text/plain\r\n\r\nCONTENT\r\n--XyZ--\r\n";

    #[test]
    fn the_fields_before_the_file_are_read_and_the_file_found() {
        let Form::File {
            fields,
            content_at,
            filename,
        } = parse_form(FORM, "XyZ")
        else {
            panic!("no file part found");
        };
        assert_eq!(
            fields,
            vec![
                ("key".to_owned(), "a/b".to_owned()),
                ("policy".to_owned(), "eyJ9".to_owned())
            ]
        );
        assert!(FORM[content_at..].starts_with(b"CONTENT"));
        assert_eq!(filename.as_deref(), Some("f.txt"));
    }

    #[test]
    fn a_form_cut_anywhere_before_its_file_needs_more() {
        let file_at = find(FORM, b"CONTENT", 0).unwrap();
        for cut in 0..file_at {
            assert_eq!(
                parse_form(&FORM[..cut], "XyZ"),
                Form::Partial,
                "cut at {cut}"
            );
        }
        assert!(matches!(
            parse_form(&FORM[..file_at], "XyZ"),
            Form::File { .. }
        ));
    }

    #[test]
    fn a_form_without_a_file_is_recognised() {
        let form = b"--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n--B--\r\n";
        assert_eq!(parse_form(form, "B"), Form::NoFile);
    }

    #[test]
    fn the_boundary_is_read_from_the_content_type() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::CONTENT_TYPE,
            "multipart/form-data; boundary=\"a b\"".parse().unwrap(),
        );
        assert_eq!(boundary(&h).as_deref(), Some("a b"));
        h.insert(
            http::header::CONTENT_TYPE,
            "multipart/form-data; charset=utf-8; BOUNDARY=zz"
                .parse()
                .unwrap(),
        );
        assert_eq!(boundary(&h).as_deref(), Some("zz"));
    }
}
