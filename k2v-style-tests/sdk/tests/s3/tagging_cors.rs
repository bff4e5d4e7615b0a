//! Object and bucket tagging and bucket CORS through the AWS Rust SDK.

use aws_sdk_s3::types::{CorsConfiguration, CorsRule, Tag, Tagging};

use crate::{assert_error, server_with_bucket};

fn tagging(pairs: &[(&str, &str)]) -> Tagging {
    let tags = pairs
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap())
        .collect();
    Tagging::builder().set_tag_set(Some(tags)).build().unwrap()
}

#[tokio::test]
async fn object_and_bucket_tags_round_trip_and_are_checked() {
    let (_server, client) = server_with_bucket("tags").await;
    client
        .put_object()
        .bucket("tags")
        .key("o")
        .tagging("a=1&b=two%20words")
        .body(b"x".to_vec().into())
        .send()
        .await
        .unwrap();
    let got = client
        .get_object()
        .bucket("tags")
        .key("o")
        .send()
        .await
        .unwrap();
    assert_eq!(got.tag_count(), Some(2));
    client
        .put_object_tagging()
        .bucket("tags")
        .key("o")
        .tagging(tagging(&[("c", "3")]))
        .send()
        .await
        .unwrap();
    let tags = client
        .get_object_tagging()
        .bucket("tags")
        .key("o")
        .send()
        .await
        .unwrap();
    let kv: Vec<_> = tags
        .tag_set()
        .iter()
        .map(|t| (t.key(), t.value()))
        .collect();
    assert_eq!(kv, [("c", "3")]);
    let eleven: Vec<(String, String)> = (0..11).map(|i| (format!("k{i}"), "v".into())).collect();
    let eleven: Vec<(&str, &str)> = eleven
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_error(
        client
            .put_object_tagging()
            .bucket("tags")
            .key("o")
            .tagging(tagging(&eleven))
            .send()
            .await,
        400,
        "BadRequest",
    );
    assert_error(
        client
            .get_object_tagging()
            .bucket("tags")
            .key("o")
            // Well-formed (48 hex digits) but naming no version.
            .version_id("0".repeat(48))
            .send()
            .await,
        404,
        "NoSuchVersion",
    );

    assert_error(
        client.get_bucket_tagging().bucket("tags").send().await,
        404,
        "NoSuchTagSet",
    );
    client
        .put_bucket_tagging()
        .bucket("tags")
        .tagging(tagging(&[("team", "web")]))
        .send()
        .await
        .unwrap();
    let got = client
        .get_bucket_tagging()
        .bucket("tags")
        .send()
        .await
        .unwrap();
    assert_eq!(got.tag_set()[0].key(), "team");
    client
        .delete_bucket_tagging()
        .bucket("tags")
        .send()
        .await
        .unwrap();
    assert_error(
        client.get_bucket_tagging().bucket("tags").send().await,
        404,
        "NoSuchTagSet",
    );
}

#[tokio::test]
async fn cors_rules_round_trip_and_are_checked() {
    let (_server, client) = server_with_bucket("cors").await;
    assert_error(
        client.get_bucket_cors().bucket("cors").send().await,
        404,
        "NoSuchCORSConfiguration",
    );
    let rule = CorsRule::builder()
        .id("r1")
        .allowed_origins("https://*.example.com")
        .allowed_methods("GET")
        .allowed_methods("PUT")
        .allowed_headers("content-type")
        .expose_headers("ETag")
        .max_age_seconds(60)
        .build()
        .unwrap();
    client
        .put_bucket_cors()
        .bucket("cors")
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(rule.clone())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let got = client
        .get_bucket_cors()
        .bucket("cors")
        .send()
        .await
        .unwrap();
    assert_eq!(got.cors_rules(), [rule]);
    let bad = CorsRule::builder()
        .allowed_origins("*")
        .allowed_methods("PATCH")
        .build()
        .unwrap();
    assert_error(
        client
            .put_bucket_cors()
            .bucket("cors")
            .cors_configuration(
                CorsConfiguration::builder()
                    .cors_rules(bad)
                    .build()
                    .unwrap(),
            )
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    client
        .delete_bucket_cors()
        .bucket("cors")
        .send()
        .await
        .unwrap();
    assert_error(
        client.get_bucket_cors().bucket("cors").send().await,
        404,
        "NoSuchCORSConfiguration",
    );
}
