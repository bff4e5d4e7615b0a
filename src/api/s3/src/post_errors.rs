//! S3's words for a POST form (PostObject) its policy refuses.
//!
//! s3s checks the policy before the operation is called and answers in its
//! own words: `400 InvalidPolicyDocument` for a failed condition, an
//! `AccessDenied` "Request has expired" for an expired policy. S3 answers
//! every refusal by the policy `403 AccessDenied` with a message starting
//! "Invalid according to Policy: ". Those answers are rewritten here, from
//! the error document s3s serialized (in memory, a few hundred bytes).

use bytes::Bytes;
use http::StatusCode;

use crate::xml_text::{error_document, unescape};

/// Whether `req` is a POST of an HTML form, the requests whose errors are
/// rewritten.
pub(crate) fn is_post_form<B>(req: &http::Request<B>) -> bool {
    req.method() == http::Method::POST
        && req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("multipart/form-data")
            })
}

/// The S3 words for the error document `body` (code and message as s3s
/// gave them), if it is a refusal by the policy.
pub(crate) fn reword(body: &[u8]) -> Option<(StatusCode, Bytes)> {
    let text = std::str::from_utf8(body).ok()?;
    let code = element(text, "Code")?;
    let message = unescape(&element(text, "Message").unwrap_or_default());
    let message = match code.as_str() {
        "AccessDenied" if message == "Request has expired" => {
            "Invalid according to Policy: Policy expired.".to_owned()
        }
        "AccessDenied" if message.starts_with("Each form field that you specify") => {
            let field = message.split('"').nth(1).unwrap_or_default();
            format!("Invalid according to Policy: Extra input fields: {field}")
        }
        "InvalidPolicyDocument"
            if message.starts_with("Policy condition") || message.starts_with("Bucket in form") =>
        {
            format!("Invalid according to Policy: Policy Condition failed: {message}")
        }
        _ => return None,
    };
    let doc = error_document("AccessDenied", &message, "");
    Some((StatusCode::FORBIDDEN, Bytes::from(doc)))
}

/// The text of the first `<name>` element of `doc`.
fn element(doc: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = doc.find(&open)? + open.len();
    let end = doc[start..].find(&format!("</{name}>"))? + start;
    Some(doc[start..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml_text::escape;

    fn doc(code: &str, msg: &str) -> Vec<u8> {
        format!(
            "<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{}</Message></Error>",
            escape(msg)
        )
        .into_bytes()
    }

    fn message(b: &Bytes) -> String {
        unescape(&element(std::str::from_utf8(b).unwrap(), "Message").unwrap())
    }

    #[test]
    fn expired_policy() {
        let (s, b) = reword(&doc("AccessDenied", "Request has expired")).unwrap();
        assert_eq!(s, StatusCode::FORBIDDEN);
        assert_eq!(message(&b), "Invalid according to Policy: Policy expired.");
    }

    #[test]
    fn extra_field() {
        let m = "Each form field that you specify in a form must appear in the list of policy conditions. \"x-amz-meta-a\" not specified in the policy.";
        let (_, b) = reword(&doc("AccessDenied", m)).unwrap();
        assert_eq!(
            message(&b),
            "Invalid according to Policy: Extra input fields: x-amz-meta-a"
        );
    }

    #[test]
    fn failed_condition() {
        let m =
            "Policy condition 'starts-with' for field 'key' failed: expected prefix 'a/', got 'b'";
        let (s, b) = reword(&doc("InvalidPolicyDocument", m)).unwrap();
        assert_eq!(s, StatusCode::FORBIDDEN);
        assert!(message(&b).starts_with("Invalid according to Policy: Policy Condition failed: "));
    }

    #[test]
    fn other_errors_kept() {
        assert!(reword(&doc("AccessDenied", "Access Denied")).is_none());
        assert!(reword(&doc("EntityTooLarge", "x")).is_none());
        assert!(reword(&doc("SignatureDoesNotMatch", "x")).is_none());
    }
}
