//! Hangar's tables: sets of typed rows keyed by (partition key, sort key),
//! replicated over the cluster.
//!
//! A [`Schema`] names a tree of the metadata store, the row type stored in
//! it and how the rows are replicated ([`Schema::Replication`]). Rows are
//! CRDTs ([`Crdt`]): inserting a row merges it into the one already stored,
//! so that replicas that received writes in different orders converge.
//!
//! - [`Table`]`<S>`: the one table type, generic over the schema and its
//!   replication ([`table`]). [`Full`]: every node holds every row
//!   ([`full`], with digest anti-entropy in [`full::sync`]). [`Sharded`]:
//!   each row on the nodes of its layout partition ([`sharded`], with a
//!   Merkle index [`merkle`], anti-entropy [`sharded::sync`], tombstone
//!   collection and fences).
//! - [`Replica`]`<S>`: this node's rows of a table, and the transactional
//!   operations every change of a row goes through ([`replica`]); the trees
//!   a row may be stored in ([`stored`]: a buried tombstone has its own).
//! - [`wire`]: every message a table sends to a peer, and its bounds.
//! - [`schema`]: the byte format of a stored row (doc/table-rows.md).
//!
//! doc/replication.md says what each replication promises.

pub mod crdt;
mod error;
pub mod fence;
pub mod full;
pub mod replica;
pub mod schema;
mod serve;
pub mod sharded;
pub mod stored;
pub mod table;
pub mod tombstones;
pub mod wire;

pub use crdt::{Crdt, Lww, LwwMap, max_by_content};
pub use error::{ReplicationError, Result, TableError};
pub use full::Full;
pub use replica::Replica;
pub use schema::{
    LEGACY_ROW_FORMAT, ROW_FORMAT, Schema, decode, encode, layout_partition_of, storage_key,
};
pub use sharded::{Sharded, merkle};
pub use stored::RowTrees;
pub use table::{Replication, Table};
