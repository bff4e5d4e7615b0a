//! The answers the admin HTTP endpoint builds the same way on every route:
//! JSON bodies that are never cached, and the refusals of the token check.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::auth::Access;

/// `v` as a JSON answer with `status`.
pub(crate) fn json(status: StatusCode, v: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(v).expect("answers encode");
    // Answers carry secrets (keys) and the cluster's state: never cached.
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The answer to a request that `access` does not let through, if any.
pub(crate) fn refusal(access: Access) -> Option<Response> {
    match access {
        Access::Allowed => None,
        Access::Missing => Some(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
            )
                .into_response(),
        ),
        Access::Expired => {
            let mut r = json(
                StatusCode::UNAUTHORIZED,
                &serde_json::json!({
                    "code": "Expired",
                    "message": "the token expired: `hangar admin-token create` makes a new one",
                }),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static(
                    "Bearer error=\"invalid_token\", error_description=\"the token expired\"",
                ),
            );
            Some(r)
        }
        Access::Refused => Some(StatusCode::FORBIDDEN.into_response()),
        Access::Disabled => Some(json(
            StatusCode::FORBIDDEN,
            &serde_json::json!({
                "code": "Disabled",
                "message": "the admin API is off: set [admin] admin_token (or admin_token_file) on this node",
            }),
        )),
    }
}
