//! Bucket aliases on one node's real metadata store: a bucket is reached
//! through its aliases (configuration and permissions go to the bucket
//! itself), an alias and a bucket never share a name, removing an alias
//! keeps the bucket, deleting the bucket removes its aliases, and an alias
//! never reaches a later bucket of the same name.

mod common;

use hangar_model::alias::{AliasRow, AliasTable};
use hangar_model::{Model, ModelError, PermissionChange};
use hangar_table::Replica;

type Node = common::ModelNode;

async fn node() -> Node {
    common::lone_node().await
}

/// The alias row this node stores for `name`.
async fn alias_row(m: &Model, name: &str) -> Option<AliasRow> {
    Replica::<AliasTable>::new(m.db().clone())
        .get(b"", name.as_bytes())
        .await
        .unwrap()
}

fn exists(r: Result<impl std::fmt::Debug, ModelError>) -> bool {
    matches!(r, Err(ModelError::BucketAlreadyExists(_)))
}

#[tokio::test]
async fn a_bucket_is_reached_and_changed_through_its_alias() {
    let n = node().await;
    let m = &n.model;
    let photos = m.buckets().create_bucket("photos", None).await.unwrap();
    let b = m
        .buckets()
        .add_bucket_alias("photos", "pics")
        .await
        .unwrap();
    assert_eq!(b.id, photos.id);
    let via = m.buckets().get_bucket("pics").await.unwrap().unwrap();
    assert_eq!(
        (via.name.as_str(), via.id.as_str()),
        ("photos", photos.id.as_str())
    );
    // Again: no change, no error.
    m.buckets().add_bucket_alias("pics", "pics").await.unwrap();
    assert_eq!(
        m.buckets().bucket_aliases(&photos).await.unwrap(),
        vec!["pics"]
    );
    assert_eq!(
        m.buckets().list_aliases().await.unwrap(),
        vec![("pics".to_owned(), via.clone())]
    );
    // Configuration and permissions set through the alias are the bucket's.
    let tags = [("a".to_owned(), "1".to_owned())].into_iter().collect();
    let changed = m.buckets().set_bucket_tags("pics", tags).await.unwrap();
    assert_eq!(changed.name, "photos");
    assert_eq!(
        m.buckets()
            .get_bucket("photos")
            .await
            .unwrap()
            .unwrap()
            .tags
            .value
            .len(),
        1
    );
    let k = m.keys().create("k").await.unwrap().access_key_id;
    let change = PermissionChange {
        read: Some(true),
        ..Default::default()
    };
    let key = m
        .buckets()
        .set_permission("pics", &k, change)
        .await
        .unwrap();
    assert!(key.permission("photos").read);
    assert!(!key.permission("pics").any());
    // The id finds it too.
    assert_eq!(
        m.buckets().find_bucket(&photos.id).await.unwrap().name,
        "photos"
    );
}

#[tokio::test]
async fn an_alias_and_a_bucket_never_share_a_name() {
    let n = node().await;
    let m = &n.model;
    m.buckets().create_bucket("photos", None).await.unwrap();
    m.buckets().create_bucket("videos", None).await.unwrap();
    m.buckets()
        .add_bucket_alias("photos", "pics")
        .await
        .unwrap();
    let k = m.keys().create("k").await.unwrap().access_key_id;
    assert!(exists(m.buckets().create_bucket("pics", Some(&k)).await));
    assert!(exists(m.buckets().create_bucket("pics", None).await));
    assert!(exists(
        m.buckets().add_bucket_alias("photos", "videos").await
    ));
    assert!(exists(m.buckets().add_bucket_alias("videos", "pics").await));
    assert!(matches!(
        m.buckets().add_bucket_alias("photos", "Bad_Name").await,
        Err(ModelError::InvalidBucketName { .. })
    ));
    assert!(matches!(
        m.buckets().add_bucket_alias("nothing", "pics2").await,
        Err(ModelError::NoSuchBucket(_))
    ));
    // Unalias frees the name; the bucket stays.
    m.buckets()
        .remove_bucket_alias("photos", "pics")
        .await
        .unwrap();
    assert!(m.buckets().get_bucket("pics").await.unwrap().is_none());
    assert!(m.buckets().get_bucket("photos").await.unwrap().is_some());
    assert!(matches!(
        m.buckets().remove_bucket_alias("photos", "pics").await,
        Err(ModelError::NoSuchAlias { .. })
    ));
    assert!(matches!(
        m.buckets().remove_bucket_alias("photos", "photos").await,
        Err(ModelError::Invalid(_))
    ));
    let pics = m.buckets().create_bucket("pics", Some(&k)).await.unwrap();
    assert_eq!(pics.name, "pics");
    assert!(alias_row(m, "pics").await.unwrap().deleted);
}

