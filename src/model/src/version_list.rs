//! Scans of a versioned bucket's object rows: the latest live version of
//! each key (ListObjects), and every version in S3's order
//! (ListObjectVersions: keys ascending, each key's versions newest first,
//! its null version placed by its timestamp).
//!
//! A key's versions sort right after its null row, newest first
//! ([`crate::version_keys`]), so once the scan knows a key's latest version it
//! seeks past the key's other rows (one range read from
//! [`after_versions`]) instead of reading them.

use std::ops::Bound;

use crate::Objects;
use crate::Result;
use crate::bucket::BucketRow;
use crate::object::ObjectRow;
use crate::version_keys::{
    VersionRef, after_versions, newer_is_null, split_sort_key, version_sort_key,
    versions_older_than,
};

/// Most rows one scan step reads.
const PAGE: usize = 1000;

/// Where a listing of versions starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionCursor {
    /// Every version of the keys from this one (inclusive) on.
    KeyFrom(Vec<u8>),
    /// The versions after version `1` of key `0`, in S3's order.
    After(Vec<u8>, VersionRef),
}

/// One version of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedVersion {
    pub key: Vec<u8>,
    pub id: VersionRef,
    pub row: ObjectRow,
    pub is_latest: bool,
}

/// Whether `base` is within `start`.
fn within(base: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => base >= s,
        Bound::Excluded(s) => base > s,
        Bound::Unbounded => true,
    }
}

/// The group of rows of one key being scanned for its latest version.
struct Group {
    key: Vec<u8>,
    null: Option<ObjectRow>,
}

impl Objects {
    /// Up to `limit` keys of a versioned bucket from `start` (a bound on
    /// object keys) on, each with its latest version, in key order; keys
    /// whose latest version is a delete marker are left out. Fewer only
    /// when there are no more.
    pub(crate) async fn list_latest(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, ObjectRow)>> {
        let part = bucket.id_bytes();
        let mut out = Vec::new();
        let mut from: Bound<Vec<u8>> = start.map(<[u8]>::to_vec);
        let mut group: Option<Group> = None;
        let page_len = limit.saturating_add(16).min(PAGE);
        // Ends the current group with its null row alone (no live version).
        let flush = |g: Option<Group>, out: &mut Vec<(Vec<u8>, ObjectRow)>| {
            if let Some(Group { key, null: Some(n) }) = g
                && !n.is_delete_marker()
            {
                out.push((key, n));
            }
        };
        loop {
            let page = self
                .rows()
                .range_from(&part, from.as_ref().map(Vec::as_slice), page_len)
                .await?;
            let exhausted = page.len() < page_len;
            let mut seek: Option<Vec<u8>> = None;
            let mut last: Option<Vec<u8>> = None;
            for (sort, row) in page {
                last = Some(sort.clone());
                let (base, v) = split_sort_key(&sort);
                if seek.as_deref().is_some_and(|s| sort.as_slice() < s) {
                    continue;
                }
                seek = None;
                if !within(base, start) {
                    // Rows of a key before the start (the versions of the
                    // key a continuation starts after): seek past them.
                    seek = Some(after_versions(base));
                    continue;
                }
                if group.as_ref().is_none_or(|g| g.key != base) {
                    flush(group.take(), &mut out);
                    if out.len() >= limit {
                        out.truncate(limit);
                        return Ok(out);
                    }
                    group = Some(Group {
                        key: base.to_vec(),
                        null: None,
                    });
                }
                let g = group.as_mut().expect("a group");
                match v {
                    None => g.null = Some(row).filter(|r| !r.is_deleted()),
                    Some(_) if row.is_deleted() => {}
                    Some(_) => {
                        // The newest live versioned row: the key is decided.
                        let g = group.take().expect("a group");
                        let latest = match g.null {
                            Some(n) if newer_is_null(n.timestamp_msec, row.timestamp_msec) => n,
                            _ => row,
                        };
                        if !latest.is_delete_marker() {
                            out.push((g.key.clone(), latest));
                            if out.len() >= limit {
                                return Ok(out);
                            }
                        }
                        seek = Some(after_versions(&g.key));
                    }
                }
            }
            if exhausted {
                flush(group.take(), &mut out);
                out.truncate(limit);
                return Ok(out);
            }
            from = match (seek, last) {
                (Some(s), _) => Bound::Included(s),
                (None, Some(l)) => Bound::Excluded(l),
                (None, None) => {
                    flush(group.take(), &mut out);
                    return Ok(out);
                }
            };
        }
    }

