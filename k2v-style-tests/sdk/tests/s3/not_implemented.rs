//! Operations outside the implemented set answer 501 NotImplemented with S3's XML body.

use crate::{assert_error, put, server_with_bucket};

#[tokio::test]
async fn unimplemented_operations_answer_501() {
    let (_server, client) = server_with_bucket("not-impl").await;
    put(&client, "not-impl", "obj", b"x").await;
    assert_error(
        client
            .get_bucket_analytics_configuration()
            .bucket("not-impl")
            .id("report")
            .send()
            .await,
        501,
        "NotImplemented",
    );
    assert_error(
        client
            .get_object_torrent()
            .bucket("not-impl")
            .key("obj")
            .send()
            .await,
        501,
        "NotImplemented",
    );
    assert_error(
        client
            .get_bucket_intelligent_tiering_configuration()
            .bucket("not-impl")
            .id("tier")
            .send()
            .await,
        501,
        "NotImplemented",
    );
}
