//! The time a request's signature claims, bounded before s3s checks the
//! signature: Signature Version 2 refused or held to Version 4's bounds,
//! and the range of a presigned URL's `X-Amz-Expires`.
//!
//! s3s bounds SigV4's times itself: a header-signed request (and so an
//! aws-chunked body, whose chunk signatures chain from the header's) more
//! than 15 minutes from the node's clock is `403 RequestTimeTooSkewed`, a
//! presigned URL past `X-Amz-Date` + `X-Amz-Expires` is `403 AccessDenied`
//! "Request has expired", and so is a POST form past its policy's
//! `expiration`. Of Signature Version 2 it bounds only a presigned URL's
//! `Expires`, and only from below: a header-signed V2 request was served
//! whatever its `Date`, so one captured request could be replayed for
//! ever. s3s 0.14 has no setting for either, so this module runs first, on
//! the head of the request alone (nothing of the body is read): V2 is
//! refused, as AWS's regions opened since 2014 refuse it, unless
//! `[s3_api] allow_signature_v2` is set, and then held to V4's bounds. The
//! rules are in [`check`]; doc/security.md ("Time: where a client's clock
//! is trusted") lists every place and its test.

use http::HeaderMap;
use s3s::{S3Error, S3ErrorCode, s3_error};

/// How far a signed request's time may be from the node's clock: 15
/// minutes, as S3 allows (and s3s applies to SigV4).
pub const MAX_SKEW_SECS: i64 = 15 * 60;

/// Longest lifetime of a presigned URL: seven days, S3's bound.
pub const MAX_PRESIGNED_SECS: i64 = 7 * 24 * 3600;

/// The message of the refusal of Signature Version 2: AWS's, then the
/// setting that would accept it.
pub const V2_REFUSED: &str = "The authorization mechanism you have provided is not supported. \
Please use AWS4-HMAC-SHA256. (Signature Version 2 is refused by this node unless its \
configuration sets [s3_api] allow_signature_v2 = true.)";

/// How a request is signed, as s3s will take it (s3s tries V2 first: a
/// `Signature` query parameter, then an `Authorization: AWS id:sig`
/// header; then V4's `X-Amz-Signature`, then its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `Authorization: AWS <id>:<signature>`.
    V2Header,
    /// `?AWSAccessKeyId=…&Expires=…&Signature=…`.
    V2Query,
    /// A presigned SigV4 URL (`X-Amz-Signature`).
    V4Query,
    /// Anything else: SigV4 in the `Authorization` header, a POST form
    /// (signed in its body), or no signature at all. s3s bounds those.
    Other,
}

impl Scheme {
    /// How `headers` and `query` sign the request.
    pub fn of(headers: &HeaderMap, query: &str) -> Scheme {
        if has_param(query, "Signature") {
            return Scheme::V2Query;
        }
        let v2_header = headers
            .get_all(http::header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.strip_prefix("AWS ")
                    .is_some_and(|rest| rest.contains(':'))
            });
        if v2_header {
            return Scheme::V2Header;
        }
        if has_param(query, "X-Amz-Signature") {
            return Scheme::V4Query;
        }
        Scheme::Other
    }

    /// Whether this is Signature Version 2.
    pub fn is_v2(self) -> bool {
        matches!(self, Scheme::V2Header | Scheme::V2Query)
    }
}

/// The values of query parameter `name` (its name decoded as s3s decodes
/// it).
fn params<'a>(query: &'a str, name: &'a str) -> impl Iterator<Item = String> + 'a {
    query.split('&').filter_map(move |kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let k = urlencoding::decode(k).ok()?;
        (k == name).then(|| {
            urlencoding::decode(v)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| v.to_owned())
        })
    })
}

fn has_param(query: &str, name: &str) -> bool {
    params(query, name).next().is_some()
}

/// The one value of query parameter `name`, if it is given once.
fn param(query: &str, name: &str) -> Option<String> {
    let mut all = params(query, name);
    let first = all.next()?;
    all.next().is_none().then_some(first)
}

