//! GetObject with Range: closed, open, suffix, past the end, across block boundaries,
//! and unsatisfiable.

use hangar_sdk_tests::random_bytes;

use crate::{assert_error, assert_same_bytes, put, server_with_bucket};

#[tokio::test]
async fn ranges_return_the_right_bytes() {
    let (_server, client) = server_with_bucket("ranges").await;
    let size = 3 * 1024 * 1024 + 17;
    let data = random_bytes(size, 7);
    put(&client, "ranges", "obj", &data).await;
    let last = size - 1;
    // (Range header, first byte, last byte)
    let cases = [
        ("bytes=0-0".to_owned(), 0, 0),
        ("bytes=0-9".to_owned(), 0, 9),
        ("bytes=100-199".to_owned(), 100, 199),
        ("bytes=1048570-1048580".to_owned(), 1_048_570, 1_048_580),
        ("bytes=1048576-2097152".to_owned(), 1_048_576, 2_097_152),
        ("bytes=2000000-".to_owned(), 2_000_000, last),
        ("bytes=-5".to_owned(), size - 5, last),
        ("bytes=-2097153".to_owned(), size - 2_097_153, last),
        // A suffix longer than the object is the whole object.
        (format!("bytes=-{}", size * 2), 0, last),
        // An end past the object is cut at the object's end.
        (format!("bytes=10-{}", size * 2), 10, last),
        (format!("bytes={last}-{last}"), last, last),
    ];
    for (range, first, end) in cases {
        let output = client
            .get_object()
            .bucket("ranges")
            .key("obj")
            .range(&range)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{range}: {e:?}"));
        assert_eq!(
            output.content_range(),
            Some(format!("bytes {first}-{end}/{size}").as_str()),
            "{range}"
        );
        assert_eq!(
            output.content_length(),
            Some((end - first + 1) as i64),
            "{range}"
        );
        assert_eq!(output.accept_ranges(), Some("bytes"), "{range}");
        assert_same_bytes(&crate::body(output).await, &data[first..=end], &range);
    }
    for range in [
        format!("bytes={size}-"),
        format!("bytes={}-{}", size + 10, size + 20),
    ] {
        assert_error(
            client
                .get_object()
                .bucket("ranges")
                .key("obj")
                .range(&range)
                .send()
                .await,
            416,
            "InvalidRange",
        );
    }
}

#[tokio::test]
async fn range_on_small_inline_object() {
    let (_server, client) = server_with_bucket("small-ranges").await;
    let data = random_bytes(3 * 1024, 8);
    put(&client, "small-ranges", "obj", &data).await;
    let output = client
        .get_object()
        .bucket("small-ranges")
        .key("obj")
        .range("bytes=1000-2047")
        .send()
        .await
        .unwrap();
    assert_eq!(output.content_range(), Some("bytes 1000-2047/3072"));
    assert_same_bytes(
        &crate::body(output).await,
        &data[1000..2048],
        "inline range",
    );
}
