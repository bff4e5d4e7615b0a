//! Stored and replicated table rows: the row decoder every read and every
//! row received from a peer goes through (`hangar_table::decode`: format
//! byte, then MessagePack, old formats converted) for each table of the
//! model and the block layer, the CRDT merge a replica then runs on two
//! such rows, the block-count rows, and a block as stored or received
//! (`EncodedBlock::decode`, bounded by the block size as its callers are).
//!
//! Input: one byte picks the table, two bytes give the length of the first
//! row, then the first row and the second.

#![no_main]

use bytes::Bytes;
use hangar_block::{BlockRefTable, EncodedBlock, RcRow};
use hangar_fuzz as _;
use hangar_model::{block_list, bucket, key, multipart, object};
use hangar_table::{Crdt, Schema, decode};
use hangar_util::Hash;
use libfuzzer_sys::fuzz_target;

fn rows<S: Schema>(a: &[u8], b: &[u8]) {
    let (Ok(mut ra), Ok(rb)) = (decode::<S>(a), decode::<S>(b)) else {
        let _ = decode::<S>(b);
        return;
    };
    let _ = S::is_tombstone(&ra);
    let mut rb2 = rb.clone();
    rb2.merge(&ra);
    ra.merge(&rb);
    let again = ra.clone();
    ra.merge(&again);
}

fuzz_target!(|data: &[u8]| {
    let [which, l0, l1, rest @ ..] = data else {
        return;
    };
    let split = usize::from(u16::from_le_bytes([*l0, *l1])).min(rest.len());
    let (a, b) = rest.split_at(split);
    match which % 9 {
        0 => rows::<object::ObjectTable>(a, b),
        1 => rows::<block_list::VersionTable>(a, b),
        2 => rows::<multipart::MpuTable>(a, b),
        3 => rows::<multipart::PartTable>(a, b),
        4 => rows::<key::KeyTable>(a, b),
        5 => rows::<bucket::BucketTable>(a, b),
        6 => rows::<BlockRefTable>(a, b),
        7 => {
            let _ = RcRow::decode(a);
        }
        _ => {
            let block = EncodedBlock {
                data: Bytes::copy_from_slice(b),
                compressed: which & 0x80 != 0,
                plain_len: u64::from(u16::from_le_bytes([*l0, *l1])) * 16,
            };
            let _ = block.decode(&Hash::of(a));
        }
    }
});
