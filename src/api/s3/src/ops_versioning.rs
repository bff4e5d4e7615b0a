//! Bucket versioning: Put/GetBucketVersioning and ListObjectVersions, and
//! what the object operations share about version ids (parsing a
//! `versionId`, the id a write answers with).
//!
//! ListObjectVersions answers with an XML body of its own: S3 interleaves
//! `Version` and `DeleteMarker` elements in the listing's order, which the
//! s3s serializer (all of one kind, then all of the other) cannot give.

use std::fmt::Write as _;

use hangar_model::bucket::{BucketRow, Versioning};
use hangar_model::object::ObjectRow;
use hangar_model::version_keys::VersionRef;
use hangar_model::version_list::{ListedVersion, VersionCursor};
use s3s::dto::{
    BucketVersioningStatus, GetBucketVersioningInput, GetBucketVersioningOutput,
    ListObjectVersionsInput, ListObjectVersionsOutput, MFADelete, PutBucketVersioningInput,
    PutBucketVersioningOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::ops_list::{after_prefix, encoder, max_keys};
use crate::xml_text::escape;

/// Parses a request's `versionId`: `null`, or an id Hangar gave.
pub(crate) fn parse_version_id(v: Option<&str>) -> S3Result<Option<VersionRef>> {
    v.map(|s| VersionRef::parse(s).ok_or_else(crate::error::invalid_version_id))
        .transpose()
}

/// The version id a write in `bucket` answers with (`x-amz-version-id`):
/// none in a bucket never versioned, `null` in a suspended one.
pub(crate) fn published_id(bucket: &BucketRow, row: &ObjectRow) -> Option<String> {
    match bucket.versioning() {
        Versioning::Off => None,
        Versioning::Suspended => Some(VersionRef::Null.to_string()),
        Versioning::Enabled => Some(
            VersionRef::Id {
                ts: row.timestamp_msec,
                id: row.version,
            }
            .to_string(),
        ),
    }
}

/// A body an operation answers with instead of the one s3s's serializer
/// would make of its output (carried in the response's extensions).
#[derive(Debug, Clone)]
pub(crate) struct XmlBody(pub bytes::Bytes);

/// One page of a ListObjectVersions answer.
struct Page {
    versions: Vec<ListedVersion>,
    prefixes: Vec<String>,
    /// Items in listing order: an index into `versions` or `prefixes`.
    order: Vec<Item>,
    truncated: bool,
    next: Option<(String, Option<VersionRef>)>,
}

enum Item {
    Version(usize),
    Prefix(usize),
}

impl S3Api {
    pub(crate) async fn do_put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let c = input.versioning_configuration;
        if input.mfa.is_some()
            || c.mfa_delete
                .as_ref()
                .is_some_and(|m| m.as_str() == MFADelete::ENABLED)
        {
            return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
        }
        let state = match c.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            _ => return Err(crate::error::malformed_xml()),
        };
        self.model
            .buckets()
            .set_bucket_versioning(&b.name, state)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketVersioningOutput {}))
    }

    pub(crate) async fn do_get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let status = match b.versioning() {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::ENABLED),
            Versioning::Suspended => Some(BucketVersioningStatus::SUSPENDED),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            mfa_delete: None,
            status: status.map(BucketVersioningStatus::from_static),
        }))
    }

    /// Lists versions from `cursor`: at most `max` versions and common
    /// prefixes together.
    async fn version_page(
        &self,
        bucket: &BucketRow,
        prefix: &str,
        delimiter: Option<&str>,
        key_marker: Option<&str>,
        mut cursor: VersionCursor,
        max: usize,
    ) -> S3Result<Page> {
        let mut page = Page {
            versions: Vec::new(),
            prefixes: Vec::new(),
            order: Vec::new(),
            truncated: false,
            next: None,
        };
        let count = |p: &Page| p.order.len();
        'scan: loop {
            let want = max - count(&page) + 1;
            let got = self
                .model
                .objects()
                .list_versions(bucket, prefix.as_bytes(), &cursor, want)
                .await
                .or_s3()?;
            let short = got.len() < want;
            let mut next_cursor = None;
            let mut last: Option<(Vec<u8>, VersionRef)> = None;
            for v in got {
                let key = String::from_utf8_lossy(&v.key).into_owned();
                let common = delimiter.and_then(|d| {
                    key[prefix.len()..]
                        .find(d)
                        .map(|i| key[..prefix.len() + i + d.len()].to_owned())
                });
                if let Some(cp) = common {
                    // A prefix up to the marker was listed by an earlier page.
                    if key_marker.is_none_or(|m| cp.as_str() > m) {
                        if count(&page) >= max {
                            page.truncated = true;
                            break 'scan;
                        }
                        page.next = Some((cp.clone(), None));
                        page.order.push(Item::Prefix(page.prefixes.len()));
                        page.prefixes.push(cp.clone());
                    }
                    match after_prefix(cp.as_bytes()) {
                        Some(s) => {
                            next_cursor = Some(VersionCursor::KeyFrom(s));
                            break;
                        }
                        None => break 'scan,
                    }
                }
                if count(&page) >= max {
                    page.truncated = true;
                    break 'scan;
                }
                last = Some((v.key.clone(), v.id));
                page.next = Some((key, Some(v.id)));
                page.order.push(Item::Version(page.versions.len()));
                page.versions.push(v);
            }
            cursor = match (next_cursor, last) {
                (Some(c), _) => c,
                (None, Some((k, id))) if !short => VersionCursor::After(k, id),
                _ => break,
            };
        }
        if !page.truncated {
            page.next = None;
        }
        Ok(page)
    }

    pub(crate) async fn do_list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let input = req.input;
        let bucket = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let enc = encoder(input.encoding_type.as_ref())?;
        let max = max_keys(input.max_keys)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.as_deref().filter(|d| !d.is_empty());
        let key_marker = input.key_marker.as_deref().filter(|k| !k.is_empty());
        let version_marker = input.version_id_marker.as_deref().filter(|v| !v.is_empty());
        let cursor = match (key_marker, version_marker) {
            (None, Some(_)) => {
                return Err(s3_error!(
                    InvalidArgument,
                    "A version-id marker cannot be specified without a key marker."
                ));
            }
            (None, None) => VersionCursor::KeyFrom(prefix.as_bytes().to_vec()),
            (Some(k), None) => {
                let mut after = k.as_bytes().to_vec();
                after.push(0);
                VersionCursor::KeyFrom(after)
            }
            (Some(k), Some(v)) => {
                let v = parse_version_id(Some(v))?.expect("a marker");
                if k < prefix.as_str() {
                    VersionCursor::KeyFrom(prefix.as_bytes().to_vec())
                } else {
                    VersionCursor::After(k.as_bytes().to_vec(), v)
                }
            }
        };
        let page = if max == 0 {
            Page {
                versions: Vec::new(),
                prefixes: Vec::new(),
                order: Vec::new(),
                truncated: false,
                next: None,
            }
        } else {
            self.version_page(&bucket, &prefix, delimiter, key_marker, cursor, max)
                .await?
        };

        let owner = crate::ops_acl::bucket_owner(&self.model, &bucket).await?;
        let mut x = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListVersionsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
        );
        let el = |x: &mut String, name: &str, v: &str| {
            let _ = write!(x, "<{name}>{}</{name}>", escape(v));
        };
        el(&mut x, "Name", &input.bucket);
        el(&mut x, "Prefix", &enc(&prefix));
        el(&mut x, "KeyMarker", &enc(key_marker.unwrap_or("")));
        el(&mut x, "VersionIdMarker", version_marker.unwrap_or(""));
        if let Some((k, v)) = &page.next {
            el(&mut x, "NextKeyMarker", &enc(k));
            if let Some(v) = v {
                el(&mut x, "NextVersionIdMarker", &v.to_string());
            }
        }
        el(&mut x, "MaxKeys", &max.to_string());
        if let Some(d) = delimiter {
            el(&mut x, "Delimiter", &enc(d));
        }
        if let Some(e) = &input.encoding_type {
            el(&mut x, "EncodingType", e.as_str());
        }
        el(
            &mut x,
            "IsTruncated",
            if page.truncated { "true" } else { "false" },
        );
        for item in &page.order {
            match item {
                Item::Prefix(i) => {
                    x.push_str("<CommonPrefixes>");
                    el(&mut x, "Prefix", &enc(&page.prefixes[*i]));
                    x.push_str("</CommonPrefixes>");
                }
                Item::Version(i) => {
                    let v = &page.versions[*i];
                    let marker = v.row.is_delete_marker();
                    let tag = if marker { "DeleteMarker" } else { "Version" };
                    let _ = write!(x, "<{tag}>");
                    el(&mut x, "Key", &enc(&String::from_utf8_lossy(&v.key)));
                    el(&mut x, "VersionId", &v.id.to_string());
                    el(
                        &mut x,
                        "IsLatest",
                        if v.is_latest { "true" } else { "false" },
                    );
                    el(
                        &mut x,
                        "LastModified",
                        &crate::time::iso8601_msec(v.row.timestamp_msec),
                    );
                    if !marker {
                        el(&mut x, "ETag", &format!("\"{}\"", v.row.etag));
                        el(&mut x, "Size", &v.row.size.to_string());
                        el(&mut x, "StorageClass", "STANDARD");
                    }
                    // Every version is the bucket owner's (`bucket_owner`).
                    x.push_str("<Owner>");
                    if let Some(name) = &owner.display_name {
                        el(&mut x, "DisplayName", name);
                    }
                    el(&mut x, "ID", owner.id.as_deref().unwrap_or_default());
                    x.push_str("</Owner>");
                    let _ = write!(x, "</{tag}>");
                }
            }
        }
        x.push_str("</ListVersionsResult>");
        let mut resp = S3Response::new(ListObjectVersionsOutput::default());
        resp.extensions.insert(XmlBody(bytes::Bytes::from(x)));
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_are_checked_before_any_read() {
        assert_eq!(parse_version_id(None).unwrap(), None);
        assert_eq!(
            parse_version_id(Some("null")).unwrap(),
            Some(VersionRef::Null)
        );
        let e = parse_version_id(Some("3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")).unwrap_err();
        assert_eq!(e.code().as_str(), "InvalidArgument");
    }
}
