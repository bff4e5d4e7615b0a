//! `scale`: the steps of `script/bench-scale` over one bucket of many small
//! objects whose names follow from their index, so that a fill can stop and
//! resume anywhere and a listing can be checked key for key.
//!
//! Object `i` is `scale/<16 hex digits>`, the digits a bijective mix of `i`
//! ([`name_of`]): distinct indices give distinct names, spread evenly over
//! the key space (a fill inserts everywhere in the index, as real names do,
//! rather than appending at its end, the cheapest case of any B-tree).
//!
//! - `fill --from A --to B`: PUTs objects `A..B` (a `503` is retried after
//!   its hint, up to [`ATTEMPTS`] times); reports objects/s and latency.
//! - `delete --from A --to B --keep-every K`: deletes the objects of `A..B`
//!   whose index is not a multiple of K (DeleteObjects, 1 000 keys a
//!   request): what is left is every K-th object, among tombstones.
//! - `walk --objects N [--keep-every K]`: one ListObjectsV2 walk of the
//!   whole prefix, 1 000 keys a page, as a client would; every name of the
//!   multiples of K in `0..N` must come once, in order, and nothing else;
//!   reports keys/s.
//! - `probe --objects N --samples S [--keep-every K]`: S listings of one
//!   page each from a random point (`start-after`), and S HEADs of random
//!   objects of `0..N` (multiples of K)
//!   (whose length must be `--obj.size`), `--concurrent` at a time; reports
//!   their latencies.
//!
//! Every step prints one JSON object on stdout and fails (exit 1) when a
//! check fails or a request fails for good.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::error::LoadgenError;
use crate::outcome::{FailureKind, OpFailure};
use crate::stats::percentile;

/// The prefix every object of the scale benchmark is under.
pub const PREFIX: &str = "scale/";
/// Attempts of one PUT or HEAD refused with a retry hint (`503`).
pub const ATTEMPTS: u32 = 8;
/// Keys per listing page (S3's maximum).
const PAGE: i32 = 1000;

/// The name of object `i`: a bijection of `u64` (splitmix64's finalizer),
/// so names never collide and spread over the key space.
pub fn name_of(i: u64) -> String {
    format!("{PREFIX}{:016x}", mix(i))
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Latencies of one kind of request, in milliseconds.
#[derive(Debug, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(mut us: Vec<u64>) -> Latency {
        us.sort_unstable();
        Latency {
            count: us.len(),
            p50_ms: percentile(&us, 50.0),
            p99_ms: percentile(&us, 99.0),
            max_ms: percentile(&us, 100.0),
        }
    }
}

/// What `fill` did.
#[derive(Debug, Serialize)]
pub struct FillReport {
    pub from: u64,
    pub to: u64,
    pub seconds: f64,
    pub objects_per_s: f64,
    pub put: Latency,
    /// PUTs refused with a retry hint and retried.
    pub retried: u64,
}

/// What `walk` found.
#[derive(Debug, Serialize)]
pub struct WalkReport {
    pub keys: u64,
    pub pages: u64,
    pub seconds: f64,
    pub keys_per_s: f64,
    pub page: Latency,
}

/// What `probe` measured.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    /// One page listed from a random point.
    pub list_page: Latency,
    /// Keys per second of those pages, each timed alone.
    pub list_keys_per_s: f64,
    pub head: Latency,
}

fn failed(phase: &'static str, message: impl Into<String>) -> LoadgenError {
    LoadgenError::Setup {
        phase,
        message: message.into(),
    }
}

/// Whether the server refused the request for now (`503`, S3's `SlowDown`),
/// as the other benchmarks classify it: retried after a back-off.
fn refused<E>(err: &SdkError<E, HttpResponse>) -> bool
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    matches!(
        OpFailure::from_sdk(String::new(), err).kind,
        FailureKind::SlowDown { .. }
    )
}

