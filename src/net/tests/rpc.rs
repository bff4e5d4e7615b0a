//! RPC behaviour between two nodes in one process: deadlines, overload,
//! streamed bodies, bounded memory with a slow receiver, and priorities.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use futures::StreamExt;
use hangar_net::{Body, CallOpts, Handler, HandlerError, Mesh, NetError, Request, Response};
use tokio::sync::Notify;

async fn pair() -> (Mesh, Mesh, tempfile::TempDir, tempfile::TempDir) {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node(da.path()).await;
    let b = start_node(db.path()).await;
    a.connect(&b.peer_addr()).await.unwrap();
    (a, b, da, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_to_a_stalled_handler_fails_at_its_deadline() {
    let (a, b, _da, _db) = pair().await;
    let release = Arc::new(Notify::new());
    b.endpoint::<u32, u32>("test/stall")
        .unwrap()
        .set_handler(Stall(release.clone()), 8);
    let ep = a.endpoint::<u32, u32>("test/stall").unwrap();
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let e = ep
        .call(b.id(), 1, CallOpts::default().with_timeout(deadline))
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, NetError::Timeout { .. }), "got {e}");
    // tokio's timers tick in whole milliseconds, so a deadline may fire up
    // to one tick before the test's own clock says it is due (seen once:
    // 299.95 ms of 300).
    let tick = Duration::from_millis(1);
    assert!(
        took + tick >= deadline && took < deadline + Duration::from_millis(250),
        "took {took:?}"
    );
    // The same holds for a local call.
    b.endpoint::<u32, u32>("test/stall").unwrap();
    let local = b.endpoint::<u32, u32>("test/stall").unwrap();
    let e = local
        .call(b.id(), 1, CallOpts::default().with_timeout(deadline))
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::Timeout { .. }), "got {e}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_handler_queue_answers_overloaded_quickly() {
    let (a, b, _da, _db) = pair().await;
    let release = Arc::new(Notify::new());
    b.endpoint::<u32, u32>("test/stall")
        .unwrap()
        .set_handler(Stall(release.clone()), 2);
    let ep = a.endpoint::<u32, u32>("test/stall").unwrap();
    let opts = CallOpts::default().with_timeout(Duration::from_secs(5));
    let first: Vec<_> = (0..2)
        .map(|i| {
            let ep = ep.clone();
            let id = b.id();
            tokio::spawn(async move { ep.call(id, i, opts).await })
        })
        .collect();
    // Let both calls reach the handler.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    let e = ep.call(b.id(), 9, opts).await.unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, NetError::Overloaded(_)), "got {e}");
    assert!(
        took < Duration::from_millis(200),
        "overload answer took {took:?}"
    );
    assert!(
        b.metrics()
            .encode_text()
            .contains("hangar_rpc_rejected_overloaded_total")
    );
    release.notify_waiters();
    for (i, h) in first.into_iter().enumerate() {
        assert_eq!(h.await.unwrap().unwrap(), i as u32);
    }
    // Once the queue drained, calls are admitted again.
    let ep_ok = ep.clone();
    let id = b.id();
    let h = tokio::spawn(async move { ep_ok.call(id, 5, opts).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    release.notify_waiters();
    assert_eq!(h.await.unwrap().unwrap(), 5);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_bodies_travel_both_ways_intact() {
    let (a, b, _da, _db) = pair().await;
    b.endpoint::<String, String>("test/echo")
        .unwrap()
        .set_handler(Echo, 8);
    let ep = a.endpoint::<String, String>("test/echo").unwrap();
    // 5 MiB + 3 bytes in uneven pieces, larger than a DATA frame.
    let data: Vec<u8> = (0..5 * 1024 * 1024 + 3).map(|i| (i % 251) as u8).collect();
    let pieces: Vec<Bytes> = data.chunks(1_500_000).map(Bytes::copy_from_slice).collect();
    let body = Body::from_stream(futures::stream::iter(pieces.into_iter().map(Ok)));
    let resp = ep
        .call_with_body(b.id(), "blk".into(), Some(body), CallOpts::default())
        .await
        .unwrap();
    assert_eq!(resp.msg, "blk");
    let back = resp.body.unwrap().collect(usize::MAX).await.unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data);

    // A body that fails midway reaches the handler as an error.
    b.endpoint::<u32, u64>("test/sink")
        .unwrap()
        .set_handler(Sink, 8);
    let sink = a.endpoint::<u32, u64>("test/sink").unwrap();
    let failing = Body::from_stream(futures::stream::iter(vec![
        Ok(Bytes::from_static(b"abc")),
        Err(NetError::Body("disk read failed".into())),
    ]));
    let e = sink
        .call_with_body(b.id(), 0, Some(failing), CallOpts::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("disk read failed"), "got {e}");
    a.shutdown().await;
    b.shutdown().await;
}

/// Answers with a body that fails after `0` bytes (a block read from a disk
/// that fails midway).
struct FailingAnswer(usize);

#[async_trait::async_trait]
impl Handler<u32, u32> for FailingAnswer {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u32>, HandlerError> {
        let body = Body::from_stream(futures::stream::iter(vec![
            Ok(Bytes::from(vec![5u8; self.0])),
            Err(NetError::Body("disk read failed".into())),
        ]));
        Ok(Response::with_body(req.msg, body))
    }
}

/// A body that fails behind megabytes still on their way reaches the other
/// side as its own error, whichever way it travels: the ERROR frame after
/// the data must be delivered, not dropped with the stream's unsent bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_failing_behind_megabytes_reaches_the_other_side_as_its_error() {
    let (a, b, _da, _db) = pair().await;
    b.endpoint::<u32, u64>("test/sink")
        .unwrap()
        .set_handler(Sink, 8);
    let sink = a.endpoint::<u32, u64>("test/sink").unwrap();
    for _ in 0..3 {
        let failing = Body::from_stream(futures::stream::iter(vec![
            Ok(Bytes::from(vec![3u8; 8 << 20])),
            Err(NetError::Body("disk read failed".into())),
        ]));
        let e = sink
            .call_with_body(b.id(), 0, Some(failing), CallOpts::default())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("disk read failed"),
            "request body: got {e}"
        );
    }
    b.endpoint::<u32, u32>("test/failing-answer")
        .unwrap()
        .set_handler(FailingAnswer(8 << 20), 8);
    let ep = a.endpoint::<u32, u32>("test/failing-answer").unwrap();
    for _ in 0..3 {
        let resp = ep
            .call_with_body(b.id(), 1, None, CallOpts::default())
            .await
            .unwrap();
        let e = resp.body.unwrap().collect(usize::MAX).await.unwrap_err();
        assert!(
            e.to_string().contains("disk read failed"),
            "response body: got {e}"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_types_are_checked_and_unknown_paths_refused() {
    let (a, b, _da, _db) = pair().await;
    a.endpoint::<String, String>("test/x").unwrap();
    assert!(matches!(
        a.endpoint::<u32, String>("test/x"),
        Err(NetError::EndpointTypeMismatch(_))
    ));
    let ep = a.endpoint::<String, String>("test/nowhere").unwrap();
    let e = ep
        .call(b.id(), "?".into(), CallOpts::default())
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::NoSuchEndpoint(_)), "got {e}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_receiver_bounds_what_the_sender_buffers() {
    let (a, b, _da, _db) = pair().await;
    let release = Arc::new(Notify::new());
    // The handler holds the body unread until released.
    b.endpoint::<u32, u32>("test/stall")
        .unwrap()
        .set_handler(Stall(release.clone()), 8);
    let ep = a.endpoint::<u32, u32>("test/stall").unwrap();
    let produced = Arc::new(AtomicU64::new(0));
    let chunk = Bytes::from(vec![1u8; 256 * 1024]);
    let p = produced.clone();
    // Up to 1 GiB offered, produced only as fast as the network takes it.
    let body = Body::from_stream(futures::stream::iter(0..4096).map(move |_| {
        p.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        Ok(chunk.clone())
    }));
    let rss_before = rss_bytes();
    let id = b.id();
    let call = tokio::spawn(async move {
        ep.call_with_body(
            id,
            1,
            Some(body),
            CallOpts::default().with_timeout(Duration::from_secs(3)),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = produced.load(Ordering::Relaxed);
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    println!("sender produced {sent} bytes, RSS grew by {rss_growth} bytes");
    // Stream window (2 MiB) + send window (4 MiB) + a chunk.
    assert!(sent <= 7 * 1024 * 1024, "sender produced {sent} bytes");
    assert!(rss_growth < 200 * 1024 * 1024, "RSS grew by {rss_growth}");
    release.notify_waiters();
    let _ = call.await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_bulk_does_not_delay_foreground_calls() {
    let (a, b, _da, _db) = pair().await;
    b.endpoint::<u32, u64>("test/sink")
        .unwrap()
        .set_handler(Sink, 64);
    b.endpoint::<String, String>("test/echo")
        .unwrap()
        .set_handler(Echo, 64);
    let sink = a.endpoint::<u32, u64>("test/sink").unwrap();
    let echo = a.endpoint::<String, String>("test/echo").unwrap();
    let id = b.id();

    // Baseline small-call latency.
    let mut idle = vec![];
    for _ in 0..50 {
        let t = Instant::now();
        echo.call(id, "p".into(), CallOpts::default())
            .await
            .unwrap();
        idle.push(t.elapsed());
    }

    // Eight background streams of 64 MiB each keep the link full.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut bulk = vec![];
    for _ in 0..8 {
        let sink = sink.clone();
        let stop = stop.clone();
        bulk.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                sink.call_with_body(
                    id,
                    0,
                    Some(lazy_body(64, 1024 * 1024)),
                    CallOpts::background(),
                )
                .await
                .unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut busy = vec![];
    let mut busy_big = vec![];
    for _ in 0..50 {
        let t = Instant::now();
        echo.call(id, "p".into(), CallOpts::default())
            .await
            .unwrap();
        busy.push(t.elapsed());
        // A foreground 1 MiB body (a GET's block) next to the bulk.
        let t = Instant::now();
        let big = Some(lazy_body(1, 1024 * 1024));
        sink.call_with_body(id, 0, big, CallOpts::default())
            .await
            .unwrap();
        busy_big.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for h in bulk {
        h.await.unwrap();
    }
    idle.sort();
    busy.sort();
    busy_big.sort();
    let (idle_p50, busy_p50, busy_p90) = (idle[25], busy[25], busy[45]);
    let big_p50 = busy_big[25];
    println!(
        "foreground latency idle p50 {idle_p50:?}; under background bulk p50 {busy_p50:?} \
         p90 {busy_p90:?}; 1 MiB foreground call p50 {big_p50:?}"
    );
    assert!(
        busy_p50 < Duration::from_millis(50),
        "p50 under load {busy_p50:?}"
    );
    // 8 background bodies share the link; a foreground one must not wait
    // for a 1/9 share (~9 MiB of transfer before it completes).
    assert!(
        big_p50 < Duration::from_millis(100),
        "1 MiB p50 under load {big_p50:?}"
    );
    a.shutdown().await;
    b.shutdown().await;
}
