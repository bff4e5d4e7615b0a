//! Conditional GetObject and HeadObject: If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since, and their precedence as the S3 reference gives it.

use std::time::Duration;

use aws_sdk_s3::primitives::DateTime;
use hangar_sdk_tests::random_bytes;

use crate::{assert_error, etag_of, failure, put, server_with_bucket};

fn shifted(t: &DateTime, secs: i64) -> DateTime {
    DateTime::from_secs(t.secs() + secs)
}

#[tokio::test]
async fn conditional_get_and_head() {
    let (_server, client) = server_with_bucket("cond").await;
    let data = random_bytes(5000, 1);
    put(&client, "cond", "obj", &data).await;
    let etag = etag_of(&data);
    let head = client
        .head_object()
        .bucket("cond")
        .key("obj")
        .send()
        .await
        .unwrap();
    let modified = *head.last_modified().expect("Last-Modified");
    let before = shifted(&modified, -3600);
    let after = shifted(&modified, 3600);
    let get = || client.get_object().bucket("cond").key("obj");
    let head = || client.head_object().bucket("cond").key("obj");

    // Conditions that hold: the object is returned.
    get().if_match(&etag).send().await.unwrap();
    get()
        .if_none_match("\"0123456789abcdef0123456789abcdef\"")
        .send()
        .await
        .unwrap();
    get().if_modified_since(before).send().await.unwrap();
    get().if_unmodified_since(after).send().await.unwrap();
    head().if_match(&etag).send().await.unwrap();

    // If-Match / If-Unmodified-Since that fail: 412 PreconditionFailed.
    assert_error(
        get()
            .if_match("\"0123456789abcdef0123456789abcdef\"")
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    assert_error(
        get().if_unmodified_since(before).send().await,
        412,
        "PreconditionFailed",
    );
    assert_eq!(failure(head().if_match("\"nope\"").send().await).0, 412);
    assert_eq!(
        failure(head().if_unmodified_since(before).send().await).0,
        412
    );

    // If-None-Match / If-Modified-Since that fail: 304 Not Modified.
    assert_eq!(failure(get().if_none_match(&etag).send().await).0, 304);
    assert_eq!(failure(get().if_modified_since(after).send().await).0, 304);
    assert_eq!(failure(head().if_none_match(&etag).send().await).0, 304);
    assert_eq!(failure(head().if_modified_since(after).send().await).0, 304);

    // Precedence (S3 GetObject reference): If-Match true and If-Unmodified-Since false
    // returns the object; If-None-Match false and If-Modified-Since true returns 304.
    get()
        .if_match(&etag)
        .if_unmodified_since(before)
        .send()
        .await
        .unwrap();
    assert_eq!(
        failure(
            get()
                .if_none_match(&etag)
                .if_modified_since(before)
                .send()
                .await
        )
        .0,
        304
    );
}

#[tokio::test]
async fn conditions_follow_overwrites() {
    let (_server, client) = server_with_bucket("cond2").await;
    let first = random_bytes(100, 1);
    put(&client, "cond2", "obj", &first).await;
    let head = client
        .head_object()
        .bucket("cond2")
        .key("obj")
        .send()
        .await
        .unwrap();
    let first_modified = *head.last_modified().expect("Last-Modified");
    // Last-Modified has one-second resolution: make the second write visibly later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = random_bytes(100, 2);
    put(&client, "cond2", "obj", &second).await;
    let get = || client.get_object().bucket("cond2").key("obj");
    // The overwrite moved Last-Modified past the first write's.
    assert_error(
        get().if_unmodified_since(first_modified).send().await,
        412,
        "PreconditionFailed",
    );
    get()
        .if_modified_since(first_modified)
        .send()
        .await
        .unwrap();
    assert_error(
        get().if_match(etag_of(&first)).send().await,
        412,
        "PreconditionFailed",
    );
    get().if_match(etag_of(&second)).send().await.unwrap();
    get().if_none_match(etag_of(&first)).send().await.unwrap();
}
