//! The operations of versioned buckets on the object table (row layout in
//! [`crate::version_keys`]): reading the latest or a given version, writing a
//! new version, delete markers, and removing a version for good.
//!
//! Like every object write, each is one row merged into the table (no
//! transaction spans rows): a new version is a new row whose timestamp is
//! taken here, strictly after the newest row of its key that was read, and
//! a removed version becomes a tombstone at its own sort key, whose merge
//! queues the version's blocks for collection (the object table's hook).
//! No version row is ever replaced by another version, so blocks are
//! collected only when their version is removed or, for the null version,
//! replaced.

use std::ops::Bound;

use hangar_util::time::now_msec;

use crate::Objects;
use crate::bucket::{BucketRow, Versioning};
use crate::object::{ObjectRow, ObjectTable};
use crate::version_keys::{
    VersionRef, after_versions, newer_is_null, split_sort_key, version_sort_key,
};
use crate::write_condition::WriteCondition;
use crate::{ModelError, Result};
use hangar_table::Table;

/// Rows read at once when looking for a key's newest live version.
const HEAD_PAGE: usize = 8;

/// One version of an object, as found in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundVersion {
    pub row: ObjectRow,
    /// How a client names it; `None` in a bucket never versioned (S3 sends
    /// no version id there).
    pub id: Option<VersionRef>,
    /// The row's sort key.
    pub sort: Vec<u8>,
}

/// What a DELETE did: the version it wrote or removed, and whether that
/// version is a delete marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    pub id: Option<VersionRef>,
    pub delete_marker: bool,
    /// Whether a live version (or object) was there to delete.
    pub existed: bool,
}

/// The head of a key's rows: its null row (tombstone or not) and its
/// newest live versioned row, with the newest timestamp among the rows
/// read (a new version is stamped past it).
pub(crate) struct Head {
    null: Option<ObjectRow>,
    first: Option<(Vec<u8>, ObjectRow)>,
    newest_ts: Option<u64>,
}

impl Head {
    /// The newest timestamp among the key's rows read, tombstones
    /// included; `None` when it has none.
    pub(crate) fn newest_ts(&self) -> Option<u64> {
        self.newest_ts
    }

    /// The latest live version (delete markers included).
    pub(crate) fn latest(self, key: &str) -> Option<FoundVersion> {
        let null = self.null.filter(|o| !o.is_deleted());
        match (null, self.first) {
            (Some(n), Some((sort, v))) if !newer_is_null(n.timestamp_msec, v.timestamp_msec) => {
                Some(found(sort, v))
            }
            (Some(n), _) => Some(FoundVersion {
                row: n,
                id: Some(VersionRef::Null),
                sort: key.as_bytes().to_vec(),
            }),
            (None, Some((sort, v))) => Some(found(sort, v)),
            (None, None) => None,
        }
    }
}

fn found(sort: Vec<u8>, row: ObjectRow) -> FoundVersion {
    FoundVersion {
        id: Some(VersionRef::of_row(&sort, &row.version)),
        row,
        sort,
    }
}

/// Reads the head of `key`'s rows: one range read of a few rows, more only
/// while the newest versioned rows are tombstones.
pub(crate) async fn head_of(objects: &Table<ObjectTable>, part: &[u8], key: &str) -> Result<Head> {
    let k = key.as_bytes();
    let end = after_versions(k);
    let mut head = Head {
        null: None,
        first: None,
        newest_ts: None,
    };
    let mut from: Vec<u8> = k.to_vec();
    let mut included = true;
    loop {
        let start = if included {
            Bound::Included(from.as_slice())
        } else {
            Bound::Excluded(from.as_slice())
        };
        let page = objects
            .range_within(part, start, Bound::Excluded(&end), HEAD_PAGE)
            .await?;
        let full = page.len() == HEAD_PAGE;
        let last = page.last().map(|(s, _)| s.clone());
        for (sort, row) in page {
            let bump =
                |h: &mut Head, ts: u64| h.newest_ts = Some(h.newest_ts.map_or(ts, |n| n.max(ts)));
            if sort == k {
                bump(&mut head, row.timestamp_msec);
                head.null = Some(row);
                continue;
            }
            let (base, v) = split_sort_key(&sort);
            let Some((ts, _)) = v.filter(|_| base == k) else {
                continue;
            };
            // The newest versioned row bounds every later one's stamp,
            // tombstone or not.
            bump(&mut head, ts.max(row.timestamp_msec));
            if !row.is_deleted() {
                head.first = Some((sort, row));
                return Ok(head);
            }
        }
        match last {
            Some(l) if full => {
                from = l;
                included = false;
            }
            _ => return Ok(head),
        }
    }
}

