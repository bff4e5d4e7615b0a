//! Bearer tokens of the admin endpoint: which token may call what, checked
//! in constant time. A token is kept only as its blake3 hash, so the
//! comparison takes the same time whatever the given token's length and
//! content, and no token is held in memory longer than needed.

use subtle::ConstantTimeEq;

use crate::routes::Verb;

/// What a request's `Authorization` header was found to be worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The token allows the call.
    Allowed,
    /// No bearer token: `401`.
    Missing,
    /// A token that is wrong, or of a scope too narrow for the call: `403`.
    Refused,
    /// No admin token is configured: the admin API is off (`403`).
    Disabled,
}

/// The tokens the endpoint accepts.
pub struct Tokens {
    admin: Option<[u8; 32]>,
    read: Option<[u8; 32]>,
    metrics: Option<[u8; 32]>,
}

fn digest(t: &str) -> [u8; 32] {
    *blake3::hash(t.as_bytes()).as_bytes()
}

fn matches(given: &[u8; 32], want: &Option<[u8; 32]>) -> bool {
    want.as_ref().is_some_and(|w| bool::from(given.ct_eq(w)))
}

/// The token of an `Authorization: Bearer <token>` header, if any.
pub fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl Tokens {
    /// `admin`: every operation; `read`: `GET` operations only; `metrics`:
    /// `/metrics` (open when `None`).
    pub fn new(admin: Option<&str>, read: Option<&str>, metrics: Option<&str>) -> Self {
        Tokens {
            admin: admin.map(digest),
            read: read.map(digest),
            metrics: metrics.map(digest),
        }
    }

    /// May a request with these headers call an admin operation of `verb`?
    pub fn check_op(&self, headers: &http::HeaderMap, verb: Verb) -> Access {
        if self.admin.is_none() && self.read.is_none() {
            return Access::Disabled;
        }
        let Some(given) = bearer(headers).map(digest) else {
            return Access::Missing;
        };
        // Both comparisons run whatever the first one says.
        let (full, read) = (matches(&given, &self.admin), matches(&given, &self.read));
        if full || (read && verb == Verb::Get) {
            Access::Allowed
        } else {
            Access::Refused
        }
    }

    /// May a request with these headers read `/metrics`? Open without a
    /// metrics token; with one, it or an admin token (full or read-only).
    pub fn check_metrics(&self, headers: &http::HeaderMap) -> Access {
        if self.metrics.is_none() {
            return Access::Allowed;
        }
        let Some(given) = bearer(headers).map(digest) else {
            return Access::Missing;
        };
        let ok = [&self.metrics, &self.admin, &self.read].map(|w| matches(&given, w));
        if ok.iter().any(|x| *x) {
            Access::Allowed
        } else {
            Access::Refused
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(auth: Option<&str>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        if let Some(a) = auth {
            h.insert(http::header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn scopes() {
        let t = Tokens::new(Some("full"), Some("ro"), Some("m"));
        assert_eq!(t.check_op(&with(None), Verb::Get), Access::Missing);
        assert_eq!(
            t.check_op(&with(Some("Basic x")), Verb::Get),
            Access::Missing
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer ")), Verb::Get),
            Access::Missing
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer nope")), Verb::Get),
            Access::Refused
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer full")), Verb::Post),
            Access::Allowed
        );
        assert_eq!(
            t.check_op(&with(Some("bearer  full ")), Verb::Get),
            Access::Allowed
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer ro")), Verb::Get),
            Access::Allowed
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer ro")), Verb::Post),
            Access::Refused
        );
        assert_eq!(
            t.check_op(&with(Some("Bearer m")), Verb::Get),
            Access::Refused
        );
        assert_eq!(t.check_metrics(&with(Some("Bearer m"))), Access::Allowed);
        assert_eq!(t.check_metrics(&with(Some("Bearer ro"))), Access::Allowed);
        assert_eq!(
            t.check_metrics(&with(Some("Bearer fullx"))),
            Access::Refused
        );
        assert_eq!(t.check_metrics(&with(None)), Access::Missing);
        // A prefix of a token is not the token.
        assert_eq!(
            t.check_op(&with(Some("Bearer ful")), Verb::Get),
            Access::Refused
        );
    }

    #[test]
    fn no_admin_token_turns_the_api_off_and_metrics_open() {
        let t = Tokens::new(None, None, None);
        assert_eq!(
            t.check_op(&with(Some("Bearer x")), Verb::Get),
            Access::Disabled
        );
        assert_eq!(t.check_metrics(&with(None)), Access::Allowed);
    }
}
