//! The admin operations that show the whole cluster from one node:
//! `hangar status` (each node's state and what it is doing) and `hangar
//! stats` (buckets, disks, tables, blocks), from the layout, the mesh and
//! every node's [`NodeReport`](crate::admin::report::NodeReport).

use std::collections::BTreeSet;

use futures::StreamExt;

use hangar_api_admin::answers::{BucketStats, ClusterStats, LayoutSync, NodeStats, StatsTotals};
use hangar_api_admin::proto::AdminError;
use hangar_layout::{LayoutHistory, NodeId};
use serde_json::Value;

use crate::admin::error::model_error;
use crate::admin::layout;
use crate::admin::report;
use crate::admin::state::AdminState;

/// Most buckets `stats` shows (each is a read of its usage counters).
pub const STATS_MAX_BUCKETS: usize = 10_000;

/// Where `node` is in the current layout version's progress: what it
/// acknowledged, synced and reads from, and whether it holds all the data
/// the version gives it (`synced`), not yet (`syncing`), or stores none.
fn layout_sync(h: &LayoutHistory, node: NodeId) -> LayoutSync {
    let v = h.current().version;
    let get = |t: &hangar_layout::Tracker| t.0.get(&node).map(|e| e.0);
    let (ack, sync, read) = (get(&h.ack), get(&h.sync), get(&h.sync_ack));
    let state = if !h.current().node_ids.contains(&node) {
        "no data"
    } else if sync.unwrap_or(0) >= v {
        "synced"
    } else {
        "syncing"
    };
    LayoutSync {
        ack,
        sync,
        sync_ack: read,
        state: state.to_owned(),
    }
}

/// `hangar status`: `layout::status`, and for each node its own
/// report (`report`, or `report_error` saying why there is none) and its
/// progress through the current layout version (`layout_sync`).
pub async fn status(st: &AdminState) -> Result<Value, AdminError> {
    let layout = st.cluster.layout();
    let mut v = layout::status(layout, &st.mesh, st.cluster.consistency_mode()).await;
    let h = layout.history();
    // Down nodes are not asked: their answer could only be a timeout.
    let ask: Vec<NodeId> = v
        .peers
        .iter()
        .filter(|r| r.peer.is_up)
        .map(|r| r.peer.id)
        .collect();
    let mut reports = report::gather(&st.reports, ask).await;
    for row in v.peers.iter_mut() {
        let id = row.peer.id;
        (row.report, row.report_error) = match reports.remove(&id) {
            Some(Ok(r)) => (Some(report::report_answer(&r)), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, Some("node is down".to_owned())),
        };
        row.layout_sync = layout_sync(&h, id);
    }
    serde_json::to_value(v).map_err(AdminError::internal)
}

/// `hangar stats`: per bucket its stored object versions and their bytes
/// (its usage counters, `hangar_model::usage`, through a read quorum), the totals, and per node its
/// report (disks, table rows, block files, resync, scrub).
pub async fn statistics(st: &AdminState) -> Result<Value, AdminError> {
    let model = st.model.as_ref();
    let mut buckets = model.buckets().list_buckets().await.map_err(model_error)?;
    if buckets.len() > STATS_MAX_BUCKETS {
        return Err(AdminError::bad(format!(
            "{} buckets: stats counts at most {STATS_MAX_BUCKETS}; use `hangar bucket info` on the ones you need",
            buckets.len()
        )));
    }
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    let (mut objects, mut bytes) = (0u64, 0u64);
    let mut rows = Vec::with_capacity(buckets.len());
    // Each bucket's counters: one read of a read quorum, a few at once.
    let reads: Vec<_> = buckets
        .iter()
        .map(|b| model.objects().bucket_usage(b))
        .collect();
    let usages: Vec<_> = futures::stream::iter(reads).buffered(16).collect().await;
    for (b, u) in buckets.iter().zip(usages) {
        let u = u.map_err(model_error)?;
        objects += u.objects;
        bytes += u.bytes;
        rows.push(BucketStats {
            name: b.name.clone(),
            id: b.id.clone(),
            objects: u.objects,
            bytes: u.bytes,
        });
    }
    let (ids, up) = known_nodes(st);
    let reports = report::gather(&st.reports, ids.iter().copied().filter(|i| up.contains(i))).await;
    let me = st.cluster.id();
    let nodes = ids
        .iter()
        .map(|id| {
            let hostname = hostname(st, id);
            let (report, report_error) = match reports.get(id) {
                Some(Ok(r)) => (Some(report::report_answer(r)), None),
                Some(Err(e)) => (None, Some(e.clone())),
                None => (None, Some("node is down".to_owned())),
            };
            NodeStats {
                id: id.to_string(),
                hostname,
                is_up: up.contains(id),
                is_self: *id == me,
                report,
                report_error,
            }
        })
        .collect();
    serde_json::to_value(ClusterStats {
        buckets: rows,
        totals: StatsTotals {
            buckets: buckets.len() as u64,
            objects,
            bytes,
        },
        nodes,
    })
    .map_err(AdminError::internal)
}

/// Every node this one knows of (itself, the peers met and the nodes of
/// any layout version), and those the failure detector reports up.
pub fn known_nodes(st: &AdminState) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    let mut ids: BTreeSet<NodeId> = st.mesh.peer_status().iter().map(|p| p.id).collect();
    ids.extend(st.cluster.layout().history().all_nodes());
    let up = st.mesh.up_nodes().into_iter().collect();
    (ids, up)
}

/// A node's host name, as it announced it (this node's own for itself).
pub fn hostname(st: &AdminState, id: &NodeId) -> Option<String> {
    if *id == st.cluster.id() {
        return Some(st.cluster.layout().local_info().hostname);
    }
    st.cluster
        .layout()
        .peers()
        .get(id)
        .and_then(|s| s.info.as_ref())
        .map(|i| i.hostname.clone())
}
