//! Bucket policies, public access blocks and canned ACLs through the AWS Rust SDK,
//! with anonymous (unsigned) requests sent raw to see what they grant.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketCannedAcl, Grant, ObjectCannedAcl, Permission, PublicAccessBlockConfiguration, Type,
};
use hangar_sdk_tests::{RawResponse, TestServer, raw_request};

use crate::{assert_error, get, put, server_with_bucket};

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";

/// An unsigned request, as a browser or `curl` sends it.
async fn anonymous(server: &TestServer, method: &str, path: &str) -> RawResponse {
    raw_request(
        method,
        &format!("{}/{path}", server.endpoint),
        &[],
        Vec::new(),
    )
    .await
}

/// Asserts that an anonymous GET of `path` is refused with S3's AccessDenied.
async fn assert_anonymous_denied(server: &TestServer, path: &str) {
    let r = anonymous(server, "GET", path).await;
    assert_eq!(r.status, 403, "anonymous GET {path}: {}", r.text());
    assert!(
        r.text().contains("<Code>AccessDenied</Code>"),
        "anonymous GET {path}: {}",
        r.text()
    );
}

/// Asserts that an anonymous GET of `path` answers `expected`.
async fn assert_anonymous_reads(server: &TestServer, path: &str, expected: &[u8]) {
    let r = anonymous(server, "GET", path).await;
    assert_eq!(r.status, 200, "anonymous GET {path}: {}", r.text());
    assert_eq!(r.body, expected, "anonymous GET {path}");
}

fn public_read_of(prefix: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": format!("arn:aws:s3:::acc/{prefix}*"),
        }],
    })
    .to_string()
}

async fn put_block(client: &Client, cfg: PublicAccessBlockConfiguration) {
    client
        .put_public_access_block()
        .bucket("acc")
        .public_access_block_configuration(cfg)
        .send()
        .await
        .unwrap();
}