    /// Up to `limit` versions (delete markers included) of the keys of a
    /// versioned bucket that start with `prefix`, from `cursor` on, in S3's
    /// order. Fewer only when there are no more.
    pub async fn list_versions(
        &self,
        bucket: &BucketRow,
        prefix: &[u8],
        cursor: &VersionCursor,
        limit: usize,
    ) -> Result<Vec<ListedVersion>> {
        let part = bucket.id_bytes();
        let mut out: Vec<ListedVersion> = Vec::new();
        // The key being listed, its null version if still to be placed,
        // and whether its latest version is still to come.
        let mut current: Option<Vec<u8>> = None;
        let mut pending_null: Option<ObjectRow> = None;
        let mut latest_to_come = false;
        let mut from: Bound<Vec<u8>>;
        // Rows of keys before this one are skipped (sought past).
        let key_floor: Vec<u8>;
        match cursor {
            VersionCursor::KeyFrom(k) => {
                let k = k.clone().max(prefix.to_vec());
                from = Bound::Included(k.clone());
                key_floor = k;
            }
            VersionCursor::After(key, v) => {
                // The rest of `key`'s versions, then the keys after it.
                let null = self
                    .rows()
                    .get(&part, key)
                    .await?
                    .filter(|o| !o.is_deleted());
                current = Some(key.clone());
                key_floor = key.clone();
                match v {
                    VersionRef::Null => {
                        let ts = null.as_ref().map_or(u64::MAX, |n| n.timestamp_msec);
                        from = match versions_older_than(key, ts) {
                            Some(s) => Bound::Included(s),
                            None => Bound::Included(after_versions(key)),
                        };
                    }
                    VersionRef::Id { ts, id } => {
                        pending_null = null.filter(|n| !newer_is_null(n.timestamp_msec, *ts));
                        from = Bound::Excluded(version_sort_key(key, *ts, id));
                    }
                }
            }
        }
        let page_len = limit.saturating_add(16).min(PAGE);
        loop {
            let page = self
                .rows()
                .range_from(&part, from.as_ref().map(Vec::as_slice), page_len)
                .await?;
            let exhausted = page.len() < page_len;
            let mut next = page.last().map(|(s, _)| Bound::Excluded(s.clone()));
            for (sort, row) in page {
                let (base, v) = split_sort_key(&sort);
                if !base.starts_with(prefix) && base > prefix {
                    flush_null(&mut out, &current, &mut pending_null, &mut latest_to_come);
                    out.truncate(limit);
                    return Ok(out);
                }
                if base < key_floor.as_slice() || !base.starts_with(prefix) {
                    // Versions of a key the cursor is past: seek past them.
                    next = Some(Bound::Included(after_versions(base)));
                    break;
                }
                if current.as_deref() != Some(base) {
                    flush_null(&mut out, &current, &mut pending_null, &mut latest_to_come);
                    if out.len() >= limit {
                        out.truncate(limit);
                        return Ok(out);
                    }
                    current = Some(base.to_vec());
                    latest_to_come = true;
                }
                if row.is_deleted() {
                    continue;
                }
                let key = current.clone().expect("a key");
                match v {
                    None => pending_null = Some(row),
                    Some((ts, id)) => {
                        if let Some(n) =
                            pending_null.take_if(|n| newer_is_null(n.timestamp_msec, ts))
                        {
                            push(&mut out, &key, VersionRef::Null, n, &mut latest_to_come);
                            if out.len() >= limit {
                                return Ok(out);
                            }
                        }
                        let id = VersionRef::Id { ts, id };
                        push(&mut out, &key, id, row, &mut latest_to_come);
                        if out.len() >= limit {
                            return Ok(out);
                        }
                    }
                }
            }
            match next {
                Some(n) if !exhausted || matches!(&n, Bound::Included(_)) => from = n,
                _ => {
                    flush_null(&mut out, &current, &mut pending_null, &mut latest_to_come);
                    out.truncate(limit);
                    return Ok(out);
                }
            }
        }
    }
}

fn push(
    out: &mut Vec<ListedVersion>,
    key: &[u8],
    id: VersionRef,
    row: ObjectRow,
    latest: &mut bool,
) {
    out.push(ListedVersion {
        key: key.to_vec(),
        id,
        row,
        is_latest: std::mem::take(latest),
    });
}

/// Ends the current key: its null version, if not placed yet, is its oldest.
fn flush_null(
    out: &mut Vec<ListedVersion>,
    current: &Option<Vec<u8>>,
    pending_null: &mut Option<ObjectRow>,
    latest_to_come: &mut bool,
) {
    if let (Some(k), Some(n)) = (current, pending_null.take()) {
        push(out, k, VersionRef::Null, n, latest_to_come);
    }
}
