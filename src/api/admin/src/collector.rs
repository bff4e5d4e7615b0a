//! The node's storage metrics — metadata store, block store, resync, scrub
//! and workers — read at scrape time from the counters each layer keeps
//! anyway (atomics), so that no hot path pays for metrics twice, and from
//! the sampler's last sample ([`crate::sampler`]). doc/metrics.md lists
//! every family.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hangar_block::{BlockManager, Resync, ScrubStatus};
use hangar_db::Db;
use hangar_util::worker::{WorkerRegistry, WorkerState, WorkerStatus};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{Label, counter, counters, gauge, gauges};
use crate::sampler::Samples;

/// Reads the node's storage counters on each scrape.
pub struct NodeCollector {
    pub db: Db,
    pub blocks: Arc<BlockManager>,
    /// `block_ram_buffer_max`: the RAM budget of block copies in flight.
    pub block_ram_buffer_max: u64,
    pub workers: WorkerRegistry,
    pub resync: Arc<Resync>,
    pub samples: Samples,
}

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCollector")
    }
}

fn l(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl Collector for NodeCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        self.encode_db(&mut e)?;
        self.encode_blocks(&mut e)?;
        self.encode_resync(&mut e)?;
        self.encode_scrub(&mut e)?;
        self.encode_lifecycle(&mut e)?;
        self.encode_workers(&mut e)
    }
}

impl NodeCollector {
    fn encode_lifecycle(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        use hangar_model::lifecycle_worker as lc;
        counter(
            e,
            "hangar_lifecycle_buckets_scanned",
            "Buckets with lifecycle rules walked by this node's lifecycle worker",
            l(&lc::BUCKETS_SCANNED),
        )?;
        counters(
            e,
            "hangar_lifecycle_actions",
            "Lifecycle actions taken by this node, by action: expire (current version deleted or given a delete marker), noncurrent (noncurrent version removed), delete_marker (expired object delete marker removed), abort_upload (incomplete multipart upload aborted)",
            [
                ([("action", "expire")], l(&lc::OBJECTS_EXPIRED)),
                ([("action", "noncurrent")], l(&lc::NONCURRENT_REMOVED)),
                ([("action", "delete_marker")], l(&lc::MARKERS_REMOVED)),
                ([("action", "abort_upload")], l(&lc::UPLOADS_ABORTED)),
            ],
        )?;
        gauge(
            e,
            "hangar_lifecycle_last_pass_timestamp_seconds",
            "When this node's lifecycle worker last finished a pass (seconds since the epoch; 0 before the first)",
            l(&lc::LAST_PASS_MSEC) as f64 / 1000.0,
        )
    }

    fn encode_db(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = self.db.stats();
        for (name, help, v) in [
            (
                "hangar_db_commit_batches",
                "Group commits of the metadata store applied",
                &s.batches,
            ),
            (
                "hangar_db_commit_writes",
                "Writes committed in group commits",
                &s.writes,
            ),
            (
                "hangar_db_commit_failed_writes",
                "Writes whose closure failed (nothing written)",
                &s.failed_writes,
            ),
            ("hangar_db_syncs", "fsyncs of the metadata store", &s.syncs),
        ] {
            counter(e, name, help, l(v))?;
        }
        if let Ok(size) = self.db.engine().size_on_disk() {
            gauge(
                e,
                "hangar_db_size_bytes",
                "Size of the metadata store on disk",
                size,
            )?;
        }
        Ok(())
    }

