//! The operator CLI: the commands that talk to a running node (`commands`),
//! by subject (blocks, layout, presign, stats, status, health, docs), how
//! they fail (`error`), and what they print (`progress`, `units`,
//! `expiry`).

pub(crate) mod block;
pub(crate) mod commands;
pub(crate) mod docs;
pub(crate) mod error;
pub(crate) mod expiry;
pub(crate) mod health;
pub(crate) mod kms;
pub(crate) mod layout;
pub(crate) mod presign;
pub(crate) mod progress;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod units;