/// The (group URI, permission) pairs of an ACL's grants.
fn groups(grants: &[Grant]) -> Vec<(String, Permission)> {
    let mut out: Vec<_> = grants
        .iter()
        .filter(|g| g.grantee().map(|e| e.r#type()) == Some(&Type::Group))
        .map(|g| {
            (
                g.grantee().and_then(|e| e.uri()).unwrap_or("").to_owned(),
                g.permission().cloned().expect("a permission"),
            )
        })
        .collect();
    out.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    out
}

#[tokio::test]
async fn bucket_policy_grants_anonymous_reads_and_public_access_block_restricts() {
    let (server, client) = server_with_bucket("acc").await;
    put(&client, "acc", "public/a", b"open").await;
    put(&client, "acc", "private/b", b"closed").await;
    assert_error(
        client.get_bucket_policy().bucket("acc").send().await,
        404,
        "NoSuchBucketPolicy",
    );
    assert_error(
        client.get_bucket_policy_status().bucket("acc").send().await,
        404,
        "NoSuchBucketPolicy",
    );
    assert_anonymous_denied(&server, "acc/public/a").await;

    let doc = public_read_of("public/");
    client
        .put_bucket_policy()
        .bucket("acc")
        .policy(&doc)
        .send()
        .await
        .unwrap();
    let got = client
        .get_bucket_policy()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    assert_eq!(got.policy(), Some(doc.as_str()));
    let status = client
        .get_bucket_policy_status()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    assert_eq!(
        status.policy_status().and_then(|s| s.is_public()),
        Some(true)
    );
    assert_anonymous_reads(&server, "acc/public/a", b"open").await;
    assert_anonymous_denied(&server, "acc/private/b").await;
    let r = raw_request(
        "PUT",
        &format!("{}/acc/public/new", server.endpoint),
        &[],
        b"x".to_vec(),
    )
    .await;
    assert_eq!(r.status, 403, "anonymous PUT: {}", r.text());
    assert_eq!(anonymous(&server, "GET", "acc").await.status, 403);

    // RestrictPublicBuckets: the public policy grants anonymous requests nothing.
    put_block(
        &client,
        PublicAccessBlockConfiguration::builder()
            .restrict_public_buckets(true)
            .build(),
    )
    .await;
    let got = client
        .get_public_access_block()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    let got = got.public_access_block_configuration().expect("a block");
    assert_eq!(
        (
            got.block_public_acls(),
            got.ignore_public_acls(),
            got.block_public_policy(),
            got.restrict_public_buckets()
        ),
        (Some(false), Some(false), Some(false), Some(true))
    );
    assert_anonymous_denied(&server, "acc/public/a").await;
    assert_eq!(get(&client, "acc", "public/a").await, b"open");

    // BlockPublicPolicy: a public policy is refused, a private one is not.
    put_block(
        &client,
        PublicAccessBlockConfiguration::builder()
            .block_public_policy(true)
            .build(),
    )
    .await;
    assert_error(
        client
            .put_bucket_policy()
            .bucket("acc")
            .policy(public_read_of(""))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    let private = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": [server.key.access_key_id.as_str()]},
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::acc/*",
        }],
    })
    .to_string();
    client
        .put_bucket_policy()
        .bucket("acc")
        .policy(&private)
        .send()
        .await
        .unwrap();
    let status = client
        .get_bucket_policy_status()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    assert_eq!(
        status.policy_status().and_then(|s| s.is_public()),
        Some(false)
    );
    client
        .delete_public_access_block()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    assert_error(
        client.get_public_access_block().bucket("acc").send().await,
        404,
        "NoSuchPublicAccessBlockConfiguration",
    );
    assert_anonymous_denied(&server, "acc/public/a").await;

    client
        .delete_bucket_policy()
        .bucket("acc")
        .send()
        .await
        .unwrap();
    assert_error(
        client.get_bucket_policy().bucket("acc").send().await,
        404,
        "NoSuchBucketPolicy",
    );
    for bad in [
        "not json".to_owned(),
        serde_json::json!({"Version": "2012-10-17"}).to_string(),
        public_read_of("").replace("s3:GetObject", "ec2:RunInstances"),
        public_read_of("").replace("arn:aws:s3:::acc/", "arn:aws:s3:::another/"),
    ] {
        assert_error(
            client
                .put_bucket_policy()
                .bucket("acc")
                .policy(&bad)
                .send()
                .await,
            400,
            "MalformedPolicy",
        );
    }
    assert_error(
        client.get_bucket_policy().bucket("acc").send().await,
        404,
        "NoSuchBucketPolicy",
    );
}

#[tokio::test]
async fn canned_acls_on_objects_and_buckets() {
    let (server, client) = server_with_bucket("acc").await;
    client
        .put_object()
        .bucket("acc")
        .key("pub")
        .acl(ObjectCannedAcl::PublicRead)
        .body(ByteStream::from_static(b"for all"))
        .send()
        .await
        .unwrap();
    put(&client, "acc", "priv", b"mine").await;
    assert_anonymous_reads(&server, "acc/pub", b"for all").await;
    assert_anonymous_denied(&server, "acc/priv").await;

    let acl = client
        .get_object_acl()
        .bucket("acc")
        .key("pub")
        .send()
        .await
        .unwrap();
    assert_eq!(
        acl.owner().and_then(|o| o.id()),
        Some(server.key.canonical_id.as_str())
    );
    assert_eq!(
        groups(acl.grants()),
        [(ALL_USERS.to_owned(), Permission::Read)]
    );
    let owner_grants: Vec<_> = acl
        .grants()
        .iter()
        .filter(|g| g.grantee().map(|e| e.r#type()) == Some(&Type::CanonicalUser))
        .map(|g| g.permission().cloned())
        .collect();
    assert_eq!(owner_grants, [Some(Permission::FullControl)]);
    let acl = client
        .get_object_acl()
        .bucket("acc")
        .key("priv")
        .send()
        .await
        .unwrap();
    assert!(groups(acl.grants()).is_empty());

    // PutObjectAcl: the public one private, the private one public.
    client
        .put_object_acl()
        .bucket("acc")
        .key("pub")
        .acl(ObjectCannedAcl::Private)
        .send()
        .await
        .unwrap();
    client
        .put_object_acl()
        .bucket("acc")
        .key("priv")
        .acl(ObjectCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    assert_anonymous_denied(&server, "acc/pub").await;
    assert_anonymous_reads(&server, "acc/priv", b"mine").await;

    // A bucket ACL: public-read lets anyone list the bucket, not read its objects.
    let bucket_groups = || async {
        groups(
            client
                .get_bucket_acl()
                .bucket("acc")
                .send()
                .await
                .unwrap()
                .grants(),
        )
    };
    assert!(bucket_groups().await.is_empty());
    assert_eq!(anonymous(&server, "GET", "acc").await.status, 403);
    client
        .put_bucket_acl()
        .bucket("acc")
        .acl(BucketCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    assert_eq!(
        bucket_groups().await,
        [(ALL_USERS.to_owned(), Permission::Read)]
    );
    let listing = anonymous(&server, "GET", "acc?list-type=2").await;
    assert_eq!(listing.status, 200, "{}", listing.text());
    assert!(
        listing.text().contains("<Key>priv</Key>"),
        "{}",
        listing.text()
    );
    assert_anonymous_denied(&server, "acc/pub").await;
    client
        .put_bucket_acl()
        .bucket("acc")
        .acl(BucketCannedAcl::Private)
        .send()
        .await
        .unwrap();
    assert!(bucket_groups().await.is_empty());
    assert_eq!(
        anonymous(&server, "GET", "acc?list-type=2").await.status,
        403
    );

    // IgnorePublicAcls: the public object is no longer readable anonymously.
    put_block(
        &client,
        PublicAccessBlockConfiguration::builder()
            .ignore_public_acls(true)
            .build(),
    )
    .await;
    assert_anonymous_denied(&server, "acc/priv").await;
    // BlockPublicAcls: a public ACL is refused, a private one is not.
    put_block(
        &client,
        PublicAccessBlockConfiguration::builder()
            .block_public_acls(true)
            .build(),
    )
    .await;
    assert_anonymous_reads(&server, "acc/priv", b"mine").await;
    assert_error(
        client
            .put_object()
            .bucket("acc")
            .key("p")
            .acl(ObjectCannedAcl::PublicRead)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_error(
        client
            .put_bucket_acl()
            .bucket("acc")
            .acl(BucketCannedAcl::PublicRead)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    client
        .put_object()
        .bucket("acc")
        .key("p")
        .acl(ObjectCannedAcl::Private)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
}
