//! Row format 11 (doc/table-rows.md): an object version or a multipart
//! upload encrypted with SSE-C is written with format byte 11 and its
//! `sse_c` record appended to the map, so a binary of an older format
//! refuses it instead of dropping the record (and serving sealed bytes as
//! the object); every other row keeps its format byte for byte. Sealed
//! blocks are named by the hash of what is stored, and their entries count
//! plaintext bytes.

use crate::row_format::{OBJECT_LOCK_ROW_FORMAT, SSE_C_ROW_FORMAT};
use hangar_table::{Lww, ROW_FORMAT, encode};
use hangar_util::Hash;

use crate::multipart::MpuTable;
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::sse_c::{CustomerKey, SEAL_OVERHEAD, SseC};
use crate::test_support::{fixstr as s, test_model};

fn record() -> SseC {
    SseC {
        algorithm: "AES256".into(),
        salt: [0x11; 16],
        check: Hash([0x22; 32]),
        managed: None,
    }
}

/// a5 "sse_c" 83 a9 "algorithm" a6 "AES256" a4 "salt" c4 10 <16 bytes>
/// a5 "check" c4 20 <32 bytes>
fn record_bytes() -> Vec<u8> {
    let mut t = s("sse_c");
    t.push(0x83);
    t.extend(s("algorithm"));
    t.extend(s("AES256"));
    t.extend(s("salt"));
    t.extend([0xc4, 0x10]);
    t.extend([0x11; 16]);
    t.extend(s("check"));
    t.extend([0xc4, 0x20]);
    t.extend([0x22; 32]);
    t
}

fn object() -> ObjectRow {
    let mut r = ObjectRow::tombstone([5; 16], 1);
    r.data = ObjectData::Inline(b"sealed bytes".to_vec());
    r
}

#[test]
fn an_encrypted_version_is_format_11_with_its_record_at_the_end() {
    let plain = object();
    let bytes = encode::<ObjectTable>(&plain);
    assert_eq!(bytes[0], ROW_FORMAT);
    assert_eq!(bytes[1], 0x88, "the 8 fields of format 2");
    assert!(!bytes.windows(7).any(|w| w == s("sse_c").as_slice()));

    let mut sealed = plain.clone();
    sealed.sse_c = Some(record());
    let v = encode::<ObjectTable>(&sealed);
    assert_eq!(v[0], SSE_C_ROW_FORMAT);
    assert_eq!(v[1], 0x89, "the 8 fields of format 2, then sse_c");
    let tail = record_bytes();
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(&v[2..v.len() - tail.len()], &bytes[2..]);
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), sealed);

    // With a lock too: format 11, which includes 8.
    sealed.legal_hold = Lww::new(0, true);
    let v = encode::<ObjectTable>(&sealed);
    assert_eq!(v[0], SSE_C_ROW_FORMAT);
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), sealed);
    sealed.sse_c = None;
    assert_eq!(encode::<ObjectTable>(&sealed)[0], OBJECT_LOCK_ROW_FORMAT);
}

#[test]
fn an_encrypted_upload_is_format_11() {
    let mut m = crate::test_support::plain_upload();
    assert_eq!(encode::<MpuTable>(&m)[0], ROW_FORMAT);
    m.sse_c = Some(record());
    let v = encode::<MpuTable>(&m);
    assert_eq!(v[0], SSE_C_ROW_FORMAT);
    assert!(v.ends_with(&record_bytes()), "{v:02x?}");
    assert_eq!(hangar_table::decode::<MpuTable>(&v).unwrap(), m);
}

#[tokio::test]
async fn sealed_blocks_are_named_by_what_is_stored_and_count_plaintext() {
    let (d, model) = test_model().await;
    let plain = vec![b'x'; 10_000];
    let (ka, kb) = (CustomerKey::new([1; 32]), CustomerKey::new([2; 32]));
    let (ra, rb) = (SseC::new(&ka), SseC::new(&kb));
    let (va, vb) = ([0xa; 16], [0xb; 16]);
    for (v, r, k) in [(va, &ra, &ka), (vb, &rb, &kb)] {
        let sealed = bytes::Bytes::from(r.seal(k, &plain));
        model
            .blocks()
            .store_sealed(v, 0, 0, plain.len() as u64, sealed)
            .await
            .unwrap();
    }
    let a = model.blocks().list(&va, 0, 10).await.unwrap();
    let b = model.blocks().list(&vb, 0, 10).await.unwrap();
    assert_eq!(
        a[0].1.size,
        plain.len() as u64,
        "the entry counts plaintext"
    );
    assert_ne!(a[0].1.hash, b[0].1.hash, "no deduplication across keys");
    assert_ne!(a[0].1.hash, Hash::of(&plain));
    let stored = model.blocks().read(a[0].1.hash).await.unwrap();
    assert_eq!(stored.len(), plain.len() + SEAL_OVERHEAD);
    assert_eq!(Hash::of(&stored), a[0].1.hash);
    assert_eq!(ra.open(&ka, &stored).unwrap(), plain);
    // Stored as sealed, never compressed (nor named .zst).
    let files: Vec<_> = walk(&d.path().join("data"));
    assert_eq!(files.len(), 2);
    assert!(files.iter().all(|f| !f.ends_with(".zst")));
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.to_string_lossy().into_owned());
        }
    }
    out
}
