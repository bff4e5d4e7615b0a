//! ListObjectsV2 and ListObjects (v1): prefix, delimiter, max-keys, continuation-token,
//! start-after, marker, encoding-type=url.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::EncodingType;

use crate::{put, server_with_bucket};

const FLAT: [&str; 6] = ["a/1", "a/2", "a/b/3", "b/1", "c", "d/x/y"];

async fn fill(client: &Client, bucket: &str) -> Vec<String> {
    let mut keys: Vec<String> = FLAT.iter().map(|k| k.to_string()).collect();
    keys.extend((1..=25).map(|i| format!("p/{i:04}")));
    for key in &keys {
        put(client, bucket, key, key.as_bytes()).await;
    }
    keys.sort_unstable();
    keys
}

/// One page: (keys, common prefixes).
type Page = (Vec<String>, Vec<String>);

fn page_of(output: &aws_sdk_s3::operation::list_objects_v2::ListObjectsV2Output) -> Page {
    (
        output
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_owned))
            .collect(),
        output
            .common_prefixes()
            .iter()
            .filter_map(|p| p.prefix().map(str::to_owned))
            .collect(),
    )
}

#[tokio::test]
async fn v2_prefix_and_delimiter() {
    let (_server, client) = server_with_bucket("list").await;
    let all = fill(&client, "list").await;

    let output = client
        .list_objects_v2()
        .bucket("list")
        .send()
        .await
        .unwrap();
    let (keys, prefixes) = page_of(&output);
    assert_eq!(keys, all);
    assert!(prefixes.is_empty());
    assert_eq!(output.key_count(), Some(all.len() as i32));
    assert_eq!(output.is_truncated(), Some(false));
    let first = &output.contents()[0];
    assert_eq!(first.size(), Some(3));
    assert!(first.e_tag().is_some() && first.last_modified().is_some());

    let output = client
        .list_objects_v2()
        .bucket("list")
        .delimiter("/")
        .send()
        .await
        .unwrap();
    assert_eq!(
        page_of(&output),
        (
            vec!["c".into()],
            vec!["a/".into(), "b/".into(), "d/".into(), "p/".into()]
        )
    );
    assert_eq!(output.key_count(), Some(5));

    let output = client
        .list_objects_v2()
        .bucket("list")
        .prefix("a/")
        .delimiter("/")
        .send()
        .await
        .unwrap();
    assert_eq!(
        page_of(&output),
        (vec!["a/1".into(), "a/2".into()], vec!["a/b/".into()])
    );
    assert_eq!(output.prefix(), Some("a/"));
    assert_eq!(output.delimiter(), Some("/"));

    let output = client
        .list_objects_v2()
        .bucket("list")
        .prefix("zzz")
        .send()
        .await
        .unwrap();
    assert_eq!(page_of(&output), (vec![], vec![]));
    assert_eq!(output.key_count(), Some(0));
}

