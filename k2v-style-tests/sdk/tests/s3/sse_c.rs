//! SSE-C (server-side encryption with customer-provided keys) through the AWS Rust
//! SDK: PUT, GET, HEAD and a range GET with the key; the errors for a missing or a
//! wrong key; a copy that re-encrypts under a new key; a multipart upload whose
//! parts each carry the key.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hangar_sdk_tests::random_bytes;
use md5::{Digest, Md5};

use crate::{assert_error, assert_same_bytes, body, etag_of, server_with_bucket};

const MIB: usize = 1024 * 1024;

/// A customer key as the SDK sends it: the base64 key and the base64 MD5 of it.
struct CustomerKey {
    key: String,
    md5: String,
}

impl CustomerKey {
    fn new(seed: u8) -> CustomerKey {
        let raw: Vec<u8> = (0..32u8).map(|i| i.wrapping_add(seed)).collect();
        CustomerKey {
            key: BASE64.encode(&raw),
            md5: BASE64.encode(Md5::digest(&raw)),
        }
    }
}

async fn put_encrypted(client: &Client, key: &str, data: &[u8], ck: &CustomerKey) -> String {
    let out = client
        .put_object()
        .bucket("ssec")
        .key(key)
        .body(ByteStream::from(data.to_vec()))
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&ck.key)
        .sse_customer_key_md5(&ck.md5)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {key} with SSE-C: {e:?}"));
    assert_eq!(out.sse_customer_algorithm(), Some("AES256"));
    assert_eq!(out.sse_customer_key_md5(), Some(ck.md5.as_str()));
    out.e_tag().expect("ETag").to_owned()
}

async fn get_encrypted(client: &Client, key: &str, ck: &CustomerKey) -> Vec<u8> {
    let out = client
        .get_object()
        .bucket("ssec")
        .key(key)
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&ck.key)
        .sse_customer_key_md5(&ck.md5)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetObject {key} with SSE-C: {e:?}"));
    assert_eq!(out.sse_customer_algorithm(), Some("AES256"));
    assert_eq!(out.sse_customer_key_md5(), Some(ck.md5.as_str()));
    body(out).await
}

#[tokio::test]
async fn put_get_head_and_ranges_with_a_customer_key() {
    let (_server, client) = server_with_bucket("ssec").await;
    let a = CustomerKey::new(0);
    let b = CustomerKey::new(100);
    let data = random_bytes(2 * MIB + 10, 61);
    let etag = put_encrypted(&client, "o", &data, &a).await;
    assert_ne!(
        etag,
        etag_of(&data),
        "an SSE-C ETag is not the MD5 of the plaintext"
    );
    assert_same_bytes(&get_encrypted(&client, "o", &a).await, &data, "GET");

    let head = client
        .head_object()
        .bucket("ssec")
        .key("o")
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&a.key)
        .sse_customer_key_md5(&a.md5)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(data.len() as i64));
    assert_eq!(head.e_tag(), Some(etag.as_str()));
    assert_eq!(head.sse_customer_algorithm(), Some("AES256"));
    assert_eq!(head.sse_customer_key_md5(), Some(a.md5.as_str()));

    // A range across the first block boundary.
    let (first, last) = (MIB - 5, MIB + 5);
    let ranged = client
        .get_object()
        .bucket("ssec")
        .key("o")
        .range(format!("bytes={first}-{last}"))
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&a.key)
        .sse_customer_key_md5(&a.md5)
        .send()
        .await
        .unwrap();
    assert_eq!(
        ranged.content_range(),
        Some(format!("bytes {first}-{last}/{}", data.len()).as_str())
    );
    assert_eq!(body(ranged).await, &data[first..=last]);

    // Without the key, and with another key: S3's 400 and 403, for a block-stored
    // object and for a small (inline) one alike.
    put_encrypted(&client, "small", b"tiny secret", &a).await;
    for key in ["o", "small"] {
        assert_error(
            client.get_object().bucket("ssec").key(key).send().await,
            400,
            "InvalidRequest",
        );
        assert_error(
            client
                .get_object()
                .bucket("ssec")
                .key(key)
                .sse_customer_algorithm("AES256")
                .sse_customer_key(&b.key)
                .sse_customer_key_md5(&b.md5)
                .send()
                .await,
            403,
            "AccessDenied",
        );
    }
    // A HEAD answer has no body, so only the status tells.
    let (status, _) = crate::failure(client.head_object().bucket("ssec").key("o").send().await);
    assert_eq!(status, 400);
    let (status, _) = crate::failure(
        client
            .head_object()
            .bucket("ssec")
            .key("o")
            .sse_customer_algorithm("AES256")
            .sse_customer_key(&b.key)
            .sse_customer_key_md5(&b.md5)
            .send()
            .await,
    );
    assert_eq!(status, 403);
    assert_eq!(get_encrypted(&client, "small", &a).await, b"tiny secret");
}

