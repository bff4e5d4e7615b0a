//! Bucket lifecycle configuration through the AWS Rust SDK: put, get and delete
//! (expiration, noncurrent-version expiration, abort of incomplete multipart
//! uploads, prefix filters), and the errors for configurations Hangar refuses.
//! (The worker applying the rules is tested in k2v-style-tests/python/test_lifecycle.py,
//! with a shortened day.)

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
};

use crate::{assert_error, server_with_bucket};

fn rule(id: &str, prefix: &str) -> aws_sdk_s3::types::builders::LifecycleRuleBuilder {
    LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix(prefix).build())
}

fn configuration(rules: Vec<LifecycleRule>) -> BucketLifecycleConfiguration {
    BucketLifecycleConfiguration::builder()
        .set_rules(Some(rules))
        .build()
        .unwrap()
}

async fn rules_of(client: &Client) -> Vec<LifecycleRule> {
    client
        .get_bucket_lifecycle_configuration()
        .bucket("lifecycle")
        .send()
        .await
        .unwrap()
        .rules()
        .to_vec()
}

#[tokio::test]
async fn lifecycle_configuration_round_trip() {
    let (_server, client) = server_with_bucket("lifecycle").await;
    let get = || {
        client
            .get_bucket_lifecycle_configuration()
            .bucket("lifecycle")
            .send()
    };
    assert_error(get().await, 404, "NoSuchLifecycleConfiguration");

    let rules = vec![
        rule("logs", "logs/")
            .expiration(LifecycleExpiration::builder().days(3).build())
            .build()
            .unwrap(),
        rule("old-versions", "")
            .noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(2)
                    .newer_noncurrent_versions(3)
                    .build(),
            )
            .build()
            .unwrap(),
        rule("uploads", "tmp/")
            .abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(7)
                    .build(),
            )
            .build()
            .unwrap(),
        LifecycleRule::builder()
            .id("markers")
            .status(ExpirationStatus::Disabled)
            .filter(LifecycleRuleFilter::builder().prefix("gone/").build())
            .expiration(
                LifecycleExpiration::builder()
                    .expired_object_delete_marker(true)
                    .build(),
            )
            .build()
            .unwrap(),
    ];
    client
        .put_bucket_lifecycle_configuration()
        .bucket("lifecycle")
        .lifecycle_configuration(configuration(rules.clone()))
        .send()
        .await
        .unwrap();
    let got = rules_of(&client).await;
    let ids: Vec<_> = got.iter().map(|r| r.id()).collect();
    assert_eq!(
        ids,
        [
            Some("logs"),
            Some("old-versions"),
            Some("uploads"),
            Some("markers")
        ]
    );
    let prefixes: Vec<_> = got
        .iter()
        .map(|r| r.filter().and_then(|f| f.prefix()))
        .collect();
    assert_eq!(
        prefixes,
        [Some("logs/"), Some(""), Some("tmp/"), Some("gone/")]
    );
    let statuses: Vec<_> = got.iter().map(|r| r.status().clone()).collect();
    assert_eq!(
        statuses,
        [
            ExpirationStatus::Enabled,
            ExpirationStatus::Enabled,
            ExpirationStatus::Enabled,
            ExpirationStatus::Disabled
        ]
    );
    assert_eq!(got[0].expiration(), rules[0].expiration());
    assert_eq!(got[0].noncurrent_version_expiration(), None);
    assert_eq!(
        got[1].noncurrent_version_expiration(),
        rules[1].noncurrent_version_expiration()
    );
    assert_eq!(got[1].expiration(), None);
    assert_eq!(
        got[2]
            .abort_incomplete_multipart_upload()
            .and_then(|a| a.days_after_initiation()),
        Some(7)
    );
    assert_eq!(
        got[3]
            .expiration()
            .and_then(|e| e.expired_object_delete_marker()),
        Some(true)
    );

    // A new configuration replaces the old one as a whole.
    let single = rule("only", "a/")
        .expiration(LifecycleExpiration::builder().days(30).build())
        .build()
        .unwrap();
    client
        .put_bucket_lifecycle_configuration()
        .bucket("lifecycle")
        .lifecycle_configuration(configuration(vec![single]))
        .send()
        .await
        .unwrap();
    let got = rules_of(&client).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id(), Some("only"));
    assert_eq!(got[0].expiration().and_then(|e| e.days()), Some(30));

    client
        .delete_bucket_lifecycle()
        .bucket("lifecycle")
        .send()
        .await
        .unwrap();
    assert_error(get().await, 404, "NoSuchLifecycleConfiguration");
    assert_error(
        client
            .get_bucket_lifecycle_configuration()
            .bucket("no-such-bucket")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

#[tokio::test]
async fn malformed_lifecycle_configurations_are_refused() {
    let (_server, client) = server_with_bucket("lifecycle").await;
    let put = |rules: Vec<LifecycleRule>| {
        client
            .put_bucket_lifecycle_configuration()
            .bucket("lifecycle")
            .lifecycle_configuration(configuration(rules))
            .send()
    };
    let zero_days = rule("zero", "")
        .expiration(LifecycleExpiration::builder().days(0).build())
        .build()
        .unwrap();
    assert_error(put(vec![zero_days]).await, 400, "InvalidArgument");
    let days = |id: &str, n: i32| {
        rule(id, "")
            .expiration(LifecycleExpiration::builder().days(n).build())
            .build()
            .unwrap()
    };
    assert_error(
        put(vec![days("same", 1), days("same", 2)]).await,
        400,
        "InvalidArgument",
    );
    let no_action = rule("idle", "x/").build().unwrap();
    assert_error(put(vec![no_action]).await, 400, "InvalidRequest");
    let both = rule("both", "")
        .expiration(
            LifecycleExpiration::builder()
                .days(1)
                .expired_object_delete_marker(true)
                .build(),
        )
        .build()
        .unwrap();
    assert_error(put(vec![both]).await, 400, "MalformedXML");
    // None of them was stored.
    assert_error(
        client
            .get_bucket_lifecycle_configuration()
            .bucket("lifecycle")
            .send()
            .await,
        404,
        "NoSuchLifecycleConfiguration",
    );
}
