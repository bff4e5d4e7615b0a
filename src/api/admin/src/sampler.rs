//! Values that cost a metadata read or a system call (queue lengths, table
//! rows, the scrub's state, free disk space): a background task samples
//! them every [`SAMPLE_INTERVAL`] on the blocking pool and the async
//! reads of the stores, and a scrape reads the last sample, so that a
//! scrape never touches the disks and its cost does not grow with the
//! data.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_block::{Scrub, ScrubState};
use hangar_cluster::Cluster;
use hangar_cluster::node_info::DiskSpace;
use hangar_db::Db;
use hangar_table::full::sync::Syncable;
use hangar_table::sharded::sync::ShardedSyncable;

/// Time between two samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
/// A queue is counted up to this many entries; a gauge at this value means
/// "at least".
pub const QUEUE_COUNT_CAP: u64 = 1_000_000;

/// What the sampler reads.
pub struct Sources {
    pub db: Db,
    pub cluster: Cluster,
    pub scrub: Arc<Scrub>,
    pub sharded: Vec<Arc<dyn ShardedSyncable>>,
    pub full: Vec<Box<dyn Syncable>>,
    /// The garbage-collection queues: (label, local tree).
    pub gc_queues: Vec<(&'static str, &'static str)>,
}

/// The last sample.
#[derive(Debug, Default, Clone)]
pub struct Sample {
    pub resync_queue: Option<u64>,
    pub scrub: Option<ScrubState>,
    /// (table, rows), for the tables that could be counted.
    pub table_rows: Vec<(&'static str, u64)>,
    /// (queue, entries).
    pub gc_queues: Vec<(&'static str, u64)>,
    pub data_disk: Option<DiskSpace>,
    pub metadata_disk: Option<DiskSpace>,
}

/// The shared last sample.
pub type Samples = Arc<Mutex<Sample>>;

/// Starts the sampler; the first sample is taken at once.
pub fn spawn_sampler(src: Sources) -> Samples {
    let out: Samples = Arc::default();
    let shared = out.clone();
    tokio::spawn(async move {
        loop {
            let s = sample(&src).await;
            *shared.lock().expect("samples lock") = s;
            tokio::time::sleep(SAMPLE_INTERVAL).await;
        }
    });
    out
}

async fn sample(src: &Sources) -> Sample {
    let mut s = Sample {
        resync_queue: hangar_block::resync_queue::len(&src.db).await.ok(),
        scrub: src.scrub.state().await.ok(),
        ..Sample::default()
    };
    for t in &src.sharded {
        match t.rows().await {
            Ok(n) => s.table_rows.push((t.tree(), n)),
            Err(e) => tracing::debug!("metrics: rows of {}: {e}", t.tree()),
        }
    }
    for t in &src.full {
        match t.rows().await {
            Ok(n) => s.table_rows.push((t.tree(), n)),
            Err(e) => tracing::debug!("metrics: rows of {}: {e}", t.tree()),
        }
    }
    for (name, tree) in &src.gc_queues {
        match count(&src.db, tree).await {
            Ok(n) => s.gc_queues.push((name, n)),
            Err(e) => tracing::debug!("metrics: queue {tree}: {e}"),
        }
    }
    let layout = src.cluster.layout().clone();
    if let Ok(info) = tokio::task::spawn_blocking(move || layout.local_info()).await {
        s.data_disk = info.data_disk;
        s.metadata_disk = info.metadata_disk;
    }
    s
}

/// Entries of `tree`, counted up to [`QUEUE_COUNT_CAP`].
async fn count(db: &Db, tree: &'static str) -> Result<u64, hangar_db::DbError> {
    const PAGE: usize = 4096;
    let (mut n, mut after) = (0u64, None::<Vec<u8>>);
    loop {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let page = db
            .range_async(tree, start, std::ops::Bound::Unbounded, false, PAGE)
            .await?;
        n += page.len() as u64;
        if page.len() < PAGE || n >= QUEUE_COUNT_CAP {
            return Ok(n.min(QUEUE_COUNT_CAP));
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}
