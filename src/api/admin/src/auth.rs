//! Bearer tokens of the admin endpoint: which token may call what, checked
//! in constant time. A token is kept only as its blake3 hash, so the
//! comparison takes the same time whatever the given token's length and
//! content, and no token is held in memory longer than needed.
//!
//! Besides the configured tokens (`admin_token`: everything, for ever;
//! `admin_read_token`: the `GET` operations), the endpoint accepts *signed
//! tokens* ([`TokenSigner::mint`], `hangar admin-token create`, Garage v2's admin tokens
//! with an expiry and a scope): `hgt1.<scope>.<expiry>.<mac>`, where the
//! scope is `read` or `full`, the expiry ms since the epoch or `never`, and
//! the mac the keyed blake3 of `<scope>.<expiry>` under a key derived from
//! `admin_token`. Nothing is stored: every node whose `admin_token` is the
//! same accepts them, and changing `admin_token` revokes them all. A signed
//! token past its expiry is answered `401` (as a missing one), a valid one
//! of too narrow a scope `403`.

use hangar_util::time::now_msec;
use subtle::ConstantTimeEq;

use crate::routes::Verb;

/// What a request's `Authorization` header was found to be worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The token allows the call.
    Allowed,
    /// No bearer token: `401`.
    Missing,
    /// A signed token past its expiry: `401`.
    Expired,
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
    /// The key of signed tokens, derived from `admin_token`.
    signing: Option<[u8; 32]>,
}

/// What a token lets its bearer call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The `GET` operations (and `/metrics`).
    Read,
    /// Every operation.
    Full,
}

impl Scope {
    /// The scope's name in a signed token and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Full => "full",
        }
    }

    /// The scope named `s`.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "full" => Some(Scope::Full),
            _ => None,
        }
    }

    fn allows(self, verb: Verb) -> bool {
        self == Scope::Full || verb == Verb::Get
    }
}

/// The first characters of a signed token.
pub const SIGNED_PREFIX: &str = "hgt1.";

fn signing_key(admin_token: &str) -> [u8; 32] {
    blake3::derive_key("hangar 2026-12 admin token signing", admin_token.as_bytes())
}

fn mac(key: &[u8; 32], scope: &str, expiry: &str) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(scope.as_bytes());
    h.update(b".");
    h.update(expiry.as_bytes());
    *h.finalize().as_bytes()
}

/// What signs tokens: the key derived from `admin_token` (the token itself
/// is not kept).
#[derive(Clone)]
pub struct TokenSigner([u8; 32]);

impl TokenSigner {
    pub fn new(admin_token: &str) -> TokenSigner {
        TokenSigner(signing_key(admin_token))
    }

    /// A signed token of `scope` that stops working at `expires_msec` (ms
    /// since the epoch; `None`: never), for every node whose admin token
    /// is this one's.
    pub fn mint(&self, scope: Scope, expires_msec: Option<u64>) -> String {
        let expiry = expires_msec.map_or_else(|| "never".to_owned(), |t| t.to_string());
        let m = mac(&self.0, scope.name(), &expiry);
        format!(
            "{SIGNED_PREFIX}{}.{expiry}.{}",
            scope.name(),
            hex::encode(m)
        )
    }
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSigner(..)")
    }
}

