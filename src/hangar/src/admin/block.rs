//! The admin operations on blocks and their workers: what the `worker`,
//! `repair` and `block` commands ask the running node (through the admin
//! socket), answered from its resync worker, block manager and tables.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hangar_api_admin::block_answers::{
    BlockFile, BlockFileError, BlockFileStored, BlockHolder, BlockInfo, BlockReference,
    BlockStorageSet, BlocksQueued, BlocksRetried, LastResyncError, ResyncError, ResyncQueueCleared,
    ResyncStats, ScrubState, TablesRepaired, WorkerInfo, WorkerSetting,
};
use hangar_api_admin::proto::{AdminError, ErrorCode};
use hangar_block::{BlockManager, BlockRefTable, Resync, Scrub, ScrubCommand, resync_queue};
use hangar_cluster::Cluster;
use hangar_model::Model;
use hangar_table::Replica;
use hangar_util::Hash;
use hangar_util::worker::WorkerRegistry;

/// Most references `block info` lists.
const INFO_REFS: usize = 100;
/// Most errors `block list-errors` lists.
const LIST_ERRORS: usize = 1000;

fn parse_hash(s: &str) -> Result<Hash, AdminError> {
    Hash::from_hex(s.trim())
        .ok_or_else(|| AdminError::bad(format!("`{s}` is not a block hash (64 hex digits)")))
}

/// `worker info NAME`: the worker's status, plus the settings it reads.
pub async fn worker_info(
    workers: &WorkerRegistry,
    resync: &Resync,
    scrub: &Scrub,
    name: &str,
) -> Result<WorkerInfo, AdminError> {
    let w = workers
        .list()
        .into_iter()
        .find(|w| w.name == name)
        .ok_or_else(|| {
            AdminError::not_found(format!(
                "no worker {name} (`hangar worker list` names them)"
            ))
        })?;
    let mut info = WorkerInfo {
        status: w,
        ..WorkerInfo::default()
    };
    if name == "block-resync" {
        let s = resync.stats();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        info.settings = Some(
            resync
                .settings()
                .list()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        );
        info.stats = Some(ResyncStats {
            checked: load(&s.checked),
            blocks_fetched: load(&s.blocks_fetched),
            bytes_fetched: load(&s.bytes_fetched),
            blocks_handed_over: load(&s.blocks_handed_over),
            bytes_handed_over: load(&s.bytes_handed_over),
            errors: load(&s.errors),
            in_flight: load(&s.in_flight),
        });
    }
    if name == "block-scrub" {
        let st = scrub.state().await.map_err(AdminError::internal)?;
        info.scrub = Some(st);
        info.settings = Some(
            [(
                "scrub-tranquility".to_owned(),
                scrub.tranquility().to_string(),
            )]
            .into(),
        );
    }
    Ok(info)
}

/// `repair scrub start|pause|resume|cancel`.
pub async fn scrub(scrub: &Scrub, command: &str) -> Result<ScrubState, AdminError> {
    let cmd = match command {
        "start" => ScrubCommand::Start,
        "pause" => ScrubCommand::Pause,
        "resume" => ScrubCommand::Resume,
        "cancel" => ScrubCommand::Cancel,
        other => {
            return Err(AdminError::bad(format!(
                "no scrub command {other}: start, pause, resume or cancel"
            )));
        }
    };
    // A store that cannot be read is the node's failure; past that, a
    // refused command contradicts the scrub's state.
    scrub.state().await.map_err(AdminError::internal)?;
    let st = scrub
        .command(cmd)
        .await
        .map_err(|m| AdminError::new(ErrorCode::Conflict, m))?;
    tracing::info!("scrub {command}: now {:?}", st.status);
    Ok(st)
}

/// `worker set SETTING VALUE`.
pub fn worker_set(
    resync: &Resync,
    scrub: &Scrub,
    setting: &str,
    value: &str,
) -> Result<WorkerSetting, AdminError> {
    if setting == "scrub-tranquility" {
        let t: u32 = value
            .trim()
            .parse()
            .map_err(|_| AdminError::bad(format!("{setting}: `{value}` is not a whole number")))?;
        scrub.set_tranquility(t);
        return Ok(WorkerSetting {
            setting: setting.to_owned(),
            value: t.to_string(),
        });
    }
    let now = resync
        .settings()
        .set(setting, value)
        .map_err(AdminError::bad)?;
    resync.wake();
    tracing::info!("worker setting {setting} = {now}");
    Ok(WorkerSetting {
        setting: setting.to_owned(),
        value: now,
    })
}

