//! A call's stream as a node reads it from a peer (`hangar_net::wire`, the
//! same parsers `serve_stream` and `call_remote` run): the version byte,
//! the header frame and the message frame, then the message decoded as one
//! of the endpoints' message types.
//!
//! Input: one byte picks the side (request or response) and the message
//! type, the rest is the stream.

#![no_main]

use std::sync::OnceLock;

use hangar_block::rpc::{
    GetBlock, HandOver, HaveBlock, PutBlock, ResyncGet, ResyncGetReply, UnrefBlock,
};
use hangar_cluster::{LayoutPush, LayoutPushReply};
use hangar_fuzz as _;
use hangar_model::bucket_create::{CreateBucket, CreateReply};
use hangar_model::object_paxos::{PublishIf, PublishIfReply};
use hangar_model::paxos::messages::{AcceptReply, PrepareReply};
use hangar_net::wire;
use hangar_table::wire::{
    GcRows, MerkleRequest, MerkleResponse, PullRows, RangeRows, ReadRange, ReadRow, RowPage,
    UpdateRows,
};
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
    match which % 22 {
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
        10 => {
            message::<GetBlock>(msg);
            message::<ResyncGet>(msg);
            message::<ResyncGetReply>(msg);
        }
        11 => message::<HaveBlock>(msg),
        12 => message::<(HandOver, UnrefBlock)>(msg),
        13 => message::<LayoutPush>(msg),
        14 => message::<LayoutPushReply>(msg),
        15 => message::<(PublishIf, PublishIfReply)>(msg),
        16 => message::<(CreateBucket, CreateReply)>(msg),
        17 => paxos::prepare(msg),
        18 => paxos::accept(msg),
        19 => paxos::commit(msg),
        20 => message::<PrepareReply>(msg),
        _ => message::<AcceptReply>(msg),
    }
}

/// The conditional-write Paxos messages as an acceptor takes them: decoded,
/// refused if the handler would refuse them (`PaxosKey::check`,
/// `Proposal::check`), then applied to an acceptor's state with the
/// ballots and values the peer chose (`AcceptorState`, what
/// `Acceptor::{prepare, accept, commit}` run in their transaction).
mod paxos {
    use hangar_model::paxos::messages::{Accept, Commit, Prepare, Proposal};
    use hangar_model::paxos::{AcceptorState, Ballot};
    use hangar_net::wire;
    use hangar_util::NodeId;

    /// A state that has promised, accepted and seen a commit already, so
    /// that every comparison of a transition is reached.
    fn state() -> AcceptorState {
        let mut s = AcceptorState::default();
        let b = Ballot {
            counter: 1_000,
            node: NodeId([7; 32]),
        };
        s.accept(b, Proposal::Nothing, Ballot::ZERO, 1_000);
        s.commit(b, None, 1_000);
        s
    }

    pub fn prepare(msg: &[u8]) {
        let Ok(m) = wire::decode_message::<Prepare>(msg) else {
            return;
        };
        if m.key.check().is_err() {
            return;
        }
        let mut s = state();
        let _ = s.prepare(m.ballot, m.ballot, u64::MAX);
        let _ = s.prepare(m.ballot, Ballot::ZERO, m.ballot.counter);
    }

    pub fn accept(msg: &[u8]) {
        let Ok(m) = wire::decode_message::<Accept>(msg) else {
            return;
        };
        if m.key.check().is_err() || m.value.check().is_err() {
            return;
        }
        let mut s = state();
        let _ = s.accept(m.ballot, m.value, Ballot::ZERO, m.ballot.counter);
        let _ = s.prepare(m.ballot, m.ballot, u64::MAX);
        s.commit(m.ballot, None, m.ballot.counter);
    }

    pub fn commit(msg: &[u8]) {
        let Ok(m) = wire::decode_message::<Commit>(msg) else {
            return;
        };
        if m.key.check().is_err() {
            return;
        }
        let mut s = state();
        s.commit(m.ballot, m.value, m.ballot.counter);
        let _ = s.prepare(m.ballot, Ballot::ZERO, u64::MAX);
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
