//! S3's rules for tags, in one place: the `x-amz-tagging` header (a
//! URL-encoded query string), the XML `TagSet`, their limits and the exact
//! errors S3 answers, and the `versionId` of the tagging calls.
//!
//! Limits: 10 tags on an object, 50 on a bucket; a key of 1 to 128 and a
//! value of up to 256 characters counted as S3 counts them (UTF-16 code
//! units); keys unique and not starting with `aws:`; letters, digits,
//! spaces and `+ - = . _ : / @` only.

use hangar_model::object::TagSet;
use s3s::dto::{Tag, Tagging};
use s3s::{S3Error, S3Result, s3_error};

/// Most tags on one object.
pub const MAX_OBJECT_TAGS: usize = 10;
/// Most tags on one bucket.
pub const MAX_BUCKET_TAGS: usize = 50;
const MAX_KEY_LEN: usize = 128;
const MAX_VALUE_LEN: usize = 256;

/// What carries the tags: the limit and S3's message for exceeding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagsOf {
    Object,
    Bucket,
}

/// Letters, digits and separators (Unicode `\p{L}`, `\p{N}`, `\p{Z}`), and
/// `+ - = . _ : / @`, as S3's tag pattern allows.
fn allowed(c: char) -> bool {
    c.is_alphabetic()
        || c.is_numeric()
        || is_separator(c)
        || matches!(c, '+' | '-' | '=' | '.' | '_' | ':' | '/' | '@')
}

/// Unicode general category Z (space, line and paragraph separators).
fn is_separator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Length as S3 counts it: tags are UTF-16 inside S3, and a character
/// outside the BMP takes two positions.
fn s3_len(s: &str) -> usize {
    s.encode_utf16().count()
}

fn invalid_key() -> S3Error {
    s3_error!(InvalidTag, "The TagKey you have provided is invalid")
}

fn invalid_value() -> S3Error {
    s3_error!(InvalidTag, "The TagValue you have provided is invalid")
}

fn check_one(key: &str, value: &str) -> S3Result<()> {
    if key.is_empty() || s3_len(key) > MAX_KEY_LEN || !key.chars().all(allowed) {
        return Err(invalid_key());
    }
    if key.starts_with("aws:") {
        return Err(s3_error!(
            InvalidTag,
            "Your TagKey cannot be prefixed with aws:"
        ));
    }
    if s3_len(value) > MAX_VALUE_LEN || !value.chars().all(allowed) {
        return Err(invalid_value());
    }
    Ok(())
}

fn check_count(n: usize, of: TagsOf) -> S3Result<()> {
    match of {
        TagsOf::Object if n > MAX_OBJECT_TAGS => Err(crate::error::bad_request(
            "Object tags cannot be greater than 10",
        )),
        TagsOf::Bucket if n > MAX_BUCKET_TAGS => Err(crate::error::bad_request(
            "Bucket tag count cannot be greater than 50",
        )),
        _ => Ok(()),
    }
}

/// The tags of an XML `Tagging` body (PutObjectTagging, PutBucketTagging),
/// checked: every tag, then unique keys, then the count.
pub fn from_xml(tagging: Tagging, of: TagsOf) -> S3Result<TagSet> {
    // Linear in the body, which s3s bounds (xml_max_body_size).
    let mut out = TagSet::new();
    for Tag { key, value } in tagging.tag_set {
        let (Some(key), Some(value)) = (key, value) else {
            return Err(crate::error::malformed_xml());
        };
        check_one(&key, &value)?;
        if out.insert(key, value).is_some() {
            return Err(s3_error!(
                InvalidTag,
                "Cannot provide multiple Tags with the same key"
            ));
        }
    }
    check_count(out.len(), of)?;
    Ok(out)
}

/// The XML `TagSet` of `tags`, in key order.
pub fn to_xml(tags: &TagSet) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

fn bad_header() -> S3Error {
    s3_error!(
        InvalidArgument,
        "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."
    )
}

/// Decodes one URL-encoded component of a query string (`+` is a space);
/// `None` for a bad `%` escape or bytes that are not UTF-8.
fn url_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

/// The tags of an `x-amz-tagging` header (PutObject, CreateMultipartUpload,
/// CopyObject with `REPLACE`): `k1=v1&k2`, URL-encoded; empty pairs are
/// skipped, a key without `=` has an empty value.
pub fn from_header(header: &str) -> S3Result<TagSet> {
    let mut out = TagSet::new();
    for pair in header.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key.is_empty() {
            return Err(bad_header());
        }
        let key = url_decode(key).ok_or_else(bad_header)?;
        let value = url_decode(value).ok_or_else(bad_header)?;
        check_one(&key, &value)?;
        if out.insert(key, value).is_some() {
            return Err(bad_header());
        }
        // A header is bounded by hyper; stop counting past the limit.
        check_count(out.len(), TagsOf::Object)?;
    }
    Ok(out)
}

