//! Conditional writes decided by consensus: a single-decree Paxos round per
//! object key over the nodes that hold the key's object row, in the manner
//! of Cassandra's lightweight transactions (doc/replication.md,
//! "Conditional writes").
//!
//! A conditional write (`If-None-Match: *`, `If-Match`) of key `k` is
//! proposed by the node that received it, in a ballot ([`Ballot`]: clock
//! time, then node id) higher than any it has seen refused:
//!
//! 1. **Prepare**: a majority of the key's nodes in every active layout
//!    version promise to refuse lower ballots, and answer the value they
//!    last accepted and the highest ballot they know committed.
//! 2. If the highest accepted value is newer than every commit known, an
//!    earlier round may have decided it without publishing: it is accepted
//!    again in this ballot, published, and the write starts over.
//! 3. **Read** the object row (read quorum), check the condition, stamp the
//!    row past the one read. A failed condition ends the write (`412`).
//! 4. **Accept**: a majority of every set accepts the row in this ballot:
//!    it is decided.
//! 5. **Publish** it: the normal sharded insert of the object row (write
//!    quorum), then **commit** (in the background): the acceptors forget
//!    the value.
//!
//! A ballot refused anywhere (a racing proposer promised a higher one) is
//! retried with a higher one after a jittered backoff, at most
//! [`proposer::MAX_ROUNDS`] times. Unconditional writes take none of this.
//!
//! Files: [`ballot`] (ballots), [`decided`] (what acceptors remember of
//! decided values, and what a proposer learns from it), [`messages`] (the frames), [`acceptor`]
//! (durable state), [`proposer`] (the rounds, over any [`proposer::Link`]
//! and [`proposer::Register`]), [`link`] (the mesh endpoints).

pub mod acceptor;
pub mod ballot;
pub mod decided;
pub mod link;
pub mod messages;
pub mod proposer;

pub use acceptor::{Acceptor, AcceptorState, PAXOS_TREE};
pub use ballot::{Ballot, BallotClock};
pub use proposer::{Outcome, ROUND_DEADLINE};
