//! Virtual-host-style requests (`<bucket>.<root_domain>`), signed by the SDK, next to
//! path-style ones on the same server.

use aws_sdk_s3::primitives::ByteStream;
use hangar_sdk_tests::{TestServer, VirtualHost, random_bytes};

use crate::{assert_same_bytes, get};

#[tokio::test]
async fn virtual_host_style_requests() {
    let server = TestServer::start_with("root_domain = \".s3.localhost\"");
    let key = &server.key;
    let vhost = aws_sdk_s3::Client::from_conf(
        server
            .config_builder(&key.access_key_id, &key.secret_access_key)
            .interceptor(VirtualHost {
                domain: format!("s3.localhost:{}", server.port()),
            })
            .build(),
    );
    let path = server.client();

    vhost.create_bucket().bucket("vhost").send().await.unwrap();
    path.head_bucket().bucket("vhost").send().await.unwrap();
    let data = random_bytes(1024 * 1024 + 1, 1);
    vhost
        .put_object()
        .bucket("vhost")
        .key("dir/obj 1")
        .body(ByteStream::from(data.clone()))
        .send()
        .await
        .unwrap();
    let got = vhost
        .get_object()
        .bucket("vhost")
        .key("dir/obj 1")
        .range("bytes=1-10")
        .send()
        .await
        .unwrap();
    assert_eq!(crate::body(got).await, &data[1..=10]);
    assert_same_bytes(
        &get(&path, "vhost", "dir/obj 1").await,
        &data,
        "path-style read",
    );
    let head = vhost
        .head_object()
        .bucket("vhost")
        .key("dir/obj 1")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(data.len() as i64));
    let listed = vhost
        .list_objects_v2()
        .bucket("vhost")
        .delimiter("/")
        .send()
        .await
        .unwrap();
    let prefixes: Vec<&str> = listed
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(prefixes, ["dir/"]);
    vhost
        .copy_object()
        .bucket("vhost")
        .key("copy")
        .copy_source("vhost/dir/obj%201")
        .send()
        .await
        .unwrap();
    assert_same_bytes(&get(&path, "vhost", "copy").await, &data, "copy via vhost");
    let buckets = vhost.list_buckets().send().await.unwrap();
    assert_eq!(buckets.buckets().len(), 1);
    for k in ["dir/obj 1", "copy"] {
        vhost
            .delete_object()
            .bucket("vhost")
            .key(k)
            .send()
            .await
            .unwrap();
    }
    vhost.delete_bucket().bucket("vhost").send().await.unwrap();
    let (status, _) = crate::failure(path.head_bucket().bucket("vhost").send().await);
    assert_eq!(status, 404);
}
