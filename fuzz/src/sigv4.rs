//! A SigV4 signer for the fuzz harness, so that fuzzed requests get past
//! authentication and reach the request parsers behind it (aws-chunked
//! bodies, XML bodies, the operations' header and query handling). It signs
//! what the harness sends; s3s then checks it with its own code.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The harness's access key id.
pub const KEY_ID: &str = "GK000000000000000000f0220f";
/// The harness's secret key.
pub const SECRET: &str = "6675a7a3c1c1c2a6f7c46e1c0d1dc7ef4a8f2e9e7e3f1a0b5c6d7e8f9a0b1c2d";
/// The region the node is configured with.
pub const REGION: &str = "garage";

/// The `x-amz-date` form of now, and its day.
pub fn now_stamp() -> (String, String) {
    let t = time::OffsetDateTime::now_utc();
    let date = format!("{:04}{:02}{:02}", t.year(), t.month() as u8, t.day());
    let stamp = format!("{date}T{:02}{:02}{:02}Z", t.hour(), t.minute(), t.second());
    (stamp, date)
}

/// SigV4's URI encoding (unreserved characters kept, `/` kept if asked).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = HmacSha256::new_from_slice(key).expect("any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// The signing key of `date` for S3 in [`REGION`].
pub fn signing_key(date: &str) -> Vec<u8> {
    let k = hmac(format!("AWS4{SECRET}").as_bytes(), date.as_bytes());
    let k = hmac(&k, REGION.as_bytes());
    let k = hmac(&k, b"s3");
    hmac(&k, b"aws4_request")
}

/// The credential scope of `date`.
pub fn scope(date: &str) -> String {
    format!("{date}/{REGION}/s3/aws4_request")
}

/// Signs a canonical request: returns the hex signature.
#[allow(clippy::too_many_arguments)]
pub fn sign(
    method: &str,
    encoded_path: &str,
    query: &[(String, String)],
    headers: &[(String, String)],
    payload_hash: &str,
    stamp: &str,
    date: &str,
) -> String {
    let mut q: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    q.sort();
    let canonical_query = q
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut h: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    h.sort();
    let canonical_headers: String = h.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = h.iter().map(|(k, _)| k.as_str()).collect();
    let canonical = format!(
        "{method}\n{encoded_path}\n{canonical_query}\n{canonical_headers}\n{}\n{payload_hash}",
        signed.join(";")
    );
    string_to_sign_signature(stamp, date, &sha256_hex(canonical.as_bytes()))
}

/// The signature of a string to sign made of `stamp`, `date`'s scope and a
/// hash.
pub fn string_to_sign_signature(stamp: &str, date: &str, hash: &str) -> String {
    let sts = format!("AWS4-HMAC-SHA256\n{stamp}\n{}\n{hash}", scope(date));
    hex::encode(hmac(&signing_key(date), sts.as_bytes()))
}

/// The signature of one aws-chunked chunk following `previous`.
pub fn chunk_signature(stamp: &str, date: &str, previous: &str, chunk: &[u8]) -> String {
    let sts = format!(
        "AWS4-HMAC-SHA256-PAYLOAD\n{stamp}\n{}\n{previous}\n{}\n{}",
        scope(date),
        sha256_hex(b""),
        sha256_hex(chunk)
    );
    hex::encode(hmac(&signing_key(date), sts.as_bytes()))
}
