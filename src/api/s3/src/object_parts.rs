//! The parts of an object as S3 names them: the part count of a multipart
//! object (the `-N` of its ETag), the bytes of part N for GET and HEAD
//! with `partNumber`, and the pages of the part list of
//! GetObjectAttributes. Part boundaries are the completed version's
//! `version_part` rows ([`hangar_model::version_parts`]); an object
//! uploaded in one request is one part.

use std::ops::Range;

use hangar_model::object::{ObjectRow, StoredChecksum};
use hangar_model::version_parts::VersionPart;
use s3s::{S3Result, s3_error};

use crate::S3Api;
use crate::error::OrS3;

/// The part count of a multipart object: the `-N` of its ETag.
pub(crate) fn parts_count(etag: &str) -> Option<i32> {
    let (_, n) = etag.rsplit_once('-')?;
    n.parse().ok()
}

/// What GET and HEAD with `partNumber` send.
pub(crate) struct PartRead {
    /// The part's bytes; `None` for the whole object (part 1 of an object
    /// uploaded in one request).
    pub range: Option<Range<u64>>,
    /// `x-amz-mp-parts-count`: the parts of a multipart object.
    pub count: Option<i32>,
    /// The part's own checksum, as uploaded.
    pub checksum: Option<StoredChecksum>,
}

impl S3Api {
    /// The bytes of part `n` of `obj`. A part number outside 1–10000 is
    /// `InvalidArgument`; one the object does not have is `416
    /// InvalidPartNumber`. A multipart object completed by a binary that
    /// kept no part boundaries answers `501 NotImplemented` for any part
    /// but the one of a one-part upload.
    pub(crate) async fn part_read(&self, obj: &ObjectRow, n: i32) -> S3Result<PartRead> {
        let n = crate::ops_multipart::check_part_number(n)?;
        let whole = PartRead {
            range: None,
            count: None,
            checksum: None,
        };
        let Some(count) = parts_count(&obj.etag) else {
            return if n == 1 {
                Ok(whole)
            } else {
                Err(crate::error::invalid_part_number())
            };
        };
        let blocks = self.model.blocks();
        if let Some(p) = blocks.part(&obj.version, n).await.or_s3()? {
            return Ok(PartRead {
                range: Some(p.offset..p.offset + p.size),
                count: Some(count),
                checksum: p.checksum,
            });
        }
        if !blocks.parts(&obj.version, 0, 1).await.or_s3()?.is_empty() {
            return Err(crate::error::invalid_part_number());
        }
        match (count, n) {
            (1, 1) => Ok(PartRead {
                count: Some(1),
                ..whole
            }),
            (1, _) => Err(crate::error::invalid_part_number()),
            _ => Err(s3_error!(
                NotImplemented,
                "partNumber on a multipart object completed before Hangar kept part boundaries is not implemented"
            )),
        }
    }

    /// Up to `max` parts of `obj` numbered more than `marker`, and whether
    /// more follow (GetObjectAttributes' `ObjectParts`). Empty for an
    /// object completed before part boundaries were kept.
    pub(crate) async fn part_page(
        &self,
        obj: &ObjectRow,
        marker: u32,
        max: usize,
    ) -> S3Result<(Vec<(u32, VersionPart)>, bool)> {
        let mut parts = self
            .model
            .blocks()
            .parts(&obj.version, marker, max.saturating_add(1))
            .await
            .or_s3()?;
        let truncated = parts.len() > max;
        parts.truncate(max);
        Ok((parts, truncated))
    }
}

#[cfg(test)]
mod tests {
    use super::parts_count;

    #[test]
    fn part_count_is_the_multipart_etag_suffix() {
        assert_eq!(parts_count("0123abcd-3"), Some(3));
        assert_eq!(parts_count("0123abcd"), None);
        assert_eq!(parts_count("0123abcd-x"), None);
    }
}