/// Writes `row` as a new version of `key` in a bucket whose versioning is
/// `mode` (enabled: a row of its own; suspended: the null row), if `cond`
/// holds on the latest version (a delete marker counts as no object).
/// The row is stamped strictly after the newest row read.
pub(crate) async fn write_version(
    objects: &Table<ObjectTable>,
    part: &[u8],
    key: &str,
    row: ObjectRow,
    cond: &WriteCondition,
    mode: Versioning,
) -> Result<(ObjectRow, VersionRef)> {
    let (sort, row, id) = plan_version(objects, part, key, row, cond, mode)
        .await?
        .ok_or(ModelError::PreconditionFailed)?;
    objects.insert_one(part, &sort, row.clone()).await?;
    Ok((row, id))
}

/// What [`write_version`] would write, without writing it: the sort key,
/// the stamped row and its version id, or `None` when `cond` does not hold
/// (a conditional write's Paxos round proposes it, `crate::object_paxos`).
pub(crate) async fn plan_version(
    objects: &Table<ObjectTable>,
    part: &[u8],
    key: &str,
    mut row: ObjectRow,
    cond: &WriteCondition,
    mode: Versioning,
) -> Result<Option<(Vec<u8>, ObjectRow, VersionRef)>> {
    let head = head_of(objects, part, key).await?;
    let floor = head.newest_ts.map_or(0, |t| t + 1);
    let latest = head.latest(key);
    let current = latest
        .as_ref()
        .map(|f| &f.row)
        .filter(|r| !r.is_delete_marker());
    if !cond.holds(current) {
        return Ok(None);
    }
    row.timestamp_msec = now_msec().max(floor).max(row.timestamp_msec);
    let (sort, id) = match mode {
        Versioning::Enabled => (
            version_sort_key(key.as_bytes(), row.timestamp_msec, &row.version),
            VersionRef::Id {
                ts: row.timestamp_msec,
                id: row.version,
            },
        ),
        Versioning::Suspended | Versioning::Off => (key.as_bytes().to_vec(), VersionRef::Null),
    };
    Ok(Some((sort, row, id)))
}

impl Objects {
    /// The latest version of `key` (a delete marker included), or `None`.
    /// In a bucket never versioned, the object row alone (one point read).
    pub async fn latest_version(
        &self,
        bucket: &BucketRow,
        key: &str,
    ) -> Result<Option<FoundVersion>> {
        let part = bucket.id_bytes();
        if bucket.versioning() == Versioning::Off {
            return Ok(self
                .rows()
                .get(&part, key.as_bytes())
                .await?
                .filter(|o| !o.is_deleted())
                .map(|row| FoundVersion {
                    row,
                    id: None,
                    sort: key.as_bytes().to_vec(),
                }));
        }
        Ok(head_of(self.rows(), &part, key).await?.latest(key))
    }

    /// Version `v` of `key` (one point read), or `None` if there is no such
    /// live version. Named by its id even in a bucket never versioned (where
    /// only `null` can be found), as S3 echoes the id asked for.
    pub async fn get_version(
        &self,
        bucket: &BucketRow,
        key: &str,
        v: VersionRef,
    ) -> Result<Option<FoundVersion>> {
        let sort = v.sort_key(key.as_bytes());
        let row = self
            .rows()
            .get(&bucket.id_bytes(), &sort)
            .await?
            .filter(|o| !o.is_deleted());
        Ok(row
            .filter(|o| match v {
                VersionRef::Null => true,
                VersionRef::Id { id, .. } => o.version == id,
            })
            .map(|row| FoundVersion {
                row,
                id: Some(v),
                sort,
            }))
    }

    /// Version `v` of `key`, or its latest version when `v` is `None`.
    pub async fn find_version(
        &self,
        bucket: &BucketRow,
        key: &str,
        v: Option<VersionRef>,
    ) -> Result<Option<FoundVersion>> {
        match v {
            Some(v) => self.get_version(bucket, key, v).await,
            None => self.latest_version(bucket, key).await,
        }
    }

