//! Multipart uploads (beyond issue 2's list, but what aws-cli and the SDKs' transfer
//! managers send for large files): create, upload parts, list, complete, abort, and the
//! errors S3 gives for bad part lists.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use hangar_sdk_tests::random_bytes;
use md5::{Digest, Md5};

use crate::{assert_error, assert_same_bytes, get, server_with_bucket};

const MIB: usize = 1024 * 1024;

async fn upload_part(
    client: &Client,
    key: &str,
    upload_id: &str,
    number: i32,
    data: &[u8],
) -> CompletedPart {
    let output = client
        .upload_part()
        .bucket("mpu")
        .key(key)
        .upload_id(upload_id)
        .part_number(number)
        .body(ByteStream::from(data.to_vec()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("UploadPart {number}: {e:?}"));
    CompletedPart::builder()
        .part_number(number)
        .e_tag(output.e_tag().expect("part ETag"))
        .build()
}

fn completed(parts: Vec<CompletedPart>) -> CompletedMultipartUpload {
    CompletedMultipartUpload::builder()
        .set_parts(Some(parts))
        .build()
}

#[tokio::test]
async fn multipart_upload_round_trip() {
    let (_server, client) = server_with_bucket("mpu").await;
    let parts_data = [
        random_bytes(5 * MIB, 1),
        random_bytes(5 * MIB + 3, 2),
        random_bytes(MIB + 1, 3),
    ];
    let created = client
        .create_multipart_upload()
        .bucket("mpu")
        .key("big")
        .content_type("application/x-parts")
        .metadata("kind", "multipart")
        .send()
        .await
        .unwrap();
    let upload_id = created.upload_id().expect("UploadId").to_owned();

    let uploads = client
        .list_multipart_uploads()
        .bucket("mpu")
        .send()
        .await
        .unwrap();
    let listed: Vec<_> = uploads
        .uploads()
        .iter()
        .filter_map(|u| u.upload_id())
        .collect();
    assert_eq!(listed, [upload_id.as_str()]);

    let mut parts = Vec::new();
    for (i, data) in parts_data.iter().enumerate() {
        parts.push(upload_part(&client, "big", &upload_id, i as i32 + 1, data).await);
    }
    let listed = client
        .list_parts()
        .bucket("mpu")
        .key("big")
        .upload_id(&upload_id)
        .send()
        .await
        .unwrap();
    let sizes: Vec<Option<i64>> = listed.parts().iter().map(|p| p.size()).collect();
    assert_eq!(
        sizes,
        parts_data
            .iter()
            .map(|d| Some(d.len() as i64))
            .collect::<Vec<_>>()
    );

    let done = client
        .complete_multipart_upload()
        .bucket("mpu")
        .key("big")
        .upload_id(&upload_id)
        .multipart_upload(completed(parts))
        .send()
        .await
        .unwrap();
    // S3's multipart ETag: MD5 of the parts' binary MD5s, then "-<part count>".
    let mut digests = Vec::new();
    for data in &parts_data {
        digests.extend_from_slice(&Md5::digest(data));
    }
    let expected_etag = format!("\"{}-3\"", hex::encode(Md5::digest(&digests)));
    assert_eq!(done.e_tag(), Some(expected_etag.as_str()));

    let whole: Vec<u8> = parts_data.concat();
    let head = client
        .head_object()
        .bucket("mpu")
        .key("big")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(whole.len() as i64));
    assert_eq!(head.e_tag(), Some(expected_etag.as_str()));
    assert_eq!(head.content_type(), Some("application/x-parts"));
    assert_eq!(
        head.metadata()
            .and_then(|m| m.get("kind"))
            .map(String::as_str),
        Some("multipart")
    );
    assert_same_bytes(
        &get(&client, "mpu", "big").await,
        &whole,
        "completed upload",
    );
    let range = client
        .get_object()
        .bucket("mpu")
        .key("big")
        .range(format!("bytes={}-{}", 5 * MIB - 2, 5 * MIB + 1))
        .send()
        .await
        .unwrap();
    assert_eq!(crate::body(range).await, &whole[5 * MIB - 2..=5 * MIB + 1]);

    let uploads = client
        .list_multipart_uploads()
        .bucket("mpu")
        .send()
        .await
        .unwrap();
    assert!(uploads.uploads().is_empty(), "{:?}", uploads.uploads());
}

#[tokio::test]
async fn multipart_errors_and_abort() {
    let (_server, client) = server_with_bucket("mpu").await;
    let created = client
        .create_multipart_upload()
        .bucket("mpu")
        .key("k")
        .send()
        .await
        .unwrap();
    let upload_id = created.upload_id().unwrap().to_owned();
    let big = random_bytes(5 * MIB, 1);
    let small = random_bytes(MIB, 2);
    let last = random_bytes(100, 3);
    let p1 = upload_part(&client, "k", &upload_id, 1, &big).await;
    let p2 = upload_part(&client, "k", &upload_id, 2, &small).await;
    let p3 = upload_part(&client, "k", &upload_id, 3, &last).await;
    let p4 = upload_part(&client, "k", &upload_id, 4, &big).await;
    let complete = |parts: Vec<CompletedPart>| {
        client
            .complete_multipart_upload()
            .bucket("mpu")
            .key("k")
            .upload_id(&upload_id)
            .multipart_upload(completed(parts))
            .send()
    };
    // Part 2 (1 MiB) is not the last one, and below 5 MiB.
    assert_error(
        complete(vec![p1.clone(), p2.clone(), p3.clone()]).await,
        400,
        "EntityTooSmall",
    );
    // Sizes would be fine (5 MiB, then the last part), but the numbers descend.
    assert_error(complete(vec![p4, p3]).await, 400, "InvalidPartOrder");
    let wrong = CompletedPart::builder()
        .part_number(1)
        .e_tag("\"00000000000000000000000000000000\"")
        .build();
    assert_error(complete(vec![wrong]).await, 400, "InvalidPart");
    // Nothing was published by the refused completions.
    let (status, _) = crate::failure(client.head_object().bucket("mpu").key("k").send().await);
    assert_eq!(status, 404);

    client
        .abort_multipart_upload()
        .bucket("mpu")
        .key("k")
        .upload_id(&upload_id)
        .send()
        .await
        .unwrap();
    assert_error(
        client
            .upload_part()
            .bucket("mpu")
            .key("k")
            .upload_id(&upload_id)
            .part_number(5)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
    assert_error(complete(vec![p1]).await, 404, "NoSuchUpload");
}
