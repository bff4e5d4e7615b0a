//! Where the versions of an object live in the object table, and how a
//! client names them.
//!
//! The row at sort key `key` is the object's `null` version: the only row
//! of an unversioned bucket (unchanged from before versioning), the row
//! every write of a suspended bucket replaces, and in an enabled bucket the
//! version written before versioning was enabled. Each version with an id
//! is a further row at
//!
//! ```text
//! key ++ 0x00 ++ (u64::MAX − timestamp_msec) BE (8) ++ version id (16)
//! ```
//!
//! so that all versions of a key sort right after its null row, newest
//! first, before any other key (keys may not contain U+0000). The id a
//! client sees, [`VersionRef::Id`], is 48 hex digits of the timestamp (8
//! bytes BE) and the version id: from it the sort key is rebuilt, so
//! reading a given version is one point read.
//!
//! The latest version of a key is the newer of its live null row and its
//! first live versioned row (tombstones skipped); of equal timestamps the
//! versioned row is the newer ([`newer_is_null`]).

use crate::VersionId;

/// The byte between a key and the rest of a version's sort key.
pub const SEPARATOR: u8 = 0x00;

/// Bytes after the separator in a version's sort key.
const SUFFIX_LEN: usize = 8 + 16;

/// A version as a client names it (`versionId`, `x-amz-version-id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionRef {
    /// The `null` version: the row at the key itself.
    Null,
    /// A version with an id: published at `ts`, with this version id.
    Id { ts: u64, id: VersionId },
}

impl VersionRef {
    /// Parses a client's version id: `null`, or 48 hex digits.
    pub fn parse(s: &str) -> Option<VersionRef> {
        if s == "null" {
            return Some(VersionRef::Null);
        }
        if s.len() != 2 * SUFFIX_LEN {
            return None;
        }
        let mut b = [0u8; SUFFIX_LEN];
        hex::decode_to_slice(s, &mut b).ok()?;
        let ts = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
        let id = b[8..].try_into().expect("16 bytes");
        Some(VersionRef::Id { ts, id })
    }

    /// The sort key of this version of `key`.
    pub fn sort_key(&self, key: &[u8]) -> Vec<u8> {
        match self {
            VersionRef::Null => key.to_vec(),
            VersionRef::Id { ts, id } => version_sort_key(key, *ts, id),
        }
    }

    /// The version a row at sort key `sort`, of version id `version`, is.
    pub fn of_row(sort: &[u8], version: &VersionId) -> VersionRef {
        match split_sort_key(sort).1 {
            Some(_) => VersionRef::Id {
                ts: row_ts(sort),
                id: *version,
            },
            None => VersionRef::Null,
        }
    }
}

/// The timestamp in a version's sort key.
fn row_ts(sort: &[u8]) -> u64 {
    let s = &sort[sort.len() - SUFFIX_LEN..];
    u64::MAX - u64::from_be_bytes(s[..8].try_into().expect("8 bytes"))
}

impl std::fmt::Display for VersionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionRef::Null => f.write_str("null"),
            VersionRef::Id { ts, id } => {
                write!(f, "{}{}", hex::encode(ts.to_be_bytes()), hex::encode(id))
            }
        }
    }
}

/// The sort key of version `id` of `key`, published at `ts`.
pub fn version_sort_key(key: &[u8], ts: u64, id: &VersionId) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1 + SUFFIX_LEN);
    k.extend_from_slice(key);
    k.push(SEPARATOR);
    k.extend_from_slice(&(u64::MAX - ts).to_be_bytes());
    k.extend_from_slice(id);
    k
}

/// The first sort key of `key`'s versioned rows.
pub fn versions_start(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(SEPARATOR);
    k
}

/// The first sort key after every row of `key` (its null row and its
/// versions): where a scan skips to once it is done with `key`.
pub fn after_versions(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(SEPARATOR + 1);
    k
}

