//! SSE-S3 and SSE-KMS on the S3 side: which managed key a write is sealed
//! under — its `x-amz-server-side-encryption` headers, else the bucket's
//! default encryption, a KMS key looked up in the key service — whether a
//! KMS key may open data now, and the response fields that name the key. The keys are [`hangar_model::sse_managed`]'s; reading a
//! managed version is [`crate::sse_c::for_read`]'s.

use hangar_model::bucket::{BucketEncryption, BucketRow};
use hangar_model::sse_c::SseC;
use hangar_model::sse_managed::{Managed, SSE_KMS, SSE_S3};
use s3s::dto::ServerSideEncryption;
use s3s::{S3Result, s3_error};

use crate::sse_c::Sealing;

/// What a write asked for: `x-amz-server-side-encryption` and
/// `x-amz-server-side-encryption-aws-kms-key-id`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Asked<'a> {
    pub algorithm: Option<&'a ServerSideEncryption>,
    pub kms_key_id: Option<&'a str>,
}

/// What a write is to be sealed under, before a KMS key is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// SSE-S3.
    S3,
    /// SSE-KMS under the key named (`None`: the default key, `aws/s3`).
    Kms(Option<String>),
}

/// What a write into `bucket` is sealed under: what it asked for, else the
/// bucket's default; `None` when neither asks for one, or when the write is
/// SSE-C (`customer`: the client's key wins over the bucket's default, and
/// asking for both is refused, as on S3).
pub(crate) fn for_write(
    bucket: &BucketRow,
    asked: Asked<'_>,
    customer: bool,
) -> S3Result<Option<Wanted>> {
    if customer {
        if asked.algorithm.is_some() || asked.kms_key_id.is_some() {
            return Err(s3_error!(
                InvalidArgument,
                "Server Side Encryption with Customer provided key is incompatible with the encryption method specified"
            ));
        }
        return Ok(None);
    }
    match asked.algorithm {
        Some(a) => wanted(a.as_str(), asked.kms_key_id).map(Some),
        None if asked.kms_key_id.is_some() => Err(kms_key_without_kms()),
        None => bucket
            .encryption()
            .map(|e| wanted(&e.algorithm, e.kms_key.as_deref()))
            .transpose(),
    }
}

impl crate::S3Api {
    /// The sealing of a new version written into `bucket` as `asked`
    /// ([`for_write`]), a KMS key looked up (missing: `400
    /// KMS.NotFoundException`; disabled: `400 KMS.DisabledException`).
    pub(crate) async fn managed_sealing(
        &self,
        bucket: &BucketRow,
        asked: Asked<'_>,
        customer: bool,
    ) -> S3Result<Option<Sealing>> {
        let managed = match for_write(bucket, asked, customer)? {
            None => return Ok(None),
            Some(Wanted::S3) => Managed::s3(),
            Some(Wanted::Kms(named)) => self
                .model
                .kms_keys()
                .for_sealing(named.as_deref())
                .await
                .map_err(crate::error::model_error)?,
        };
        Ok(Some(Sealing::managed(
            &self.settings.sse_master_key,
            managed,
        )))
    }

    /// Whether data sealed per `record` may be opened now: refused when its
    /// KMS key is missing or disabled.
    pub(crate) async fn check_kms_usable(&self, record: Option<&SseC>) -> S3Result<()> {
        match record.and_then(|r| r.managed.as_ref()) {
            Some(m) => self
                .model
                .kms_keys()
                .check_usable(m)
                .await
                .map_err(crate::error::model_error),
            None => Ok(()),
        }
    }
}

/// What an algorithm names (with its KMS key id).
fn wanted(algorithm: &str, kms_key_id: Option<&str>) -> S3Result<Wanted> {
    match algorithm {
        SSE_S3 if kms_key_id.is_some() => Err(kms_key_without_kms()),
        SSE_S3 => Ok(Wanted::S3),
        SSE_KMS => Ok(Wanted::Kms(kms_key_id.map(str::to_owned))),
        ServerSideEncryption::AWS_KMS_DSSE => Err(s3_error!(
            NotImplemented,
            "DSSE-KMS (aws:kms:dsse) is not implemented: use aws:kms, AES256 or SSE-C"
        )),
        _ => Err(s3_error!(
            InvalidArgument,
            "The encryption method specified is not supported"
        )),
    }
}

