//! The parts of a completed multipart object: where each part listed at
//! completion begins and ends within the object's version, so that GET and
//! HEAD with `partNumber` read one part and GetObjectAttributes lists them.
//!
//! The `version_part` table: partition = version id (16 bytes), sort key =
//! the part number of the upload (u32, big-endian: rows sort in part
//! order, and a completion's part numbers need not be contiguous). A
//! completion writes its version's rows before it publishes the object, a
//! copy that shares the version's blocks copies them, and the version
//! collector turns them into tombstones with the block entries. A version
//! that was not completed from parts (a plain upload), or was completed by
//! a binary older than this table, has none.

use hangar_table::{Crdt, Schema, max_by_content};
use serde::{Deserialize, Serialize};

use crate::object::StoredChecksum;
use crate::{Blocks, Result, VersionId};

/// One part of a completed object. The derived order is the merge order:
/// rows never change once written but to become tombstones (`deleted`),
/// which win.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionPart {
    /// Set when the version was collected.
    #[serde(default)]
    pub deleted: bool,
    /// Bytes of the part.
    pub size: u64,
    /// Where the part begins in the version (the sum of the sizes of the
    /// parts before it).
    pub offset: u64,
    /// The part's checksum as uploaded (`x-amz-checksum-*` of UploadPart),
    /// when the upload announced an algorithm.
    pub checksum: Option<StoredChecksum>,
}

impl Crdt for VersionPart {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of completed objects' parts.
pub struct VersionPartTable;

impl Schema for VersionPartTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "version_part";
    const PARTITION_LEN: usize = 16;
    type Row = VersionPart;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:version_part");
    const BURIED_TREE: Option<&'static str> = Some("buried:version_part");

    fn is_tombstone(row: &VersionPart) -> bool {
        row.deleted
    }
}

impl Blocks {
    /// Records the parts of `version`, a completed upload's (`parts`: part
    /// number and row, in part order), before the object is published.
    pub(crate) async fn put_parts(
        &self,
        version: VersionId,
        parts: Vec<(u32, VersionPart)>,
    ) -> Result<()> {
        let rows = parts
            .into_iter()
            .map(|(n, p)| (version.to_vec(), n.to_be_bytes().to_vec(), p))
            .collect();
        Ok(self.part_rows().insert(rows).await?)
    }

    /// Part `number` of `version`; `None` when the version has no such
    /// part (or none at all: [`Blocks::parts`] tells which).
    pub async fn part(&self, version: &VersionId, number: u32) -> Result<Option<VersionPart>> {
        Ok(self
            .part_rows()
            .get_local_first(version, &number.to_be_bytes(), |p| !p.deleted)
            .await?
            .filter(|p| !p.deleted))
    }

    /// Up to `limit` parts of `version` numbered more than `after`, in
    /// order.
    pub async fn parts(
        &self,
        version: &VersionId,
        after: u32,
        limit: usize,
    ) -> Result<Vec<(u32, VersionPart)>> {
        let Some(from) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let rows = self
            .part_rows()
            .range_filtered(
                version,
                std::ops::Bound::Included(&from.to_be_bytes()),
                limit,
                |p| !p.deleted,
            )
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(k, p)| Some((u32::from_be_bytes(k.try_into().ok()?), p)))
            .collect())
    }

    /// Gives version `to` the parts of version `from` (a copy that shares
    /// `from`'s blocks), before `to` is published.
    pub(crate) async fn share_parts(&self, from: VersionId, to: VersionId) -> Result<()> {
        let mut after = 0;
        loop {
            let page = self.parts(&from, after, PAGE).await?;
            let Some((last, _)) = page.last() else {
                return Ok(());
            };
            after = *last;
            let full = page.len() == PAGE;
            self.put_parts(to, page).await?;
            if !full {
                return Ok(());
            }
        }
    }

    /// Turns the parts of collected `version` into tombstones.
    pub(crate) async fn drop_parts(&self, version: VersionId) -> Result<()> {
        loop {
            let page = self.parts(&version, 0, PAGE).await?;
            if page.is_empty() {
                return Ok(());
            }
            let tombs = page
                .into_iter()
                .map(|(n, mut p)| {
                    p.deleted = true;
                    (version.to_vec(), n.to_be_bytes().to_vec(), p)
                })
                .collect();
            self.part_rows().insert(tombs).await?;
        }
    }
}

/// Rows read or written at a time when parts are copied or dropped.
const PAGE: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::test_model;

    fn part(size: u64, offset: u64) -> VersionPart {
        VersionPart {
            deleted: false,
            size,
            offset,
            checksum: None,
        }
    }

    /// The bytes doc/table-rows.md shows for a row.
    #[test]
    fn a_row_is_encoded_as_the_documentation_writes_it() {
        let row = VersionPart {
            deleted: false,
            size: 5 << 20,
            offset: 10 << 20,
            checksum: Some(StoredChecksum {
                algorithm: "CRC32".into(),
                value: "q1Fa/w==".into(),
            }),
        };
        let mut want = vec![hangar_table::ROW_FORMAT, 0x84];
        want.extend(b"\xa7deleted\xc2");
        want.extend(b"\xa4size\xce\x00\x50\x00\x00");
        want.extend(b"\xa6offset\xce\x00\xa0\x00\x00");
        want.extend(b"\xa8checksum\x82\xa9algorithm\xa5CRC32\xa5value\xa8q1Fa/w==");
        assert_eq!(hangar_table::encode::<VersionPartTable>(&row), want);
    }

    #[tokio::test]
    async fn parts_are_read_paged_shared_and_dropped() {
        let (_d, model) = test_model().await;
        let blocks = model.blocks();
        let (v, copy, other) = ([7u8; 16], [8u8; 16], [9u8; 16]);
        let parts: Vec<(u32, VersionPart)> = (1..=2500u32)
            .filter(|n| n % 2 == 1)
            .map(|n| (n, part(10, u64::from(n / 2) * 10)))
            .collect();
        blocks.put_parts(v, parts.clone()).await.unwrap();
        blocks
            .put_parts(other, vec![(1, part(5, 0))])
            .await
            .unwrap();

        assert_eq!(blocks.part(&v, 3).await.unwrap(), Some(part(10, 10)));
        assert_eq!(blocks.part(&v, 2).await.unwrap(), None);
        assert_eq!(blocks.parts(&v, 0, 2).await.unwrap(), parts[..2].to_vec());
        assert_eq!(blocks.parts(&v, 3, 1).await.unwrap(), parts[2..3].to_vec());
        assert_eq!(blocks.parts(&v, u32::MAX, 5).await.unwrap(), Vec::new());

        // A copy takes every part, more than a page of them.
        blocks.share_parts(v, copy).await.unwrap();
        assert_eq!(blocks.parts(&copy, 0, usize::MAX).await.unwrap(), parts);

        // Dropped (the version collector's last step, tested in
        // garbage.rs): tombstones, and the other versions' parts stay.
        blocks.drop_parts(v).await.unwrap();
        assert_eq!(blocks.parts(&v, 0, 10).await.unwrap(), Vec::new());
        assert_eq!(blocks.part(&v, 1).await.unwrap(), None);
        let raw = blocks
            .part_rows()
            .local()
            .get(&v, &1u32.to_be_bytes())
            .await
            .unwrap()
            .expect("a tombstone is kept until the tombstone delay");
        assert!(raw.deleted);
        assert_eq!(blocks.parts(&copy, 0, usize::MAX).await.unwrap(), parts);
        assert_eq!(blocks.parts(&other, 0, 10).await.unwrap().len(), 1);
    }
}
