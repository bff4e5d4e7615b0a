//! The node side of `hangar layout …` and the layout part of `hangar
//! status`: runs the operator's change on the cluster layout and answers
//! with the typed answers of `hangar_api_admin::layout_answers`, which the
//! CLI prints.

use std::collections::{BTreeMap, BTreeSet};

use hangar_api_admin::answers::{ClusterStatus, Disk, PeerRow};
use hangar_api_admin::layout_answers::{
    ApplyOutcome, ClusterHealth, Conflicts, CurrentLayout, DeadNodesSkipped, LayoutApplied,
    LayoutAssigned, LayoutConfigured, LayoutHistoryAnswer, LayoutRemoved, LayoutReverted,
    LayoutRole, LayoutShow, NodeTrackers, RoleStaged, StagedChanges, StagedParameters, SyncAck,
    VersionLine,
};
use hangar_api_admin::proto::AdminError;
use hangar_cluster::DiskSpace;
use hangar_layout::{
    LayoutHistory, LayoutParameters, NodeId, NodeRole, PARTITION_COUNT, Quorums, WriteSet,
    ZoneRedundancy, resolve_node_prefix,
};
use hangar_net::{Mesh, PeerStatus};
use hangar_util::config::ConsistencyMode;
use hangar_util::time::now_msec;

use hangar_cluster::ClusterLayout;

/// `layout assign`: what the operator gave; fields not given keep the
/// node's staged role.
pub struct AssignArgs {
    pub nodes: Vec<String>,
    pub zone: Option<String>,
    pub capacity: Option<u64>,
    pub gateway: bool,
    pub tags: Vec<String>,
}

/// Every node id a prefix may name: the mesh's peers and the layout's nodes.
fn known_nodes(mesh: &Mesh, h: &LayoutHistory) -> BTreeSet<NodeId> {
    let mut known: BTreeSet<NodeId> = mesh.peer_status().into_iter().map(|p| p.id).collect();
    known.extend(h.all_nodes());
    known.extend(h.staged_roles().into_keys());
    known
}

fn err(e: impl std::fmt::Display) -> AdminError {
    AdminError::bad(e.to_string())
}

/// Runs an operator change on the layout: what the change refuses is the
/// operator's error (400), a failure to persist it the node's (500).
async fn change<R>(
    layout: &ClusterLayout,
    what: &str,
    f: impl FnOnce(&mut LayoutHistory) -> Result<R, AdminError>,
) -> Result<(R, usize), AdminError> {
    let mut refused = None;
    let r = layout
        .update(what, |h| {
            f(h).map_err(|e| {
                let m = e.message.clone();
                refused = Some(e);
                m
            })
        })
        .await;
    r.map_err(|m| refused.take().unwrap_or_else(|| AdminError::internal(m)))
}

/// `layout assign`.
pub async fn assign(
    layout: &ClusterLayout,
    mesh: &Mesh,
    a: AssignArgs,
) -> Result<LayoutAssigned, AdminError> {
    if a.gateway && a.capacity.is_some() {
        return Err(AdminError::bad(
            "-g (gateway) and -c (capacity) exclude each other",
        ));
    }
    let me = layout.me();
    let peers = layout.peers();
    let (staged, pushed) = change(layout, "layout assign", |h| {
            let known = known_nodes(mesh, h);
            let mut staged = Vec::new();
            for prefix in &a.nodes {
                let node = resolve_node_prefix(prefix, known.iter().copied()).map_err(err)?;
                if let Some(why) = peers.get(&node).and_then(|p| p.refused.as_ref()) {
                    return Err(AdminError::bad(format!(
                        "node {} cannot get a role: {why}",
                        node.short()
                    )));
                }
                let old = h.staged_roles().get(&node).cloned();
                let zone = a
                    .zone
                    .clone()
                    .or_else(|| old.as_ref().map(|r| r.zone.clone()))
                    .ok_or_else(|| {
                        AdminError::bad(format!(
                            "node {} has no role yet: give its zone with -z",
                            node.short()
                        ))
                    })?;
                let capacity = if a.gateway {
                    None
                } else if let Some(c) = a.capacity {
                    Some(c)
                } else {
                    old.as_ref().map(|r| r.capacity).ok_or_else(|| {
                        AdminError::bad(format!(
                            "node {} has no role yet: give its capacity with -c (e.g. -c 1T), or make it a gateway with -g",
                            node.short()
                        ))
                    })?
                };
                let tags = if a.tags.is_empty() {
                    old.map(|r| r.tags).unwrap_or_default()
                } else {
                    a.tags.clone()
                };
                let role = NodeRole {
                    zone,
                    capacity,
                    tags,
                };
                h.stage_role(me, now_msec(), node, role.clone())
                    .map_err(err)?;
                staged.push(RoleStaged { node, role });
            }
            Ok(staged)
        })
        .await?;
    Ok(LayoutAssigned {
        staged,
        pushed_to_peers: pushed,
    })
}

