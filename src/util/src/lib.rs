//! Hangar's shared ground: the configuration file, the block hash type, size
//! parsing and the registry through which background workers report progress.
//!
//! Every other crate may depend on this one; it depends on none of them.

pub mod config;
mod fixed_bytes;
pub mod hash;
pub mod node_id;
pub mod serde_id16;
pub mod size;
pub mod time;
pub mod worker;

pub use hash::Hash;
pub use node_id::NodeId;