/// `repair blocks`.
pub async fn repair_blocks(resync: &Resync) -> Result<BlocksQueued, AdminError> {
    let queued = resync
        .queue_everything()
        .await
        .map_err(AdminError::internal)?;
    Ok(BlocksQueued { queued })
}

/// `repair tables`: one anti-entropy pass of the sharded tables.
pub async fn repair_tables(cluster: &Cluster, model: &Model) -> Result<TablesRepaired, AdminError> {
    let r = hangar_table::sharded::sync::sync_pass(cluster, &model.tables().sharded_tables()).await;
    Ok(TablesRepaired {
        partitions_differed: r.partitions_differed as u64,
        rows_pulled: r.rows_pulled,
        rows_pushed: r.rows_pushed,
        complete: r.complete,
        errors: r.errors,
    })
}

/// `repair clear-resync-queue`.
pub async fn clear_resync_queue(blocks: &BlockManager) -> Result<ResyncQueueCleared, AdminError> {
    let cleared = resync_queue::clear(blocks.metadata())
        .await
        .map_err(AdminError::internal)?;
    Ok(ResyncQueueCleared { cleared })
}

/// `block list-errors`.
pub async fn list_errors(blocks: &BlockManager) -> Result<Vec<ResyncError>, AdminError> {
    let rows = resync_queue::errors(blocks.metadata(), None, LIST_ERRORS)
        .await
        .map_err(AdminError::internal)?;
    Ok(rows
        .into_iter()
        .map(|(h, r)| ResyncError {
            hash: h.to_hex(),
            tries: r.tries,
            first_msec: r.first_msec,
            last_msec: r.last_msec,
            next_msec: r.next_msec,
            error: r.error,
        })
        .collect())
}

/// `block retry-now [HASH]`.
pub async fn retry_now(
    blocks: &BlockManager,
    resync: &Resync,
    hash: Option<String>,
) -> Result<BlocksRetried, AdminError> {
    let hash = hash.as_deref().map(parse_hash).transpose()?;
    let retried = resync_queue::retry_now(blocks.metadata(), hash)
        .await
        .map_err(AdminError::internal)?;
    resync.wake();
    Ok(BlocksRetried { retried })
}

/// `block info HASH`.
pub async fn info(
    blocks: &Arc<BlockManager>,
    cluster: &Cluster,
    hash: &str,
) -> Result<BlockInfo, AdminError> {
    let h = parse_hash(hash)?;
    let e = AdminError::internal;
    let refcount = blocks.refcount(h).await.map_err(e)?;
    let file = match blocks.read_encoded(h).await {
        Ok(enc) => Some(BlockFile::Stored(BlockFileStored {
            stored_bytes: enc.data.len() as u64,
            plain_bytes: enc.plain_len,
            compressed: enc.compressed,
        })),
        Err(hangar_block::BlockError::Missing(_)) => None,
        Err(other) => Some(BlockFile::Unreadable(BlockFileError {
            error: other.to_string(),
        })),
    };
    let refs = Replica::<BlockRefTable>::new(blocks.metadata().clone())
        .range(
            h.as_bytes(),
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            INFO_REFS,
        )
        .await
        .map_err(AdminError::internal)?;
    let nodes = cluster.storage_nodes_of(&h);
    let error = resync_queue::error_of(blocks.metadata(), h)
        .await
        .map_err(e)?;
    Ok(BlockInfo {
        hash: h.to_hex(),
        partition: h.as_bytes()[0],
        refcount,
        file,
        references: refs
            .into_iter()
            .map(|(version, r)| BlockReference {
                version: hex::encode(version),
                deleted: r.deleted,
            })
            .collect(),
        stored_on: nodes
            .sets
            .iter()
            .map(|s| BlockStorageSet {
                layout_version: s.version,
                nodes: s
                    .nodes
                    .iter()
                    .map(|n| BlockHolder {
                        node: n.to_string(),
                        up: cluster.is_up(*n),
                        this_node: *n == cluster.id(),
                    })
                    .collect(),
            })
            .collect(),
        resync_error: error.map(|r| LastResyncError {
            tries: r.tries,
            last_msec: r.last_msec,
            next_msec: r.next_msec,
            error: r.error,
        }),
    })
}