/// PUTs objects `from..to` with `concurrent` workers, bodies of `size` bytes.
pub async fn fill(
    client: &Client,
    bucket: &str,
    from: u64,
    to: u64,
    size: u64,
    concurrent: usize,
) -> Result<FillReport, LoadgenError> {
    let body = {
        let mut b = vec![0u8; size as usize];
        Xoshiro256PlusPlus::seed_from_u64(size).fill_bytes(&mut b);
        Bytes::from(b)
    };
    let next = Arc::new(AtomicU64::new(from));
    let retried = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..concurrent.max(1) {
        let (client, bucket, body, next, retried) = (
            client.clone(),
            bucket.to_owned(),
            body.clone(),
            next.clone(),
            retried.clone(),
        );
        tasks.spawn(async move {
            let mut us = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    return Ok::<_, String>(us);
                }
                let key = name_of(i);
                let mut attempt = 1;
                loop {
                    let t = Instant::now();
                    let r = client
                        .put_object()
                        .bucket(&bucket)
                        .key(&key)
                        .body(ByteStream::from(body.clone()))
                        .send()
                        .await;
                    match r {
                        Ok(_) => {
                            us.push(t.elapsed().as_micros() as u64);
                            break;
                        }
                        Err(e) if refused(&e) && attempt < ATTEMPTS => {
                            retried.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                            attempt += 1;
                        }
                        Err(e) => return Err(format!("PUT {key}: {}", DisplayErrorContext(&e))),
                    }
                }
            }
        });
    }
    let mut all = Vec::with_capacity((to - from) as usize);
    while let Some(joined) = tasks.join_next().await {
        all.extend(
            joined
                .expect("fill worker panicked")
                .map_err(|m| failed("fill", m))?,
        );
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(FillReport {
        from,
        to,
        seconds,
        objects_per_s: (to - from) as f64 / seconds,
        put: Latency::of(all),
        retried: retried.load(Ordering::Relaxed),
    })
}

/// What `delete` did.
#[derive(Debug, Serialize)]
pub struct DeleteReport {
    pub deleted: u64,
    pub seconds: f64,
    pub objects_per_s: f64,
}

