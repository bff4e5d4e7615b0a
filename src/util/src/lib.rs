//! Hangar's shared ground: the configuration file, the block hash type, size
//! parsing, the registry through which background workers report progress,
//! the connection bounds the HTTP endpoints share (`conn_limits`,
//! `idle_io`), the open-file limit (`fd_limit`), whether the node is serving clients now (`foreground`),
//! when something last happened (`last_event`), the targets of bucket
//! notifications (`notify_targets`), and the low-priority threads
//! of background block work (`low_priority`).
//!
//! Every other crate may depend on this one; it depends on none of them.

pub mod config;
pub mod conn_limits;
pub mod fd_limit;
mod fixed_bytes;
pub mod foreground;
pub mod hash;
pub mod idle_io;
pub mod last_event;
pub mod low_priority;
pub mod node_id;
pub mod notify_targets;
pub mod serde_id16;
pub mod size;
pub mod time;
pub mod worker;

pub use hash::Hash;
pub use node_id::NodeId;
