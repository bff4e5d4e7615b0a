//! The `PresignObject` admin operation: a SigV4 presigned URL for one S3
//! request, signed on the node with one of the cluster's keys, so the web
//! console's object browser never holds a secret (doc/console.md). The S3
//! endpoint checks the URL like any other: the key needs the bucket
//! permission the request needs.

use hangar_api_admin::answers::PresignedUrl;
use hangar_api_admin::proto::AdminError;
use hangar_api_s3::presign::{MAX_EXPIRES_SECS, Presign, path_for, presign};
use hangar_model::Model;

/// Lifetime of a URL whose request gives none.
const DEFAULT_EXPIRES_SECS: u64 = 900;
/// Longest object name, prefix or continuation token taken (S3's key bound).
const MAX_NAME: usize = 1024;
/// Longest delimiter taken.
const MAX_DELIMITER: usize = 32;
/// Longest `endpoint` taken.
const MAX_ENDPOINT: usize = 256;

/// What presigning needs of the node's S3 settings.
#[derive(Debug, Clone)]
pub struct PresignSettings {
    pub region: String,
    /// `http://host:port` of this node's S3 endpoint, when it has one.
    pub endpoint: Option<String>,
}

impl PresignSettings {
    /// The settings of a node whose S3 endpoint listens on `bind` (an
    /// unspecified address stands for the loopback one).
    pub fn new(region: &str, bind: Option<&str>) -> Self {
        let endpoint = bind.map(|b| {
            let host = match b.parse::<std::net::SocketAddr>() {
                Ok(a) if a.ip().is_unspecified() && a.is_ipv4() => {
                    format!("127.0.0.1:{}", a.port())
                }
                Ok(a) if a.ip().is_unspecified() => format!("[::1]:{}", a.port()),
                _ => b.to_owned(),
            };
            format!("http://{host}")
        });
        PresignSettings {
            region: region.to_owned(),
            endpoint,
        }
    }
}

/// One `PresignObject` request's fields.
pub struct PresignArgs {
    pub bucket: String,
    pub key: String,
    pub action: String,
    pub object: String,
    pub prefix: Option<String>,
    pub delimiter: Option<String>,
    pub continuation_token: Option<String>,
    pub download: bool,
    pub expires_secs: Option<u64>,
    pub endpoint: Option<String>,
}

fn bounded(what: &str, v: &str, max: usize) -> Result<(), AdminError> {
    if v.len() > max {
        return Err(AdminError::bad(format!(
            "{what} is {} bytes; at most {max}",
            v.len()
        )));
    }
    Ok(())
}

/// `(scheme, host)` of an `http(s)://host[:port]` endpoint.
fn parse_endpoint(e: &str) -> Result<(String, String), AdminError> {
    bounded("endpoint", e, MAX_ENDPOINT)?;
    let bad = || AdminError::bad(format!("endpoint {e:?} is not http(s)://host[:port]"));
    let uri: http::Uri = e.parse().map_err(|_| bad())?;
    let scheme = uri.scheme_str().ok_or_else(bad)?;
    let host = uri.authority().ok_or_else(bad)?;
    let path_ok = matches!(uri.path(), "" | "/") && uri.query().is_none();
    if !matches!(scheme, "http" | "https") || !path_ok || host.as_str().contains('@') {
        return Err(bad());
    }
    Ok((scheme.to_owned(), host.as_str().to_owned()))
}

/// The `list` query parameters of `a`.
fn list_query(a: &PresignArgs) -> Result<Vec<(String, String)>, AdminError> {
    let mut q = vec![("list-type".to_owned(), "2".to_owned())];
    for (name, v, max) in [
        ("prefix", &a.prefix, MAX_NAME),
        ("delimiter", &a.delimiter, MAX_DELIMITER),
        ("continuation-token", &a.continuation_token, MAX_NAME),
    ] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            bounded(name, v, max)?;
            q.push((name.to_owned(), v.clone()));
        }
    }
    Ok(q)
}

