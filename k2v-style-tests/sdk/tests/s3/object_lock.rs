//! S3 Object Lock through the AWS Rust SDK: a bucket created with object lock,
//! its configuration and default retention, a version's retention refusing its
//! delete, and a legal hold set and lifted.

use std::time::{Duration, SystemTime};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{
    BucketVersioningStatus, DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled,
    ObjectLockLegalHold, ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetentionMode,
    ObjectLockRule, VersioningConfiguration,
};
use hangar_sdk_tests::TestServer;

use crate::{assert_error, body};

fn in_secs(secs: u64) -> DateTime {
    DateTime::from(SystemTime::now() + Duration::from_secs(secs))
}

/// Asserts a date read back is the one given, to the second (S3 dates have no finer
/// precision).
#[track_caller]
fn assert_same_second(got: Option<&DateTime>, expected: &DateTime) {
    let got = got.expect("a date").secs();
    assert!(
        (got - expected.secs()).abs() <= 1,
        "{got} vs {}",
        expected.secs()
    );
}

async fn put_version(client: &Client, key: &str, data: &'static [u8]) -> String {
    client
        .put_object()
        .bucket("lock")
        .key(key)
        .body(ByteStream::from_static(data))
        .send()
        .await
        .unwrap()
        .version_id()
        .expect("a version id in a locked bucket")
        .to_owned()
}

async fn legal_hold(
    client: &Client,
    key: &str,
    version: &str,
) -> Option<ObjectLockLegalHoldStatus> {
    client
        .get_object_legal_hold()
        .bucket("lock")
        .key(key)
        .version_id(version)
        .send()
        .await
        .unwrap()
        .legal_hold()
        .and_then(|h| h.status())
        .cloned()
}

