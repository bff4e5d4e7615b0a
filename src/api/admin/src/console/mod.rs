//! The web console (doc/console.md): a static shell of HTML, CSS and
//! JavaScript compiled into the binary and served under `/console/`, which
//! logs in with the admin token and then calls the admin API's `/v2/`
//! routes with it, and the object browser's S3 proxy (`proxy`).
//!
//! The shell holds no data and no secret: it is the one part of the
//! console served without a token. Every console response carries
//! [`secure`]'s headers: a Content-Security-Policy with no inline script
//! or style and no framing, `nosniff`, and `no-store`.

mod proxy;

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::admin_endpoint::AdminEndpoint;
pub use crate::node_s3::NodeS3;
use crate::ops::AdminOps;

/// The console's files: name under `/console/`, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "ui.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/ui.js"),
    ),
    (
        "pages.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/pages.js"),
    ),
    (
        "objects.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/objects.js"),
    ),
    (
        "plot.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/plot.js"),
    ),
    (
        "history.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/history.js"),
    ),
];

/// The Content-Security-Policy of the console's pages: its own scripts,
/// styles and API only; no inline code, no plugins, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
frame-ancestors 'none'";

/// `resp` with the console's security headers.
pub fn secure(mut resp: Response, csp: &'static str) -> Response {
    let h = resp.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, csp),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}

fn asset(name: &str) -> Response {
    let found = ASSETS.iter().find(|(n, _, _)| *n == name);
    let resp = match found {
        Some((_, content_type, body)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, *content_type)],
            *body,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such console file\n",
        )
            .into_response(),
    };
    secure(resp, CSP)
}

async fn shell() -> Response {
    asset("index.html")
}

async fn file(Path(name): Path<String>) -> Response {
    asset(&name)
}

async fn to_shell() -> Response {
    let resp = (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, "/console/")],
    )
        .into_response();
    secure(resp, CSP)
}

/// The console's routes, to be merged into the admin endpoint's router.
pub fn routes<H: AdminOps>() -> Router<Arc<AdminEndpoint<H>>> {
    Router::new()
        .route("/console", axum::routing::get(to_shell))
        .route("/console/", axum::routing::get(shell))
        .route("/console/{name}", axum::routing::get(file))
        .route("/console/s3/{*rest}", axum::routing::any(proxy::s3::<H>))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_use_no_inline_script_or_style() {
        // The CSP refuses inline code: a file that relies on it would
        // break in the browser, so none may carry any.
        for (name, _, body) in ASSETS {
            for bad in [" style=", " onclick=", " onload=", "<style", "javascript:"] {
                assert!(!body.contains(bad), "{name} contains {bad:?}");
            }
            if name.ends_with(".html") {
                for script in body.split("<script").skip(1) {
                    assert!(script.contains(" src="), "{name} has an inline script");
                }
            }
        }
    }

    #[test]
    fn every_file_the_shell_loads_is_served() {
        let served = |name: &str| ASSETS.iter().any(|(n, _, _)| *n == name);
        let (_, _, html) = ASSETS[0];
        for part in html
            .split("src=\"")
            .skip(1)
            .chain(html.split("stylesheet\" href=\"").skip(1))
        {
            let name = part.split('"').next().unwrap();
            assert!(served(name), "index.html loads {name}");
        }
        for (file, _, body) in ASSETS.iter().filter(|(n, _, _)| n.ends_with(".js")) {
            for part in body.split(" from \"./").skip(1) {
                let name = part.split('"').next().unwrap();
                assert!(served(name), "{file} imports {name}");
            }
        }
    }
}
