//! A peer that holds the cluster secret but sends forged frames on its
//! authenticated connection: frame lengths it never sends, lengths past the
//! limits, garbage messages and a wrong version byte. The node refuses each
//! without allocating what the frame claims, and keeps serving that peer's
//! other calls and every other peer.
//!
//! Memory is measured with a counting global allocator (this test binary
//! only): bytes currently allocated by the whole process.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Echo, init_tracing, start_node};
use hangar_net::wire::{self, MAX_MESSAGE_LEN, RequestHeader, WIRE_VERSION};
use hangar_net::{CallOpts, Mesh};

struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const MIB: usize = 1024 * 1024;

fn header_frame(path: &str) -> Vec<u8> {
    let head = RequestHeader {
        path: path.into(),
        timeout_ms: 30_000,
        priority: 1,
        has_body: false,
    };
    let enc = wire::encode_message(&head).unwrap();
    let mut out = vec![WIRE_VERSION];
    out.extend_from_slice(&(enc.len() as u32).to_be_bytes());
    out.extend_from_slice(&enc);
    out
}

async fn echo(from: &Mesh, to: &Mesh, text: &str) -> String {
    let ep = from.endpoint::<String, String>("test/echo").unwrap();
    ep.call(
        to.id(),
        text.into(),
        CallOpts::default().with_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_frames_are_refused_without_allocating_them() {
    init_tracing();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let victim = start_node(dirs[0].path()).await;
    let attacker = start_node(dirs[1].path()).await;
    let bystander = start_node(dirs[2].path()).await;
    for m in [&victim, &attacker, &bystander] {
        m.endpoint::<String, String>("test/echo")
            .unwrap()
            .set_handler(Echo, 64);
    }
    attacker.connect(&victim.peer_addr()).await.unwrap();
    bystander.connect(&victim.peer_addr()).await.unwrap();
    assert_eq!(echo(&bystander, &victim, "before").await, "before");

    // 1. Calls whose message frame claims the largest accepted length
    // (16 MiB) and then sends 10 bytes and waits: 64 of them would be 1 GiB
    // if the claimed length were allocated up front.
    let before = ALLOCATED.load(Ordering::Relaxed);
    let mut hanging = Vec::new();
    for _ in 0..64 {
        let (mut send, recv) = attacker.open_raw_stream(victim.id()).await.unwrap();
        let mut bytes = header_frame("test/echo");
        bytes.extend_from_slice(&(MAX_MESSAGE_LEN as u32).to_be_bytes());
        bytes.extend_from_slice(&[0x91; 10]);
        send.write_all(&bytes).await.unwrap();
        hanging.push((send, recv));
    }
    // The victim has read every header and started every message read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = ALLOCATED.load(Ordering::Relaxed).saturating_sub(before);
    assert!(
        grown < 32 * MIB,
        "{} MiB allocated for 64 forged 16 MiB frames",
        grown / MIB
    );
    // Meanwhile the victim serves the attacker's own honest calls and the
    // bystander's.
    assert_eq!(echo(&bystander, &victim, "during").await, "during");
    assert_eq!(echo(&attacker, &victim, "mine").await, "mine");

    // 2. Frames past the limits, and a wrong version byte: the stream is
    // reset at once, nothing answered.
    let mut too_long_header = vec![WIRE_VERSION];
    too_long_header.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut too_long_message = header_frame("test/echo");
    too_long_message.extend_from_slice(&(MAX_MESSAGE_LEN as u32 + 1).to_be_bytes());
    let mut wrong_version = header_frame("test/echo");
    wrong_version[0] = WIRE_VERSION + 1;
    let garbage_header = vec![WIRE_VERSION, 0, 0, 0, 3, 0xc1, 0xc1, 0xc1];
    for forged in [
        too_long_header,
        too_long_message,
        wrong_version,
        garbage_header,
    ] {
        let (mut send, mut recv) = attacker.open_raw_stream(victim.id()).await.unwrap();
        send.write_all(&forged).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), wire::read_response(&mut recv))
            .await
            .expect("the stream is refused at once, not left open");
        assert!(
            answer.is_err(),
            "forged frame {forged:02x?} got an answer: {answer:?}"
        );
    }

    // 3. A well-framed message that is not the endpoint's type: answered
    // with a decoding error (status 4, bad request).
    let (mut send, mut recv) = attacker.open_raw_stream(victim.id()).await.unwrap();
    let mut bytes = header_frame("test/echo");
    bytes.extend_from_slice(&5u32.to_be_bytes());
    bytes.extend_from_slice(&[0xc1, 0xff, 0x00, 0x93, 0xdd]);
    send.write_all(&bytes).await.unwrap();
    send.finish().unwrap();
    let (head, msg) = tokio::time::timeout(Duration::from_secs(5), wire::read_response(&mut recv))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((head.status, msg), (4, None), "{:?}", head.message);

    // The forged calls' streams end when the attacker drops them; the
    // victim still serves everyone.
    drop(hanging);
    assert_eq!(echo(&bystander, &victim, "after").await, "after");
    assert_eq!(echo(&attacker, &victim, "again").await, "again");
    for m in [victim, attacker, bystander] {
        m.shutdown().await;
    }
}
