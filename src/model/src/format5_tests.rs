//! Row format 5 (doc/table-rows.md): a key row carrying an expiry is
//! written with format byte 5 and `expires_msec` appended to its map, so a
//! binary of format 4 refuses it instead of dropping the expiry on its next
//! merge (which would make the key work again); every other key row stays
//! format 2 byte for byte.

use crate::row_format::KEY_EXPIRY_ROW_FORMAT;
use hangar_table::{Lww, ROW_FORMAT, encode};
use serde::Serialize;

use crate::test_support::{fixstr as s, test_model};

/// `KeyRow` as format 2 had it: no `expires_msec`.
#[derive(Serialize)]
struct Format2KeyRow {
    access_key_id: String,
    name: Lww<String>,
    secret: Lww<String>,
    allow_create_bucket: Lww<bool>,
    buckets: hangar_table::LwwMap<String, crate::key::Permission>,
    created_msec: u64,
    deleted: Lww<bool>,
}

#[test]
fn a_key_without_expiry_is_format_2_byte_for_byte_and_one_with_it_format_5() {
    use crate::key::{KeyRow, KeyTable};
    let mut k = KeyRow::new("GK000000000000000000000001", "secret-secret-00", "k", 4);
    let old = Format2KeyRow {
        access_key_id: k.access_key_id.clone(),
        name: k.name.clone(),
        secret: k.secret.clone(),
        allow_create_bucket: k.allow_create_bucket.clone(),
        buckets: k.buckets.clone(),
        created_msec: 4,
        deleted: k.deleted.clone(),
    };
    let mut expected = vec![ROW_FORMAT];
    rmp_serde::encode::write_named(&mut expected, &old).unwrap();
    assert_eq!(encode::<KeyTable>(&k), expected);
    let back: KeyRow = rmp_serde::from_slice(&expected[1..]).unwrap();
    assert_eq!(back, k);

    k.expires_msec.update(9, Some(300));
    let v = encode::<KeyTable>(&k);
    assert_eq!(v[0], KEY_EXPIRY_ROW_FORMAT);
    assert_eq!(v[1], 0x88, "the 7 fields of format 2, then expires_msec");
    // ad "expires_msec" 82 a2 "ts" 09 a5 "value" cd 01 2c, at the end.
    let mut tail = s("expires_msec");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x09);
    tail.extend(s("value"));
    tail.extend([0xcd, 0x01, 0x2c]);
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<KeyTable>(&v).unwrap(), k);
    // Cleared later: still format 5 (the clearing must replicate).
    k.expires_msec.update(10, None);
    assert_eq!(encode::<KeyTable>(&k)[0], KEY_EXPIRY_ROW_FORMAT);
    assert_eq!(
        hangar_table::decode::<KeyTable>(&encode::<KeyTable>(&k)).unwrap(),
        k
    );
}

#[tokio::test]
async fn a_key_created_expiring_and_renewed_through_the_model() {
    let (_d, model) = test_model().await;
    let k = model.keys().create_expiring("ci", Some(1)).await.unwrap();
    assert_eq!(k.expires_msec.value, Some(1));
    let id = k.access_key_id.clone();
    match model.keys().signing_key(&id).await {
        Err(crate::ModelError::KeyExpired {
            id: got,
            expired_msec: 1,
        }) => assert_eq!(got, id),
        other => panic!("{other:?}"),
    }
    // The admin operations still see it.
    assert!(model.keys().get(&id).await.unwrap().is_some());
    let renewed = model.keys().set_expiry(&id, None).await.unwrap();
    assert_eq!(renewed.expires_msec.value, None);
    assert!(model.keys().signing_key(&id).await.unwrap().is_some());
    // A key deleted and imported again does not keep the old expiry.
    model.keys().set_expiry(&id, Some(1)).await.unwrap();
    model.keys().delete(&id).await.unwrap();
    let again = model
        .keys()
        .import(&id, "secret-secret-00", "ci")
        .await
        .unwrap();
    assert_eq!(again.expires_msec.value, None);
    assert!(model.keys().signing_key(&id).await.unwrap().is_some());
}