/// Refuses a request whose signature scheme or claimed time the node does
/// not accept at Unix time `now` (seconds), from its head alone:
///
/// - Signature Version 2 without `allow_v2`: `400 InvalidRequest`
///   ([`V2_REFUSED`], AWS's words and the setting's name).
/// - V2 in the header: the signed time is `x-amz-date` if sent, else
///   `Date` (V2 signs one of them). Missing or not an HTTP date: `403
///   AccessDenied`; more than [`MAX_SKEW_SECS`] from `now`: `403
///   RequestTimeTooSkewed`.
/// - V2 presigned: `Expires` (Unix seconds) not a number: `403
///   AccessDenied`; past: `403 AccessDenied` "Request has expired"; more
///   than [`MAX_PRESIGNED_SECS`] ahead of `now`: `400
///   AuthorizationQueryParametersError`, as V4 answers a lifetime over a
///   week (a V2 URL carries no signing time, so its lifetime is counted
///   from `now`).
/// - V4 presigned: `X-Amz-Expires` not a number, negative, or over
///   [`MAX_PRESIGNED_SECS`]: `400 AuthorizationQueryParametersError` with
///   AWS's messages. (Whether it has expired is s3s's check: `0` has.)
pub fn check(allow_v2: bool, headers: &HeaderMap, query: &str, now: i64) -> Result<(), S3Error> {
    let scheme = Scheme::of(headers, query);
    if scheme.is_v2() && !allow_v2 {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            V2_REFUSED,
        ));
    }
    match scheme {
        Scheme::V2Header => check_v2_date(headers, now),
        Scheme::V2Query => check_v2_expires(query, now),
        Scheme::V4Query => check_v4_expires(query),
        Scheme::Other => Ok(()),
    }
}

fn check_v2_date(headers: &HeaderMap, now: i64) -> Result<(), S3Error> {
    // V2 signs `Date` only when there is no `x-amz-date`.
    let signed = headers
        .get("x-amz-date")
        .or_else(|| headers.get(http::header::DATE));
    let Some(t) = signed.and_then(|v| v.to_str().ok()).and_then(parse_v2_date) else {
        return Err(s3_error!(
            AccessDenied,
            "AWS authentication requires a valid Date or x-amz-date header"
        ));
    };
    if (now - t).abs() > MAX_SKEW_SECS {
        return Err(s3_error!(
            RequestTimeTooSkewed,
            "The difference between the request time and the current time is too large."
        ));
    }
    Ok(())
}

