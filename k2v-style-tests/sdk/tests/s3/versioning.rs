//! Bucket versioning through the AWS Rust SDK: enable, overwrite, list
//! versions, read an old one, delete (marker), restore by copy of a
//! `versionId`, remove a version for good.

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};

use crate::{assert_error, body, get, server_with_bucket};

#[tokio::test]
async fn versions_are_kept_listed_read_and_restored() {
    let (_server, client) = server_with_bucket("vers").await;
    let cfg = VersioningConfiguration::builder()
        .status(BucketVersioningStatus::Enabled)
        .build();
    client
        .put_bucket_versioning()
        .bucket("vers")
        .versioning_configuration(cfg)
        .send()
        .await
        .unwrap();
    let status = client
        .get_bucket_versioning()
        .bucket("vers")
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), Some(&BucketVersioningStatus::Enabled));
    let mut ids = Vec::new();
    for b in [&b"one"[..], b"two"] {
        let r = client
            .put_object()
            .bucket("vers")
            .key("k")
            .body(b.to_vec().into())
            .send()
            .await
            .unwrap();
        ids.push(r.version_id().unwrap().to_owned());
    }
    let listed = client
        .list_object_versions()
        .bucket("vers")
        .send()
        .await
        .unwrap();
    let got: Vec<_> = listed
        .versions()
        .iter()
        .map(|v| (v.version_id().unwrap().to_owned(), v.is_latest().unwrap()))
        .collect();
    assert_eq!(got, [(ids[1].clone(), true), (ids[0].clone(), false)]);
    let old = client
        .get_object()
        .bucket("vers")
        .key("k")
        .version_id(&ids[0])
        .send()
        .await
        .unwrap();
    assert_eq!(body(old).await, b"one");
    let d = client
        .delete_object()
        .bucket("vers")
        .key("k")
        .send()
        .await
        .unwrap();
    assert_eq!(d.delete_marker(), Some(true));
    assert_error(
        client.get_object().bucket("vers").key("k").send().await,
        404,
        "NoSuchKey",
    );
    let c = client
        .copy_object()
        .bucket("vers")
        .key("k")
        .copy_source(format!("vers/k?versionId={}", ids[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(c.copy_source_version_id(), Some(ids[0].as_str()));
    assert_eq!(get(&client, "vers", "k").await, b"one");
    client
        .delete_object()
        .bucket("vers")
        .key("k")
        .version_id(&ids[1])
        .send()
        .await
        .unwrap();
    assert_error(
        client
            .get_object()
            .bucket("vers")
            .key("k")
            .version_id(&ids[1])
            .send()
            .await,
        404,
        "NoSuchVersion",
    );
}
