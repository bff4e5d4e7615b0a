//! Block references and reference counts, kept in the metadata store.
//!
//! Three trees, all written inside the caller's group-commit transaction so
//! that a count never disagrees with the rows that reference the block:
//! - `block_ref`: `hash(32) ++ version(16)` → empty: version `version` uses block `hash`;
//! - `block_rc`: `hash(32)` → [`RcRow`]: how many `block_ref` rows name the block;
//! - `block_gc`: `deadline_msec(8, BE) ++ hash(32)` → empty: look at the block
//!   again at `deadline`, and delete it if its count is still zero.

use hangar_db::{DbError, Tx};
use hangar_util::Hash;
use serde::{Deserialize, Serialize};

/// Tree of reference counts.
pub const RC_TREE: &str = "block_rc";
pub(crate) const REF_TREE: &str = "block_ref";
pub(crate) const GC_TREE: &str = "block_gc";

/// The reference count of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RcRow {
    pub count: u64,
    /// When the count last became zero (ms since epoch); `None` while referenced.
    pub zero_since_msec: Option<u64>,
}

impl RcRow {
    pub(crate) fn decode(v: &[u8]) -> Result<RcRow, DbError> {
        rmp_serde::from_slice(v).map_err(|e| DbError::Engine {
            engine: "block_rc row",
            message: e.to_string(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).expect("RcRow encodes")
    }
}

pub(crate) fn read_rc(tx: &Tx<'_>, hash: &Hash) -> Result<Option<RcRow>, DbError> {
    tx.get(RC_TREE, hash.as_bytes())?
        .map(|v| RcRow::decode(&v))
        .transpose()
}

pub(crate) fn gc_key(deadline_msec: u64, hash: &Hash) -> Vec<u8> {
    let mut k = deadline_msec.to_be_bytes().to_vec();
    k.extend_from_slice(hash.as_bytes());
    k
}

fn ref_key(hash: &Hash, version: &[u8; 16]) -> Vec<u8> {
    let mut k = hash.as_bytes().to_vec();
    k.extend_from_slice(version);
    k
}

/// Makes sure a block about to be written has a count row: a new or
/// unreferenced block gets a zero count and a GC visit after `grace`, so a
/// block written by an upload that never completes is reclaimed.
pub(crate) fn touch(tx: &mut Tx<'_>, hash: &Hash, now: u64, grace: u64) -> Result<(), DbError> {
    match read_rc(tx, hash)? {
        Some(rc) if rc.count > 0 => {}
        _ => {
            let row = RcRow {
                count: 0,
                zero_since_msec: Some(now),
            };
            tx.put(RC_TREE, hash.as_bytes().to_vec(), row.encode());
            tx.put(GC_TREE, gc_key(now + grace, hash), Vec::new());
        }
    }
    Ok(())
}

/// Records that `version` uses block `hash` (idempotent).
pub fn add_ref(tx: &mut Tx<'_>, hash: &Hash, version: &[u8; 16]) -> Result<(), DbError> {
    let k = ref_key(hash, version);
    if tx.get(REF_TREE, &k)?.is_some() {
        return Ok(());
    }
    tx.put(REF_TREE, k, Vec::new());
    let mut rc = read_rc(tx, hash)?.unwrap_or_default();
    rc.count += 1;
    rc.zero_since_msec = None;
    tx.put(RC_TREE, hash.as_bytes().to_vec(), rc.encode());
    Ok(())
}

/// Records that `version` no longer uses block `hash` (idempotent); a block
/// left unreferenced is scheduled for deletion after `grace` ms.
pub fn remove_ref(
    tx: &mut Tx<'_>,
    hash: &Hash,
    version: &[u8; 16],
    now: u64,
    grace: u64,
) -> Result<(), DbError> {
    let k = ref_key(hash, version);
    if tx.get(REF_TREE, &k)?.is_none() {
        return Ok(());
    }
    tx.delete(REF_TREE, k);
    let mut rc = read_rc(tx, hash)?.unwrap_or_default();
    rc.count = rc.count.saturating_sub(1);
    if rc.count == 0 {
        rc.zero_since_msec = Some(now);
        tx.put(GC_TREE, gc_key(now + grace, hash), Vec::new());
    }
    tx.put(RC_TREE, hash.as_bytes().to_vec(), rc.encode());
    Ok(())
}