/// `hangar single-node`'s first start: a cluster of one needs a layout of
/// one, so when nothing was ever applied or staged this node takes a
/// storage role in zone `dc1` with its data disk's size (at least 1 GB) and
/// applies version 1. Returns whether it did.
pub async fn assign_self_if_empty(layout: &ClusterLayout) -> Result<bool, AdminError> {
    let me = layout.me();
    let disk = layout.local_info().data_disk.map_or(0, |d| d.total);
    let capacity = disk.max(1_000_000_000);
    let (done, _) = change(layout, "single-node setup", |h| {
        if h.current().version != 0 || !h.staging.is_empty() {
            return Ok(false);
        }
        h.stage_role(me, now_msec(), me, NodeRole::storage("dc1", capacity))
            .map_err(err)?;
        h.apply(1, me, now_msec()).map_err(err)?;
        Ok(true)
    })
    .await?;
    Ok(done)
}

/// `layout remove`.
pub async fn remove(
    layout: &ClusterLayout,
    mesh: &Mesh,
    prefix: &str,
) -> Result<LayoutRemoved, AdminError> {
    let me = layout.me();
    let (node, pushed) = change(layout, "layout remove", |h| {
        let node = resolve_node_prefix(prefix, known_nodes(mesh, h)).map_err(err)?;
        h.stage_removal(me, now_msec(), node).map_err(err)?;
        Ok(node)
    })
    .await?;
    Ok(LayoutRemoved {
        removed: node,
        pushed_to_peers: pushed,
    })
}

/// `layout config -r`.
pub async fn config(
    layout: &ClusterLayout,
    zone_redundancy: &str,
) -> Result<LayoutConfigured, AdminError> {
    let zr: ZoneRedundancy = zone_redundancy.parse().map_err(err)?;
    let me = layout.me();
    let params = LayoutParameters {
        zone_redundancy: zr,
    };
    let ((), pushed) = change(layout, "layout config", |h| {
        h.stage_parameters(me, now_msec(), params).map_err(err)
    })
    .await?;
    Ok(LayoutConfigured {
        zone_redundancy: zr,
        pushed_to_peers: pushed,
    })
}

/// `layout apply --version N`.
pub async fn apply(layout: &ClusterLayout, version: u64) -> Result<LayoutApplied, AdminError> {
    let me = layout.me();
    let (report, pushed) = change(layout, "layout apply", |h| {
        h.apply(version, me, now_msec()).map_err(err)
    })
    .await?;
    Ok(LayoutApplied {
        version,
        report: Some(report),
        pushed_to_peers: pushed,
    })
}

/// `layout revert`.
pub async fn revert(layout: &ClusterLayout) -> Result<LayoutReverted, AdminError> {
    let me = layout.me();
    let (had, pushed) = change(layout, "layout revert", |h| Ok(h.revert(me, now_msec()))).await?;
    Ok(LayoutReverted {
        reverted: had,
        pushed_to_peers: pushed,
    })
}

