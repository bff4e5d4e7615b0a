//! Virtual-host-style addressing without DNS: an SDK interceptor moves the bucket from the
//! path into the Host header (`<bucket>.<root domain>:<port>`) before signing, while the
//! connection still goes to the loopback address.

use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;

/// Rewrites path-style requests (`/bucket/key`) into virtual-host-style ones.
#[derive(Debug)]
pub struct VirtualHost {
    /// Host suffix after the bucket name, port included: `s3.localhost:3900`.
    pub domain: String,
}

impl Intercept for VirtualHost {
    fn name(&self) -> &'static str {
        "VirtualHost"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let uri = request.uri().to_owned();
        let after_scheme = uri.find("://").map_or(0, |i| i + 3);
        let path_start = uri[after_scheme..]
            .find('/')
            .map_or(uri.len(), |i| after_scheme + i);
        let (origin, path_and_query) = uri.split_at(path_start);
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let trimmed = path.trim_start_matches('/');
        let (bucket, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        if bucket.is_empty() {
            // ListBuckets: no bucket to move.
            return Ok(());
        }
        let mut new_uri = format!("{origin}/{rest}");
        if let Some(query) = query {
            new_uri.push('?');
            new_uri.push_str(query);
        }
        let host = format!("{bucket}.{}", self.domain);
        request.set_uri(new_uri)?;
        request.headers_mut().insert("host", host);
        Ok(())
    }
}
