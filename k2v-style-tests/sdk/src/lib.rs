//! Test harness for the AWS Rust SDK integration tests: starts a real `hangar server`
//! process on free loopback ports with its own temporary directories, creates access
//! keys through the `hangar` CLI, and builds SDK clients for them.
//!
//! Every test starts its own server ([`TestServer::start`]), so tests run in parallel
//! (nextest runs each in its own process) and never see each other's buckets.

mod data;
mod http;
mod server;
mod vhost;

pub use data::{compressible_bytes, random_bytes};
pub use http::{RawResponse, raw_request};
pub use server::{AccessKey, REGION, TestServer};
pub use vhost::VirtualHost;