/// `layout skip-dead-nodes`: the nodes of the kept versions that are down
/// now are counted as having acknowledged (and, with `allow_missing_data`,
/// synced) `version`; their sync acknowledgement only once `version` is
/// synced. `sync_ack` says which: `set`, `when_synced` (run it again
/// then), `blocked` (a dead node holds partitions of `version`, which
/// cannot sync without it or `allow_missing_data`).
pub async fn skip_dead_nodes(
    layout: &ClusterLayout,
    mesh: &Mesh,
    version: u64,
    allow_missing_data: bool,
) -> Result<DeadNodesSkipped, AdminError> {
    let up: BTreeSet<NodeId> = mesh.up_nodes().into_iter().collect();
    let ((dead, changed, sync_ack), pushed) = change(layout, "layout skip-dead-nodes", |h| {
        let dead: Vec<NodeId> = h
            .all_nodes()
            .into_iter()
            .filter(|n| !up.contains(n))
            .collect();
        if dead.is_empty() {
            return Err(AdminError::bad(
                "every node of the layout is up: there is no dead node to skip",
            ));
        }
        let changed = h
            .skip_dead_nodes(version, &dead, allow_missing_data)
            .map_err(err)?;
        // A sync acknowledgement needs the version synced first, so until
        // then the old version cannot retire: the operator must come back,
        // and a dead node holding partitions of `version` keeps it from
        // syncing at all unless counted as synced.
        let holds_data = h
            .version(version)
            .is_some_and(|x| dead.iter().any(|n| x.node_ids.contains(n)));
        let sync_ack = if h.synced_version() >= version {
            SyncAck::Set
        } else if holds_data && !allow_missing_data {
            SyncAck::Blocked
        } else {
            SyncAck::WhenSynced
        };
        Ok((dead, changed, sync_ack))
    })
    .await?;
    Ok(DeadNodesSkipped {
        nodes: dead,
        changed,
        sync_ack,
        pushed_to_peers: pushed,
    })
}

fn conflicts(h: &LayoutHistory) -> Conflicts {
    h.conflicts
        .iter()
        .map(|(v, hs)| (v.to_string(), hs.iter().map(|x| x.to_hex()).collect()))
        .collect()
}

/// `layout show`: the current version, the staged changes and what
/// applying them would do.
pub async fn show(layout: &ClusterLayout) -> LayoutShow {
    let h = layout.snapshot().await;
    let cur = h.current();
    let partitions = cur.partition_counts();
    let roles = cur
        .roles
        .iter()
        .map(|(id, r)| LayoutRole {
            id: *id,
            zone: r.zone.clone(),
            capacity: r.capacity,
            tags: r.tags.clone(),
            gateway: r.is_gateway(),
            partitions: partitions.get(id).copied().unwrap_or(0),
            partition_list: cur.partitions_of_node(*id),
        })
        .collect();
    let preview = h.show();
    LayoutShow {
        replication_factor: h.replication_factor,
        current: CurrentLayout {
            version: cur.version,
            hash: cur.content_hash().to_hex(),
            zone_redundancy: cur.parameters.zone_redundancy,
            partition_size: cur.partition_size,
            roles,
            report: h.describe_current(),
        },
        staged: StagedChanges {
            roles: preview.roles,
            parameters: preview.parameters.map(|(c, s)| StagedParameters {
                current: c.zone_redundancy,
                staged: s.zone_redundancy,
            }),
        },
        outcome: preview.outcome.map(|o| match o {
            Ok(r) => ApplyOutcome::Ok(r),
            Err(e) => ApplyOutcome::Error(e.to_string()),
        }),
        conflicts: conflicts(&h),
    }
}

/// `layout history`.
pub async fn history(layout: &ClusterLayout) -> LayoutHistoryAnswer {
    let h = layout.snapshot().await;
    let versions = h
        .history()
        .iter()
        .map(|v| VersionLine {
            version: v.version,
            hash: v.hash.to_hex(),
            storage_nodes: v.storage_nodes,
            gateways: v.gateways,
            partition_size: v.partition_size,
            status: v.status.to_owned(),
        })
        .collect();
    let mut trackers: BTreeMap<String, NodeTrackers> = BTreeMap::new();
    for (node, (v, _)) in &h.ack.0 {
        trackers.entry(node.to_string()).or_default().ack = Some(*v);
    }
    for (node, (v, _)) in &h.sync.0 {
        trackers.entry(node.to_string()).or_default().sync = Some(*v);
    }
    for (node, (v, _)) in &h.sync_ack.0 {
        trackers.entry(node.to_string()).or_default().sync_ack = Some(*v);
    }
    LayoutHistoryAnswer {
        current_version: h.current().version,
        retired_below: h.retired_below,
        versions,
        min_ack: h.min_ack(),
        synced_version: h.synced_version(),
        min_sync_ack: h.min_sync_ack(),
        trackers,
        conflicts: conflicts(&h),
    }
}

