//! The admin side of the binary: the operations behind the admin HTTP API
//! and the Unix socket (`server`), what they run on (`state`), their error
//! codes (`error`), the operations by subject (blocks, cluster, layout,
//! presigned URLs, health, the console's history), and what each node reports about itself to
//! the one that answers for the cluster (`report`).

pub(crate) mod block;
pub(crate) mod cluster;
pub(crate) mod error;
pub(crate) mod health;
pub(crate) mod history;
pub(crate) mod layout;
pub(crate) mod presign;
pub(crate) mod report;
pub(crate) mod server;
pub(crate) mod state;