    /// Publishes `row` in a versioned bucket (see [`write_version`]); a
    /// conditional write is a Paxos round (`crate::object_paxos`).
    pub(crate) async fn publish_versioned(
        &self,
        bucket: &BucketRow,
        key: &str,
        row: ObjectRow,
        cond: WriteCondition,
    ) -> Result<(ObjectRow, VersionRef)> {
        let part = bucket.id_bytes();
        let mode = bucket.versioning();
        if cond.is_none() {
            return write_version(self.rows(), &part, key, row, &cond, mode).await;
        }
        self.conditional()
            .publish_version(&part, key, row, &cond, mode)
            .await
    }

    /// S3's DELETE of `key` in any bucket: without `v`, deletes the object
    /// (never versioned), writes a delete marker as a new version (enabled)
    /// or as the null version (suspended); with `v`, removes that version
    /// for good (its blocks are collected), so that the version before it
    /// becomes the latest.
    ///
    /// A version protected by Object Lock is not removed
    /// ([`ModelError::ObjectLocked`]); see [`Objects::delete_version_as`].
    pub async fn delete_version(
        &self,
        bucket: &BucketRow,
        key: &str,
        v: Option<VersionRef>,
    ) -> Result<Deleted> {
        self.delete_version_as(bucket, key, v, false).await
    }

    /// [`Objects::delete_version`], where a removal by id may bypass a
    /// GOVERNANCE retention (`bypass_governance`: the requester asked for
    /// it and may). The row is read (at the read quorum in a cluster) just
    /// before its tombstone is written: a retention or legal hold stored
    /// before the delete started refuses it (crate::object_lock).
    pub async fn delete_version_as(
        &self,
        bucket: &BucketRow,
        key: &str,
        v: Option<VersionRef>,
        bypass_governance: bool,
    ) -> Result<Deleted> {
        let part = bucket.id_bytes();
        let mode = bucket.versioning();
        match (mode, v) {
            (Versioning::Off, None) => {
                let existed = self.tombstone_objects(bucket, vec![key.to_owned()]).await?[0];
                Ok(Deleted {
                    id: None,
                    delete_marker: false,
                    existed,
                })
            }
            (Versioning::Enabled | Versioning::Suspended, None) => {
                let marker = ObjectRow::delete_marker(crate::new_version_id(), 0);
                let (_, id) = write_version(
                    self.rows(),
                    &part,
                    key,
                    marker,
                    &WriteCondition::default(),
                    mode,
                )
                .await?;
                Ok(Deleted {
                    id: Some(id),
                    delete_marker: true,
                    existed: true,
                })
            }
            (_, Some(v)) => {
                let sort = v.sort_key(key.as_bytes());
                let old = self.rows().get(&part, &sort).await?;
                let live = old.as_ref().filter(|o| {
                    !o.is_deleted()
                        && match v {
                            VersionRef::Null => true,
                            VersionRef::Id { id, .. } => o.version == id,
                        }
                });
                let delete_marker = live.is_some_and(|o| o.is_delete_marker());
                let existed = live.is_some();
                if let Some(o) = live {
                    let now = now_msec();
                    if crate::object_lock::removal_blocked(o, now, bypass_governance).is_some() {
                        return Err(ModelError::ObjectLocked);
                    }
                    let ts = now.max(o.timestamp_msec + 1);
                    let tomb = ObjectRow::tombstone(crate::new_version_id(), ts);
                    self.rows().insert_one(&part, &sort, tomb).await?;
                    self.wake_collector();
                }
                Ok(Deleted {
                    id: Some(v),
                    delete_marker,
                    existed,
                })
            }
        }
    }

    /// Replaces the tags of the version `found` (read by
    /// [`Objects::find_version`]); a version removed meanwhile stays removed
    /// (the tags are merged onto that version only).
    pub async fn set_version_tags(
        &self,
        bucket: &BucketRow,
        found: &FoundVersion,
        tags: crate::object::TagSet,
    ) -> Result<()> {
        let mut row = found.row.clone();
        row.tags.update(now_msec(), tags);
        Ok(self
            .rows()
            .insert_one(&bucket.id_bytes(), &found.sort, row)
            .await?)
    }
}
