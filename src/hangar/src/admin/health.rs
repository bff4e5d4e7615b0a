//! `GET /health`: whether this node can serve reads and writes at its
//! consistency mode now, as far as its failure detector tells: every
//! partition has a write quorum (which covers the read quorum) of live
//! nodes in each of its layout versions' sets, and the key and bucket
//! tables, held by every node of the layout, have their majority (one
//! node in `dangerous` mode). With `replication_factor = 1` and no layout
//! the node serves alone; with more, no layout means writes would not be
//! replicated as configured.

use std::collections::BTreeSet;

use hangar_api_admin::layout_answers::NodeHealth;
use hangar_api_admin::ops::Health;
use hangar_cluster::Cluster;
use hangar_layout::NodeId;
use hangar_net::Mesh;
use hangar_util::config::ConsistencyMode;

use crate::admin::layout;

/// This node's health.
pub fn check(cluster: &Cluster, mesh: &Mesh) -> Health {
    let h = cluster.layout().history();
    let peers = mesh.peer_status();
    let up: BTreeSet<NodeId> = peers.iter().filter(|p| p.is_up).map(|p| p.id).collect();
    let mode = cluster.consistency_mode();
    let parts = layout::health(&h, &up, mode);
    let mut table_nodes = h.all_nodes();
    table_nodes.insert(cluster.id());
    let tables_needed = match mode {
        ConsistencyMode::Dangerous => 1,
        _ => table_nodes.len() / 2 + 1,
    };
    let tables_up = table_nodes.iter().filter(|n| up.contains(n)).count();
    let rf = h.replication_factor;
    let m = serde_json::to_value(parts.consistency_mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let (status, ok, reason) = match parts.status.as_str() {
        "no layout applied" if rf > 1 => (
            "unavailable",
            false,
            format!(
                "no layout applied: writes would not reach {rf} nodes (`hangar layout assign`, then `hangar layout apply`)"
            ),
        ),
        "no layout applied" => (
            "healthy",
            true,
            "no layout applied: this node serves alone (replication_factor 1)".to_owned(),
        ),
        _ if tables_up < tables_needed => (
            "unavailable",
            false,
            format!(
                "{tables_up} of {} nodes up: keys and buckets need {tables_needed}",
                table_nodes.len()
            ),
        ),
        "unavailable" => (
            "unavailable",
            false,
            format!(
                "{} of {} partitions lack a write quorum of {} live nodes ({m} mode)",
                parts.unavailable, parts.partitions, parts.write_quorum,
            ),
        ),
        "degraded" => (
            "degraded",
            true,
            format!(
                "{} of {} partitions miss a replica but keep their quorums ({m} mode)",
                parts.degraded, parts.partitions,
            ),
        ),
        _ => (
            "healthy",
            true,
            format!("every partition has all its replicas up ({m} mode)"),
        ),
    };
    let others = peers.iter().filter(|p| !p.is_self).count();
    let others_up = peers.iter().filter(|p| p.is_up && !p.is_self).count();
    let body = NodeHealth {
        status: status.to_owned(),
        reason,
        node: mesh.peer_addr().to_string(),
        known_peers: others,
        peers_up: others_up,
        layout_version: h.current().version,
        partitions: parts,
    };
    Health {
        ok,
        body: serde_json::to_value(body).expect("health answers serialize"),
    }
}
