//! SSE-C on the S3 side: the three request headers (and their copy-source
//! twins) turned into a checked [`Given`] key, the key checked against what
//! an object or an upload recorded, and the response headers that echo it.
//! The sealing itself is [`hangar_model::sse_c`]. A version sealed under a
//! managed key (SSE-S3, SSE-KMS: [`crate::sse_managed`]) is read the same
//! way, with the key the cluster derives in place of one sent.
//!
//! Hangar serves plain HTTP (TLS is terminated in front of it), so unlike
//! AWS it accepts SSE-C requests that reached it over HTTP
//! (doc/s3-compatibility.md, "SSE-C").

use base64::Engine as _;
use hangar_model::sse_c::{ALGORITHM, CustomerKey, SseC};
use hangar_model::sse_managed::MasterKey;
use s3s::S3Result;
use s3s::crypto::{Checksum as _, Md5};

use crate::error::sse_c as err;

/// The key of a sealed version: one a request sent, checked against its
/// MD5 header (SSE-C), or the one the cluster derives for a managed version.
#[derive(Clone)]
pub(crate) struct Given {
    pub key: CustomerKey,
    /// Base64 MD5 of a customer key, as the request sent it (and the
    /// response echoes it); `None` for a managed key, which no response
    /// shows.
    pub key_md5: Option<String>,
}

impl std::fmt::Debug for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key_md5 {
            Some(m) => write!(f, "Given(key md5 {m})"),
            None => f.write_str("Given(managed)"),
        }
    }
}

/// The key of a request's SSE-C headers: `None` when it sent none, S3's
/// `400 InvalidArgument` when they are incomplete or inconsistent.
pub(crate) fn given(
    algorithm: Option<&str>,
    key: Option<&str>,
    key_md5: Option<&str>,
) -> S3Result<Option<Given>> {
    if algorithm.is_none() && key.is_none() && key_md5.is_none() {
        return Ok(None);
    }
    if algorithm != Some(ALGORITHM) {
        return Err(err::bad_algorithm());
    }
    let key = key.ok_or_else(err::missing_key)?;
    let key_md5 = key_md5.ok_or_else(err::missing_key_md5)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let bytes: [u8; 32] = b64
        .decode(key.trim())
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or_else(err::bad_key)?;
    let mut md5 = Md5::new();
    md5.update(&bytes);
    let computed = b64.encode(md5.finalize());
    if computed != key_md5.trim() {
        return Err(err::key_md5_mismatch());
    }
    Ok(Some(Given {
        key: CustomerKey::new(bytes),
        key_md5: Some(computed),
    }))
}

impl crate::S3Api {
    /// [`given`], and with `[s3_api] sse_c_require_https` the request
    /// refused unless its TLS proxy says it came over HTTPS
    /// (`X-Forwarded-Proto: https`).
    pub(crate) fn sse_given(
        &self,
        headers: &http::HeaderMap,
        algorithm: Option<&str>,
        key: Option<&str>,
        key_md5: Option<&str>,
    ) -> S3Result<Option<Given>> {
        let g = given(algorithm, key, key_md5)?;
        if g.is_some() && self.settings.sse_c_require_https && !over_https(headers) {
            return Err(err::insecure());
        }
        Ok(g)
    }
}

/// Whether the proxy in front says the request came over HTTPS.
fn over_https(headers: &http::HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// What a request may read of a version sealed per `recorded` with the key
/// it `sent`: `Ok(None)` for a plain version read without a key, the key
/// when it is the right one or the version's key is managed (derived from
/// `master`), else S3's error (no key: `400 InvalidRequest`; a key for a
/// plain or managed version: `400 InvalidRequest`; a wrong key: `403
/// AccessDenied`).
pub(crate) fn for_read(
    master: &MasterKey,
    recorded: Option<&SseC>,
    sent: Option<Given>,
) -> S3Result<Option<Given>> {
    if let Some(managed) = managed_read(master, recorded, sent.as_ref()) {
        return managed;
    }
    match (recorded, sent) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(err::not_encrypted()),
        (Some(_), None) => Err(err::key_required()),
        (Some(r), Some(g)) if r.matches(&g.key) => Ok(Some(g)),
        (Some(_), Some(_)) => Err(err::wrong_key()),
    }
}

