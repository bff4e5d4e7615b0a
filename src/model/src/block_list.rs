//! A version's block list: one row per block, so that storing a large object
//! never rewrites a growing list (Garage's single-row list costs O(n²)).
//!
//! Each entry carries the byte offset of its block within the version, so
//! that a range read finds its first block with a binary search over block
//! indexes ([`crate::Blocks::find`]) instead of reading the whole list.

use std::ops::Range;

use hangar_table::{Crdt, Schema, max_by_content};
use hangar_util::Hash;
use serde::{Deserialize, Serialize};

use crate::Blocks;
use crate::{ModelError, Result, VersionId};

/// One block of a version. The derived order is the merge order: a
/// tombstone (`deleted`) wins over the live entry it replaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockEntry {
    /// Set when the version was collected and its reference to the block
    /// dropped; the row stays as a tombstone, with the hash it named.
    #[serde(default)]
    pub deleted: bool,
    pub hash: Hash,
    /// Plain (uncompressed) length of the block.
    pub size: u64,
    /// Byte offset of the block within the version (the sum of the sizes of
    /// the blocks before it). Absent, so 0, in rows of format 1: blocks are
    /// never empty, so an entry of index > 0 with offset 0 was written by
    /// format 1, and its version's offsets are unknown
    /// ([`BlockEntry::has_offset`]).
    #[serde(default)]
    pub offset: u64,
}

impl BlockEntry {
    /// Whether the entry, number `index` of its version, knows its offset.
    pub fn has_offset(&self, index: u32) -> bool {
        index == 0 || self.offset > 0
    }
}

impl Crdt for BlockEntry {
    fn merge(&mut self, other: &Self) {
        // A version's block i never changes once written, except to become
        // a tombstone; the content order settles anything else the same way
        // on every replica.
        max_by_content(self, other);
    }
}

/// The version table: partition = version id (16 bytes), sort key = block
/// index (u32, big-endian, so rows sort in block order).
pub struct VersionTable;

impl Schema for VersionTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "version";
    const PARTITION_LEN: usize = 16;
    type Row = BlockEntry;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:version");
    const BURIED_TREE: Option<&'static str> = Some("buried:version");

    fn is_tombstone(row: &BlockEntry) -> bool {
        row.deleted
    }
}

/// The result of [`crate::Blocks::find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockLookup {
    /// The block holding the byte: its index and entry.
    Found(u32, BlockEntry),
    /// The version's entries have no offsets (written by row format 1):
    /// only a scan from block 0 can place its bytes.
    NoOffsets,
}

/// The slice of one block a read sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockSlice {
    pub index: u32,
    pub hash: Hash,
    /// Bytes `from..to` of the block's plain data.
    pub from: usize,
    pub to: usize,
}

/// The binary search of [`crate::Blocks::find`], over any reader of entries
/// (`probe(i)` reads entry `i`): the last block of `0..count` whose offset
/// is at most `byte`. `count` must be at least 1.
///
/// Why a binary search with point reads rather than a range scan: the sort
/// key of the version table is the block index, not the byte offset, so no
/// scan (forward or reverse) can seek to a byte; and block sizes are not
/// uniform (a completed multipart upload has a short last block per part),
/// so the index cannot be computed from the block size either. Offsets
/// grow with the index, so ⌈log2 count⌉ point reads find the block: 17 for a
/// 100 GiB object of 1 MiB blocks, instead of reading its 100 000 rows.
pub(crate) async fn search_block<F>(
    count: u32,
    byte: u64,
    mut probe: impl FnMut(u32) -> F,
) -> Result<BlockLookup>
where
    F: Future<Output = Result<BlockEntry>>,
{
    assert!(count > 0, "search in an empty version");
    // Invariant: the block sought is in lo..hi, and `found` is entry lo
    // when it has been read.
    let (mut lo, mut hi) = (0u32, count);
    let mut found = None;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let e = probe(mid).await?;
        if !e.has_offset(mid) {
            return Ok(BlockLookup::NoOffsets);
        }
        if e.offset <= byte {
            lo = mid;
            found = Some(e);
        } else {
            hi = mid;
        }
    }
    let e = match found {
        Some(e) => e,
        None => probe(lo).await?,
    };
    Ok(BlockLookup::Found(lo, e))
}

