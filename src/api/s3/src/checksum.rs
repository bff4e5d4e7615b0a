//! Flexible checksums (`x-amz-checksum-*`): which one a request asks for,
//! computing it while the body streams, and checking the client's value,
//! sent as a header or as an aws-chunked trailer.

use hangar_model::object::StoredChecksum;
use http::HeaderMap;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::{S3Result, TrailingHeaders, s3_error};

/// The checksum algorithms S3 defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

impl Algorithm {
    pub(crate) const ALL: [Algorithm; 5] = [
        Algorithm::Crc32,
        Algorithm::Crc32c,
        Algorithm::Crc64Nvme,
        Algorithm::Sha1,
        Algorithm::Sha256,
    ];

    /// The name used in `x-amz-checksum-algorithm` and stored rows.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Crc64Nvme => "CRC64NVME",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }

    /// The header carrying the value: `x-amz-checksum-crc32`, …
    pub fn header(self) -> String {
        format!("x-amz-checksum-{}", self.name().to_ascii_lowercase())
    }

    pub(crate) fn parse(s: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s) || a.header().eq_ignore_ascii_case(s))
    }
}

/// What a request asks to be checked.
pub struct Requested {
    pub algorithm: Algorithm,
    /// The value sent in a header, if any.
    pub header_value: Option<String>,
    /// Whether the value comes in an aws-chunked trailer.
    pub in_trailer: bool,
}

/// Reads the checksum a request asks for from its headers: a value header,
/// `x-amz-trailer`, or `x-amz-sdk-checksum-algorithm` (compute and store,
/// nothing to compare). More than one value header is an error, as in S3.
pub fn requested(headers: &HeaderMap) -> S3Result<Option<Requested>> {
    let mut found: Option<Requested> = None;
    for a in Algorithm::ALL {
        if let Some(v) = headers.get(a.header()) {
            if found.is_some() {
                return Err(s3_error!(
                    InvalidRequest,
                    "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
                ));
            }
            let v = v
                .to_str()
                .map_err(|_| s3_error!(InvalidRequest, "Invalid {} header", a.header()))?;
            found = Some(Requested {
                algorithm: a,
                header_value: Some(v.to_owned()),
                in_trailer: false,
            });
        }
    }
    if found.is_some() {
        return Ok(found);
    }
    if let Some(t) = headers.get("x-amz-trailer").and_then(|v| v.to_str().ok()) {
        let a = Algorithm::parse(t.trim())
            .ok_or_else(|| s3_error!(InvalidRequest, "Unsupported trailer {t}"))?;
        return Ok(Some(Requested {
            algorithm: a,
            header_value: None,
            in_trailer: true,
        }));
    }
    for h in ["x-amz-sdk-checksum-algorithm", "x-amz-checksum-algorithm"] {
        if let Some(v) = headers.get(h).and_then(|v| v.to_str().ok()) {
            let a = Algorithm::parse(v)
                .ok_or_else(|| s3_error!(InvalidRequest, "Unsupported checksum algorithm {v}"))?;
            return Ok(Some(Requested {
                algorithm: a,
                header_value: None,
                in_trailer: false,
            }));
        }
    }
    Ok(None)
}

/// A hasher for one algorithm.
pub fn hasher(a: Algorithm) -> ChecksumHasher {
    let mut h = ChecksumHasher::default();
    match a {
        Algorithm::Crc32 => h.crc32 = Some(Crc32::new()),
        Algorithm::Crc32c => h.crc32c = Some(Crc32c::new()),
        Algorithm::Crc64Nvme => h.crc64nvme = Some(Crc64Nvme::new()),
        Algorithm::Sha1 => h.sha1 = Some(Sha1::new()),
        Algorithm::Sha256 => h.sha256 = Some(Sha256::new()),
    }
    h
}

/// Finishes `h`, a hasher of one algorithm ([`hasher`]): its value in
/// base64, as S3 transmits it.
pub fn value_of(h: ChecksumHasher) -> String {
    let c = h.finalize();
    [
        c.checksum_crc32,
        c.checksum_crc32c,
        c.checksum_crc64nvme,
        c.checksum_sha1,
        c.checksum_sha256,
    ]
    .into_iter()
    .flatten()
    .next()
    .expect("the hasher computes one checksum")
}

/// Finishes `h` and checks it against what the client sent; returns the
/// checksum to store with the object.
pub fn verify(
    req: &Requested,
    h: ChecksumHasher,
    trailers: Option<&TrailingHeaders>,
) -> S3Result<StoredChecksum> {
    let computed = value_of(h);
    let sent = if req.in_trailer {
        let name = req.algorithm.header();
        let v = trailers
            .and_then(|t| {
                t.read(|h| {
                    h.get(&name)
                        .and_then(|v| v.to_str().ok().map(str::to_owned))
                })
            })
            .flatten();
        Some(v.ok_or_else(|| {
            s3_error!(
                InvalidRequest,
                "The request declared trailer {name} but did not send it"
            )
        })?)
    } else {
        req.header_value.clone()
    };
    if let Some(sent) = sent
        && sent.trim() != computed
    {
        return Err(s3_error!(
            BadDigest,
            "The {} you specified did not match the calculated checksum.",
            req.algorithm.name()
        ));
    }
    Ok(StoredChecksum {
        algorithm: req.algorithm.name().to_owned(),
        value: computed,
    })
}

/// Sets the checksum field of output `$out` (any S3 DTO with the five
/// `checksum_*` fields) that matches `$c: Option<&StoredChecksum>`.
macro_rules! fill_checksum {
    ($c:expr, $out:expr) => {
        $crate::checksum::fill(
            $c,
            [
                &mut $out.checksum_crc32,
                &mut $out.checksum_crc32c,
                &mut $out.checksum_crc64nvme,
                &mut $out.checksum_sha1,
                &mut $out.checksum_sha256,
            ],
        )
    };
}
pub(crate) use fill_checksum;

/// Sets, among an output's checksum fields (CRC32, CRC32C, CRC64NVME, SHA1,
/// SHA256, in that order), the one matching `c`'s algorithm.
pub fn fill(c: Option<&StoredChecksum>, slots: [&mut Option<String>; 5]) {
    let Some(c) = c else { return };
    let Some(i) = Algorithm::ALL.iter().position(|a| a.name() == c.algorithm) else {
        return;
    };
    if let Some(slot) = slots.into_iter().nth(i) {
        *slot = Some(c.value.clone());
    }
}