/// The key a part of an upload sealed per `recorded` is sealed with: like
/// [`for_read`], with S3's messages for parts.
pub(crate) fn for_part(
    master: &MasterKey,
    recorded: Option<&SseC>,
    sent: Option<Given>,
) -> S3Result<Option<Given>> {
    if let Some(managed) = managed_read(master, recorded, sent.as_ref()) {
        return managed;
    }
    match (recorded, sent) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(err::not_encrypted()),
        (Some(_), None) => Err(err::part_key_required()),
        (Some(r), Some(g)) if r.matches(&g.key) => Ok(Some(g)),
        (Some(_), Some(_)) => Err(err::part_key_mismatch()),
    }
}

/// The key of a version sealed under a managed key, which no request may
/// send one for; `None` when `recorded` is not managed.
fn managed_read(
    master: &MasterKey,
    recorded: Option<&SseC>,
    sent: Option<&Given>,
) -> Option<S3Result<Option<Given>>> {
    let r = recorded.filter(|r| !r.is_customer_key())?;
    Some(match sent {
        Some(_) => Err(err::not_encrypted()),
        None => managed_key(master, r).map(Some),
    })
}

/// The key of a managed version: derived from the master key, and checked
/// against the record (a node configured with another master key than the
/// one that sealed the version must not serve garbage).
fn managed_key(master: &MasterKey, record: &SseC) -> S3Result<Given> {
    let key = master.key_of(record).ok_or_else(|| {
        tracing::error!(
            "a version sealed with SSE-S3/SSE-KMS does not open with this node's master key: \
             is sse_master_key (or rpc_secret, which it derives from when unset) the same on every node?"
        );
        err::master_key_mismatch()
    })?;
    Ok(Given { key, key_md5: None })
}

/// A version's record and the key to seal its data with.
#[derive(Clone)]
pub(crate) struct Sealing {
    pub record: SseC,
    pub key: CustomerKey,
}

impl Sealing {
    /// Sealing for a new version (a fresh salt) with `given`'s key.
    pub fn new(given: &Given) -> Sealing {
        Sealing {
            record: SseC::new(&given.key),
            key: given.key.clone(),
        }
    }

    /// Sealing for a new version under a managed key, derived from
    /// `master` with a fresh salt.
    pub fn managed(master: &MasterKey, managed: hangar_model::sse_managed::Managed) -> Sealing {
        let (record, key) = master.seal_new(managed);
        Sealing { record, key }
    }

    /// Whether the version's ETag is the MD5 of its content: not when the
    /// client holds the key (an MD5 would let whoever lists the bucket
    /// confirm a guess of the content) nor under a KMS key, as on AWS;
    /// SSE-S3's ETag is the MD5, as on AWS.
    pub fn etag_is_md5(&self) -> bool {
        self.record
            .managed
            .as_ref()
            .is_some_and(|m| m.kms_key.is_none())
    }

    /// Sealing with an existing record (a multipart upload's) and its key.
    pub fn with(record: &SseC, given: &Given) -> Sealing {
        Sealing {
            record: record.clone(),
            key: given.key.clone(),
        }
    }
}