#[tokio::test]
async fn lock_configuration_retention_and_legal_hold() {
    let server = TestServer::start();
    let client = server.client();
    client
        .create_bucket()
        .bucket("lock")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let versioning = client
        .get_bucket_versioning()
        .bucket("lock")
        .send()
        .await
        .unwrap();
    assert_eq!(versioning.status(), Some(&BucketVersioningStatus::Enabled));
    assert_error(
        client
            .put_bucket_versioning()
            .bucket("lock")
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Suspended)
                    .build(),
            )
            .send()
            .await,
        409,
        "InvalidBucketState",
    );
    let cfg = client
        .get_object_lock_configuration()
        .bucket("lock")
        .send()
        .await
        .unwrap();
    let cfg = cfg.object_lock_configuration().expect("a configuration");
    assert_eq!(cfg.object_lock_enabled(), Some(&ObjectLockEnabled::Enabled));
    assert_eq!(cfg.rule(), None);

    // Legal hold on and off, before any default retention.
    let held = put_version(&client, "held", b"held").await;
    assert_error(
        client
            .get_object_legal_hold()
            .bucket("lock")
            .key("held")
            .version_id(&held)
            .send()
            .await,
        404,
        "NoSuchObjectLockConfiguration",
    );
    let set_hold = |status: ObjectLockLegalHoldStatus| {
        client
            .put_object_legal_hold()
            .bucket("lock")
            .key("held")
            .version_id(&held)
            .legal_hold(ObjectLockLegalHold::builder().status(status).build())
            .send()
    };
    set_hold(ObjectLockLegalHoldStatus::On).await.unwrap();
    assert_eq!(
        legal_hold(&client, "held", &held).await,
        Some(ObjectLockLegalHoldStatus::On)
    );
    let head = client
        .head_object()
        .bucket("lock")
        .key("held")
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.object_lock_legal_hold_status(),
        Some(&ObjectLockLegalHoldStatus::On)
    );
    for bypass in [false, true] {
        assert_error(
            client
                .delete_object()
                .bucket("lock")
                .key("held")
                .version_id(&held)
                .bypass_governance_retention(bypass)
                .send()
                .await,
            403,
            "AccessDenied",
        );
    }
    set_hold(ObjectLockLegalHoldStatus::Off).await.unwrap();
    assert_eq!(
        legal_hold(&client, "held", &held).await,
        Some(ObjectLockLegalHoldStatus::Off)
    );
    client
        .delete_object()
        .bucket("lock")
        .key("held")
        .version_id(&held)
        .send()
        .await
        .unwrap();
    let (status, _) = crate::failure(
        client
            .head_object()
            .bucket("lock")
            .key("held")
            .version_id(&held)
            .send()
            .await,
    );
    assert_eq!(
        status, 404,
        "the held version, deleted once the hold is lifted"
    );

    // A version with its own retention: its delete by id is refused, a delete
    // without id only adds a delete marker.
    let until = in_secs(3600);
    let kept = client
        .put_object()
        .bucket("lock")
        .key("kept")
        .body(ByteStream::from_static(b"kept"))
        .object_lock_mode(ObjectLockMode::Compliance)
        .object_lock_retain_until_date(until)
        .send()
        .await
        .unwrap()
        .version_id()
        .expect("version id")
        .to_owned();
    let head = client
        .head_object()
        .bucket("lock")
        .key("kept")
        .version_id(&kept)
        .send()
        .await
        .unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Compliance));
    assert_same_second(head.object_lock_retain_until_date(), &until);
    let retention = client
        .get_object_retention()
        .bucket("lock")
        .key("kept")
        .version_id(&kept)
        .send()
        .await
        .unwrap();
    let retention = retention.retention().expect("a retention");
    assert_eq!(retention.mode(), Some(&ObjectLockRetentionMode::Compliance));
    assert_same_second(retention.retain_until_date(), &until);
    for bypass in [false, true] {
        let refused = client
            .delete_object()
            .bucket("lock")
            .key("kept")
            .version_id(&kept)
            .bypass_governance_retention(bypass)
            .send()
            .await;
        assert_error(refused, 403, "AccessDenied");
    }
    let marker = client
        .delete_object()
        .bucket("lock")
        .key("kept")
        .send()
        .await
        .unwrap();
    assert_eq!(marker.delete_marker(), Some(true));
    let old = client
        .get_object()
        .bucket("lock")
        .key("kept")
        .version_id(&kept)
        .send()
        .await
        .unwrap();
    assert_eq!(body(old).await, b"kept");

    // A default retention: stored, read back, applied to new versions.
    let rule = ObjectLockRule::builder()
        .default_retention(
            DefaultRetention::builder()
                .mode(ObjectLockRetentionMode::Governance)
                .days(2)
                .build(),
        )
        .build();
    client
        .put_object_lock_configuration()
        .bucket("lock")
        .object_lock_configuration(
            ObjectLockConfiguration::builder()
                .object_lock_enabled(ObjectLockEnabled::Enabled)
                .rule(rule.clone())
                .build(),
        )
        .send()
        .await
        .unwrap();
    let cfg = client
        .get_object_lock_configuration()
        .bucket("lock")
        .send()
        .await
        .unwrap();
    assert_eq!(
        cfg.object_lock_configuration().and_then(|c| c.rule()),
        Some(&rule)
    );
    let defaulted = put_version(&client, "defaulted", b"d").await;
    let retention = client
        .get_object_retention()
        .bucket("lock")
        .key("defaulted")
        .version_id(&defaulted)
        .send()
        .await
        .unwrap();
    let retention = retention.retention().expect("the default retention");
    assert_eq!(retention.mode(), Some(&ObjectLockRetentionMode::Governance));
    let two_days = in_secs(2 * 86400).secs();
    let got = retention.retain_until_date().expect("a date").secs();
    assert!((got - two_days).abs() < 60, "{got} vs {two_days}");
    assert_error(
        client
            .delete_object()
            .bucket("lock")
            .key("defaulted")
            .version_id(&defaulted)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    // GOVERNANCE gives way to the owner with the bypass header.
    client
        .delete_object()
        .bucket("lock")
        .key("defaulted")
        .version_id(&defaulted)
        .bypass_governance_retention(true)
        .send()
        .await
        .unwrap();

    // Days and Years together: MalformedXML, nothing changed.
    let both = ObjectLockRule::builder()
        .default_retention(
            DefaultRetention::builder()
                .mode(ObjectLockRetentionMode::Governance)
                .days(1)
                .years(1)
                .build(),
        )
        .build();
    assert_error(
        client
            .put_object_lock_configuration()
            .bucket("lock")
            .object_lock_configuration(
                ObjectLockConfiguration::builder()
                    .object_lock_enabled(ObjectLockEnabled::Enabled)
                    .rule(both)
                    .build(),
            )
            .send()
            .await,
        400,
        "MalformedXML",
    );
}

#[tokio::test]
async fn lock_needs_a_versioned_bucket() {
    let (_server, client) = crate::server_with_bucket("lock").await;
    assert_error(
        client
            .get_object_lock_configuration()
            .bucket("lock")
            .send()
            .await,
        404,
        "ObjectLockConfigurationNotFoundError",
    );
    let enable = || {
        client
            .put_object_lock_configuration()
            .bucket("lock")
            .object_lock_configuration(
                ObjectLockConfiguration::builder()
                    .object_lock_enabled(ObjectLockEnabled::Enabled)
                    .build(),
            )
            .send()
    };
    assert_error(enable().await, 409, "InvalidBucketState");
    assert_error(
        client
            .put_object()
            .bucket("lock")
            .key("o")
            .body(ByteStream::from_static(b"x"))
            .object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On)
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    client
        .put_bucket_versioning()
        .bucket("lock")
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    enable().await.unwrap();
    let cfg = client
        .get_object_lock_configuration()
        .bucket("lock")
        .send()
        .await
        .unwrap();
    assert_eq!(
        cfg.object_lock_configuration()
            .and_then(|c| c.object_lock_enabled()),
        Some(&ObjectLockEnabled::Enabled)
    );
}