fn kms_key_without_kms() -> s3s::S3Error {
    s3_error!(
        InvalidArgument,
        "Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms"
    )
}

/// A bucket's default encryption as S3's rule asks for it: `AES256` (no
/// KMS key) or `aws:kms` (with a key id, or the default key); the key is
/// looked up when a write uses it, as on S3.
pub(crate) fn bucket_default(
    algorithm: &str,
    kms_key_id: Option<&str>,
    bucket_key: bool,
) -> S3Result<BucketEncryption> {
    wanted(algorithm, kms_key_id)?;
    Ok(BucketEncryption {
        algorithm: algorithm.to_owned(),
        kms_key: kms_key_id.map(str::to_owned),
        bucket_key,
    })
}

/// The response fields that name a version's managed key:
/// `(x-amz-server-side-encryption, -aws-kms-key-id)`; none for a plain or
/// SSE-C version.
pub(crate) fn echo(record: Option<&SseC>) -> (Option<ServerSideEncryption>, Option<String>) {
    match record.and_then(|r| r.managed.as_ref()) {
        Some(m) => (
            Some(ServerSideEncryption::from_static(m.algorithm())),
            m.kms_key.clone(),
        ),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(default: Option<&str>) -> BucketRow {
        let mut b = BucketRow::new("b", "ab".repeat(32), 1, 1);
        if let Some(a) = default {
            b.encryption
                .update(2, Some(bucket_default(a, None, false).unwrap()));
        }
        b
    }

    fn code<T: std::fmt::Debug>(r: S3Result<T>) -> String {
        r.unwrap_err().code().as_str().to_owned()
    }

    #[test]
    fn a_write_gets_what_it_asks_for_else_the_bucket_default() {
        let aes = ServerSideEncryption::from_static("AES256");
        let asked = Asked {
            algorithm: Some(&aes),
            kms_key_id: None,
        };
        let plain = bucket(None);
        assert_eq!(for_write(&plain, asked, false).unwrap(), Some(Wanted::S3));
        assert_eq!(for_write(&plain, Asked::default(), false).unwrap(), None);
        let defaulted = bucket(Some("AES256"));
        assert_eq!(
            for_write(&defaulted, Asked::default(), false).unwrap(),
            Some(Wanted::S3)
        );
        // SSE-C wins over the default, and may not be asked with SSE-S3.
        assert_eq!(for_write(&defaulted, Asked::default(), true).unwrap(), None);
        assert_eq!(code(for_write(&plain, asked, true)), "InvalidArgument");
    }

    #[test]
    fn what_s3_refuses_is_refused() {
        let b = bucket(None);
        let (aes, kms, other) = (
            ServerSideEncryption::from_static("AES256"),
            ServerSideEncryption::from_static("aws:kms"),
            ServerSideEncryption::from_static("AES128"),
        );
        let ask = |a, k| Asked {
            algorithm: a,
            kms_key_id: k,
        };
        assert_eq!(
            code(for_write(&b, ask(Some(&other), None), false)),
            "InvalidArgument"
        );
        assert_eq!(
            code(for_write(&b, ask(Some(&aes), Some("k")), false)),
            "InvalidArgument"
        );
        assert_eq!(
            code(for_write(&b, ask(None, Some("k")), false)),
            "InvalidArgument"
        );
        assert_eq!(
            for_write(&b, ask(Some(&kms), Some("k")), false).unwrap(),
            Some(Wanted::Kms(Some("k".into())))
        );
        assert_eq!(
            for_write(&b, ask(Some(&kms), None), false).unwrap(),
            Some(Wanted::Kms(None))
        );
        let dsse = ServerSideEncryption::from_static("aws:kms:dsse");
        assert_eq!(
            code(for_write(&b, ask(Some(&dsse), None), false)),
            "NotImplemented"
        );
        assert!(bucket_default("aws:kms", Some("k"), true).is_ok());
    }

    #[test]
    fn only_managed_versions_are_echoed() {
        let master = hangar_model::sse_managed::MasterKey::new([1; 32]);
        let (rec, _) = master.seal_new(Managed::s3());
        let (a, k) = echo(Some(&rec));
        assert_eq!(a.unwrap().as_str(), "AES256");
        assert_eq!(k, None);
        let customer = SseC::new(&hangar_model::sse_c::CustomerKey::new([2; 32]));
        assert_eq!(echo(Some(&customer)), (None, None));
        assert_eq!(echo(None), (None, None));
    }
}
