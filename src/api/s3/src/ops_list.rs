//! ListObjects (v1) and ListObjectsV2: prefix, delimiter, max-keys,
//! pagination (marker, start-after, continuation-token) and
//! encoding-type=url, over one ordered scan of the bucket's object rows.

use std::ops::Bound;

use hangar_model::bucket::BucketRow;
use hangar_model::object::ObjectRow;
use s3s::dto::{
    CommonPrefix, EncodingType, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input,
    ListObjectsV2Output, Object, ObjectStorageClass, Owner,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::conditions::etag;
use crate::error::OrS3;
use crate::ops_acl::bucket_owner;
use crate::time::timestamp;

const PAGE: usize = 1000;
/// Rows read after skipping past a common prefix.
const SKIP_PAGE: usize = 8;

/// One page of a listing.
struct Listing {
    objects: Vec<(String, ObjectRow)>,
    prefixes: Vec<String>,
    truncated: bool,
    /// Where the next page starts (inclusive), when truncated.
    next_start: Option<Vec<u8>>,
    /// The last key or prefix returned (v1's NextMarker).
    last: Option<String>,
}

/// The first key after every key that starts with `prefix`.
pub(crate) fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(b) = p.pop() {
        if b < 0xff {
            p.push(b + 1);
            return Some(p);
        }
    }
    None
}

impl S3Api {
    /// Lists `bucket` from `start` (inclusive) on. A common prefix that is
    /// not after `after` (the client's marker or start-after) was returned
    /// by an earlier page and is skipped with everything under it.
    async fn list(
        &self,
        bucket: &BucketRow,
        prefix: &str,
        delimiter: Option<&str>,
        start: Vec<u8>,
        after: Option<&str>,
        max_keys: usize,
    ) -> S3Result<Listing> {
        let mut out = Listing {
            objects: Vec::new(),
            prefixes: Vec::new(),
            truncated: false,
            next_start: None,
            last: None,
        };
        if max_keys == 0 {
            // Nothing asked for, so nothing left out (AWS: IsTruncated false).
            return Ok(out);
        }
        let mut cursor = start.max(prefix.as_bytes().to_vec());
        let delimiter = delimiter.filter(|d| !d.is_empty());
        let mut page = PAGE;
        'scan: loop {
            let rows = self
                .model
                .objects()
                .list(bucket, Bound::Included(&cursor), page)
                .await
                .or_s3()?;
            let exhausted = rows.len() < page;
            let mut next_cursor = None;
            for (key_bytes, row) in rows {
                if !key_bytes.starts_with(prefix.as_bytes()) {
                    break 'scan;
                }
                let key = String::from_utf8_lossy(&key_bytes).into_owned();
                let common = delimiter.and_then(|d| {
                    key[prefix.len()..]
                        .find(d)
                        .map(|i| key[..prefix.len() + i + d.len()].to_owned())
                });
                if let Some(cp) = &common
                    && after.is_some_and(|a| cp.as_str() <= a)
                {
                    match after_prefix(cp.as_bytes()) {
                        Some(s) => {
                            next_cursor = Some(s);
                            break;
                        }
                        None => break 'scan,
                    }
                }
                if out.objects.len() + out.prefixes.len() >= max_keys {
                    out.truncated = true;
                    break 'scan;
                }
                match common {
                    Some(cp) => {
                        let skip_to = after_prefix(cp.as_bytes());
                        out.next_start = skip_to.clone();
                        out.last = Some(cp.clone());
                        out.prefixes.push(cp);
                        match skip_to {
                            // Everything under this prefix is summed up by it.
                            Some(s) => {
                                next_cursor = Some(s);
                                break;
                            }
                            None => break 'scan,
                        }
                    }
                    None => {
                        let mut n = key_bytes.clone();
                        n.push(0);
                        out.next_start = Some(n);
                        out.last = Some(key.clone());
                        out.objects.push((key, row));
                    }
                }
            }
            // After a jump past a common prefix, what follows is most often
            // the next prefix: a short read finds it (a delimiter listing of
            // 100 folders of 1 000 keys reads 100 short pages, not 100 000
            // rows); a page used up by plain keys doubles the next one.
            page = if next_cursor.is_some() {
                SKIP_PAGE
            } else {
                (page * 2).min(PAGE)
            };
            match next_cursor {
                Some(c) => cursor = c,
                None if exhausted => break,
                None => match &out.next_start {
                    Some(n) => cursor = n.clone(),
                    None => break,
                },
            }
        }
        if !out.truncated {
            out.next_start = None;
        }
        Ok(out)
    }
}

/// The encoder of `encoding-type`: none, or `url`, which percent-encodes
/// every byte but the unreserved ones and `/` (as AWS does: a key
/// `photos/a b` is listed as `photos/a%20b`; clients decode the fields AWS
/// encodes, and a `/` left alone reads the same either way).
pub(crate) fn encoder(t: Option<&EncodingType>) -> S3Result<impl Fn(&str) -> String> {
    let url = match t {
        None => false,
        Some(t) if t.as_str() == EncodingType::URL => true,
        Some(t) => {
            return Err(s3_error!(
                InvalidArgument,
                "Invalid Encoding Method specified in Request: {}",
                t.as_str()
            ));
        }
    };
    Ok(move |s: &str| {
        if url {
            // `%` itself is encoded, so every `%2F` is a `/`.
            urlencoding::encode(s).replace("%2F", "/")
        } else {
            s.to_owned()
        }
    })
}

