//! Hangar's data model, on top of tables and the block store.
//!
//! - [`key`]: access keys, their secrets and their per-bucket permissions;
//!   [`keys`]: the service that owns them (`Model::keys`);
//! - [`bucket`]: buckets by name;
//! - [`alias`]: more names of a bucket (bucket aliases);
//! - [`access`]: a bucket's policy document and public access block;
//! - [`bucket_create`]: bucket creation, decided by one coordinator per
//!   name in a cluster;
//! - [`object`]: the current version of each object, with its metadata and
//!   either its bytes (small objects, stored inline) or a block count;
//! - [`block_list`]: a version's block list, one row per block so that a
//!   large object costs O(n) rows and never rewrites a growing list;
//! - the versions of an object in a versioned bucket, rows of the object
//!   table: [`version_keys`] (where each version lives and how clients name
//!   it), [`version_ops`] (reading, writing, delete markers, removal) and
//!   [`version_list`] (their listings);
//! - [`object_paxos`]: conditional writes in a cluster, a Paxos round per
//!   key ([`paxos`]); `write_condition`: the conditions they check;
//! - [`object_lock`]: S3 Object Lock (bucket configuration, a version's
//!   retention and legal hold, and whether a version may be removed);
//! - [`sse_c`]: SSE-C, data sealed with the customer's key;
//!   [`sse_managed`]: SSE-S3 and SSE-KMS, sealed with derived keys;
//!   [`kms`]: the keys of SSE-KMS, [`kms_keys`]: their service
//!   (`Model::kms_keys`);
//! - [`garbage`]: uploads in progress and the collector of dead versions;
//! - [`notification`]: bucket notification rules and the durable queue
//!   of the events they select (`Model::notifications`);
//! - configuration registers (tags of buckets and objects, CORS rules of
//!   buckets, [`website`] configuration), changed by the services' `set_*`.
//!
//! [`Model`] ties them to one node's metadata store and block manager.

pub mod access;
pub mod alias;
pub mod block_list;
pub mod blocks;
pub mod bucket;
pub mod bucket_config;
pub mod bucket_create;
pub mod buckets;
mod error;
#[cfg(test)]
mod format10_tests;
#[cfg(test)]
mod format11_tests;
#[cfg(test)]
mod format12_tests;
#[cfg(test)]
mod format13_tests;
#[cfg(test)]
mod format14_tests;
#[cfg(test)]
mod format15_tests;
#[cfg(test)]
mod format16_tests;
#[cfg(test)]
mod format17_tests;
#[cfg(test)]
mod format18_tests;
#[cfg(test)]
mod format19_tests;
#[cfg(test)]
mod format20_tests;
#[cfg(test)]
mod format21_tests;
#[cfg(test)]
mod format3_tests;
#[cfg(test)]
mod format5_tests;
#[cfg(test)]
mod format7_tests;
#[cfg(test)]
mod format8_tests;
#[cfg(test)]
mod format9_tests;
#[cfg(test)]
mod format_tests;
pub mod garbage;
pub mod key;
pub mod keys;
pub mod kms;
pub mod kms_keys;
pub mod lifecycle;
pub mod lifecycle_worker;
mod lock_ops;
mod model;
pub mod multipart;
pub mod notification;
#[cfg(test)]
mod notification_tests;
pub mod object;
pub mod object_config;
pub mod object_lock;
pub mod object_paxos;
pub mod objects;
pub mod paxos;
mod queues;
pub mod retention;
pub mod row_format;
pub mod sse_c;
pub mod sse_managed;
mod state;
pub mod tables;
#[cfg(test)]
mod test_support;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod uploads;
pub mod usage;
pub mod usage_backfill;
pub mod version_keys;
pub mod version_list;
pub mod version_ops;
pub mod version_parts;
pub mod website;
mod write_condition;

pub use blocks::Blocks;
pub use buckets::{Buckets, PermissionChange};
pub use error::ModelError;
pub use model::Model;
pub use objects::Objects;
pub use uploads::Uploads;
pub use write_condition::WriteCondition;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, ModelError>;

/// A version identifier: 16 random bytes.
pub type VersionId = [u8; 16];

/// A new random version identifier.
pub fn new_version_id() -> VersionId {
    rand::random()
}