fn corrupt(version: &VersionId, what: String) -> ModelError {
    ModelError::Corrupt(format!("version {}: {what}", hex::encode(version)))
}

/// Rows read at once when a read walks a block list.
const PAGE: usize = 256;

impl Blocks {
    /// The block of `version` (of `count` blocks) that holds byte `byte`,
    /// found with O(log count) point reads; or [`BlockLookup::NoOffsets`]
    /// for a version written by row format 1.
    pub async fn find(&self, version: &VersionId, count: u32, byte: u64) -> Result<BlockLookup> {
        let table = self.rows().clone();
        let version = *version;
        // Each probe owns what it reads with (a future borrowing the
        // closure's captures would not be `Send` for every lifetime).
        search_block(count, byte, |i: u32| {
            let table = table.clone();
            async move {
                table
                    .get_local_first(&version, &i.to_be_bytes(), |e| !e.deleted)
                    .await?
                    .ok_or_else(|| corrupt(&version, format!("block {i} of {count} is missing")))
            }
        })
        .await
    }

    /// The slices of the blocks of `version` (of `count` blocks and `size`
    /// bytes) that make up bytes `range`, in order. Only the entries of the
    /// blocks overlapping the range are read, plus the O(log count) reads of
    /// the search for the first one; a version written by row format 1 (no
    /// offsets) is scanned from block 0 instead.
    pub async fn for_range(
        &self,
        version: &VersionId,
        count: u32,
        size: u64,
        range: Range<u64>,
    ) -> Result<Vec<BlockSlice>> {
        if range.start >= range.end {
            return Ok(Vec::new());
        }
        if range.end > size || count == 0 {
            return Err(corrupt(
                version,
                format!("bytes {range:?} read from {count} blocks of {size} bytes"),
            ));
        }
        let (mut index, mut offset) = (0u32, 0u64);
        // The largest block size seen, to size the pages read.
        let mut block_size = None;
        if range.start > 0
            && let BlockLookup::Found(i, e) = self.find(version, count, range.start).await?
        {
            (index, offset) = (i, e.offset);
            block_size = Some(e.size);
        }
        let mut out = Vec::new();
        loop {
            // Enough rows for the rest of the range if the blocks are as
            // large as the largest seen (only the last block of an upload
            // or of a part is shorter); a scan of unknown blocks from 0
            // starts with one row.
            let want = match block_size {
                Some(s) if s > 0 => ((range.end - offset).div_ceil(s) as usize).clamp(1, PAGE),
                _ if range.start == 0 => 1,
                _ => PAGE,
            };
            // Every entry of the page, live and in order, from this node's
            // replica, or a quorum read.
            let expect = want.min(count.saturating_sub(index) as usize);
            let page = self
                .rows()
                .range_numbered_local_first(version, index, want, |rows| {
                    rows.len() == expect
                        && rows
                            .iter()
                            .enumerate()
                            .all(|(k, (i, e))| *i == index + k as u32 && !e.deleted)
                })
                .await?;
            if page.is_empty() {
                return Err(corrupt(
                    version,
                    format!("blocks end at byte {offset}, before byte {}", range.end),
                ));
            }
            for (i, e) in page {
                if i != index {
                    return Err(corrupt(version, format!("block {index} is missing")));
                }
                if e.has_offset(i) && e.offset != offset {
                    return Err(corrupt(
                        version,
                        format!("block {i} at offset {} instead of {offset}", e.offset),
                    ));
                }
                block_size = block_size.max(Some(e.size));
                let end = offset + e.size;
                if end > range.start {
                    out.push(BlockSlice {
                        index: i,
                        hash: e.hash,
                        from: (range.start.max(offset) - offset) as usize,
                        to: (range.end.min(end) - offset) as usize,
                    });
                }
                if i + 1 == count && end != size {
                    return Err(corrupt(
                        version,
                        format!("{end} bytes of blocks but a size of {size}"),
                    ));
                }
                (index, offset) = (i + 1, end);
                if end >= range.end {
                    return Ok(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;
    use crate::test_support::test_model;
    use hangar_table::Replica;
    use hangar_table::TableError;

    /// Block sizes like a completed multipart upload's: parts of four
    /// 100-byte blocks then a 37-byte one, and a 5-byte last block.
    fn sizes(n: u32) -> Vec<u64> {
        (0..n)
            .map(|i| match i {
                i if i + 1 == n => 5,
                i if i % 5 == 4 => 37,
                _ => 100,
            })
            .collect()
    }

    fn entries(sizes: &[u64], with_offsets: bool) -> Vec<BlockEntry> {
        let mut offset = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let e = BlockEntry {
                    deleted: false,
                    hash: Hash::of(&(i as u32).to_be_bytes()),
                    size,
                    offset: if with_offsets { offset } else { 0 },
                };
                offset += size;
                e
            })
            .collect()
    }

    /// The index of the block holding byte `b`, by a linear scan.
    fn linear(sizes: &[u64], b: u64) -> u32 {
        let mut end = 0;
        for (i, s) in sizes.iter().enumerate() {
            end += s;
            if b < end {
                return i as u32;
            }
        }
        panic!("byte {b} beyond the version");
    }

    #[tokio::test]
    async fn the_search_finds_the_block_in_log_n_reads() {
        for n in [1u32, 2, 3, 7, 64, 1000, 4099] {
            let sizes = sizes(n);
            let es = entries(&sizes, true);
            let total: u64 = sizes.iter().sum();
            let bound = 32 - (n - 1).leading_zeros() + 1; // ⌈log2 n⌉ + 1
            let mut bytes: Vec<u64> = es.iter().flat_map(|e| [e.offset, e.offset + 1]).collect();
            bytes.extend(es.iter().map(|e| e.offset + e.size - 1));
            bytes.push(total - 1);
            for b in bytes.into_iter().filter(|&b| b < total) {
                let reads = Rc::new(Cell::new(0u32));
                let (es2, r2) = (es.clone(), reads.clone());
                let found = search_block(n, b, move |i| {
                    r2.set(r2.get() + 1);
                    let e = es2[i as usize].clone();
                    async move { Ok(e) }
                })
                .await
                .unwrap();
                let want = linear(&sizes, b);
                assert_eq!(
                    found,
                    BlockLookup::Found(want, es[want as usize].clone()),
                    "n={n} b={b}"
                );
                assert!(reads.get() <= bound, "n={n}: {} reads", reads.get());
            }
        }
    }

    #[tokio::test]
    async fn the_search_detects_entries_without_offsets() {
        let es = entries(&sizes(10), false);
        let found = search_block(10, 250, |i| {
            let e = es[i as usize].clone();
            async move { Ok(e) }
        })
        .await
        .unwrap();
        assert_eq!(found, BlockLookup::NoOffsets);
    }

    /// Writes the entries of version `v` as rows.
    async fn put_entries(model: &crate::Model, v: VersionId, es: Vec<BlockEntry>) {
        model
            .db()
            .write(move |tx| {
                for (i, e) in es.iter().enumerate() {
                    Replica::<VersionTable>::tx_insert(tx, &v, &(i as u32).to_be_bytes(), e)?;
                }
                Ok::<_, TableError>(())
            })
            .await
            .unwrap();
    }

    /// What `Blocks::for_range` must return, computed from the sizes.
    fn expected(sizes: &[u64], es: &[BlockEntry], r: Range<u64>) -> Vec<BlockSlice> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, &s) in sizes.iter().enumerate() {
            let end = start + s;
            if end > r.start && start < r.end {
                out.push(BlockSlice {
                    index: i as u32,
                    hash: es[i].hash,
                    from: (r.start.max(start) - start) as usize,
                    to: (r.end.min(end) - start) as usize,
                });
            }
            start = end;
        }
        out
    }

    #[tokio::test]
    async fn ranges_of_a_version_with_many_blocks() {
        let (_d, model) = test_model().await;
        let n = 700u32; // more than a page of rows
        let sizes = sizes(n);
        let total: u64 = sizes.iter().sum();
        let (new, old) = ([1u8; 16], [2u8; 16]);
        let (es_new, es_old) = (entries(&sizes, true), entries(&sizes, false));
        put_entries(&model, new, es_new.clone()).await;
        put_entries(&model, old, es_old).await;

        let o = |i: usize| es_new[i].offset;
        let ranges = [
            0..total,                 // everything
            0..1,                     // first byte
            total - 1..total,         // last byte
            total - 6..total,         // the last two blocks, from the last byte of one
            o(1)..o(2),               // exactly block 1
            o(350)..o(351) + 1,       // a block boundary on each side
            o(350) - 1..o(350) + 1,   // across a boundary
            o(351) + 10..o(351) + 20, // inside a block
            o(4) + 36..o(5) + 1,      // the end of a short block
            o(3)..total,              // from a boundary to the end
            o(699)..total,            // the last block
            o(600) + 50..o(690),      // more than a page of rows
        ];
        for r in ranges {
            let want = expected(&sizes, &es_new, r.clone());
            let got = model
                .blocks()
                .for_range(&new, n, total, r.clone())
                .await
                .unwrap();
            assert_eq!(got, want, "range {r:?}");
            // Format 1: no offsets, the scan from block 0 gives the same slices.
            let got = model
                .blocks()
                .for_range(&old, n, total, r.clone())
                .await
                .unwrap();
            assert_eq!(got, want, "range {r:?} of the legacy version");
        }
        assert!(
            model
                .blocks()
                .for_range(&new, n, total, 5..5)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            model.blocks().find(&new, n, o(350)).await.unwrap(),
            BlockLookup::Found(350, es_new[350].clone())
        );
        assert_eq!(
            model.blocks().find(&new, n, o(350) - 1).await.unwrap(),
            BlockLookup::Found(349, es_new[349].clone())
        );
        assert_eq!(
            model.blocks().find(&old, n, 1000).await.unwrap(),
            BlockLookup::NoOffsets
        );
    }

    #[tokio::test]
    async fn inconsistent_block_lists_are_errors() {
        let (_d, model) = test_model().await;
        let sizes = sizes(20);
        let total: u64 = sizes.iter().sum();
        let v = [3u8; 16];
        let mut es = entries(&sizes, true);
        es.remove(12); // block 12 missing: rows 12..18 hold blocks 13..19
        put_entries(&model, v, es).await;
        for r in [0..total, 1000..total, total - 1..total] {
            let e = model.blocks().for_range(&v, 20, total, r.clone()).await;
            assert!(matches!(e, Err(ModelError::Corrupt(_))), "{r:?}: {e:?}");
        }
        // A size larger than the blocks.
        let e = model
            .blocks()
            .for_range(&v, 20, total + 1, 0..total + 1)
            .await;
        assert!(matches!(e, Err(ModelError::Corrupt(_))));
    }

    #[tokio::test]
    async fn stored_and_shared_blocks_carry_offsets() {
        let (_d, model) = test_model().await;
        let (a, b, c) = ([4u8; 16], [5u8; 16], [6u8; 16]);
        // Uploads store blocks with their offset.
        for (i, (off, len)) in [(0u64, 10usize), (10, 10), (20, 3)].into_iter().enumerate() {
            let data = bytes::Bytes::from(vec![i as u8; len]);
            model.blocks().store(a, i as u32, off, data).await.unwrap();
        }
        let got = model.blocks().list(&a, 0, 10).await.unwrap();
        let offsets: Vec<_> = got.iter().map(|(_, e)| e.offset).collect();
        assert_eq!(offsets, [0, 10, 20]);
        // A source without offsets (format 1), its blocks on disk.
        let old = entries(&[7, 7], false);
        for e in &old {
            let data = bytes::Bytes::from(vec![0u8; e.size as usize]);
            model
                .blocks()
                .local()
                .store(e.hash, data, b, |_| Ok(()))
                .await
                .unwrap();
        }
        put_entries(&model, b, old).await;
        // Completion: a's blocks then b's, numbered and placed after a's.
        model.blocks().share_at(a, 3, c, 0, 0).await.unwrap();
        model.blocks().share_at(b, 2, c, 3, 23).await.unwrap();
        let got = model.blocks().list(&c, 0, 10).await.unwrap();
        let placed: Vec<_> = got.iter().map(|(i, e)| (*i, e.offset, e.size)).collect();
        assert_eq!(
            placed,
            [(0, 0, 10), (1, 10, 10), (2, 20, 3), (3, 23, 7), (4, 30, 7)]
        );
        let slices = model.blocks().for_range(&c, 5, 37, 22..31).await.unwrap();
        let idx: Vec<_> = slices.iter().map(|s| (s.index, s.from, s.to)).collect();
        assert_eq!(idx, [(2, 2, 3), (3, 0, 7), (4, 0, 1)]);
    }
}
