//! The node's cluster metrics — layout, nodes up and down, tables and
//! their anti-entropy, garbage-collection queues, free disk space — read
//! at scrape time from the cluster handle and the sampler's last sample.
//! doc/metrics.md lists every family.

use hangar_cluster::Cluster;
use hangar_table::sharded::sync::ShardedSyncStatus;
use hangar_util::time::now_msec;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::{Label, counter, counters, gauge, gauges};
use crate::sampler::Samples;

/// Reads the cluster's state on each scrape.
pub struct ClusterCollector {
    pub cluster: Cluster,
    pub sync: ShardedSyncStatus,
    pub samples: Samples,
}

impl std::fmt::Debug for ClusterCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterCollector")
    }
}

impl Collector for ClusterCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let e = &mut e;
        gauges(
            e,
            "hangar_build_info",
            "Always 1; the version of the hangar binary is the label",
            [([("version", env!("CARGO_PKG_VERSION"))], 1i64)],
        )?;
        self.encode_layout(e)?;
        self.encode_tables(e)?;
        self.encode_disks(e)
    }
}

impl ClusterCollector {
    fn encode_layout(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let h = self.cluster.layout().history();
        gauge(
            e,
            "hangar_cluster_layout_version",
            "The current cluster layout version (0: no layout yet)",
            h.current().version,
        )?;
        gauge(
            e,
            "hangar_cluster_layout_active_versions",
            "Layout versions still active (more than 1 while data moves to a new layout)",
            h.versions.len() as u64,
        )?;
        gauge(
            e,
            "hangar_cluster_layout_synced_version",
            "The newest layout version this node's sharded tables hold every row of",
            self.sync.synced_version(),
        )?;
        // The layout's nodes bound this family; before a layout, this node
        // alone.
        let nodes = h.all_nodes();
        let me = self.cluster.id();
        let (up, all) = if nodes.is_empty() {
            (1, 1)
        } else {
            let up = nodes
                .iter()
                .filter(|n| **n == me || self.cluster.is_up(**n))
                .count();
            (up as u64, nodes.len() as u64)
        };
        gauges(
            e,
            "hangar_cluster_nodes",
            "Nodes of the layout (this one included), by state up or down per this node's failure detector",
            [([("state", "up")], up), ([("state", "down")], all - up)],
        )
    }

    fn encode_tables(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(
            e,
            "hangar_table_sync_lag_seconds",
            "Time since the start of the last anti-entropy pass that found this node's sharded tables holding every acknowledged write (since start when none did yet)",
            self.sync.lag_msec(now_msec()) as f64 / 1000.0,
        )?;
        counter(
            e,
            "hangar_bucket_id_conflicts",
            "Merges on this node in which a live bucket lost to another bucket of its name not created from its tombstone: objects written under the losing id are hidden (doc/replication.md, Bucket creation)",
            hangar_model::bucket::BUCKET_ID_CONFLICTS.load(std::sync::atomic::Ordering::Relaxed),
        )?;
        {
            use hangar_model::usage::{OBJECT_QUOTA_REFUSALS, SIZE_QUOTA_REFUSALS};
            use std::sync::atomic::Ordering::Relaxed;
            counters(
                e,
                "hangar_quota_refusals",
                "Writes (PutObject, CopyObject, CompleteMultipartUpload, PostObject) this node refused with 403 AccessDenied because they would pass a bucket quota, by quota: objects or size",
                [
                    ([("quota", "objects")], OBJECT_QUOTA_REFUSALS.load(Relaxed)),
                    ([("quota", "size")], SIZE_QUOTA_REFUSALS.load(Relaxed)),
                ],
            )?;
        }
        counter(
            e,
            "hangar_table_sync_passes",
            "Anti-entropy passes of the sharded tables finished",
            self.sync.passes(),
        )?;
        gauge(
            e,
            "hangar_table_sync_last_pass_seconds",
            "How long the last anti-entropy pass of the sharded tables took (0 before the first)",
            self.sync.last_pass_msec() as f64 / 1000.0,
        )?;
        gauge(
            e,
            "hangar_table_sync_partitions_pending",
            "Partitions of the current layout version this node holds whose sharded tables the last anti-entropy pass did not find holding every acknowledged write (0 once in sync)",
            self.sync.pending_partitions() as f64,
        )?;
        let totals = self.sync.totals();
        let rows = |f: fn(&hangar_table::sharded::sync::TableSyncCounts) -> u64| {
            totals.iter().map(move |(t, c)| ([("table", *t)], f(c)))
        };
        counters(
            e,
            "hangar_table_sync_partitions_differed",
            "Partitions found to differ from a replica by anti-entropy, per table",
            rows(|c| c.partitions_differed),
        )?;
        counters(
            e,
            "hangar_table_sync_rows_pulled",
            "Rows pulled from replicas by anti-entropy, per table",
            rows(|c| c.rows_pulled),
        )?;
        counters(
            e,
            "hangar_table_sync_rows_pushed",
            "Rows pushed to replicas by anti-entropy, per table",
            rows(|c| c.rows_pushed),
        )?;
        counters(
            e,
            "hangar_table_sync_rows_dropped",
            "Rows deleted because their layout partition left this node (after the old layout version retired), per table",
            rows(|c| c.rows_dropped),
        )?;
        let s = self.samples.lock().expect("samples lock").clone();
        gauges(
            e,
            "hangar_table_rows",
            "Rows this node stores, tombstones included, per table (sampled)",
            s.table_rows
                .iter()
                .map(|(t, n)| -> (Label<'_>, u64) { ([("table", *t)], *n) }),
        )?;
        gauges(
            e,
            "hangar_gc_queue_entries",
            "Entries waiting in a garbage-collection queue: version (replaced object versions), block (blocks at zero references), tombstone (sampled, counted up to 1000000)",
            s.gc_queues
                .iter()
                .map(|(q, n)| -> (Label<'_>, u64) { ([("queue", *q)], *n) }),
        )
    }

    fn encode_disks(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = self.samples.lock().expect("samples lock").clone();
        let disks: Vec<_> = [("data", s.data_disk), ("metadata", s.metadata_disk)]
            .into_iter()
            .filter_map(|(d, space)| space.map(|sp| (d, sp)))
            .collect();
        gauges(
            e,
            "hangar_node_disk_avail_bytes",
            "Bytes an unprivileged process can still write on the file systems of the data directories and of the metadata directory (sampled)",
            disks.iter().map(|(d, sp)| ([("dir", *d)], sp.avail)),
        )?;
        gauges(
            e,
            "hangar_node_disk_total_bytes",
            "Size of the file systems of the data directories and of the metadata directory (sampled)",
            disks.iter().map(|(d, sp)| ([("dir", *d)], sp.total)),
        )
    }
}
