//! GetObjectAttributes: what HEAD tells of an object, chosen by the
//! `x-amz-object-attributes` header (ETag, Checksum, ObjectParts,
//! StorageClass, ObjectSize), in an XML body.
//!
//! `ObjectParts` gives a multipart object's part count and a page of its
//! parts (`x-amz-part-number-marker`, `x-amz-max-parts`); as S3 does for a
//! general-purpose bucket, the `Part` elements themselves only when the
//! parts carry a checksum. An object uploaded in one request has no
//! `ObjectParts`.

use std::fmt::Write as _;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::object_parts::parts_count;
use crate::time::timestamp;
use crate::xml_text::escape;
use hangar_model::object::StoredChecksum;

/// Parts of an `ObjectParts` page when `x-amz-max-parts` asks no fewer.
const MAX_PARTS: i32 = 1000;

/// The `Checksum…` elements of `c` (of the object, or of one part).
fn checksum_elements(x: &mut String, c: &StoredChecksum) {
    let mut sum = Checksum::default();
    crate::checksum::fill_checksum!(Some(c), sum);
    for (name, v) in [
        ("ChecksumCRC32", &sum.checksum_crc32),
        ("ChecksumCRC32C", &sum.checksum_crc32c),
        ("ChecksumCRC64NVME", &sum.checksum_crc64nvme),
        ("ChecksumSHA1", &sum.checksum_sha1),
        ("ChecksumSHA256", &sum.checksum_sha256),
    ] {
        if let Some(v) = v {
            let _ = write!(x, "<{name}>{}</{name}>", escape(v));
        }
    }
}

impl S3Api {
    pub(crate) async fn do_get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let input = req.input;
        let wanted: Vec<&str> = input
            .object_attributes
            .iter()
            .flat_map(|a| a.as_str().split(','))
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        if let Some(bad) = wanted.iter().find(|a| {
            !matches!(
                **a,
                ObjectAttributes::ETAG
                    | ObjectAttributes::CHECKSUM
                    | ObjectAttributes::OBJECT_PARTS
                    | ObjectAttributes::STORAGE_CLASS
                    | ObjectAttributes::OBJECT_SIZE
            )
        }) {
            return Err(s3_error!(
                InvalidArgument,
                "Invalid attribute name specified: {bad}"
            ));
        }
        if wanted.is_empty() {
            return Err(s3_error!(
                InvalidArgument,
                "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty"
            ));
        }
        let found = self
            .object_for_read(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let obj = found.row;
        // As on HEAD: an SSE-C object's attributes need its key.
        let sse = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        crate::sse_c::for_read(&self.settings.sse_master_key, obj.sse_c.as_ref(), sse)?;
        let wants = |a: &str| wanted.contains(&a);
        // The body is written here rather than by s3s, which quotes the
        // ETag: GetObjectAttributes answers it unquoted (AWS API
        // reference, GetObjectAttributes, "ETag"). s3s still writes the
        // headers (Last-Modified, x-amz-version-id).
        let mut x = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><GetObjectAttributesResponse xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
        );
        let el = |x: &mut String, name: &str, v: &str| {
            let _ = write!(x, "<{name}>{}</{name}>", escape(v));
        };
        if wants(ObjectAttributes::ETAG) {
            el(&mut x, "ETag", &obj.etag);
        }
        if wants(ObjectAttributes::CHECKSUM)
            && let Some(c) = obj.checksum.as_ref()
        {
            x.push_str("<Checksum>");
            checksum_elements(&mut x, c);
            el(
                &mut x,
                "ChecksumType",
                crate::multipart_checksum::Kind::of_stored(c).name(),
            );
            x.push_str("</Checksum>");
        }
        if wants(ObjectAttributes::OBJECT_PARTS)
            && let Some(n) = parts_count(&obj.etag)
        {
            let marker = input.part_number_marker.unwrap_or(0).max(0) as u32;
            let max = match input.max_parts.unwrap_or(MAX_PARTS) {
                m if m < 0 => {
                    return Err(s3_error!(
                        InvalidArgument,
                        "Argument max-parts must be an integer between 0 and 2147483647"
                    ));
                }
                m => m.min(MAX_PARTS),
            };
            let (parts, truncated) = self.part_page(&obj, marker, max as usize).await?;
            x.push_str("<ObjectParts>");
            el(&mut x, "PartsCount", &n.to_string());
            el(&mut x, "PartNumberMarker", &marker.to_string());
            if truncated && let Some((last, _)) = parts.last() {
                el(&mut x, "NextPartNumberMarker", &last.to_string());
            }
            el(&mut x, "MaxParts", &max.to_string());
            el(
                &mut x,
                "IsTruncated",
                if truncated { "true" } else { "false" },
            );
            for (number, p) in &parts {
                let Some(c) = p.checksum.as_ref() else {
                    continue;
                };
                x.push_str("<Part>");
                el(&mut x, "PartNumber", &number.to_string());
                el(&mut x, "Size", &p.size.to_string());
                checksum_elements(&mut x, c);
                x.push_str("</Part>");
            }
            x.push_str("</ObjectParts>");
        }
        if wants(ObjectAttributes::STORAGE_CLASS) {
            el(&mut x, "StorageClass", StorageClass::STANDARD);
        }
        if wants(ObjectAttributes::OBJECT_SIZE) {
            el(&mut x, "ObjectSize", &obj.size.to_string());
        }
        x.push_str("</GetObjectAttributesResponse>");
        let mut resp = S3Response::new(GetObjectAttributesOutput {
            last_modified: Some(timestamp(obj.timestamp_msec)),
            version_id: found.id.map(|i| i.to_string()),
            ..Default::default()
        });
        resp.extensions
            .insert(crate::ops_versioning::XmlBody(bytes::Bytes::from(x)));
        Ok(resp)
    }
}
