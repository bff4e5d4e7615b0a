//! Row format 18 (doc/table-rows.md): a key row carrying an owner
//! identity the operator set (`canonical_id`, `display_name`) is written
//! with format byte 18 and the registers appended to its map, so a binary
//! of format 17 refuses it instead of dropping the identity on its next
//! merge (which would change the owner every listing and ACL shows); every
//! other key row keeps its format byte for byte.

use hangar_table::{ROW_FORMAT, Schema, encode};

use crate::key::{KeyRow, KeyTable, derived_canonical_id};
use crate::row_format::{
    KEY_EXPIRY_ROW_FORMAT, OWNER_IDENTITY_ROW_FORMAT, PARTITIONED_LOG_ROW_FORMAT,
};
use crate::test_support::{fixstr as s, test_model};

#[test]
fn a_key_with_an_identity_is_format_18_and_format_17_readers_refuse_it() {
    let mut k = KeyRow::new("GK000000000000000000000001", "secret-secret-00", "k", 4);
    assert_eq!(encode::<KeyTable>(&k)[0], ROW_FORMAT);
    k.expires_msec.update(5, Some(300));
    assert_eq!(encode::<KeyTable>(&k)[0], KEY_EXPIRY_ROW_FORMAT);
    k.display_name.update(6, Some("Ann".into()));
    let v = encode::<KeyTable>(&k);
    assert_eq!(v[0], OWNER_IDENTITY_ROW_FORMAT);
    assert_eq!(v[1], 0x89, "the 8 fields of format 5, then display_name");
    // ac "display_name" 82 a2 "ts" 06 a5 "value" a3 "Ann", at the end.
    let mut tail = s("display_name");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x06);
    tail.extend(s("value"));
    tail.extend(s("Ann"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<KeyTable>(&v).unwrap(), k);
    k.canonical_id.update(7, Some("ann-1".into()));
    let v = encode::<KeyTable>(&k);
    assert_eq!(v[1], 0x8a, "canonical_id before display_name");
    assert_eq!(hangar_table::decode::<KeyTable>(&v).unwrap(), k);

    struct Format17;
    impl Schema for Format17 {
        const NEWEST_FORMAT: u8 = PARTITIONED_LOG_ROW_FORMAT;
        const TREE: &'static str = KeyTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = KeyRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &KeyRow) -> u8 {
            PARTITIONED_LOG_ROW_FORMAT
        }
    }
    let e = hangar_table::decode::<Format17>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 18"), "{e}");
    // Cleared later: still format 18 (the clearing must replicate).
    k.canonical_id.update(8, None);
    k.display_name.update(8, None);
    assert_eq!(encode::<KeyTable>(&k)[0], OWNER_IDENTITY_ROW_FORMAT);
}

#[test]
fn the_derived_canonical_id_is_64_hex_digits_stable_and_not_the_key_id() {
    let id = "GK000000000000000000000001";
    let c = derived_canonical_id(id);
    assert_eq!(c.len(), 64);
    assert!(c.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(!c.contains("GK"));
    // Every node and every release derives the same one: it is not stored.
    assert_eq!(
        c,
        "c71fdcda1eede040e65afae489f2c8fe9be54d02c5fbc39fb7538fc5a026e6d5"
    );
    assert_ne!(c, derived_canonical_id("GK000000000000000000000002"));
}

#[tokio::test]
async fn an_identity_set_shared_cleared_and_kept_by_a_deleted_key() {
    let (_d, model) = test_model().await;
    let a = model.keys().create("a").await.unwrap();
    let b = model.keys().create("b").await.unwrap();
    let (ida, idb) = (a.access_key_id.clone(), b.access_key_id.clone());
    assert_eq!(
        model.keys().identity(&ida).await.unwrap().canonical_id,
        derived_canonical_id(&ida)
    );
    for bad in ["", "has space", "é", &"x".repeat(129)] {
        let e = model
            .keys()
            .set_identity(&ida, Some(Some(bad.into())), None)
            .await
            .unwrap_err();
        assert!(matches!(e, crate::ModelError::Invalid(_)), "{bad:?}: {e}");
    }
    let e = model
        .keys()
        .set_identity(&ida, None, Some(Some("tab\there".into())))
        .await
        .unwrap_err();
    assert!(matches!(e, crate::ModelError::Invalid(_)), "{e}");
    model
        .keys()
        .set_identity(&ida, Some(Some("team-1".into())), Some(Some("Team".into())))
        .await
        .unwrap();
    model
        .keys()
        .set_identity(&idb, Some(Some("team-1".into())), None)
        .await
        .unwrap();
    let mut shared: Vec<String> = model
        .keys()
        .with_canonical_id("team-1")
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.access_key_id)
        .collect();
    shared.sort();
    let mut both = vec![ida.clone(), idb.clone()];
    both.sort();
    assert_eq!(shared, both);
    // Only the display name is cleared when only it is given.
    let k = model
        .keys()
        .set_identity(&idb, None, Some(None))
        .await
        .unwrap();
    assert_eq!(k.canonical_id(), "team-1");
    assert_eq!(k.display_name.value, None);
    model
        .keys()
        .set_identity(&idb, Some(None), None)
        .await
        .unwrap();
    assert_eq!(
        model.keys().identity(&idb).await.unwrap().canonical_id,
        derived_canonical_id(&idb)
    );
    // A deleted key keeps its identity: its buckets keep their owner.
    model.keys().delete(&ida).await.unwrap();
    let who = model.keys().identity(&ida).await.unwrap();
    assert_eq!(who.canonical_id, "team-1");
    assert_eq!(who.display_name.as_deref(), Some("Team"));
    assert!(
        model
            .keys()
            .with_canonical_id("team-1")
            .await
            .unwrap()
            .is_empty()
    );
}