/// Deletes the objects of `from..to` whose index is not a multiple of
/// `keep_every`, 1 000 a request, `concurrent` requests at a time.
pub async fn delete(
    client: &Client,
    bucket: &str,
    from: u64,
    to: u64,
    keep_every: u64,
    concurrent: usize,
) -> Result<DeleteReport, LoadgenError> {
    use aws_sdk_s3::types::{Delete, ObjectIdentifier};
    let doomed: Vec<u64> = (from..to).filter(|i| i % keep_every.max(1) != 0).collect();
    let batches: Arc<Vec<Vec<u64>>> = Arc::new(doomed.chunks(1000).map(<[u64]>::to_vec).collect());
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..concurrent.max(1) {
        let (client, bucket, batches, next) = (
            client.clone(),
            bucket.to_owned(),
            batches.clone(),
            next.clone(),
        );
        tasks.spawn(async move {
            while let Some(batch) = batches.get(next.fetch_add(1, Ordering::Relaxed) as usize) {
                let ids = batch
                    .iter()
                    .map(|&i| ObjectIdentifier::builder().key(name_of(i)).build())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let del = Delete::builder()
                    .set_objects(Some(ids))
                    .quiet(true)
                    .build()
                    .map_err(|e| e.to_string())?;
                let r = client
                    .delete_objects()
                    .bucket(&bucket)
                    .delete(del)
                    .send()
                    .await
                    .map_err(|e| format!("DeleteObjects: {}", DisplayErrorContext(&e)))?;
                if let Some(e) = r.errors().first() {
                    return Err(format!("DeleteObjects: {:?} {:?}", e.key(), e.code()));
                }
            }
            Ok::<_, String>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined
            .expect("delete worker panicked")
            .map_err(|m| failed("delete", m))?;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(DeleteReport {
        deleted: doomed.len() as u64,
        seconds,
        objects_per_s: doomed.len() as f64 / seconds,
    })
}

/// Lists the whole prefix and checks it holds exactly the names of the
/// multiples of `keep_every` in `0..objects`.
pub async fn walk(
    client: &Client,
    bucket: &str,
    objects: u64,
    keep_every: u64,
) -> Result<WalkReport, LoadgenError> {
    let mut want: Vec<u64> = (0..objects)
        .filter(|i| i % keep_every.max(1) == 0)
        .map(mix)
        .collect();
    want.sort_unstable();
    let mut token: Option<String> = None;
    let (mut seen, mut pages) = (0u64, 0u64);
    let mut us = Vec::new();
    let start = Instant::now();
    loop {
        let t = Instant::now();
        let page = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(PREFIX)
            .max_keys(PAGE)
            .set_continuation_token(token.take())
            .send()
            .await
            .map_err(|e| failed("walk", DisplayErrorContext(&e).to_string()))?;
        us.push(t.elapsed().as_micros() as u64);
        pages += 1;
        for o in page.contents() {
            let key = o.key().unwrap_or_default();
            let expected = want
                .get(seen as usize)
                .map(|&h| format!("{PREFIX}{h:016x}"));
            if expected.as_deref() != Some(key) {
                return Err(failed(
                    "walk",
                    format!("key {seen} of the listing is {key:?}, expected {expected:?}"),
                ));
            }
            seen += 1;
        }
        match page.next_continuation_token() {
            Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_owned()),
            _ => break,
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if seen != want.len() as u64 {
        return Err(failed(
            "walk",
            format!("listed {seen} keys, expected {}", want.len()),
        ));
    }
    Ok(WalkReport {
        keys: seen,
        pages,
        seconds,
        keys_per_s: seen as f64 / seconds,
        page: Latency::of(us),
    })
}

/// Lists `samples` pages from random points and HEADs `samples` random
/// objects of `0..objects` (multiples of `keep_every`), `concurrent`
/// requests at a time.
pub async fn probe(
    client: &Client,
    bucket: &str,
    objects: u64,
    keep_every: u64,
    size: u64,
    samples: usize,
    concurrent: usize,
) -> Result<ProbeReport, LoadgenError> {
    let keep_every = keep_every.max(1);
    let live = objects.div_ceil(keep_every);
    if live == 0 {
        return Err(failed("probe", "--objects must be at least 1"));
    }
    let mut page_us = Vec::new();
    let (mut keys, mut list_s) = (0u64, 0f64);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(objects);
    for _ in 0..samples {
        let from = format!("{PREFIX}{:016x}", rng.next_u64());
        let t = Instant::now();
        let page = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(PREFIX)
            .start_after(&from)
            .max_keys(PAGE)
            .send()
            .await
            .map_err(|e| failed("probe listing", DisplayErrorContext(&e).to_string()))?;
        let took = t.elapsed();
        page_us.push(took.as_micros() as u64);
        list_s += took.as_secs_f64();
        let got = page.contents();
        if got.windows(2).any(|w| w[0].key() >= w[1].key())
            || got
                .first()
                .is_some_and(|o| o.key().unwrap_or_default() <= from.as_str())
        {
            return Err(failed(
                "probe listing",
                format!("a page from {from} is out of order"),
            ));
        }
        keys += got.len() as u64;
    }
    let todo = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for w in 0..concurrent.max(1) {
        let (client, bucket, todo) = (client.clone(), bucket.to_owned(), todo.clone());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(objects ^ ((w as u64) << 40));
        tasks.spawn(async move {
            let mut us = Vec::new();
            while todo.fetch_add(1, Ordering::Relaxed) < samples as u64 {
                let key = name_of(rng.next_u64() % live * keep_every);
                let mut attempt = 1;
                loop {
                    let t = Instant::now();
                    match client.head_object().bucket(&bucket).key(&key).send().await {
                        Ok(h) if h.content_length() == Some(size as i64) => {
                            us.push(t.elapsed().as_micros() as u64);
                            break;
                        }
                        Ok(h) => {
                            return Err(format!(
                                "HEAD {key}: length {:?}, expected {size}",
                                h.content_length()
                            ));
                        }
                        Err(e) if refused(&e) && attempt < ATTEMPTS => {
                            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                            attempt += 1;
                        }
                        Err(e) => return Err(format!("HEAD {key}: {}", DisplayErrorContext(&e))),
                    }
                }
            }
            Ok::<_, String>(us)
        });
    }
    let mut head_us = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        head_us.extend(
            joined
                .expect("probe worker panicked")
                .map_err(|m| failed("probe", m))?,
        );
    }
    Ok(ProbeReport {
        list_page: Latency::of(page_us),
        list_keys_per_s: if list_s > 0.0 {
            keys as f64 / list_s
        } else {
            0.0
        },
        head: Latency::of(head_us),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_fixed_width_and_spread() {
        let names: std::collections::BTreeSet<String> = (0..100_000).map(name_of).collect();
        assert_eq!(names.len(), 100_000);
        assert!(names.iter().all(|n| n.len() == PREFIX.len() + 16));
        // Consecutive indices land all over the key space: each of the 16
        // first hex digits starts some of the first thousand names.
        let firsts: std::collections::BTreeSet<char> = (0..1000)
            .map(|i| name_of(i).chars().nth(PREFIX.len()).unwrap())
            .collect();
        assert_eq!(firsts.len(), 16);
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let l = Latency::of((1..=100).map(|ms| ms * 1000).collect());
        assert_eq!(
            (l.count, l.p50_ms, l.p99_ms, l.max_ms),
            (100, 50.0, 99.0, 100.0)
        );
        assert_eq!(Latency::of(Vec::new()).count, 0);
    }
}
