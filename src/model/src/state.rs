//! The model's local bookkeeping: one tree of markers that say which
//! one-time start-up work this node has done (the Merkle index repair of
//! the sharded tables, the first count of the bucket usage counters), so
//! that later starts skip it.

/// Local tree: marker name → empty.
pub const MODEL_STATE_TREE: &str = "model_state";