/// The tags of an optional `x-amz-tagging` header.
pub fn from_optional_header(header: Option<&str>) -> S3Result<TagSet> {
    header.map_or_else(|| Ok(TagSet::new()), from_header)
}

/// The tags of a PostObject form's `tagging` field (AWS S3 API reference,
/// POST Object, `tagging`: the XML `Tagging` document of
/// PutObjectTagging), checked as PutObjectTagging checks them, written as
/// an `x-amz-tagging` header so that the form is stored by PutObject's path.
pub fn header_of_xml(xml: &str) -> S3Result<String> {
    use s3s::xml::Deserialize as _;
    let mut d = s3s::xml::Deserializer::new(xml.as_bytes());
    let tagging = Tagging::deserialize(&mut d).map_err(|_| crate::error::malformed_xml())?;
    let tags = from_xml(tagging, TagsOf::Object)?;
    Ok(tags
        .iter()
        .map(|(k, v)| format!("{}={}", urlencoding::encode(k), urlencoding::encode(v)))
        .collect::<Vec<_>>()
        .join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: S3Result<TagSet>) -> String {
        r.unwrap_err().code().as_str().to_owned()
    }

    #[test]
    fn a_form_tagging_document_becomes_the_header_it_means() {
        let xml = "<Tagging><TagSet><Tag><Key>team</Key><Value>blue sky</Value></Tag>\
                   <Tag><Key>a+b</Key><Value>x=y</Value></Tag></TagSet></Tagging>";
        let header = header_of_xml(xml).unwrap();
        let tags = from_header(&header).unwrap();
        assert_eq!(tags.get("team").map(String::as_str), Some("blue sky"));
        assert_eq!(tags.get("a+b").map(String::as_str), Some("x=y"));
        assert_eq!(tags.len(), 2);
        assert_eq!(
            header_of_xml("<Tagging><TagSet>")
                .unwrap_err()
                .code()
                .as_str(),
            "MalformedXML"
        );
    }

    #[test]
    fn headers_parse_as_s3_does() {
        let t = from_header("a=1&b&c=&&d=x%2Fy+z").unwrap();
        assert_eq!(t["a"], "1");
        assert_eq!(t["b"], "");
        assert_eq!(t["c"], "");
        assert_eq!(t["d"], "x/y z");
        assert_eq!(from_header("k=a=b").unwrap()["k"], "a=b");
        assert!(from_header("&").unwrap().is_empty());
        for bad in ["=", "=v", "k%", "k%zz=v", "k=v&k=w", "k=%ff"] {
            assert_eq!(code(from_header(bad)), "InvalidArgument", "{bad}");
        }
        for bad in ["k?=v", "k=v?", "k(=v", "k=v!", "aws:x=1"] {
            assert_eq!(code(from_header(bad)), "InvalidTag", "{bad}");
        }
        let eleven: Vec<String> = (0..11).map(|i| format!("k{i}=v")).collect();
        assert_eq!(code(from_header(&eleven.join("&"))), "BadRequest");
    }

    #[test]
    fn lengths_count_utf16_positions() {
        assert!(check_one(&"é".repeat(128), "v").is_ok());
        assert!(check_one(&"a".repeat(129), "v").is_err());
        // U+10400 is outside the BMP: two positions each.
        assert!(check_one("k", &"\u{10400}".repeat(128)).is_ok());
        assert!(check_one("k", &"\u{10400}".repeat(129)).is_err());
        assert!(check_one("k", &"v".repeat(256)).is_ok());
        assert!(check_one("k", &"v".repeat(257)).is_err());
        assert!(check_one("", "v").is_err());
        assert!(check_one("日本 語+-=._:/@", "ünï cödé 123").is_ok());
    }

    #[test]
    fn xml_tag_sets_are_checked() {
        let set = |pairs: Vec<(&str, &str)>| Tagging {
            tag_set: pairs
                .into_iter()
                .map(|(k, v)| Tag {
                    key: Some(k.into()),
                    value: Some(v.into()),
                })
                .collect(),
        };
        assert_eq!(
            code(from_xml(set(vec![("a", "1"), ("a", "2")]), TagsOf::Object)),
            "InvalidTag"
        );
        let many: Vec<(String, String)> = (0..51).map(|i| (format!("k{i}"), "v".into())).collect();
        let many = |n: usize| {
            set(many[..n]
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect())
        };
        assert_eq!(code(from_xml(many(11), TagsOf::Object)), "BadRequest");
        assert_eq!(from_xml(many(10), TagsOf::Object).unwrap().len(), 10);
        assert_eq!(from_xml(many(50), TagsOf::Bucket).unwrap().len(), 50);
        assert_eq!(code(from_xml(many(51), TagsOf::Bucket)), "BadRequest");
        let no_value = Tagging {
            tag_set: vec![Tag {
                key: Some("k".into()),
                value: None,
            }],
        };
        assert_eq!(code(from_xml(no_value, TagsOf::Object)), "MalformedXML");
    }
}