#[tokio::test]
async fn copy_reencrypts_under_a_new_key() {
    let (_server, client) = server_with_bucket("ssec").await;
    let a = CustomerKey::new(0);
    let b = CustomerKey::new(100);
    let data = random_bytes(MIB + 300, 62);
    put_encrypted(&client, "src", &data, &a).await;

    // The encrypted source without its key, or with a wrong one.
    assert_error(
        client
            .copy_object()
            .bucket("ssec")
            .key("x")
            .copy_source("ssec/src")
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_error(
        client
            .copy_object()
            .bucket("ssec")
            .key("x")
            .copy_source("ssec/src")
            .copy_source_sse_customer_algorithm("AES256")
            .copy_source_sse_customer_key(&b.key)
            .copy_source_sse_customer_key_md5(&b.md5)
            .send()
            .await,
        403,
        "AccessDenied",
    );

    let copied = client
        .copy_object()
        .bucket("ssec")
        .key("dst")
        .copy_source("ssec/src")
        .copy_source_sse_customer_algorithm("AES256")
        .copy_source_sse_customer_key(&a.key)
        .copy_source_sse_customer_key_md5(&a.md5)
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&b.key)
        .sse_customer_key_md5(&b.md5)
        .send()
        .await
        .unwrap();
    assert_eq!(copied.sse_customer_algorithm(), Some("AES256"));
    assert_eq!(copied.sse_customer_key_md5(), Some(b.md5.as_str()));
    assert_same_bytes(&get_encrypted(&client, "dst", &b).await, &data, "copy");
    assert_error(
        client
            .get_object()
            .bucket("ssec")
            .key("dst")
            .sse_customer_algorithm("AES256")
            .sse_customer_key(&a.key)
            .sse_customer_key_md5(&a.md5)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    // The source is untouched, still under its own key.
    assert_same_bytes(&get_encrypted(&client, "src", &a).await, &data, "source");
}

#[tokio::test]
async fn multipart_upload_with_a_customer_key() {
    let (_server, client) = server_with_bucket("ssec").await;
    let a = CustomerKey::new(7);
    let b = CustomerKey::new(200);
    let parts_data = [random_bytes(5 * MIB, 63), random_bytes(MIB + 3, 64)];
    let created = client
        .create_multipart_upload()
        .bucket("ssec")
        .key("mp")
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&a.key)
        .sse_customer_key_md5(&a.md5)
        .send()
        .await
        .unwrap();
    assert_eq!(created.sse_customer_key_md5(), Some(a.md5.as_str()));
    let upload_id = created.upload_id().expect("UploadId").to_owned();

    // A part without the upload's key is refused.
    assert_error(
        client
            .upload_part()
            .bucket("ssec")
            .key("mp")
            .upload_id(&upload_id)
            .part_number(1)
            .body(ByteStream::from_static(b"p"))
            .send()
            .await,
        400,
        "InvalidRequest",
    );

    let mut parts = Vec::new();
    for (i, data) in parts_data.iter().enumerate() {
        let number = i as i32 + 1;
        let out = client
            .upload_part()
            .bucket("ssec")
            .key("mp")
            .upload_id(&upload_id)
            .part_number(number)
            .body(ByteStream::from(data.clone()))
            .sse_customer_algorithm("AES256")
            .sse_customer_key(&a.key)
            .sse_customer_key_md5(&a.md5)
            .send()
            .await
            .unwrap_or_else(|e| panic!("UploadPart {number}: {e:?}"));
        assert_eq!(out.sse_customer_key_md5(), Some(a.md5.as_str()));
        parts.push(
            CompletedPart::builder()
                .part_number(number)
                .e_tag(out.e_tag().expect("part ETag"))
                .build(),
        );
    }
    client
        .complete_multipart_upload()
        .bucket("ssec")
        .key("mp")
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .unwrap();

    let whole = parts_data.concat();
    assert_same_bytes(&get_encrypted(&client, "mp", &a).await, &whole, "multipart");
    // A range across the two parts.
    let (first, last) = (5 * MIB - 3, 5 * MIB + 3);
    let ranged = client
        .get_object()
        .bucket("ssec")
        .key("mp")
        .range(format!("bytes={first}-{last}"))
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&a.key)
        .sse_customer_key_md5(&a.md5)
        .send()
        .await
        .unwrap();
    assert_eq!(body(ranged).await, &whole[first..=last]);
    assert_error(
        client.get_object().bucket("ssec").key("mp").send().await,
        400,
        "InvalidRequest",
    );
    assert_error(
        client
            .get_object()
            .bucket("ssec")
            .key("mp")
            .sse_customer_algorithm("AES256")
            .sse_customer_key(&b.key)
            .sse_customer_key_md5(&b.md5)
            .send()
            .await,
        403,
        "AccessDenied",
    );
}