/// Runs `PresignObject`.
pub async fn presign_object(
    model: &Model,
    settings: &PresignSettings,
    a: PresignArgs,
    err: impl Fn(hangar_model::ModelError) -> AdminError,
) -> Result<PresignedUrl, AdminError> {
    bounded("object", &a.object, MAX_NAME)?;
    let expires = a.expires_secs.unwrap_or(DEFAULT_EXPIRES_SECS);
    if !(1..=MAX_EXPIRES_SECS).contains(&expires) {
        return Err(AdminError::bad(format!(
            "expires_secs must be 1 to {MAX_EXPIRES_SECS}"
        )));
    }
    let (method, object, query) = match a.action.as_str() {
        "list" => ("GET", "", list_query(&a)?),
        "get" | "put" | "delete" if a.object.is_empty() => {
            return Err(AdminError::bad(format!("{} needs an object", a.action)));
        }
        "get" if a.download => {
            let base = a.object.rsplit('/').next().unwrap_or(&a.object);
            let encoded = hangar_api_s3::presign::uri_encode(base, false);
            let disposition = format!("attachment; filename*=UTF-8''{encoded}");
            (
                "GET",
                a.object.as_str(),
                vec![("response-content-disposition".to_owned(), disposition)],
            )
        }
        "get" => ("GET", a.object.as_str(), vec![]),
        "put" => ("PUT", a.object.as_str(), vec![]),
        "delete" => ("DELETE", a.object.as_str(), vec![]),
        other => {
            return Err(AdminError::bad(format!(
                "action {other:?}: give get, put, delete or list"
            )));
        }
    };
    let endpoint = match a.endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(e) => e.to_owned(),
        None => settings.endpoint.clone().ok_or_else(|| {
            AdminError::bad("this node has no S3 endpoint ([s3_api] api_bind_addr): give endpoint")
        })?,
    };
    let (scheme, host) = parse_endpoint(&endpoint)?;
    let key = model.keys().find(&a.key).await.map_err(&err)?;
    // The bucket must exist, as the signing key names it (its local aliases
    // too): a URL for a typo is of no use to anyone.
    if model
        .buckets()
        .get_bucket_as(&a.bucket, Some(&key.access_key_id))
        .await
        .map_err(&err)?
        .is_none()
    {
        return Err(AdminError::not_found(format!(
            "bucket {} does not exist",
            a.bucket
        )));
    }
    let path = path_for(&a.bucket, object);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let url = presign(&Presign {
        method,
        scheme: &scheme,
        host: &host,
        path: &path,
        query: &query,
        access_key_id: &key.access_key_id,
        secret: &key.secret.value,
        region: &settings.region,
        expires_secs: expires,
        now_secs: now,
    });
    let path_and_query = url[scheme.len() + 3 + host.len()..].to_owned();
    Ok(PresignedUrl {
        url,
        method: method.to_owned(),
        host,
        path_and_query,
        access_key_id: key.access_key_id,
        expires_secs: expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_origins_only() {
        assert_eq!(
            parse_endpoint("http://127.0.0.1:3900").unwrap(),
            ("http".into(), "127.0.0.1:3900".into())
        );
        assert_eq!(
            parse_endpoint("https://s3.example.com/").unwrap().1,
            "s3.example.com"
        );
        for bad in [
            "ftp://h",
            "h:3900",
            "http://h/x",
            "http://h?x=1",
            "http://u@h",
            "",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
        assert!(parse_endpoint(&format!("http://{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn unspecified_bind_addresses_become_loopback() {
        let s = |b| PresignSettings::new("r", Some(b)).endpoint.unwrap();
        assert_eq!(s("0.0.0.0:3900"), "http://127.0.0.1:3900");
        assert_eq!(s("[::]:3900"), "http://[::1]:3900");
        assert_eq!(s("10.0.0.5:3900"), "http://10.0.0.5:3900");
        assert!(PresignSettings::new("r", None).endpoint.is_none());
    }
}