#[tokio::test]
async fn v2_pagination_with_delimiter() {
    let (_server, client) = server_with_bucket("pages").await;
    fill(&client, "pages").await;
    // With a delimiter, keys and common prefixes share the max-keys budget, in order.
    let mut entries = Vec::new();
    let mut token: Option<String> = None;
    for page in 0.. {
        assert!(page < 10, "pagination does not end");
        let output = client
            .list_objects_v2()
            .bucket("pages")
            .delimiter("/")
            .max_keys(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        let (keys, prefixes) = page_of(&output);
        assert!(
            keys.len() + prefixes.len() <= 2,
            "page {page}: {keys:?} {prefixes:?}"
        );
        assert_eq!(output.max_keys(), Some(2));
        assert_eq!(
            output.key_count(),
            Some((keys.len() + prefixes.len()) as i32)
        );
        entries.extend(keys);
        entries.extend(prefixes);
        if output.is_truncated() == Some(true) {
            token = Some(output.next_continuation_token().expect("token").to_owned());
        } else {
            assert!(output.next_continuation_token().is_none());
            break;
        }
    }
    entries.sort_unstable();
    assert_eq!(entries, ["a/", "b/", "c", "d/", "p/"]);

    // Without a delimiter: 25 keys under p/ in pages of 10.
    let mut sizes = Vec::new();
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let output = client
            .list_objects_v2()
            .bucket("pages")
            .prefix("p/")
            .max_keys(10)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        let (keys, _) = page_of(&output);
        sizes.push(keys.len());
        seen.extend(keys);
        match output.next_continuation_token() {
            Some(next) if output.is_truncated() == Some(true) => token = Some(next.to_owned()),
            _ => break,
        }
        assert!(sizes.len() < 10, "pagination does not end");
    }
    assert_eq!(sizes, [10, 10, 5]);
    let expected: Vec<String> = (1..=25).map(|i| format!("p/{i:04}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn v2_start_after_and_url_encoding() {
    let (_server, client) = server_with_bucket("after").await;
    fill(&client, "after").await;
    let output = client
        .list_objects_v2()
        .bucket("after")
        .prefix("p/")
        .start_after("p/0020")
        .send()
        .await
        .unwrap();
    let (keys, _) = page_of(&output);
    assert_eq!(keys, ["p/0021", "p/0022", "p/0023", "p/0024", "p/0025"]);
    assert_eq!(output.start_after(), Some("p/0020"));

    put(&client, "after", "q/é&x", b"1").await;
    let output = client
        .list_objects_v2()
        .bucket("after")
        .prefix("q/")
        .encoding_type(EncodingType::Url)
        .send()
        .await
        .unwrap();
    assert_eq!(output.encoding_type(), Some(&EncodingType::Url));
    let (keys, _) = page_of(&output);
    assert_eq!(keys.len(), 1, "{keys:?}");
    // Whether `/` is escaped differs between implementations (MinIO keeps it, Garage
    // escapes it); what must hold is that the rest is escaped and decodes to the key.
    let encoded = keys[0].replace("%2F", "/");
    assert_eq!(encoded, "q/%C3%A9%26x");
    let decoded = percent_encoding::percent_decode_str(&keys[0])
        .decode_utf8()
        .unwrap();
    assert_eq!(decoded, "q/é&x");
}

#[tokio::test]
async fn v1_marker_pagination() {
    let (_server, client) = server_with_bucket("list-v1").await;
    let all = fill(&client, "list-v1").await;
    let mut seen = Vec::new();
    let mut marker: Option<String> = None;
    for page in 0.. {
        assert!(page < 10, "pagination does not end");
        let output = client
            .list_objects()
            .bucket("list-v1")
            .max_keys(7)
            .set_marker(marker.clone())
            .send()
            .await
            .unwrap();
        let keys: Vec<String> = output
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_owned))
            .collect();
        assert!(keys.len() <= 7);
        let truncated = output.is_truncated() == Some(true);
        marker = keys.last().cloned();
        seen.extend(keys);
        if !truncated {
            break;
        }
    }
    assert_eq!(seen, all);

    // With a delimiter, NextMarker is returned and resumes after a common prefix.
    let output = client
        .list_objects()
        .bucket("list-v1")
        .delimiter("/")
        .max_keys(2)
        .send()
        .await
        .unwrap();
    let prefixes: Vec<&str> = output
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(prefixes, ["a/", "b/"]);
    assert_eq!(output.is_truncated(), Some(true));
    let next = output
        .next_marker()
        .expect("NextMarker with a delimiter")
        .to_owned();
    let output = client
        .list_objects()
        .bucket("list-v1")
        .delimiter("/")
        .max_keys(10)
        .marker(&next)
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = output.contents().iter().filter_map(|o| o.key()).collect();
    let prefixes: Vec<&str> = output
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(keys, ["c"], "after NextMarker {next:?}");
    assert_eq!(prefixes, ["d/", "p/"], "after NextMarker {next:?}");
    assert_eq!(output.is_truncated(), Some(false));
}
