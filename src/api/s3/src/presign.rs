//! SigV4 presigned URLs (query-string authentication), as the S3 endpoint
//! verifies them: what the admin endpoint hands out so that a browser or a
//! script can make one S3 request without holding a key's secret.
//!
//! Only path-style URLs are built (`/<bucket>/<object>`), which every node
//! serves whatever its `root_domain`; the payload is `UNSIGNED-PAYLOAD` and
//! the only signed header is `host`, so the URL works with any body and
//! any client that sends that host.
//!
//! Why not a library: s3s, which verifies these URLs, keeps its SigV4 code
//! private, and `aws-sigv4` would link the AWS SDK's runtime crates
//! (aws-smithy-*, aws-credential-types) into the server for one canonical
//! request and four HMACs. This signer is checked against AWS's documented
//! presigned-URL example and against s3s's verifier (the S3 endpoint).

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// Longest lifetime a presigned URL may ask for: seven days, S3's bound.
pub const MAX_EXPIRES_SECS: u64 = 7 * 24 * 3600;

/// One request to presign.
#[derive(Debug, Clone)]
pub struct Presign<'a> {
    /// `GET`, `PUT`, `DELETE`, `HEAD`.
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The `Host` the client will send (`host[:port]`).
    pub host: &'a str,
    /// The canonical URI path, already encoded ([`path_for`]).
    pub path: &'a str,
    /// The request's own query parameters, not encoded.
    pub query: &'a [(String, String)],
    pub access_key_id: &'a str,
    pub secret: &'a str,
    pub region: &'a str,
    /// Seconds the URL stays valid, 1 to [`MAX_EXPIRES_SECS`].
    pub expires_secs: u64,
    /// The signing time: Unix seconds.
    pub now_secs: i64,
}

/// `s` encoded as SigV4 wants: every byte but the unreserved
/// `A-Z a-z 0-9 - _ . ~` as `%XX`, and `/` too unless `keep_slash`.
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path-style URI path of `object` in `bucket` (the bucket's own when
/// `object` is empty).
pub fn path_for(bucket: &str, object: &str) -> String {
    if object.is_empty() {
        format!("/{}", uri_encode(bucket, false))
    } else {
        format!(
            "/{}/{}",
            uri_encode(bucket, false),
            uri_encode(object, true)
        )
    }
}

/// HMAC-SHA256 of `data` under `key`.
pub(crate) fn hmac(key: &[u8], data: impl AsRef<[u8]>) -> [u8; 32] {
    let mut m = <Hmac<Sha256>>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data.as_ref());
    m.finalize().into_bytes().into()
}

/// SigV4's signing key of `secret` for a scope `date` (`YYYYMMDD`) /
/// `region` / `service` / `aws4_request`.
pub(crate) fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), date);
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part);
    }
    key
}

/// `YYYYMMDD'T'HHMMSS'Z'` of Unix seconds `t`.
fn amz_date(t: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(t).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The presigned URL of `p`: `scheme://host/path?query` with the
/// `X-Amz-*` parameters and the signature.
pub fn presign(p: &Presign<'_>) -> String {
    let date = amz_date(p.now_secs);
    let scope = format!("{}/{}/s3/aws4_request", &date[..8], p.region);
    let mut query: Vec<(String, String)> = p
        .query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    for (k, v) in [
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256".to_owned()),
        ("X-Amz-Credential", format!("{}/{scope}", p.access_key_id)),
        ("X-Amz-Date", date.clone()),
        (
            "X-Amz-Expires",
            p.expires_secs.clamp(1, MAX_EXPIRES_SECS).to_string(),
        ),
        ("X-Amz-SignedHeaders", "host".to_owned()),
    ] {
        query.push((k.to_owned(), uri_encode(&v, false)));
    }
    query.sort();
    let qs = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical = format!(
        "{}\n{}\n{qs}\nhost:{}\n\nhost\nUNSIGNED-PAYLOAD",
        p.method, p.path, p.host
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let key = signing_key(p.secret, &date[..8], p.region, "s3");
    let signature = hex::encode(hmac(&key, &to_sign));
    format!(
        "{}://{}{}?{qs}&X-Amz-Signature={signature}",
        p.scheme, p.host, p.path
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of AWS's "Authenticating Requests: Using Query
    /// Parameters" page, signature included.
    #[test]
    fn matches_the_aws_documented_example() {
        let url = presign(&Presign {
            method: "GET",
            scheme: "https",
            host: "examplebucket.s3.amazonaws.com",
            path: "/test.txt",
            query: &[],
            access_key_id: "AKIAIOSFODNN7EXAMPLE",
            secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            region: "us-east-1",
            expires_secs: 86400,
            now_secs: 1369353600, // 2013-05-24T00:00:00Z
        });
        assert_eq!(
            url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256\
&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn paths_and_queries_are_encoded_once() {
        assert_eq!(path_for("b", ""), "/b");
        assert_eq!(path_for("b", "a dir/ü+x.txt"), "/b/a%20dir/%C3%BC%2Bx.txt");
        let url = presign(&Presign {
            method: "GET",
            scheme: "http",
            host: "h:3900",
            path: "/b",
            query: &[("prefix".into(), "a b/".into())],
            access_key_id: "GK1",
            secret: "s",
            region: "garage",
            expires_secs: 0,
            now_secs: 0,
        });
        assert!(url.contains("prefix=a%20b%2F"), "{url}");
        assert!(url.contains("X-Amz-Expires=1&"), "{url}");
    }
}