/// The response fields that echo a customer key: `(algorithm, key MD5)`.
pub(crate) fn echo(given: Option<&Given>) -> (Option<String>, Option<String>) {
    match given.and_then(|g| g.key_md5.as_ref()) {
        Some(md5) => (Some(ALGORITHM.to_owned()), Some(md5.clone())),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn md5_b64(b: &[u8]) -> String {
        let mut m = Md5::new();
        m.update(b);
        b64(&m.finalize())
    }

    #[test]
    fn headers_are_checked_as_s3_checks_them() {
        let k = [7u8; 32];
        let (key, md5) = (b64(&k), md5_b64(&k));
        assert!(given(None, None, None).unwrap().is_none());
        let g = given(Some("AES256"), Some(&key), Some(&md5))
            .unwrap()
            .unwrap();
        assert_eq!(g.key_md5.as_deref(), Some(md5.as_str()));
        assert!(!format!("{g:?}").contains(&key));
        let code = |r: S3Result<Option<Given>>| r.unwrap_err().code().as_str().to_owned();
        for bad in [
            given(Some("AES128"), Some(&key), Some(&md5)),
            given(None, Some(&key), Some(&md5)),
            given(Some("AES256"), None, Some(&md5)),
            given(Some("AES256"), Some(&key), None),
            given(
                Some("AES256"),
                Some(&b64(&k[..16])),
                Some(&md5_b64(&k[..16])),
            ),
            given(Some("AES256"), Some("%%%"), Some(&md5)),
            given(Some("AES256"), Some(&key), Some(&md5_b64(b"other"))),
        ] {
            assert_eq!(code(bad), "InvalidArgument");
        }
    }

    #[test]
    fn keys_are_checked_against_the_record() {
        let k = [9u8; 32];
        let g = given(Some("AES256"), Some(&b64(&k)), Some(&md5_b64(&k)))
            .unwrap()
            .unwrap();
        let other = [8u8; 32];
        let o = given(Some("AES256"), Some(&b64(&other)), Some(&md5_b64(&other)))
            .unwrap()
            .unwrap();
        let rec = SseC::new(&CustomerKey::new(k));
        let m = MasterKey::new([1; 32]);
        let code = |r: S3Result<Option<Given>>| r.unwrap_err().code().as_str().to_owned();
        assert!(for_read(&m, None, None).unwrap().is_none());
        assert!(for_read(&m, Some(&rec), Some(g.clone())).unwrap().is_some());
        assert_eq!(code(for_read(&m, Some(&rec), None)), "InvalidRequest");
        assert_eq!(code(for_read(&m, None, Some(g.clone()))), "InvalidRequest");
        assert_eq!(
            code(for_read(&m, Some(&rec), Some(o.clone()))),
            "AccessDenied"
        );
        assert_eq!(code(for_part(&m, Some(&rec), Some(o))), "InvalidRequest");
        assert_eq!(code(for_part(&m, Some(&rec), None)), "InvalidRequest");
    }

    #[test]
    fn a_managed_version_opens_with_the_master_key_and_refuses_customer_keys() {
        let m = MasterKey::new([1; 32]);
        let sealing = Sealing::managed(&m, hangar_model::sse_managed::Managed::s3());
        assert!(sealing.etag_is_md5());
        assert!(
            !Sealing::managed(&m, hangar_model::sse_managed::Managed::kms("k", [2; 16]))
                .etag_is_md5()
        );
        let rec = sealing.record.clone();
        let opened = for_read(&m, Some(&rec), None).unwrap().unwrap();
        assert!(opened.key_md5.is_none());
        assert_eq!(echo(Some(&opened)), (None, None));
        let sealed = rec.seal(&sealing.key, b"x");
        assert_eq!(rec.open(&opened.key, &sealed).unwrap(), b"x");
        assert!(for_part(&m, Some(&rec), None).unwrap().is_some());
        let k = [9u8; 32];
        let g = given(Some("AES256"), Some(&b64(&k)), Some(&md5_b64(&k))).unwrap();
        let code = |r: S3Result<Option<Given>>| r.unwrap_err().code().as_str().to_owned();
        assert_eq!(code(for_read(&m, Some(&rec), g.clone())), "InvalidRequest");
        assert_eq!(code(for_part(&m, Some(&rec), g)), "InvalidRequest");
        let other = MasterKey::new([2; 32]);
        assert_eq!(code(for_read(&other, Some(&rec), None)), "InternalError");
    }
}
