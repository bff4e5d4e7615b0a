//! Hangar's cluster layout (DESIGN.md §6, doc/layout.md): node roles (zone,
//! capacity, or gateway), the assignment of the 256 partitions to
//! `replication_factor` storage nodes each, staged changes, and the
//! versioned history that nodes merge as a CRDT.
//!
//! This crate is pure: no network, no disk, no clock (callers pass the time).

pub mod assign;
pub mod error;
mod flow;
pub mod history;
pub mod node;
pub mod quorum;
pub mod role;
pub mod staging;
pub mod tracker;
pub mod version;

pub use assign::{AssignmentReport, MIN_CAPACITY, NodeUsage, ZoneUsage, compute_assignment};
pub use error::LayoutError;
pub use history::{LayoutHistory, LayoutPreview, StagedRole, VersionStatus, WriteSet};
pub use node::{NodeId, resolve_node_prefix};
pub use quorum::Quorums;
pub use role::{LayoutParameters, NodeRole, ZoneRedundancy};
pub use staging::{Staging, Stamp};
pub use tracker::Tracker;
pub use version::{LayoutVersion, PARTITION_COUNT, Partition, partition_of};
