//! The admin operations on blocks and their workers: what the `worker`,
//! `repair` and `block` commands ask the running node (through the admin
//! socket), answered from its resync worker, block manager and tables.

use std::ops::Bound;
use std::sync::Arc;

use hangar_api_admin::proto::{AdminError, ErrorCode};
use hangar_block::{BlockManager, BlockRefTable, Resync, Scrub, ScrubCommand, resync_queue};
use hangar_cluster::Cluster;
use hangar_model::Model;
use hangar_table::Table;
use hangar_util::Hash;
use hangar_util::worker::WorkerRegistry;
use serde_json::{Value, json};

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
) -> Result<Value, AdminError> {
    let w = workers
        .list()
        .into_iter()
        .find(|w| w.name == name)
        .ok_or_else(|| {
            AdminError::not_found(format!(
                "no worker {name} (`hangar worker list` names them)"
            ))
        })?;
    let mut v = serde_json::to_value(&w).map_err(AdminError::internal)?;
    if name == "block-resync" {
        let s = resync.stats();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        v["settings"] = resync
            .settings()
            .list()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v["stats"] = json!({
            "checked": load(&s.checked),
            "blocks_fetched": load(&s.blocks_fetched),
            "bytes_fetched": load(&s.bytes_fetched),
            "blocks_handed_over": load(&s.blocks_handed_over),
            "bytes_handed_over": load(&s.bytes_handed_over),
            "errors": load(&s.errors),
            "in_flight": load(&s.in_flight),
        });
    }
    if name == "block-scrub" {
        let st = scrub.state().await.map_err(AdminError::internal)?;
        v["scrub"] = serde_json::to_value(&st).map_err(AdminError::internal)?;
        v["settings"] = json!({"scrub-tranquility": scrub.tranquility().to_string()});
    }
    Ok(v)
}

/// `repair scrub start|pause|resume|cancel`.
pub async fn scrub(scrub: &Scrub, command: &str) -> Result<Value, AdminError> {
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
    serde_json::to_value(&st).map_err(AdminError::internal)
}

/// `worker set SETTING VALUE`.
pub fn worker_set(
    resync: &Resync,
    scrub: &Scrub,
    setting: &str,
    value: &str,
) -> Result<Value, AdminError> {
    if setting == "scrub-tranquility" {
        let t: u32 = value
            .trim()
            .parse()
            .map_err(|_| AdminError::bad(format!("{setting}: `{value}` is not a whole number")))?;
        scrub.set_tranquility(t);
        return Ok(json!({"setting": setting, "value": t.to_string()}));
    }
    let now = resync
        .settings()
        .set(setting, value)
        .map_err(AdminError::bad)?;
    resync.wake();
    tracing::info!("worker setting {setting} = {now}");
    Ok(json!({"setting": setting, "value": now}))
}

/// `repair blocks`.
pub async fn repair_blocks(resync: &Resync) -> Result<Value, AdminError> {
    let n = resync
        .queue_everything()
        .await
        .map_err(AdminError::internal)?;
    Ok(json!({"queued": n}))
}

/// `repair tables`: one anti-entropy pass of the sharded tables.
pub async fn repair_tables(cluster: &Cluster, model: &Model) -> Result<Value, AdminError> {
    let r = hangar_table::sharded_sync::sync_pass(cluster, &model.sharded_tables()).await;
    Ok(json!({
        "partitions_differed": r.partitions_differed,
        "rows_pulled": r.rows_pulled,
        "rows_pushed": r.rows_pushed,
        "complete": r.complete,
        "errors": r.errors,
    }))
}

/// `repair clear-resync-queue`.
pub async fn clear_resync_queue(blocks: &BlockManager) -> Result<Value, AdminError> {
    let n = resync_queue::clear(blocks.metadata())
        .await
        .map_err(AdminError::internal)?;
    Ok(json!({"cleared": n}))
}

/// `block list-errors`.
pub async fn list_errors(blocks: &BlockManager) -> Result<Value, AdminError> {
    let rows = resync_queue::errors(blocks.metadata(), None, LIST_ERRORS)
        .await
        .map_err(AdminError::internal)?;
    Ok(Value::Array(
        rows.into_iter()
            .map(|(h, r)| {
                json!({
                    "hash": h.to_hex(),
                    "tries": r.tries,
                    "first_msec": r.first_msec,
                    "last_msec": r.last_msec,
                    "next_msec": r.next_msec,
                    "error": r.error,
                })
            })
            .collect(),
    ))
}

/// `block retry-now [HASH]`.
pub async fn retry_now(
    blocks: &BlockManager,
    resync: &Resync,
    hash: Option<String>,
) -> Result<Value, AdminError> {
    let hash = hash.as_deref().map(parse_hash).transpose()?;
    let n = resync_queue::retry_now(blocks.metadata(), hash)
        .await
        .map_err(AdminError::internal)?;
    resync.wake();
    Ok(json!({"retried": n}))
}

/// `block info HASH`.
pub async fn info(
    blocks: &Arc<BlockManager>,
    cluster: &Cluster,
    hash: &str,
) -> Result<Value, AdminError> {
    let h = parse_hash(hash)?;
    let e = AdminError::internal;
    let refcount = blocks.refcount(h).await.map_err(e)?;
    let file = match blocks.read_encoded(h).await {
        Ok(enc) => json!({
            "stored_bytes": enc.data.len(),
            "plain_bytes": enc.plain_len,
            "compressed": enc.compressed,
        }),
        Err(hangar_block::BlockError::Missing(_)) => Value::Null,
        Err(other) => json!({"error": other.to_string()}),
    };
    let refs = Table::<BlockRefTable>::new(blocks.metadata().clone())
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
    Ok(json!({
        "hash": h.to_hex(),
        "partition": h.as_bytes()[0],
        "refcount": refcount,
        "file": file,
        "references": refs.into_iter().map(|(version, r)| json!({
            "version": hex::encode(version),
            "deleted": r.deleted,
        })).collect::<Vec<_>>(),
        "stored_on": nodes.sets.iter().map(|s| json!({
            "layout_version": s.version,
            "nodes": s.nodes.iter().map(|n| json!({
                "node": n.to_string(),
                "up": cluster.is_up(*n),
                "this_node": *n == cluster.id(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "resync_error": error.map(|r| json!({
            "tries": r.tries,
            "last_msec": r.last_msec,
            "next_msec": r.next_msec,
            "error": r.error,
        })),
    }))
}