#[tokio::test]
async fn deleting_a_bucket_removes_its_aliases() {
    let n = node().await;
    let m = &n.model;
    let first = m.buckets().create_bucket("photos", None).await.unwrap();
    m.buckets()
        .add_bucket_alias("photos", "pics")
        .await
        .unwrap();
    m.buckets()
        .add_bucket_alias("photos", "images")
        .await
        .unwrap();
    // Through an alias, as through its name.
    m.delete_bucket("pics").await.unwrap();
    assert!(m.buckets().get_bucket("photos").await.unwrap().is_none());
    for a in ["pics", "images"] {
        assert!(m.buckets().get_bucket(a).await.unwrap().is_none(), "{a}");
        assert!(alias_row(m, a).await.unwrap().deleted, "{a}");
    }
    assert!(matches!(
        m.buckets().add_bucket_alias("photos", "pics").await,
        Err(ModelError::NoSuchBucket(_))
    ));
    // An alias row of the deleted bucket that arrives late (a replica
    // that missed the delete made it live again) reaches nothing, not
    // even a new bucket of the same name.
    let second = m.buckets().create_bucket("photos", None).await.unwrap();
    assert_ne!(second.id, first.id);
    let stale = AliasRow {
        updated_msec: u64::MAX / 2,
        deleted: false,
        bucket_id: first.id.clone(),
        bucket: "photos".into(),
    };
    m.db()
        .write(move |tx| Replica::<AliasTable>::tx_insert(tx, b"", b"pics", &stale))
        .await
        .unwrap();
    assert!(m.buckets().get_bucket("pics").await.unwrap().is_none());
    assert!(
        m.buckets()
            .bucket_aliases(&second)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(m.buckets().list_aliases().await.unwrap().is_empty());
    // Its name is free: for a bucket, or an alias of the new one.
    m.buckets()
        .add_bucket_alias("photos", "pics")
        .await
        .unwrap();
    assert_eq!(
        m.buckets().get_bucket("pics").await.unwrap().unwrap().id,
        second.id
    );
}

#[tokio::test]
async fn a_local_alias_is_one_key_s_name_of_a_bucket() {
    let n = node().await;
    let m = &n.model;
    let photos = m.buckets().create_bucket("photos", None).await.unwrap();
    m.buckets().create_bucket("videos", None).await.unwrap();
    let k = m.keys().create("k").await.unwrap().access_key_id;
    let other = m.keys().create("other").await.unwrap().access_key_id;
    m.buckets()
        .add_local_bucket_alias(&k, "photos", "mine")
        .await
        .unwrap();
    let as_k = m
        .buckets()
        .get_bucket_as("mine", Some(&k))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(as_k.id, photos.id);
    assert!(
        m.buckets()
            .get_bucket_as("mine", Some(&other))
            .await
            .unwrap()
            .is_none()
    );
    assert!(m.buckets().get_bucket("mine").await.unwrap().is_none());
    // It may take a bucket's name: that key reaches its own bucket there.
    m.buckets()
        .add_local_bucket_alias(&k, "photos", "videos")
        .await
        .unwrap();
    assert_eq!(
        m.buckets()
            .get_bucket_as("videos", Some(&k))
            .await
            .unwrap()
            .unwrap()
            .id,
        photos.id
    );
    assert_eq!(
        m.buckets()
            .get_bucket_as("videos", Some(&other))
            .await
            .unwrap()
            .unwrap()
            .name,
        "videos"
    );
    assert_eq!(
        m.buckets().bucket_local_aliases(&photos).await.unwrap(),
        vec![
            (k.clone(), "mine".to_owned()),
            (k.clone(), "videos".to_owned())
        ]
    );
    assert!(
        m.buckets()
            .bucket_aliases(&photos)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(m.buckets().list_local_aliases(&k).await.unwrap().len(), 2);
    assert!(
        m.buckets()
            .list_local_aliases(&other)
            .await
            .unwrap()
            .is_empty()
    );
    // Taken for that key only.
    assert!(exists(
        m.buckets()
            .add_local_bucket_alias(&k, "videos", "mine")
            .await
    ));
    m.buckets()
        .add_local_bucket_alias(&other, "videos", "mine")
        .await
        .unwrap();
    // The key cannot create a bucket it would not reach; others can.
    m.keys().set_create_bucket(&k, true).await.unwrap();
    assert!(exists(m.buckets().create_bucket("mine", Some(&k)).await));
    assert!(matches!(
        m.buckets()
            .add_local_bucket_alias("GK000000000000000000000009", "photos", "x-y")
            .await,
        Err(ModelError::NoSuchKey(_))
    ));
    m.buckets()
        .remove_local_bucket_alias(&k, "photos", "mine")
        .await
        .unwrap();
    assert!(
        m.buckets()
            .get_bucket_as("mine", Some(&k))
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        m.buckets()
            .remove_local_bucket_alias(&k, "photos", "mine")
            .await,
        Err(ModelError::NoSuchAlias { .. })
    ));
    m.buckets().create_bucket("mine", Some(&k)).await.unwrap();
    // Deleting the bucket removes its local aliases too.
    m.delete_bucket("photos").await.unwrap();
    assert!(m.buckets().list_local_aliases(&k).await.unwrap().is_empty());
    assert_eq!(
        m.buckets()
            .get_bucket_as("videos", Some(&k))
            .await
            .unwrap()
            .unwrap()
            .name,
        "videos"
    );
}
