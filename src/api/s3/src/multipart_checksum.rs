//! The checksum of an object completed from parts, as S3 makes it: the
//! upload names an algorithm (`x-amz-checksum-algorithm`) and a type
//! (`x-amz-checksum-type`), each part is uploaded with its checksum, and
//! the completion makes the object's:
//!
//! - `COMPOSITE` (the default of CRC32, CRC32C, SHA-1 and SHA-256): the
//!   algorithm over the parts' checksums, their bytes end to end, written
//!   `<base64>-<parts>`;
//! - `FULL_OBJECT` (the only type of CRC64NVME, and a choice for CRC32 and
//!   CRC32C): the CRC of the whole content, combined from the parts' CRCs
//!   and lengths without reading a byte (`crc_fast::checksum_combine`).
//!
//! A part listed in the completion with a checksum must have that
//! checksum (else `InvalidPart`); a `COMPOSITE` upload must list every
//! part's; an object checksum sent with the completion must be the one the
//! parts make (else `BadDigest`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hangar_model::multipart::{ChecksumRefusal, CompleteError, MpuRow, PartRow};
use hangar_model::object::StoredChecksum;
use s3s::dto::ChecksumType;
use s3s::{S3Result, s3_error};

use crate::checksum::{Algorithm, hasher};

/// How an object's checksum is made of its parts'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Composite,
    FullObject,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Composite => ChecksumType::COMPOSITE,
            Kind::FullObject => ChecksumType::FULL_OBJECT,
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            ChecksumType::COMPOSITE => Some(Kind::Composite),
            ChecksumType::FULL_OBJECT => Some(Kind::FullObject),
            _ => None,
        }
    }

    /// The type an algorithm has when the upload names none.
    fn default_of(a: Algorithm) -> Kind {
        match a {
            Algorithm::Crc64Nvme => Kind::FullObject,
            _ => Kind::Composite,
        }
    }

    /// The type of a stored object checksum: a composite one ends in `-N`.
    pub(crate) fn of_stored(c: &StoredChecksum) -> Kind {
        if c.value.contains('-') {
            Kind::Composite
        } else {
            Kind::FullObject
        }
    }
}

/// CreateMultipartUpload's algorithm and type, checked: the type to record
/// with the upload (`None`: the algorithm's default, or no checksum).
pub(crate) fn upload_type(algorithm: Option<&str>, ty: Option<&str>) -> S3Result<Option<String>> {
    let Some(ty) = ty else { return Ok(None) };
    let kind = Kind::parse(ty).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "Value for x-amz-checksum-type header is invalid."
        )
    })?;
    let Some(a) = algorithm.and_then(Algorithm::parse) else {
        return Err(s3_error!(
            InvalidRequest,
            "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
        ));
    };
    let allowed = match kind {
        Kind::Composite => a != Algorithm::Crc64Nvme,
        Kind::FullObject => matches!(
            a,
            Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Crc64Nvme
        ),
    };
    if !allowed {
        return Err(s3_error!(
            InvalidRequest,
            "The {} checksum type cannot be used with the {} checksum algorithm.",
            kind.name(),
            a.name().to_ascii_lowercase()
        ));
    }
    Ok(Some(kind.name().to_owned()))
}

/// The algorithm and type of an upload's object checksum, if it has one.
pub(crate) fn of_upload(mpu: &MpuRow) -> Option<(Algorithm, Kind)> {
    let a = Algorithm::parse(mpu.checksum_algorithm.as_deref()?)?;
    let kind = mpu
        .checksum_type
        .as_deref()
        .and_then(Kind::parse)
        .unwrap_or(Kind::default_of(a));
    Some((a, kind))
}

/// What a completion request says of checksums.
pub(crate) struct Sent {
    /// Each listed part's checksum of the upload's algorithm, in order.
    pub parts: Vec<Option<String>>,
    /// The object's checksum (`x-amz-checksum-<algorithm>`), if sent.
    pub object: Option<String>,
    /// `x-amz-checksum-type`, if sent.
    pub kind: Option<String>,
}

