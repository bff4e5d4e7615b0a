//! DeleteObjects: per-key results, keys that do not exist, quiet mode.

use aws_sdk_s3::types::{Delete, ObjectIdentifier};

use crate::{put, server_with_bucket};

fn delete_of(keys: &[&str], quiet: bool) -> Delete {
    Delete::builder()
        .set_objects(Some(
            keys.iter()
                .map(|k| ObjectIdentifier::builder().key(*k).build().unwrap())
                .collect(),
        ))
        .quiet(quiet)
        .build()
        .unwrap()
}

async fn remaining(client: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    let listed = client
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn delete_objects_reports_each_key() {
    let (_server, client) = server_with_bucket("multi").await;
    for key in ["a", "b", "c", "d", "e/f"] {
        put(&client, "multi", key, key.as_bytes()).await;
    }
    let output = client
        .delete_objects()
        .bucket("multi")
        .delete(delete_of(&["a", "c", "e/f", "never-existed"], false))
        .send()
        .await
        .unwrap();
    let mut deleted: Vec<&str> = output.deleted().iter().filter_map(|d| d.key()).collect();
    deleted.sort_unstable();
    // S3 reports a key that did not exist as deleted too.
    assert_eq!(deleted, ["a", "c", "e/f", "never-existed"]);
    assert!(output.errors().is_empty(), "{:?}", output.errors());
    assert_eq!(remaining(&client, "multi").await, ["b", "d"]);
}

#[tokio::test]
async fn quiet_mode_lists_only_errors() {
    let (_server, client) = server_with_bucket("quiet").await;
    for key in ["a", "b", "c"] {
        put(&client, "quiet", key, b"x").await;
    }
    let output = client
        .delete_objects()
        .bucket("quiet")
        .delete(delete_of(&["a", "b", "zzz"], true))
        .send()
        .await
        .unwrap();
    assert!(output.deleted().is_empty(), "{:?}", output.deleted());
    assert!(output.errors().is_empty(), "{:?}", output.errors());
    assert_eq!(remaining(&client, "quiet").await, ["c"]);
}

#[tokio::test]
async fn delete_a_thousand_keys_at_once() {
    let (_server, client) = server_with_bucket("thousand").await;
    let keys: Vec<String> = (0..1000).map(|i| format!("k{i:04}")).collect();
    for key in keys.iter().step_by(100) {
        put(&client, "thousand", key, b"x").await;
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let output = client
        .delete_objects()
        .bucket("thousand")
        .delete(delete_of(&refs, false))
        .send()
        .await
        .unwrap();
    assert_eq!(output.deleted().len(), 1000);
    assert!(remaining(&client, "thousand").await.is_empty());
}
