//! Bucket website configuration through the AWS Rust SDK: put, get and delete of an
//! index document, an error document and routing rules, a redirect of all requests,
//! and the configurations S3 refuses. (Serving the site on the web endpoint is tested
//! in k2v-style-tests/python/test_website.py.)

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{
    Condition, ErrorDocument, IndexDocument, Protocol, Redirect, RedirectAllRequestsTo,
    RoutingRule, WebsiteConfiguration,
};

use crate::{assert_error, server_with_bucket};

async fn put_website(
    client: &Client,
    cfg: WebsiteConfiguration,
) -> Result<
    aws_sdk_s3::operation::put_bucket_website::PutBucketWebsiteOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::put_bucket_website::PutBucketWebsiteError>,
> {
    client
        .put_bucket_website()
        .bucket("web")
        .website_configuration(cfg)
        .send()
        .await
}

fn index(suffix: &str) -> IndexDocument {
    IndexDocument::builder().suffix(suffix).build().unwrap()
}

#[tokio::test]
async fn website_configuration_round_trip() {
    let (_server, client) = server_with_bucket("web").await;
    let get = || client.get_bucket_website().bucket("web").send();
    assert_error(get().await, 404, "NoSuchWebsiteConfiguration");

    let rules = vec![
        RoutingRule::builder()
            .condition(Condition::builder().key_prefix_equals("old/").build())
            .redirect(
                Redirect::builder()
                    .replace_key_prefix_with("new/")
                    .http_redirect_code("302")
                    .build(),
            )
            .build(),
        RoutingRule::builder()
            .condition(
                Condition::builder()
                    .http_error_code_returned_equals("404")
                    .key_prefix_equals("gone/")
                    .build(),
            )
            .redirect(
                Redirect::builder()
                    .host_name("elsewhere.example")
                    .protocol(Protocol::Https)
                    .replace_key_with("moved.html")
                    .build(),
            )
            .build(),
    ];
    let site = WebsiteConfiguration::builder()
        .index_document(index("index.html"))
        .error_document(ErrorDocument::builder().key("error.html").build().unwrap())
        .set_routing_rules(Some(rules.clone()))
        .build();
    put_website(&client, site).await.unwrap();
    let got = get().await.unwrap();
    assert_eq!(got.index_document().map(|d| d.suffix()), Some("index.html"));
    assert_eq!(got.error_document().map(|d| d.key()), Some("error.html"));
    assert_eq!(got.routing_rules(), rules.as_slice());
    assert_eq!(got.redirect_all_requests_to(), None);

    // A redirect of every request replaces the whole configuration.
    let redirect = RedirectAllRequestsTo::builder()
        .host_name("example.com")
        .protocol(Protocol::Https)
        .build()
        .unwrap();
    put_website(
        &client,
        WebsiteConfiguration::builder()
            .redirect_all_requests_to(redirect.clone())
            .build(),
    )
    .await
    .unwrap();
    let got = get().await.unwrap();
    assert_eq!(got.redirect_all_requests_to(), Some(&redirect));
    assert_eq!(got.index_document(), None);
    assert!(got.routing_rules().is_empty());

    client
        .delete_bucket_website()
        .bucket("web")
        .send()
        .await
        .unwrap();
    assert_error(get().await, 404, "NoSuchWebsiteConfiguration");
    // Deleting what is not there succeeds, as on S3.
    client
        .delete_bucket_website()
        .bucket("web")
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn invalid_website_configurations_are_refused() {
    let (_server, client) = server_with_bucket("web").await;
    let bad = [
        // An error document without an index document.
        WebsiteConfiguration::builder()
            .error_document(ErrorDocument::builder().key("e.html").build().unwrap())
            .build(),
        // An index suffix with a slash.
        WebsiteConfiguration::builder()
            .index_document(index("a/index.html"))
            .build(),
        // An index document beside a redirect of all requests.
        WebsiteConfiguration::builder()
            .index_document(index("index.html"))
            .redirect_all_requests_to(
                RedirectAllRequestsTo::builder()
                    .host_name("x.example")
                    .build()
                    .unwrap(),
            )
            .build(),
        // A redirect code that is no redirect.
        WebsiteConfiguration::builder()
            .index_document(index("index.html"))
            .routing_rules(
                RoutingRule::builder()
                    .redirect(Redirect::builder().http_redirect_code("200").build())
                    .build(),
            )
            .build(),
        // Both ways of replacing the key.
        WebsiteConfiguration::builder()
            .index_document(index("index.html"))
            .routing_rules(
                RoutingRule::builder()
                    .redirect(
                        Redirect::builder()
                            .replace_key_with("a")
                            .replace_key_prefix_with("b")
                            .build(),
                    )
                    .build(),
            )
            .build(),
    ];
    for cfg in bad {
        assert_error(put_website(&client, cfg).await, 400, "InvalidArgument");
        assert_error(
            client.get_bucket_website().bucket("web").send().await,
            404,
            "NoSuchWebsiteConfiguration",
        );
    }
    assert_error(
        client.get_bucket_website().bucket("no-such").send().await,
        404,
        "NoSuchBucket",
    );
}