/// Unix seconds of a V2 request's date: an HTTP date (IMF-fixdate, RFC 850
/// or asctime), or SigV4's `YYYYMMDDTHHMMSSZ`, which some V2 clients send
/// in `x-amz-date`.
fn parse_v2_date(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(t) = httpdate::parse_http_date(s) {
        let secs = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        return i64::try_from(secs).ok();
    }
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = s.get(r)?;
        d.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| d.parse().ok())?
    };
    let month = time::Month::try_from(u8::try_from(num(4..6)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(
        i32::try_from(num(0..4)?).ok()?,
        month,
        u8::try_from(num(6..8)?).ok()?,
    )
    .ok()?;
    let hms = time::Time::from_hms(
        u8::try_from(num(9..11)?).ok()?,
        u8::try_from(num(11..13)?).ok()?,
        u8::try_from(num(13..15)?).ok()?,
    )
    .ok()?;
    Some(
        time::PrimitiveDateTime::new(date, hms)
            .assume_utc()
            .unix_timestamp(),
    )
}

fn check_v2_expires(query: &str, now: i64) -> Result<(), S3Error> {
    let given = param(query, "Expires").unwrap_or_default();
    let Ok(expires) = given.parse::<i64>() else {
        return Err(s3_error!(
            AccessDenied,
            "Invalid date (should be seconds since epoch): {given}"
        ));
    };
    if now > expires {
        return Err(s3_error!(AccessDenied, "Request has expired"));
    }
    if expires - now > MAX_PRESIGNED_SECS {
        return Err(s3_error!(
            AuthorizationQueryParametersError,
            "Expires must be less than a week (in seconds) from now; that is, at most {MAX_PRESIGNED_SECS} seconds ahead"
        ));
    }
    Ok(())
}

fn check_v4_expires(query: &str) -> Result<(), S3Error> {
    // A missing one is s3s's to answer (with the other missing fields).
    let Some(given) = param(query, "X-Amz-Expires") else {
        return Ok(());
    };
    let Ok(expires) = given.parse::<i64>() else {
        return Err(s3_error!(
            AuthorizationQueryParametersError,
            "X-Amz-Expires should be a number"
        ));
    };
    if expires < 0 {
        return Err(s3_error!(
            AuthorizationQueryParametersError,
            "X-Amz-Expires must be non-negative"
        ));
    }
    if expires > MAX_PRESIGNED_SECS {
        return Err(s3_error!(
            AuthorizationQueryParametersError,
            "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than {MAX_PRESIGNED_SECS} seconds"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2019-01-01T00:00:00Z, the date of the replayed requests.
    const T: i64 = 1_546_300_800;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn code(r: Result<(), S3Error>) -> Option<String> {
        r.err().map(|e| e.code().as_str().to_owned())
    }

    const V2_AUTH: (&str, &str) = ("authorization", "AWS GK1:c2lnbmF0dXJl");

    #[test]
    fn schemes_are_told_apart_as_s3s_tells_them() {
        let none = HeaderMap::new();
        assert_eq!(Scheme::of(&headers(&[V2_AUTH]), ""), Scheme::V2Header);
        assert_eq!(
            Scheme::of(&none, "AWSAccessKeyId=GK1&Expires=1&Signature=x"),
            Scheme::V2Query
        );
        // s3s takes a `Signature` parameter for V2 before anything else.
        assert_eq!(
            Scheme::of(&none, "X-Amz-Signature=a&Signature=b"),
            Scheme::V2Query
        );
        assert_eq!(Scheme::of(&none, "Sig%6Eature=b"), Scheme::V2Query);
        assert_eq!(Scheme::of(&none, "X-Amz-Signature=a"), Scheme::V4Query);
        let v4 = headers(&[(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=GK1/20190101/garage/s3/aws4_request, SignedHeaders=host, Signature=ab",
        )]);
        assert_eq!(Scheme::of(&v4, ""), Scheme::Other);
        assert_eq!(
            Scheme::of(&none, "Signatures=1&prefix=Signature"),
            Scheme::Other
        );
        assert_eq!(Scheme::of(&none, ""), Scheme::Other);
    }

    #[test]
    fn signature_v2_is_refused_unless_allowed() {
        let dated = headers(&[V2_AUTH, ("date", "Tue, 01 Jan 2019 00:00:00 GMT")]);
        let e = check(false, &dated, "", T).unwrap_err();
        assert_eq!(e.code(), &S3ErrorCode::InvalidRequest);
        assert!(e.message().unwrap().contains("allow_signature_v2"));
        assert_eq!(
            code(check(
                false,
                &HeaderMap::new(),
                "Expires=9999999999&Signature=x",
                T
            )),
            Some("InvalidRequest".into())
        );
        assert_eq!(code(check(true, &dated, "", T)), None);
        // V4 and anonymous requests are not this module's to refuse.
        assert_eq!(code(check(false, &HeaderMap::new(), "", T)), None);
    }

    #[test]
    fn a_v2_header_date_is_held_to_fifteen_minutes() {
        let at = |date: &str| headers(&[V2_AUTH, ("date", date)]);
        let ok = "Tue, 01 Jan 2019 00:00:00 GMT";
        assert_eq!(code(check(true, &at(ok), "", T)), None);
        assert_eq!(code(check(true, &at(ok), "", T + MAX_SKEW_SECS)), None);
        assert_eq!(code(check(true, &at(ok), "", T - MAX_SKEW_SECS)), None);
        for now in [
            T + MAX_SKEW_SECS + 1,
            T - MAX_SKEW_SECS - 1,
            T + 5 * 365 * 86400,
        ] {
            assert_eq!(
                code(check(true, &at(ok), "", now)),
                Some("RequestTimeTooSkewed".into()),
                "{now}"
            );
        }
        // RFC 850 and asctime are HTTP dates too.
        assert_eq!(
            code(check(true, &at("Tuesday, 01-Jan-19 00:00:00 GMT"), "", T)),
            None
        );
        assert_eq!(
            code(check(true, &at("Tue Jan  1 00:00:00 2019"), "", T)),
            None
        );
        for bad in ["yesterday", "", "Tue, 01 Jan 2019"] {
            assert_eq!(
                code(check(true, &at(bad), "", T)),
                Some("AccessDenied".into()),
                "{bad:?}"
            );
        }
        assert_eq!(
            code(check(true, &headers(&[V2_AUTH]), "", T)),
            Some("AccessDenied".into())
        );
    }

    #[test]
    fn a_v2_x_amz_date_is_the_signed_one() {
        // With x-amz-date, V2 does not sign Date: a fresh Date beside a
        // stale x-amz-date is still stale, and the other way round is fresh.
        let stale = "Mon, 31 Dec 2018 00:00:00 GMT";
        let fresh = "Tue, 01 Jan 2019 00:00:00 GMT";
        let h = headers(&[V2_AUTH, ("date", fresh), ("x-amz-date", stale)]);
        assert_eq!(
            code(check(true, &h, "", T)),
            Some("RequestTimeTooSkewed".into())
        );
        let h = headers(&[V2_AUTH, ("date", stale), ("x-amz-date", fresh)]);
        assert_eq!(code(check(true, &h, "", T)), None);
        let h = headers(&[V2_AUTH, ("x-amz-date", "20190101T000500Z")]);
        assert_eq!(code(check(true, &h, "", T)), None);
        for bad in [
            "20190101T250000Z",
            "20191301T000000Z",
            "2019010T1000000Z",
            "20190101T00000+Z",
        ] {
            let h = headers(&[
                V2_AUTH,
                ("date", "Tue, 01 Jan 2019 00:00:00 GMT"),
                ("x-amz-date", bad),
            ]);
            assert_eq!(
                code(check(true, &h, "", T)),
                Some("AccessDenied".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn v2_presigned_expires_is_bounded_both_ways() {
        let q = |e: i64| format!("AWSAccessKeyId=GK1&Expires={e}&Signature=x");
        let none = HeaderMap::new();
        assert_eq!(code(check(true, &none, &q(T), T)), None);
        assert_eq!(
            code(check(true, &none, &q(T + MAX_PRESIGNED_SECS), T)),
            None
        );
        let e = check(true, &none, &q(T - 1), T).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (&S3ErrorCode::AccessDenied, Some("Request has expired"))
        );
        assert_eq!(
            code(check(true, &none, &q(T + MAX_PRESIGNED_SECS + 1), T)),
            Some("AuthorizationQueryParametersError".into())
        );
        for bad in [
            "Expires=soon&Signature=x",
            "Signature=x",
            "Expires=1&Expires=2&Signature=x",
        ] {
            assert_eq!(
                code(check(true, &none, bad, T)),
                Some("AccessDenied".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn v4_presigned_expires_gets_the_errors_aws_gives() {
        let q =
            |e: &str| format!("X-Amz-Date=20190101T000000Z&X-Amz-Expires={e}&X-Amz-Signature=ab");
        let none = HeaderMap::new();
        for ok in ["0", "1", "604800"] {
            assert_eq!(code(check(false, &none, &q(ok), T)), None, "{ok}");
        }
        for (bad, message) in [
            ("604801", "must be less than a week"),
            ("-1", "must be non-negative"),
            ("soon", "should be a number"),
            ("", "should be a number"),
        ] {
            let e = check(false, &none, &q(bad), T).unwrap_err();
            assert_eq!(
                e.code(),
                &S3ErrorCode::AuthorizationQueryParametersError,
                "{bad}"
            );
            assert!(
                e.message().unwrap().contains(message),
                "{bad}: {:?}",
                e.message()
            );
        }
        // Without X-Amz-Expires, s3s names what is missing.
        assert_eq!(code(check(false, &none, "X-Amz-Signature=ab", T)), None);
    }
}
