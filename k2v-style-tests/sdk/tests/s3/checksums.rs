//! Flexible checksums: the SDK's default CRC32 (a header for in-memory bodies; an
//! aws-chunked trailer, `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, for streaming bodies),
//! explicit algorithms and precomputed values, verified on upload and returned with
//! `x-amz-checksum-mode: ENABLED`.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumMode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hangar_sdk_tests::random_bytes;
use sha2::{Digest, Sha256};

use crate::{assert_error, assert_same_bytes, failure, get, server_with_bucket};

const SIZES: [usize; 4] = [0, 3 * 1024, 1024 * 1024 + 1, 5 * 1024 * 1024 + 7];

fn crc32_of(data: &[u8]) -> String {
    BASE64.encode(crc32fast::hash(data).to_be_bytes())
}

fn sha256_of(data: &[u8]) -> String {
    BASE64.encode(Sha256::digest(data))
}

#[tokio::test]
async fn sdk_default_crc32_is_verified_and_returned() {
    let (_server, client) = server_with_bucket("crc").await;
    for size in SIZES {
        let data = random_bytes(size, size as u64);
        let key = format!("obj-{size}");
        let put = client
            .put_object()
            .bucket("crc")
            .key(&key)
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("PUT {key}: {e:?}"));
        assert_eq!(
            put.checksum_crc32(),
            Some(crc32_of(&data).as_str()),
            "PUT {key}"
        );

        let got = client
            .get_object()
            .bucket("crc")
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(
            got.checksum_crc32(),
            Some(crc32_of(&data).as_str()),
            "GET {key}"
        );
        // The SDK also validates the body against the returned checksum while reading.
        assert_same_bytes(&crate::body(got).await, &data, &key);

        let head = client
            .head_object()
            .bucket("crc")
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(
            head.checksum_crc32(),
            Some(crc32_of(&data).as_str()),
            "HEAD {key}"
        );
    }
}

#[tokio::test]
async fn streaming_body_sends_crc32_trailer() {
    // A body read from a file has no in-memory bytes, so the SDK sends it aws-chunked
    // with the CRC32 in a trailer, as aws-cli and current SDKs do by default.
    let (_server, client) = server_with_bucket("trailer").await;
    let dir = tempfile::tempdir().unwrap();
    for size in SIZES.into_iter().chain([20 * 1024 * 1024 + 3]) {
        let data = random_bytes(size, 1000 + size as u64);
        let path = dir.path().join(format!("body-{size}"));
        std::fs::write(&path, &data).unwrap();
        let key = format!("streamed-{size}");
        let put = client
            .put_object()
            .bucket("trailer")
            .key(&key)
            .body(ByteStream::from_path(&path).await.unwrap())
            .send()
            .await
            .unwrap_or_else(|e| panic!("PUT {key}: {e:?}"));
        assert_eq!(
            put.checksum_crc32(),
            Some(crc32_of(&data).as_str()),
            "PUT {key}"
        );
        let got = client
            .get_object()
            .bucket("trailer")
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(
            got.checksum_crc32(),
            Some(crc32_of(&data).as_str()),
            "GET {key}"
        );
        assert_eq!(got.content_length(), Some(size as i64), "GET {key}");
        assert_same_bytes(&crate::body(got).await, &data, &key);
    }
}

#[tokio::test]
async fn explicit_sha256_is_verified_and_returned() {
    let (_server, client) = server_with_bucket("sha").await;
    for size in SIZES {
        let data = random_bytes(size, 100 + size as u64);
        let key = format!("obj-{size}");
        let put = client
            .put_object()
            .bucket("sha")
            .key(&key)
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("PUT {key}: {e:?}"));
        assert_eq!(
            put.checksum_sha256(),
            Some(sha256_of(&data).as_str()),
            "PUT {key}"
        );
        let got = client
            .get_object()
            .bucket("sha")
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(
            got.checksum_sha256(),
            Some(sha256_of(&data).as_str()),
            "GET {key}"
        );
        assert_same_bytes(&crate::body(got).await, &data, &key);
    }
    // A precomputed value, sent as a header.
    let data = random_bytes(4096, 9);
    client
        .put_object()
        .bucket("sha")
        .key("precomputed")
        .checksum_sha256(sha256_of(&data))
        .body(ByteStream::from(data.clone()))
        .send()
        .await
        .unwrap();
    assert_same_bytes(
        &get(&client, "sha", "precomputed").await,
        &data,
        "precomputed",
    );
}

/// Uploads with `algorithm` computed by the SDK, then checks that GET with checksum mode
/// returns the value the PUT answer gave (the SDK validates the body against it too).
async fn algorithm_round_trips(algorithm: ChecksumAlgorithm) {
    let bucket = format!("algo-{}", algorithm.as_str().to_lowercase());
    let (_server, client) = server_with_bucket(&bucket).await;
    let data = random_bytes(1024 * 1024 + 1, 3);
    let put = client
        .put_object()
        .bucket(&bucket)
        .key("obj")
        .checksum_algorithm(algorithm.clone())
        .body(ByteStream::from(data.clone()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT with {algorithm:?}: {e:?}"));
    let got = client
        .get_object()
        .bucket(&bucket)
        .key("obj")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    let (sent, returned) = match algorithm {
        ChecksumAlgorithm::Crc32C => (put.checksum_crc32_c(), got.checksum_crc32_c()),
        ChecksumAlgorithm::Sha1 => (put.checksum_sha1(), got.checksum_sha1()),
        ChecksumAlgorithm::Crc64Nvme => (put.checksum_crc64_nvme(), got.checksum_crc64_nvme()),
        other => panic!("not covered here: {other:?}"),
    };
    let sent = sent.map(str::to_owned);
    assert!(
        sent.is_some(),
        "PUT with {algorithm:?} returned no checksum"
    );
    assert_eq!(returned.map(str::to_owned), sent, "GET with {algorithm:?}");
    assert_same_bytes(&crate::body(got).await, &data, algorithm.as_str());
}

#[tokio::test]
async fn crc32c_round_trips() {
    algorithm_round_trips(ChecksumAlgorithm::Crc32C).await;
}

#[tokio::test]
async fn sha1_round_trips() {
    algorithm_round_trips(ChecksumAlgorithm::Sha1).await;
}

/// CRC64NVME is asked for "if the library has it" (issue 2): a failure here alone says
/// the server does not support it.
#[tokio::test]
async fn crc64nvme_round_trips() {
    algorithm_round_trips(ChecksumAlgorithm::Crc64Nvme).await;
}

#[tokio::test]
async fn wrong_checksum_is_refused() {
    let (_server, client) = server_with_bucket("bad-sum").await;
    let data = random_bytes(10_000, 4);
    let other = random_bytes(10_000, 5);
    assert_error(
        client
            .put_object()
            .bucket("bad-sum")
            .key("crc")
            .checksum_crc32(crc32_of(&other))
            .body(ByteStream::from(data.clone()))
            .send()
            .await,
        400,
        "BadDigest",
    );
    assert_error(
        client
            .put_object()
            .bucket("bad-sum")
            .key("sha")
            .checksum_sha256(sha256_of(&other))
            .body(ByteStream::from(data.clone()))
            .send()
            .await,
        400,
        "BadDigest",
    );
    for key in ["crc", "sha"] {
        let (status, _) = failure(client.head_object().bucket("bad-sum").key(key).send().await);
        assert_eq!(status, 404, "{key} must not exist after a refused upload");
    }
}