/// The first sort key of `key`'s versions published before `ts` (older
/// than a version of timestamp `ts`); `None` if there can be none.
pub fn versions_older_than(key: &[u8], ts: u64) -> Option<Vec<u8>> {
    let inv = (u64::MAX - ts).checked_add(1)?;
    let mut k = versions_start(key);
    k.extend_from_slice(&inv.to_be_bytes());
    Some(k)
}

/// Splits a sort key of a versioned bucket into the object key and, for a
/// versioned row, its (timestamp, version id). A key is a versioned row
/// when its first 0x00 byte is followed by exactly 24 bytes (new keys may
/// not contain U+0000; an older key of that exact shape in a bucket later
/// versioned would read as a version).
pub fn split_sort_key(sort: &[u8]) -> (&[u8], Option<(u64, VersionId)>) {
    match sort.iter().position(|&b| b == SEPARATOR) {
        Some(p) if sort.len() - p - 1 == SUFFIX_LEN => {
            let ts = row_ts(sort);
            let id = sort[p + 1 + 8..].try_into().expect("16 bytes");
            (&sort[..p], Some((ts, id)))
        }
        _ => (sort, None),
    }
}

/// Whether the null row (published at `null_ts`) is newer than a versioned
/// row published at `version_ts`: of equal timestamps, the versioned row is
/// the newer, the same on every node.
pub fn newer_is_null(null_ts: u64, version_ts: u64) -> bool {
    null_ts > version_ts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_round_trip_and_rebuild_the_sort_key() {
        let r = VersionRef::Id {
            ts: 1_700_000_000_123,
            id: [7; 16],
        };
        let s = r.to_string();
        assert_eq!(s.len(), 48);
        assert_eq!(VersionRef::parse(&s), Some(r));
        assert_eq!(VersionRef::parse("null"), Some(VersionRef::Null));
        for bad in ["", "nul", "x", &"g".repeat(48), &"0".repeat(47), &s[..46]] {
            assert_eq!(VersionRef::parse(bad), None, "{bad}");
        }
        let sort = r.sort_key(b"photos/a.jpg");
        assert_eq!(
            split_sort_key(&sort),
            (&b"photos/a.jpg"[..], Some((1_700_000_000_123, [7; 16])))
        );
        assert_eq!(
            split_sort_key(b"photos/a.jpg"),
            (&b"photos/a.jpg"[..], None)
        );
        // A key with a 0x00 not followed by 24 bytes is a key.
        assert_eq!(split_sort_key(b"a\0b"), (&b"a\0b"[..], None));
    }

    #[test]
    fn versions_sort_newest_first_between_their_key_and_the_next() {
        let key = b"k";
        let mut sorts = [
            b"k".to_vec(),
            b"k\x01".to_vec(),
            b"j\xff".to_vec(),
            b"ka".to_vec(),
            version_sort_key(key, 5, &[1; 16]),
            version_sort_key(key, 9, &[0; 16]),
            version_sort_key(key, 9, &[2; 16]),
            version_sort_key(key, 1, &[9; 16]),
        ];
        sorts.sort();
        let order: Vec<_> = sorts.iter().map(|s| split_sort_key(s)).collect();
        assert_eq!(order[0], (&b"j\xff"[..], None));
        assert_eq!(order[1], (&b"k"[..], None));
        assert_eq!(order[2], (&b"k"[..], Some((9, [0; 16]))));
        assert_eq!(order[3], (&b"k"[..], Some((9, [2; 16]))));
        assert_eq!(order[4], (&b"k"[..], Some((5, [1; 16]))));
        assert_eq!(order[5], (&b"k"[..], Some((1, [9; 16]))));
        assert_eq!(order[6], (&b"k\x01"[..], None));
        assert_eq!(order[7], (&b"ka"[..], None));
        assert!(versions_start(key) < sorts[2] && sorts[5] < after_versions(key));
        // Older than 5: the version at 1 only.
        let from = versions_older_than(key, 5).unwrap();
        assert!(from > version_sort_key(key, 5, &[0xff; 16]));
        assert!(from <= version_sort_key(key, 4, &[0; 16]));
        assert_eq!(versions_older_than(key, 0), None);
    }
}
