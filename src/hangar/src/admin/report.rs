//! What each node says about itself for `hangar status` and `hangar
//! stats`: the mesh endpoint `hangar/admin/report`, answered by every node
//! with its [`NodeReport`] (disks, layout version, resync, scrub, table
//! rows, block files), and [`gather`], which asks every known node at once
//! so that one node's admin operation can show the whole cluster.
//!
//! A report is measured when asked (a few metadata reads and `statvfs`
//! calls, no scan of the data), so it is current; the endpoint admits
//! [`QUEUE`] calls at a time and a caller waits [`TIMEOUT`] per node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar_api_admin::answers;
use hangar_block::{BlockManager, Resync, Scrub, ScrubState};
use hangar_cluster::Cluster;
use hangar_cluster::node_info::DiskSpace;
use hangar_layout::NodeId;
use hangar_model::Model;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, Mesh, NetError, Request, Response};
use serde::{Deserialize, Serialize};

/// The mesh endpoint of node reports.
pub const PATH: &str = "hangar/admin/report";
/// Calls a node answers at once; more are refused as overloaded.
const QUEUE: usize = 4;
/// How long a caller waits for each node's report.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Asks for a report (no fields: a node reports everything).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReportRequest {}

/// One node's state, as it measures it. A new field is a new wire format
/// (structs are MessagePack arrays, doc/rpc.md): older peers answer
/// without it and their report reads as unavailable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The current layout version this node holds.
    pub layout_version: u64,
    pub data_disk: Option<DiskSpace>,
    pub metadata_disk: Option<DiskSpace>,
    /// Blocks waiting in the resync queue.
    pub resync_queue: u64,
    /// Block transfers of the resync worker running now.
    pub resync_in_flight: u64,
    /// Resync errors since the node started.
    pub resync_errors: u64,
    pub scrub: Option<ScrubState>,
    /// (table, rows this node holds) for each replicated table.
    pub tables: Vec<(String, u64)>,
    /// Block files stored and their bytes on disk; `None` until the
    /// count made at start has finished.
    pub blocks: Option<(u64, u64)>,
}

/// What a node's report is measured from.
#[derive(Clone)]
pub struct Sources {
    pub cluster: Cluster,
    pub model: Arc<Model>,
    pub blocks: Arc<BlockManager>,
    pub resync: Arc<Resync>,
    pub scrub: Arc<Scrub>,
}

impl Sources {
    /// Measures this node.
    pub async fn measure(&self) -> NodeReport {
        use std::sync::atomic::Ordering::Relaxed;
        let layout = self.cluster.layout().clone();
        let info = tokio::task::spawn_blocking(move || layout.local_info())
            .await
            .unwrap_or_default();
        let mut tables = Vec::new();
        for t in self.model.tables().full_tables() {
            if let Ok(n) = t.rows().await {
                tables.push((t.tree().to_owned(), n));
            }
        }
        for t in self.model.tables().sharded_tables() {
            if let Ok(n) = t.rows().await {
                tables.push((t.tree().to_owned(), n));
            }
        }
        let s = self.resync.stats();
        NodeReport {
            layout_version: self.cluster.layout().history().current().version,
            data_disk: info.data_disk,
            metadata_disk: info.metadata_disk,
            resync_queue: hangar_block::resync_queue::len(self.model.db())
                .await
                .unwrap_or(0),
            resync_in_flight: s.in_flight.load(Relaxed),
            resync_errors: s.errors.load(Relaxed),
            scrub: self.scrub.state().await.ok(),
            tables,
            blocks: self
                .blocks
                .block_files()
                .tally()
                .stored()
                .map(|s| (s.blocks, s.bytes)),
        }
    }
}

struct ReportHandler(Sources);

#[async_trait]
impl Handler<ReportRequest, NodeReport> for ReportHandler {
    async fn handle(
        &self,
        _req: Request<ReportRequest>,
    ) -> Result<Response<NodeReport>, HandlerError> {
        Ok(Response::new(self.0.measure().await))
    }
}

/// Registers the endpoint on the node's mesh and answers it.
pub fn serve(
    mesh: &Mesh,
    src: Sources,
) -> Result<Arc<Endpoint<ReportRequest, NodeReport>>, NetError> {
    let ep = mesh.endpoint::<ReportRequest, NodeReport>(PATH)?;
    ep.set_handler(ReportHandler(src), QUEUE);
    Ok(ep)
}

/// Every node's report, or why it has none (down, no answer in time, an
/// older version): asked at once, at most [`TIMEOUT`] each.
pub async fn gather(
    ep: &Endpoint<ReportRequest, NodeReport>,
    nodes: impl IntoIterator<Item = NodeId>,
) -> BTreeMap<NodeId, Result<NodeReport, String>> {
    let calls = nodes.into_iter().map(|id| async move {
        let opts = CallOpts {
            timeout: Some(TIMEOUT),
            ..CallOpts::default()
        };
        let r = ep.call(id, ReportRequest {}, opts).await;
        (id, r.map_err(|e| e.to_string()))
    });
    futures::future::join_all(calls).await.into_iter().collect()
}

/// A node's report as the admin answers show it.
pub fn report_answer(r: &NodeReport) -> answers::NodeReport {
    let disk = |d: &DiskSpace| answers::Disk {
        avail: d.avail,
        total: d.total,
    };
    answers::NodeReport {
        layout_version: r.layout_version,
        data_disk: r.data_disk.as_ref().map(disk),
        metadata_disk: r.metadata_disk.as_ref().map(disk),
        resync: answers::Resync {
            queue: r.resync_queue,
            in_flight: r.resync_in_flight,
            errors: r.resync_errors,
        },
        scrub: r.scrub.as_ref().map(|s| answers::Scrub {
            status: s.status,
            checked: s.checked,
            corrupt: s.corrupt,
            progress: s.progress(),
            last_pass_done_msec: s.last_pass_done_msec,
        }),
        tables: r.tables.iter().cloned().collect(),
        blocks: r
            .blocks
            .map(|(count, bytes)| answers::BlockFiles { count, bytes }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_goes_over_the_wire_and_back() {
        let r = NodeReport {
            layout_version: 3,
            data_disk: Some(DiskSpace { avail: 1, total: 2 }),
            metadata_disk: None,
            resync_queue: 4,
            resync_in_flight: 1,
            resync_errors: 0,
            scrub: None,
            tables: vec![("object".into(), 7)],
            blocks: Some((5, 500)),
        };
        let bytes = rmp_serde::to_vec(&r).unwrap();
        assert_eq!(rmp_serde::from_slice::<NodeReport>(&bytes).unwrap(), r);
        let v = serde_json::to_value(report_answer(&r)).unwrap();
        assert_eq!(v["tables"]["object"], 7);
        assert_eq!(v["blocks"]["bytes"], 500);
        assert_eq!(v["resync"]["queue"], 4);
    }
}
