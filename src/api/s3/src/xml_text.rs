//! Text in the XML documents Hangar writes itself, outside s3s's
//! serializer: error documents of answers s3s never sees (preflights) or
//! that are reworded after it (PostObject), and hand-built listings.

/// `s` as XML character data or an attribute value: the five predefined
/// entities escaped.
pub(crate) fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// The text of `s` with the five predefined entities turned back.
pub(crate) fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// An S3 error document: `code`, `message` (escaped here) and `extra`, a
/// sequence of elements already written as XML.
pub(crate) fn error_document(code: &str, message: &str, extra: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>{}</Message>{extra}</Error>",
        escape(code),
        escape(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped_and_unescaped() {
        assert_eq!(escape("a<&>\"'b"), "a&lt;&amp;&gt;&quot;&apos;b");
        assert_eq!(unescape(&escape("a<&>\"'b &amp;")), "a<&>\"'b &amp;");
    }
}