/// A signed token checked: its scope if its mac is right and it has not
/// expired at `now_msec`; [`Access::Expired`] or [`Access::Refused`] if not.
fn check_signed(key: Option<&[u8; 32]>, token: &str, now_msec: u64) -> Result<Scope, Access> {
    let rest = token.strip_prefix(SIGNED_PREFIX).ok_or(Access::Refused)?;
    let mut parts = rest.splitn(3, '.');
    let (Some(scope), Some(expiry), Some(given)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Access::Refused);
    };
    let mut given_mac = [0u8; 32];
    let (Some(key), Some(sc), Ok(())) = (
        key,
        Scope::parse(scope),
        hex::decode_to_slice(given, &mut given_mac),
    ) else {
        return Err(Access::Refused);
    };
    if !bool::from(mac(key, scope, expiry).ct_eq(&given_mac)) {
        return Err(Access::Refused);
    }
    // Only a token this node signed gets this far: its expiry is ours.
    let expires = match expiry {
        "never" => None,
        t => Some(t.parse::<u64>().map_err(|_| Access::Refused)?),
    };
    if expires.is_some_and(|t| now_msec >= t) {
        return Err(Access::Expired);
    }
    Ok(sc)
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
            signing: admin.map(signing_key),
        }
    }

    /// May a request with these headers call an admin operation of `verb`?
    pub fn check_op(&self, headers: &http::HeaderMap, verb: Verb) -> Access {
        if self.admin.is_none() && self.read.is_none() {
            return Access::Disabled;
        }
        let Some(token) = bearer(headers) else {
            return Access::Missing;
        };
        if token.starts_with(SIGNED_PREFIX) {
            return match check_signed(self.signing.as_ref(), token, now_msec()) {
                Ok(scope) if scope.allows(verb) => Access::Allowed,
                Ok(_) => Access::Refused,
                Err(a) => a,
            };
        }
        let given = digest(token);
        // Both comparisons run whatever the first one says.
        let (full, read) = (matches(&given, &self.admin), matches(&given, &self.read));
        if full || (read && verb == Verb::Get) {
            Access::Allowed
        } else {
            Access::Refused
        }
    }

    /// May a request with these headers read `/metrics`? Open without a
    /// metrics token; with one, it or an admin token (full or read-only,
    /// signed ones included).
    pub fn check_metrics(&self, headers: &http::HeaderMap) -> Access {
        if self.metrics.is_none() {
            return Access::Allowed;
        }
        let Some(token) = bearer(headers) else {
            return Access::Missing;
        };
        if token.starts_with(SIGNED_PREFIX) {
            return match check_signed(self.signing.as_ref(), token, now_msec()) {
                Ok(_) => Access::Allowed,
                Err(a) => a,
            };
        }
        let given = digest(token);
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
    fn signed_tokens_have_a_scope_and_an_expiry() {
        let t = Tokens::new(Some("full"), None, Some("m"));
        let bearer = |tok: &str| with(Some(&format!("Bearer {tok}")));
        let far = now_msec() + 3_600_000;
        let read = TokenSigner::new("full").mint(Scope::Read, Some(far));
        assert!(read.starts_with("hgt1.read."), "{read}");
        assert_eq!(t.check_op(&bearer(&read), Verb::Get), Access::Allowed);
        assert_eq!(t.check_op(&bearer(&read), Verb::Post), Access::Refused);
        assert_eq!(t.check_metrics(&bearer(&read)), Access::Allowed);
        let full = TokenSigner::new("full").mint(Scope::Full, None);
        assert_eq!(t.check_op(&bearer(&full), Verb::Post), Access::Allowed);
        // One instant for the mint and the rewrite below: reading the clock twice
        // let them differ by a millisecond, and the rewrite then changed nothing.
        let past = now_msec() - 1;
        let old = TokenSigner::new("full").mint(Scope::Full, Some(past));
        assert_eq!(t.check_op(&bearer(&old), Verb::Get), Access::Expired);
        assert_eq!(t.check_metrics(&bearer(&old)), Access::Expired);
        // Signed under another admin token, or changed: refused.
        let other = TokenSigner::new("other").mint(Scope::Full, None);
        assert_eq!(t.check_op(&bearer(&other), Verb::Get), Access::Refused);
        let widened = read.replacen("hgt1.read.", "hgt1.full.", 1);
        assert_eq!(t.check_op(&bearer(&widened), Verb::Get), Access::Refused);
        let extended = old.replacen(&format!(".{past}."), &format!(".{far}."), 1);
        assert_ne!(extended, old);
        for bad in [
            extended.as_str(),
            "hgt1.",
            "hgt1.full",
            "hgt1.full.never",
            "hgt1.full.never.zz",
            "hgt1.root.never.00",
        ] {
            assert_eq!(
                t.check_op(&bearer(bad), Verb::Get),
                Access::Refused,
                "{bad}"
            );
        }
        // The API is off without admin_token, signed tokens included.
        let off = Tokens::new(None, Some("ro"), None);
        assert_eq!(off.check_op(&bearer(&full), Verb::Get), Access::Refused);
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