/// Counts the partitions by whether their write sets have a write quorum
/// of live nodes: healthy (every replica up), degraded (a quorum in every
/// set, not all up), unavailable (some set short of a quorum).
pub fn health(h: &LayoutHistory, up: &BTreeSet<NodeId>, mode: ConsistencyMode) -> ClusterHealth {
    let q = Quorums::new(h.replication_factor, mode);
    let mut counts = [0usize; 3];
    let mut assigned = false;
    for p in 0..PARTITION_COUNT {
        let sets = h.write_sets_of_partition(p as hangar_layout::Partition);
        if sets.is_empty() {
            continue;
        }
        assigned = true;
        let live = |s: &WriteSet| s.nodes.iter().filter(|n| up.contains(n)).count();
        if sets.iter().all(|s| live(s) == s.nodes.len()) {
            counts[0] += 1;
        } else if sets.iter().all(|s| live(s) >= q.write) {
            counts[1] += 1;
        } else {
            counts[2] += 1;
        }
    }
    let status = if !assigned {
        "no layout applied"
    } else if counts[2] > 0 {
        "unavailable"
    } else if counts[1] > 0 {
        "degraded"
    } else {
        "healthy"
    };
    ClusterHealth {
        status: status.to_owned(),
        consistency_mode: mode,
        read_quorum: q.read,
        write_quorum: q.write,
        partitions: PARTITION_COUNT,
        healthy: counts[0],
        degraded: counts[1],
        unavailable: counts[2],
    }
}

/// `hangar status`: the mesh's peers with their layout role, hostname and
/// disks, plus nodes the layout names that the mesh does not know, and the
/// cluster health. Each node's report and layout progress are left for
/// the caller (`crate::admin::cluster::status`).
pub async fn status(layout: &ClusterLayout, mesh: &Mesh, mode: ConsistencyMode) -> ClusterStatus {
    let h = layout.snapshot().await;
    let cur = h.current();
    let partitions = cur.partition_counts();
    let infos = layout.peers();
    let local = layout.local_info();
    let disk = |d: Option<DiskSpace>| {
        d.map(|d| Disk {
            avail: d.avail,
            total: d.total,
        })
    };
    let mut rows: Vec<(NodeId, PeerRow)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut up = BTreeSet::new();
    for p in mesh.peer_status() {
        seen.insert(p.id);
        if p.is_up {
            up.insert(p.id);
        }
        let st = infos.get(&p.id).cloned().unwrap_or_default();
        let info = if p.is_self {
            Some(local.clone())
        } else {
            st.info
        };
        let is_self = p.is_self;
        let row = PeerRow {
            peer: p,
            hostname: info.as_ref().map(|i| i.hostname.clone()),
            data_disk: disk(info.as_ref().and_then(|i| i.data_disk)),
            metadata_disk: disk(info.as_ref().and_then(|i| i.metadata_disk)),
            info_msec: if is_self {
                Some(now_msec())
            } else {
                st.info_msec
            },
            layout_refused: st.refused,
            ..PeerRow::default()
        };
        rows.push((row.peer.id, row));
    }
    for id in h.all_nodes() {
        if !seen.contains(&id) {
            let row = PeerRow {
                peer: PeerStatus {
                    id,
                    ..PeerStatus::default()
                },
                ..PeerRow::default()
            };
            rows.push((id, row));
        }
    }
    let peers = rows
        .into_iter()
        .map(|(id, mut row)| {
            let role = cur.roles.get(&id);
            row.zone = role.map(|r| r.zone.clone());
            row.capacity = role.and_then(|r| r.capacity);
            row.gateway = role.map(|r| r.is_gateway());
            row.tags = role.map(|r| r.tags.clone());
            row.partitions = partitions.get(&id).copied().unwrap_or(0);
            row
        })
        .collect();
    ClusterStatus {
        node: mesh.peer_addr().to_string(),
        layout_version: cur.version,
        replication_factor: h.replication_factor,
        staged_changes: !h.staging.is_empty(),
        peers,
        health: health(&h, &up, mode),
    }
}