    fn encode_blocks(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let b = self.blocks.stats();
        for (name, help, v) in [
            (
                "hangar_block_written",
                "Block files written by this node (not found already stored)",
                &b.blocks_written,
            ),
            (
                "hangar_block_written_plain_bytes",
                "Bytes of the blocks written, before compression",
                &b.bytes_written_plain,
            ),
            (
                "hangar_block_written_stored_bytes",
                "Bytes of the block files written, after compression",
                &b.bytes_written_stored,
            ),
            (
                "hangar_block_deduplicated",
                "Blocks not written because already stored",
                &b.blocks_deduplicated,
            ),
            (
                "hangar_block_read",
                "Blocks read from this node's disks",
                &b.blocks_read,
            ),
            (
                "hangar_block_deleted",
                "Block files deleted by the block GC",
                &b.blocks_deleted,
            ),
            (
                "hangar_block_corrupt_reads",
                "Local block reads that failed their hash check",
                &b.corrupt_reads,
            ),
            (
                "hangar_block_quarantined",
                "Local block copies found corrupt (read, check or scrub) and moved to quarantine",
                &b.blocks_quarantined,
            ),
            (
                "hangar_block_corrupt_replicas",
                "Block copies, here or on another node, found not to match their hash",
                &b.corrupt_replicas,
            ),
            (
                "hangar_block_remote_puts",
                "Block copies sent to other nodes and acknowledged",
                &b.remote_puts,
            ),
            (
                "hangar_block_remote_put_errors",
                "Block copies of a put that failed or timed out",
                &b.remote_put_errors,
            ),
            (
                "hangar_block_puts_received",
                "Block copies received from other nodes and stored (or found present)",
                &b.puts_received,
            ),
            (
                "hangar_block_puts_refused",
                "Block copies received from other nodes and refused (bad size or content)",
                &b.puts_refused,
            ),
            (
                "hangar_block_remote_gets",
                "Blocks read from another node",
                &b.remote_gets,
            ),
            (
                "hangar_block_remote_get_errors",
                "Block reads from another node that failed (error, timeout, not found)",
                &b.remote_get_errors,
            ),
            (
                "hangar_block_hedged_reads",
                "Block reads that asked a further replica because the first was slow",
                &b.hedged_reads,
            ),
            (
                "hangar_block_resync_served",
                "Blocks read for other nodes' resync and sent",
                &b.resync_served,
            ),
            (
                "hangar_block_resync_deferred",
                "Resync reads of other nodes deferred to another source while this node served clients",
                &b.resync_deferred,
            ),
            (
                "hangar_block_puts_overloaded",
                "Block puts refused because block_ram_buffer_max stayed spent past the deadline",
                &b.puts_overloaded,
            ),
            (
                "hangar_block_background_copies_abandoned",
                "Block copies given up after their put returned (a slow replica); its resync brings it the block",
                &b.background_copies_abandoned,
            ),
        ] {
            counter(e, name, help, l(v))?;
        }
        let (plain, stored) = (l(&b.bytes_written_plain), l(&b.bytes_written_stored));
        gauge(
            e,
            "hangar_block_compression_ratio",
            "Stored bytes per plain byte of the blocks this node wrote since it started (1: nothing saved)",
            if plain == 0 {
                1.0
            } else {
                stored as f64 / plain as f64
            },
        )?;
        if let Some(s) = self.blocks.block_files().tally().stored() {
            gauge(
                e,
                "hangar_block_stored_blocks",
                "Block files stored on this node's data disks",
                s.blocks,
            )?;
            gauge(
                e,
                "hangar_block_stored_bytes",
                "Bytes of the block files stored on this node's data disks",
                s.bytes,
            )?;
        }
        gauge(
            e,
            "hangar_block_ram_buffer_in_use_bytes",
            "Bytes of block_ram_buffer_max held by block puts now (foreground and background copies)",
            l(&b.ram_in_use_bytes),
        )?;
        gauge(
            e,
            "hangar_block_ram_buffer_max_bytes",
            "block_ram_buffer_max: the RAM budget of block copies in flight",
            self.block_ram_buffer_max,
        )?;
        gauge(
            e,
            "hangar_block_background_copies",
            "Block copies still being sent after their put returned",
            l(&b.background_copies_pending),
        )
    }

    fn encode_resync(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let r = self.resync.stats();
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
            counter(e, name, help, l(v))?;
        }
        gauge(
            e,
            "hangar_resync_in_flight",
            "Resync transfers running now",
            l(&r.in_flight),
        )?;
        gauge(
            e,
            "hangar_resync_rate_limit_bytes_per_second",
            "resync_max_bytes_per_sec: the resync byte-rate limit (0: none)",
            self.resync.settings().max_bytes_per_sec(),
        )?;
        let queued = self.samples.lock().expect("samples lock").resync_queue;
        if let Some(q) = queued {
            gauge(
                e,
                "hangar_resync_queue_blocks",
                "Blocks queued for the resync worker (sampled)",
                q,
            )?;
        }
        Ok(())
    }

    fn encode_scrub(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let Some(st) = self.samples.lock().expect("samples lock").scrub.clone() else {
            return Ok(());
        };
        gauges(
            e,
            "hangar_scrub_state",
            "1 for the scrub's state (idle, running, paused), 0 for the others (sampled)",
            [
                ("idle", ScrubStatus::Idle),
                ("running", ScrubStatus::Running),
                ("paused", ScrubStatus::Paused),
            ]
            .map(|(name, s)| ([("state", name)], i64::from(st.status == s))),
        )?;
        gauge(
            e,
            "hangar_scrub_progress_ratio",
            "Share of the hash space the scrub pass under way has covered, 0 to 1 (sampled)",
            st.progress(),
        )?;
        gauge(
            e,
            "hangar_scrub_pass_checked_blocks",
            "Blocks checked in the current (or last) scrub pass",
            st.checked,
        )?;
        gauge(
            e,
            "hangar_scrub_pass_checked_bytes",
            "Bytes read in the current (or last) scrub pass",
            st.bytes,
        )?;
        gauge(
            e,
            "hangar_scrub_pass_corrupt_blocks",
            "Corrupt copies found in the current (or last) scrub pass",
            st.corrupt,
        )?;
        if let Some(done) = st.last_pass_done_msec {
            gauge(
                e,
                "hangar_scrub_last_pass_end_timestamp_seconds",
                "When the last scrub pass finished (Unix time)",
                done as f64 / 1000.0,
            )?;
        }
        Ok(())
    }

    fn encode_workers(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let ws = self.workers.list();
        fn label(w: &WorkerStatus) -> Label<'_> {
            [("worker", w.name.as_str())]
        }
        counters(
            e,
            "hangar_worker_processed",
            "Items handled by the background worker",
            ws.iter().map(|w| (label(w), w.processed)),
        )?;
        counters(
            e,
            "hangar_worker_errors",
            "Errors of the background worker",
            ws.iter().map(|w| (label(w), w.errors)),
        )?;
        gauges(
            e,
            "hangar_worker_busy",
            "1 while the background worker is busy, 0 when idle or done",
            ws.iter()
                .map(|w| (label(w), i64::from(w.state == WorkerState::Busy))),
        )?;
        gauges(
            e,
            "hangar_worker_queue_length",
            "Items queued for the background worker, for the workers that report it",
            ws.iter()
                .filter_map(|w| w.queue_length.map(|q| (label(w), q))),
        )
    }
}