/// The object checksum of a completion of `mpu` whose request says `sent`,
/// from the stored rows of the parts it lists (part number, row).
pub(crate) fn object_checksum(
    mpu: &MpuRow,
    sent: &Sent,
    parts: &[(u32, PartRow)],
) -> Result<Option<StoredChecksum>, CompleteError> {
    let refuse = |r| Err(CompleteError::Checksum(r));
    let Some((a, kind)) = of_upload(mpu) else {
        return Ok(None);
    };
    if let Some(k) = &sent.kind
        && Kind::parse(k) != Some(kind)
    {
        return refuse(ChecksumRefusal::Missing(format!(
            "The upload was created using the {} checksum mode. The complete request must use the same checksum mode.",
            kind.name()
        )));
    }
    let mut sums = Vec::with_capacity(parts.len());
    for ((n, p), listed) in parts.iter().zip(&sent.parts) {
        let stored = p.checksum.as_ref().filter(|c| c.algorithm == a.name());
        let Some(stored) = stored else {
            return refuse(ChecksumRefusal::Missing(format!(
                "The upload was created using a {} checksum. Part {n} was uploaded without one.",
                a.name().to_ascii_lowercase()
            )));
        };
        match listed {
            Some(l) if l.trim() != stored.value => {
                return refuse(ChecksumRefusal::PartMismatch(*n));
            }
            None if kind == Kind::Composite => {
                return refuse(ChecksumRefusal::Missing(format!(
                    "The upload was created using a {} checksum. The complete request must include the checksum for each part. It was missing for part {n} in the request.",
                    a.name().to_ascii_lowercase()
                )));
            }
            _ => {}
        }
        let Ok(bytes) = B64.decode(&stored.value) else {
            return refuse(ChecksumRefusal::Missing(format!(
                "The stored checksum of part {n} does not decode"
            )));
        };
        sums.push((bytes, p.size));
    }
    let value = match kind {
        Kind::Composite => {
            let mut h = hasher(a);
            for (bytes, _) in &sums {
                h.update(bytes);
            }
            format!("{}-{}", crate::checksum::value_of(h), sums.len())
        }
        Kind::FullObject => match combined(a, &sums) {
            Some(v) => v,
            None => {
                return refuse(ChecksumRefusal::Missing(format!(
                    "A {} checksum cannot be combined into a full-object checksum.",
                    a.name().to_ascii_lowercase()
                )));
            }
        },
    };
    if let Some(o) = &sent.object {
        // The composite value may be sent with or without its part count.
        let bare = value.split('-').next().unwrap_or_default();
        if o.trim() != value && o.trim() != bare {
            return refuse(ChecksumRefusal::ObjectMismatch(format!(
                "The {} you specified did not match the calculated checksum.",
                a.name().to_ascii_lowercase()
            )));
        }
    }
    Ok(Some(StoredChecksum {
        algorithm: a.name().to_owned(),
        value,
    }))
}

/// The CRC of the parts' content end to end, from their CRCs (big-endian
/// bytes) and lengths; `None` for an algorithm that is not a CRC.
fn combined(a: Algorithm, parts: &[(Vec<u8>, u64)]) -> Option<String> {
    use crc_fast::CrcAlgorithm;
    let (crc, width) = match a {
        Algorithm::Crc32 => (CrcAlgorithm::Crc32IsoHdlc, 4),
        Algorithm::Crc32c => (CrcAlgorithm::Crc32Iscsi, 4),
        Algorithm::Crc64Nvme => (CrcAlgorithm::Crc64Nvme, 8),
        Algorithm::Sha1 | Algorithm::Sha256 => return None,
    };
    let mut acc: Option<u64> = None;
    for (bytes, len) in parts {
        let v = bytes.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b));
        acc = Some(match acc {
            None => v,
            Some(c) => crc_fast::checksum_combine(crc, c, v, *len),
        });
    }
    let v = acc.unwrap_or(0);
    Some(B64.encode(&v.to_be_bytes()[8 - width..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc_b64(a: Algorithm, data: &[u8]) -> String {
        let mut h = hasher(a);
        h.update(data);
        crate::checksum::value_of(h)
    }

    #[test]
    fn full_object_crcs_are_combined_from_the_parts() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for a in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            for cuts in [vec![10_000], vec![1, 9_999], vec![5_000, 3_000, 2_000]] {
                let mut parts = Vec::new();
                let mut at = 0;
                for c in cuts {
                    let piece = &data[at..at + c];
                    parts.push((B64.decode(crc_b64(a, piece)).unwrap(), c as u64));
                    at += c;
                }
                assert_eq!(combined(a, &parts).unwrap(), crc_b64(a, &data), "{a:?}");
            }
        }
        assert_eq!(combined(Algorithm::Sha256, &[]), None);
    }

    #[test]
    fn an_upload_type_must_suit_its_algorithm() {
        assert_eq!(upload_type(Some("CRC32"), None).unwrap(), None);
        assert_eq!(
            upload_type(Some("CRC32"), Some("FULL_OBJECT")).unwrap(),
            Some("FULL_OBJECT".into())
        );
        assert_eq!(
            upload_type(Some("SHA256"), Some("COMPOSITE")).unwrap(),
            Some("COMPOSITE".into())
        );
        for (a, t) in [
            (Some("SHA256"), "FULL_OBJECT"),
            (Some("CRC64NVME"), "COMPOSITE"),
            (None, "COMPOSITE"),
            (Some("CRC32"), "BOTH"),
        ] {
            assert!(upload_type(a, Some(t)).is_err(), "{a:?} {t}");
        }
    }
}
