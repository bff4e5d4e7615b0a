//! This node's progress through layout versions (doc/layout.md §8): the
//! task that acknowledges a new version, reports when this node holds all
//! the data it assigns it, and acknowledges reads from a synced version —
//! so that the cluster retires old versions on its own.
//!
//! Every second, for the current version `v`:
//! - **ack**: once no write this node sent under an older version is still
//!   running (`Cluster::writes_before(v) == 0`), it records `ack(v)`;
//! - **sync**: once every node acknowledged `v`, the sharded tables'
//!   anti-entropy completed a pass for `v` (which includes the block
//!   reference table), and every block referenced here, of a partition this
//!   node stores, has its file (`Resync::count_missing` = 0), it records
//!   `sync(v)`;
//! - **sync-ack**: once every storage node synced a version, it records
//!   that it reads from it. The layout history then retires the versions no
//!   node reads from any more.
//!
//! It also tells the resync worker when the partitions this node stores
//! change (`Resync::queue_moved_partitions`), so that blocks of a
//! partition it gained are checked and those of one it lost handed over.

use std::sync::Arc;
use std::time::Duration;

use hangar_block::Resync;
use hangar_cluster::Cluster;
use hangar_table::sharded::sync::ShardedSyncStatus;
use hangar_util::worker::{WorkerRegistry, WorkerState};

/// How often the task looks.
const POLL: Duration = Duration::from_secs(1);
/// How often the blocks are counted while a version waits for them.
const BLOCK_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Starts the task, reporting as worker `layout-progress`.
pub fn spawn(
    cluster: Cluster,
    tables: ShardedSyncStatus,
    resync: Arc<Resync>,
    workers: &WorkerRegistry,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("layout-progress");
    tokio::spawn(async move {
        let me = cluster.id();
        // The version whose blocks were found complete, and when they were
        // last counted.
        let mut blocks_ok: u64 = 0;
        let mut last_count: Option<tokio::time::Instant> = None;
        loop {
            if let Err(e) = resync.queue_moved_partitions().await {
                w.record_error(format!("queueing moved partitions: {e}"));
            }
            let h = cluster.layout().history();
            let v = h.current().version;
            let my = |t: &hangar_layout::Tracker| t.0.get(&me).map_or(0, |e| e.0);
            let (acked, synced, read) = (my(&h.ack), my(&h.sync), my(&h.sync_ack));
            let is_storage = h.current().node_ids.contains(&me);
            let want_ack = acked < v && cluster.writes_before(v) == 0;
            let mut want_sync = false;
            if is_storage && synced < v && h.sync_may_start(v) && tables.synced_version() >= v {
                if blocks_ok < v && last_count.is_none_or(|t| t.elapsed() >= BLOCK_CHECK_EVERY) {
                    last_count = Some(tokio::time::Instant::now());
                    match resync.count_missing().await {
                        Ok(0) => blocks_ok = v,
                        Ok(n) => w.set_progress(
                            format!("version {v}: tables synced, {n} blocks still to fetch"),
                            Some(n),
                        ),
                        Err(e) => w.record_error(format!("counting blocks: {e}")),
                    }
                }
                want_sync = blocks_ok >= v;
            }
            let global = h.synced_version();
            let want_read = read < global;
            if want_ack || want_sync || want_read {
                w.set_state(WorkerState::Busy);
                let r = cluster
                    .layout()
                    .update("layout progress", |h| {
                        let mut changed = false;
                        if want_ack {
                            changed |= h.ack_version(me, v);
                        }
                        if want_sync {
                            changed |= h.mark_synced(me, v);
                        }
                        if want_read {
                            changed |= h.ack_sync(me, h.synced_version());
                        }
                        Ok(changed)
                    })
                    .await;
                match r {
                    Ok((true, _)) => {
                        w.add_processed(1);
                        tracing::info!(
                            "layout version {v}: {}{}{}",
                            if want_ack { "acknowledged; " } else { "" },
                            if want_sync {
                                "this node holds its data; "
                            } else {
                                ""
                            },
                            if want_read {
                                "reads from the synced version"
                            } else {
                                ""
                            },
                        );
                    }
                    Ok((false, _)) => {}
                    Err(e) => w.record_error(e),
                }
                w.set_state(WorkerState::Idle);
            }
            let h = cluster.layout().history();
            if !want_sync || blocks_ok >= v {
                w.set_progress(
                    format!(
                        "current version {v}: acknowledged {}, synced {}, reading from {}; cluster reads from {}, {} versions kept",
                        my(&h.ack),
                        my(&h.sync),
                        my(&h.sync_ack),
                        h.synced_version(),
                        h.versions.len()
                    ),
                    None,
                );
            }
            tokio::time::sleep(POLL).await;
        }
    })
}
