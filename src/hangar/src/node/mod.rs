//! `hangar server` and `hangar single-node`: starting a node (`server`),
//! its progress through layout versions (`layout_progress`), and the
//! one-command single node (`single_node`).

pub(crate) mod layout_progress;
pub(crate) mod server;
pub(crate) mod single_node;