pub(crate) fn max_keys(m: Option<i32>) -> S3Result<usize> {
    match m {
        None => Ok(1000),
        Some(n) if n < 0 => Err(s3_error!(
            InvalidArgument,
            "max-keys must be a non-negative integer"
        )),
        Some(n) => Ok((n as usize).min(1000)),
    }
}

/// The listed objects, each with `owner` when the listing shows owners.
fn contents(
    objects: Vec<(String, ObjectRow)>,
    enc: &impl Fn(&str) -> String,
    owner: Option<&Owner>,
) -> Vec<Object> {
    objects
        .into_iter()
        .map(|(k, r)| Object {
            owner: owner.cloned(),
            ..object(k, &r, enc)
        })
        .collect()
}

/// The delimiter a listing echoes: none for an empty one (AWS leaves the
/// element out).
fn echoed_delimiter(d: Option<&str>, enc: &impl Fn(&str) -> String) -> Option<String> {
    d.filter(|d| !d.is_empty()).map(enc)
}

fn common_prefixes(prefixes: Vec<String>, enc: &impl Fn(&str) -> String) -> Vec<CommonPrefix> {
    prefixes
        .into_iter()
        .map(|p| CommonPrefix {
            prefix: Some(enc(&p)),
        })
        .collect()
}

fn object(key: String, row: &ObjectRow, enc: &impl Fn(&str) -> String) -> Object {
    Object {
        key: Some(enc(&key)),
        last_modified: Some(timestamp(row.timestamp_msec)),
        e_tag: Some(etag(row)),
        size: Some(row.size as i64),
        storage_class: Some(ObjectStorageClass::from_static(
            ObjectStorageClass::STANDARD,
        )),
        checksum_algorithm: row
            .checksum
            .as_ref()
            .map(|c| vec![s3s::dto::ChecksumAlgorithm::from(c.algorithm.clone())]),
        ..Default::default()
    }
}

impl S3Api {
    pub(crate) async fn do_list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let bucket = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let encoding_type = input.encoding_type.clone();
        let enc = encoder(encoding_type.as_ref())?;
        let max = max_keys(input.max_keys)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let start = match (&input.continuation_token, &input.start_after) {
            (Some(t), _) => hex::decode(t).map_err(|_| {
                s3_error!(
                    InvalidArgument,
                    "The continuation token provided is incorrect"
                )
            })?,
            (None, Some(s)) => {
                let mut s = s.as_bytes().to_vec();
                s.push(0);
                s
            }
            (None, None) => Vec::new(),
        };
        let l = self
            .list(
                &bucket,
                &prefix,
                input.delimiter.as_deref(),
                start,
                input
                    .start_after
                    .as_deref()
                    .filter(|_| input.continuation_token.is_none()),
                max,
            )
            .await?;
        let key_count = (l.objects.len() + l.prefixes.len()) as i32;
        let owner = if input.fetch_owner == Some(true) {
            Some(bucket_owner(&self.model, &bucket).await?)
        } else {
            None
        };
        let out = ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(enc(&prefix)),
            delimiter: echoed_delimiter(input.delimiter.as_deref(), &enc),
            max_keys: Some(max as i32),
            key_count: Some(key_count),
            is_truncated: Some(l.truncated),
            continuation_token: input.continuation_token,
            next_continuation_token: l.next_start.map(hex::encode),
            start_after: input.start_after.as_deref().map(&enc),
            encoding_type: input.encoding_type,
            contents: Some(contents(l.objects, &enc, owner.as_ref())),
            common_prefixes: Some(common_prefixes(l.prefixes, &enc)),
            request_charged: None,
        };
        Ok(S3Response::new(out))
    }

    pub(crate) async fn do_list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let bucket = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let encoding_type = input.encoding_type.clone();
        let enc = encoder(encoding_type.as_ref())?;
        let max = max_keys(input.max_keys)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let start = match &input.marker {
            Some(m) => {
                let mut s = m.as_bytes().to_vec();
                s.push(0);
                s
            }
            None => Vec::new(),
        };
        let l = self
            .list(
                &bucket,
                &prefix,
                input.delimiter.as_deref(),
                start,
                input.marker.as_deref(),
                max,
            )
            .await?;
        let owner = bucket_owner(&self.model, &bucket).await?;
        let out = ListObjectsOutput {
            name: Some(input.bucket),
            // Echoed as sent: AWS does not encode ListObjects' prefix (nor
            // do clients decode it).
            prefix: Some(prefix),
            marker: Some(input.marker.as_deref().map(&enc).unwrap_or_default()),
            delimiter: echoed_delimiter(input.delimiter.as_deref(), &enc),
            max_keys: Some(max as i32),
            is_truncated: Some(l.truncated),
            next_marker: if l.truncated {
                l.last.as_deref().map(&enc)
            } else {
                None
            },
            encoding_type: input.encoding_type,
            // ListObjects shows each object's owner (ListObjectsV2 only
            // when asked): the bucket owner's, as with AWS's default
            // object ownership (BucketOwnerEnforced).
            contents: Some(contents(l.objects, &enc, Some(&owner))),
            common_prefixes: Some(common_prefixes(l.prefixes, &enc)),
            request_charged: None,
        };
        Ok(S3Response::new(out))
    }
}
