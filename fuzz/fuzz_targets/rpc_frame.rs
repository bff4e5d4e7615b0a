//! A call's stream as a node reads it from a peer (`hangar_net::wire`, the
//! same parsers `serve_stream` and `call_remote` run): the version byte,
//! the header frame and the message frame, then the message decoded as one
//! of the endpoints' message types.
//!
//! Input: one byte picks the side (request or response) and the message
//! type, the rest is the stream.

#![no_main]

use std::sync::OnceLock;

use hangar_block::rpc::{GetBlock, HandOver, HaveBlock, PutBlock, UnrefBlock};
use hangar_cluster::{LayoutPush, LayoutPushReply};
use hangar_fuzz as _;
use hangar_model::bucket_create::{CreateBucket, CreateReply};
use hangar_model::conditional::{PublishIf, PublishIfReply};
use hangar_net::wire;
use hangar_table::gc_rpc::GcRows;
use hangar_table::replicated::{PullRows, ReadRow, RowPage, UpdateRows};
use hangar_table::sharded::{MerkleRequest, MerkleResponse, RangeRows, ReadRange};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

fn message<T: DeserializeOwned>(bytes: &[u8]) {
    let _ = wire::decode_message::<T>(bytes);
}

fn decode_as(which: u8, msg: &[u8]) {
    match which % 17 {
        0 => message::<UpdateRows>(msg),
        1 => message::<ReadRow>(msg),
        2 => message::<PullRows>(msg),
        3 => message::<RowPage>(msg),
        4 => message::<ReadRange>(msg),
        5 => message::<RangeRows>(msg),
        6 => message::<MerkleRequest>(msg),
        7 => message::<MerkleResponse>(msg),
        8 => message::<GcRows>(msg),
        9 => message::<PutBlock>(msg),
        10 => message::<GetBlock>(msg),
        11 => message::<HaveBlock>(msg),
        12 => message::<(HandOver, UnrefBlock)>(msg),
        13 => message::<LayoutPush>(msg),
        14 => message::<LayoutPushReply>(msg),
        15 => message::<(PublishIf, PublishIfReply)>(msg),
        _ => message::<(CreateBucket, CreateReply)>(msg),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, mut stream)) = data.split_first() else {
        return;
    };
    runtime().block_on(async {
        if which & 0x80 == 0 {
            if let Ok((head, msg)) = wire::read_request(&mut stream).await {
                let _ = head.path.len();
                decode_as(which, &msg);
            }
        } else if let Ok((_, Some(msg))) = wire::read_response(&mut stream).await {
            decode_as(which, &msg);
        }
    });
});
