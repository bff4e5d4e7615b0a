//! What the node's admin operations run on (`server.rs` runs them,
//! `cluster.rs` answers the cluster-wide ones).

use std::sync::Arc;

use hangar_api_admin::auth::TokenSigner;
use hangar_api_admin::history::History;
use hangar_api_admin::history::rpc::HistoryEndpoint;
use hangar_block::{BlockManager, Resync, Scrub};
use hangar_cluster::Cluster;
use hangar_model::Model;
use hangar_net::{Endpoint, Mesh};
use hangar_util::worker::WorkerRegistry;

use crate::admin::presign::PresignSettings;
use crate::admin::report::{NodeReport, ReportRequest};

/// What the admin operations run on.
#[derive(Clone)]
pub struct AdminState {
    pub model: Arc<Model>,
    pub workers: WorkerRegistry,
    pub mesh: Mesh,
    pub cluster: Cluster,
    pub blocks: Arc<BlockManager>,
    pub resync: Arc<Resync>,
    pub scrub: Arc<Scrub>,
    /// Every node's report, for `status` and `stats`.
    pub reports: Arc<Endpoint<ReportRequest, NodeReport>>,
    /// This node's recent history, and every node's (the console's plots).
    pub history: History,
    pub histories: Arc<HistoryEndpoint>,
    pub presign: PresignSettings,
    /// Signs admin tokens (`admin-token create`); `None` without
    /// `admin_token`.
    pub token_signer: Option<TokenSigner>,
}
