//! Gauges and counters read at scrape time from the counters each layer
//! keeps anyway (atomics), so that no hot path pays for metrics twice.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use hangar_api_s3::admission::RamBudget;
use hangar_block::BlockManager;
use hangar_db::Db;
use hangar_util::worker::WorkerRegistry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the node's own counters on each scrape.
pub struct NodeCollector {
    pub db: Db,
    pub blocks: Arc<BlockManager>,
    pub budget: RamBudget,
    pub workers: WorkerRegistry,
    /// The resync worker's counters, on a node that runs one.
    pub resync: Option<Arc<hangar_block::Resync>>,
}

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCollector")
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for NodeCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = self.db.stats();
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        counter(
            &mut e,
            "hangar_db_commit_batches",
            "Group commits applied",
            l(&s.batches),
        )?;
        counter(
            &mut e,
            "hangar_db_commit_writes",
            "Writes committed in group commits",
            l(&s.writes),
        )?;
        counter(
            &mut e,
            "hangar_db_commit_failed_writes",
            "Writes whose closure failed",
            l(&s.failed_writes),
        )?;
        counter(
            &mut e,
            "hangar_db_syncs",
            "fsyncs of the metadata store",
            l(&s.syncs),
        )?;
        if let Ok(size) = self.db.engine().size_on_disk() {
            gauge(
                &mut e,
                "hangar_db_size_bytes",
                "Metadata store size on disk",
                size as i64,
            )?;
        }
        let b = self.blocks.stats();
        counter(
            &mut e,
            "hangar_block_written",
            "Block files written",
            l(&b.blocks_written),
        )?;
        counter(
            &mut e,
            "hangar_block_written_stored_bytes",
            "Bytes of block files written (after compression)",
            l(&b.bytes_written_stored),
        )?;
        counter(
            &mut e,
            "hangar_block_deduplicated",
            "Blocks not written because already stored",
            l(&b.blocks_deduplicated),
        )?;
        counter(
            &mut e,
            "hangar_block_read",
            "Blocks read",
            l(&b.blocks_read),
        )?;
        counter(
            &mut e,
            "hangar_block_deleted",
            "Block files deleted by the GC",
            l(&b.blocks_deleted),
        )?;
        counter(
            &mut e,
            "hangar_block_corrupt_reads",
            "Block reads that failed their hash check",
            l(&b.corrupt_reads),
        )?;
        counter(
            &mut e,
            "hangar_block_quarantined",
            "Local block copies found corrupt and moved to quarantine",
            l(&b.blocks_quarantined),
        )?;
        if let Some(r) = &self.resync {
            let r = r.stats();
            for (name, help, v) in [
                (
                    "hangar_resync_checked",
                    "Queued blocks the resync worker looked at",
                    &r.checked,
                ),
                (
                    "hangar_resync_fetched_blocks",
                    "Blocks fetched from other nodes by the resync worker",
                    &r.blocks_fetched,
                ),
                (
                    "hangar_resync_fetched_bytes",
                    "Bytes (as stored) fetched by the resync worker",
                    &r.bytes_fetched,
                ),
                (
                    "hangar_resync_handed_over_blocks",
                    "Blocks handed over to their new holders",
                    &r.blocks_handed_over,
                ),
                (
                    "hangar_resync_handed_over_bytes",
                    "Bytes (as stored) handed over to new holders",
                    &r.bytes_handed_over,
                ),
                (
                    "hangar_resync_errors",
                    "Resync attempts that failed (retried with backoff)",
                    &r.errors,
                ),
            ] {
                counter(&mut e, name, help, l(v))?;
            }
            gauge(
                &mut e,
                "hangar_resync_in_flight",
                "Resync transfers running now",
                l(&r.in_flight) as i64,
            )?;
        }
        counter(
            &mut e,
            "hangar_s3_slowdown",
            "Requests answered 503 SlowDown for lack of RAM budget",
            self.budget.rejected(),
        )?;
        gauge(
            &mut e,
            "hangar_s3_ram_buffer_free_blocks",
            "Block buffers of the S3 RAM budget free now",
            self.budget.available() as i64,
        )?;
        for w in self.workers.list() {
            let name = w.name.replace('-', "_");
            counter(
                &mut e,
                &format!("hangar_worker_{name}_processed"),
                "Items handled by the worker",
                w.processed,
            )?;
            counter(
                &mut e,
                &format!("hangar_worker_{name}_errors"),
                "Errors of the worker",
                w.errors,
            )?;
            if let Some(q) = w.queue_length {
                gauge(
                    &mut e,
                    &format!("hangar_worker_{name}_queue"),
                    "Items queued for the worker",
                    q as i64,
                )?;
            }
        }
        Ok(())
    }
}
