//! SSE-S3 (and the request side of SSE-KMS) on the S3 side: which managed
//! key a write is sealed under — its `x-amz-server-side-encryption`
//! headers, else the bucket's default encryption — and the response fields
//! that name it. The keys are [`hangar_model::sse_managed`]'s; reading a
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

/// The managed key a write into `bucket` is sealed under: the one it asked
/// for, else the bucket's default; `None` when neither asks for one, or
/// when the write is SSE-C (`customer`: the client's key wins over the
/// bucket's default, and asking for both is refused, as on S3).
pub(crate) fn for_write(
    bucket: &BucketRow,
    asked: Asked<'_>,
    customer: bool,
) -> S3Result<Option<Managed>> {
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
        Some(a) => managed(a.as_str(), asked.kms_key_id),
        None if asked.kms_key_id.is_some() => Err(kms_key_without_kms()),
        None => bucket
            .encryption()
            .map(|e| managed(&e.algorithm, e.kms_key.as_deref()))
            .transpose()
            .map(Option::flatten),
    }
}

/// [`for_write`] as the sealing of the new version (`None`: plain), with
/// the master key of `api`.
pub(crate) fn sealing(api: &crate::S3Api, managed: Option<Managed>) -> Option<Sealing> {
    managed.map(|m| Sealing::managed(&api.settings.sse_master_key, m))
}

/// The managed key an algorithm names (with its KMS key id).
fn managed(algorithm: &str, kms_key_id: Option<&str>) -> S3Result<Option<Managed>> {
    match algorithm {
        SSE_S3 if kms_key_id.is_some() => Err(kms_key_without_kms()),
        SSE_S3 => Ok(Some(Managed::s3())),
        SSE_KMS | ServerSideEncryption::AWS_KMS_DSSE => Err(s3_error!(
            NotImplemented,
            "SSE-KMS is not implemented yet: use AES256 (SSE-S3) or SSE-C"
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
/// KMS key), `aws:kms` (refused as not implemented, like the header).
pub(crate) fn bucket_default(
    algorithm: &str,
    kms_key_id: Option<&str>,
    bucket_key: bool,
) -> S3Result<BucketEncryption> {
    managed(algorithm, kms_key_id)?;
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
        assert_eq!(
            for_write(&plain, asked, false).unwrap(),
            Some(Managed::s3())
        );
        assert_eq!(for_write(&plain, Asked::default(), false).unwrap(), None);
        let defaulted = bucket(Some("AES256"));
        assert_eq!(
            for_write(&defaulted, Asked::default(), false).unwrap(),
            Some(Managed::s3())
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
            code(for_write(&b, ask(Some(&kms), None), false)),
            "NotImplemented"
        );
        assert_eq!(
            code(bucket_default("aws:kms", None, true)),
            "NotImplemented"
        );
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
