//! `hangar server`: opens the node's stores, starts its workers and serves
//! S3 and the local admin socket until SIGINT/SIGTERM.

use hangar_model::sse_managed::MasterKey;
use std::sync::Arc;
use std::time::Duration;

use hangar_api_admin::auth::Tokens;
use hangar_api_admin::history::History;
use hangar_api_admin::history::rpc::HistoryEndpoint;
use hangar_api_admin::proto::SOCKET_NAME;
use hangar_api_admin::{AdminEndpoint, ClusterCollector, NodeCollector, sampler};
use hangar_api_s3::metrics::S3Metrics;
use hangar_api_s3::{S3Api, S3Settings};
use hangar_block::{
    BlockFiles, BlockManager, ReplicatedBlocks, ReplicatedConfig, Resync, ResyncSettings, Scrub,
    spawn_gc_worker, spawn_orphan_scan,
};
use hangar_db::{Db, DbOptions, open_engine};
use hangar_model::Model;
use hangar_model::garbage::{
    TOMBSTONE_BURIAL_DELAY, abandon_uploads, spawn_tombstone_burial_worker,
    spawn_tombstone_gc_worker, spawn_version_gc_worker, stale_uploads,
};
use hangar_net::{Mesh, MeshConfig};
use hangar_table::full::sync::spawn_full_sync_worker;
use hangar_table::sharded::sync::spawn_sharded_sync_worker;
use hangar_util::config::Config;
use hangar_util::conn_limits::ConnLimits;
use hangar_util::foreground::Foreground;
use hangar_util::worker::{WorkerRegistry, WorkerState};
use prometheus_client::registry::Registry;

use crate::admin::report::{NodeReport, ReportRequest};
use crate::admin::state::AdminState;
use hangar_cluster::{Cluster, ClusterError, LayoutFileError, layout_file};

/// Errors that stop a node from starting.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Config(#[from] hangar_util::config::ConfigError),
    #[error("metadata store: {0}")]
    Db(#[from] hangar_db::DbError),
    #[error("block store: {0}")]
    Block(#[from] hangar_block::BlockError),
    #[error("{0}")]
    Model(#[from] hangar_model::ModelError),
    #[error("RPC mesh: {0}")]
    Net(#[from] hangar_net::NetError),
    #[error("cluster layout: {0}")]
    Layout(#[from] LayoutFileError),
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    #[error("{0}")]
    Setup(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
    let what = what.into();
    move |source| NodeError::Io { what, source }
}

/// A started node: its stores, workers, RPC mesh and cluster layer.
pub struct Node {
    pub db: Db,
    pub blocks: Arc<BlockManager>,
    pub model: Arc<Model>,
    pub workers: WorkerRegistry,
    pub mesh: Mesh,
    pub cluster: Cluster,
    pub resync: Arc<Resync>,
    pub scrub: Arc<Scrub>,
    /// What the sharded tables' anti-entropy established (for metrics).
    pub tables_synced: hangar_table::sharded::sync::ShardedSyncStatus,
    /// The node-report endpoint (`status`, `stats`).
    pub reports: Arc<hangar_net::Endpoint<ReportRequest, NodeReport>>,
    /// This node's recent history (the console's plots), and the endpoint
    /// that answers it to other nodes and asks theirs.
    pub history: History,
    pub histories: Arc<HistoryEndpoint>,
    /// Whether S3 clients are being served now, for the background work
    /// that gives way to them; set once the S3 layer exists.
    pub foreground: Foreground,
}

/// The master key of SSE-S3 and SSE-KMS: `sse_master_key`, else derived
/// from the cluster secret (doc/configuration.md).
fn sse_master_key(cfg: &Config) -> Result<MasterKey, NodeError> {
    Ok(match cfg.sse_master_key_bytes()? {
        Some(k) => MasterKey::new(k),
        None => MasterKey::from_rpc_secret(&cfg.rpc_secret_bytes()?),
    })
}

/// Descriptors a node keeps besides its client connections: the RPC
/// mesh's connections, the metadata store, open block files, logs.
const FDS_BESIDES_CLIENTS: u64 = 1024;

/// Raises the open-file limit to what `cfg`'s connection limits need, or
/// says which setting asks for more than the system allows.
fn raise_fd_limit(cfg: &Config) -> Result<(), NodeError> {
    let web = if cfg.s3_web.as_ref().is_some_and(|w| w.bind_addr.is_some()) {
        cfg.s3_max_connections
    } else {
        0
    };
    let need =
        (cfg.s3_max_connections + web + cfg.admin_max_connections) as u64 + FDS_BESIDES_CLIENTS;
    match hangar_util::fd_limit::raise_to(need) {
        Ok(limit) => {
            tracing::debug!("open-file limit {limit} ({need} needed)");
            Ok(())
        }
        Err(e @ hangar_util::fd_limit::FdLimitError::TooLow { .. }) => {
            Err(NodeError::Setup(format!(
                "{e}: s3_max_connections = {} (twice with [s3_web]), admin_max_connections = {} \
             and {FDS_BESIDES_CLIENTS} for the mesh and files; lower s3_max_connections or \
             raise the limit (ulimit -Hn, systemd LimitNOFILE=)",
                cfg.s3_max_connections, cfg.admin_max_connections
            )))
        }
        Err(e) => Err(NodeError::Setup(e.to_string())),
    }
}

/// Makes this node answer pings "unfit" while a metadata commit has waited
/// for the disk longer than `limit_msec` (0: never), so that its peers go
/// around it as around a dead node (`metadata_stall_timeout_msec`,
/// doc/replication.md §9).
fn unfit_while_metadata_stalls(mesh: &Mesh, db: &Db, limit_msec: u64) {
    if limit_msec == 0 {
        return;
    }
    let (db, limit) = (db.clone(), Duration::from_millis(limit_msec));
    let said = std::sync::atomic::AtomicBool::new(false);
    mesh.set_health_check(Box::new(move || {
        use std::sync::atomic::Ordering::Relaxed;
        match db.applying_for() {
            Some(t) if t > limit => {
                let why = format!(
                    "a metadata commit has waited {:.1} s for the disk (metadata_stall_timeout_msec = {limit_msec})",
                    t.as_secs_f64()
                );
                if !said.swap(true, Relaxed) {
                    tracing::error!("{why}: peers are told this node is down until it goes through");
                }
                Err(why)
            }
            _ => {
                if said.swap(false, Relaxed) {
                    tracing::warn!("metadata commits go through again: peers are told this node is up");
                }
                Ok(())
            }
        }
    }));
}

/// Opens the stores and starts the background workers.
pub async fn open(cfg: &Config) -> Result<Node, NodeError> {
    raise_fd_limit(cfg)?;
    std::fs::create_dir_all(&cfg.metadata_dir).map_err(io(format!(
        "cannot create metadata_dir {}",
        cfg.metadata_dir.display()
    )))?;
    let replication = cfg.replication()?;
    let history = layout_file::load_or_create(&cfg.metadata_dir, replication.factor)?;
    // Opening may repair the store after a crash (redb walks the whole
    // file): keep it off the async workers.
    let (kind, dir, fsync) = (cfg.db_engine, cfg.metadata_dir.clone(), cfg.metadata_fsync);
    let engine = tokio::task::spawn_blocking(move || open_engine(kind, &dir, fsync))
        .await
        .map_err(|e| NodeError::Io {
            what: "opening the metadata store".into(),
            source: std::io::Error::other(e.to_string()),
        })??;
    let db = Db::new(
        engine,
        DbOptions {
            fsync: cfg.metadata_fsync,
            max_batch: cfg.metadata_commit_batch,
            ..DbOptions::default()
        },
    );
    let files = BlockFiles::new(
        cfg.data_dir.writable(),
        cfg.compression_level.0,
        cfg.data_fsync,
        cfg.verify_blocks_on_read,
    )?;
    // Before anything can write the object table (the mesh is not up yet):
    // the scan then sees every row and no hook counts meanwhile.
    let counted = hangar_model::usage_backfill::backfill(&db).await?;
    if counted > 0 {
        tracing::info!("bucket usage counters: {counted} object rows stored before them counted");
    }
    let mesh = Mesh::start(MeshConfig::from_config(cfg)?).await?;
    tracing::info!("RPC mesh on {} as {}", cfg.rpc_bind_addr, mesh.peer_addr());
    unfit_while_metadata_stalls(&mesh, &db, cfg.metadata_stall_timeout_msec);
    let cluster = match Cluster::start(
        mesh.clone(),
        history,
        replication.consistency,
        cfg.metadata_dir.clone(),
        cfg.data_dir.writable(),
    ) {
        Ok(c) => c,
        Err(e) => {
            mesh.shutdown().await;
            return Err(e.into());
        }
    };
    let grace = cfg.block_gc_delay_secs * 1000;
    let blocks = BlockManager::new(files, db.clone(), grace);
    let migrated = hangar_block::refcount::migrate_legacy_refs(&db).await?;
    if migrated > 0 {
        tracing::info!("{migrated} block references converted to the block_refs table");
    }
    let foreground = Foreground::default();
    let resync_settings = Arc::new(
        ResyncSettings::new(
            cfg.resync_chunks_in_flight.as_count(),
            cfg.resync_max_bytes_per_sec,
            cfg.resync_tranquility,
        )
        .yielding_to(
            foreground.clone(),
            cfg.resync_yield_msec
                .min(hangar_block::resync::MAX_YIELD_MSEC),
        ),
    );
    let replicated = ReplicatedBlocks::new(
        blocks.clone(),
        cluster.clone(),
        ReplicatedConfig::from_config(cfg),
        resync_settings,
    )?;
    let resync = replicated.resync().clone();
    let model = Model::new(
        db.clone(),
        blocks.clone(),
        cfg.allow_punycode,
        &cluster,
        replicated,
    )?;
    let workers = WorkerRegistry::default();
    // The uploads the last stop interrupted are read now, before any new
    // one starts; ending them reads their objects' rows at a quorum, which
    // must not hold the start back while the peers are not up yet.
    let stale = stale_uploads(&model).await?;
    if !stale.is_empty() {
        let (model, w) = (model.clone(), workers.register("stale-uploads"));
        tokio::spawn(async move {
            w.set_state(WorkerState::Busy);
            loop {
                match abandon_uploads(&model, &stale).await {
                    Ok(n) => {
                        tracing::info!(
                            "{} uploads interrupted by the last stop: {n} queued for collection",
                            stale.len()
                        );
                        w.add_processed(stale.len() as u64);
                        w.set_progress(format!("{n} interrupted uploads collected"), None);
                        w.set_state(WorkerState::Done);
                        return;
                    }
                    Err(e) => {
                        w.record_error(&e);
                        w.set_progress(
                            format!("{} interrupted uploads wait for a quorum: {e}", stale.len()),
                            Some(stale.len() as u64),
                        );
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            }
        });
    }
    spawn_version_gc_worker(model.clone(), &workers, Duration::from_secs(60));
    spawn_tombstone_gc_worker(
        model.clone(),
        &workers,
        Duration::from_secs(cfg.tombstone_gc_delay_secs),
        Duration::from_secs(cfg.tombstone_gc_delay_secs.clamp(1, 600)),
    );
    spawn_tombstone_burial_worker(
        model.clone(),
        &workers,
        TOMBSTONE_BURIAL_DELAY,
        Duration::from_secs(5),
    );
    hangar_model::lifecycle_worker::spawn_lifecycle_worker(
        model.clone(),
        &workers,
        cfg.lifecycle_day_secs.max(1) * 1000,
        Duration::from_secs(cfg.lifecycle_interval_secs.max(1)),
    );
    spawn_orphan_scan(blocks.clone(), &workers);
    spawn_gc_worker(
        blocks.clone(),
        &workers,
        Duration::from_secs(cfg.block_gc_delay_secs.clamp(1, 60)),
    );
    spawn_full_sync_worker(cluster.clone(), model.tables().full_tables(), &workers);
    model.tables().repair_indexes().await?;
    let (_, tables_synced) = spawn_sharded_sync_worker(
        cluster.clone(),
        model.tables().sharded_tables(),
        &workers,
        hangar_table::sharded::sync::SYNC_INTERVAL,
    );
    tokio::spawn(resync.clone().run(workers.register("block-resync")));
    let scrub = Scrub::new(blocks.clone(), cfg.scrub_tranquility, !cfg.disable_scrub);
    tokio::spawn(scrub.clone().run(workers.register("block-scrub")));
    crate::node::layout_progress::spawn(
        cluster.clone(),
        tables_synced.clone(),
        resync.clone(),
        &workers,
    );
    let reports = crate::admin::report::serve(
        &mesh,
        crate::admin::report::Sources {
            cluster: cluster.clone(),
            model: model.clone(),
            blocks: blocks.clone(),
            resync: resync.clone(),
            scrub: scrub.clone(),
        },
    )?;
    let history = History::default();
    let histories = hangar_api_admin::history::rpc::serve(&mesh, history.clone())?;
    Ok(Node {
        foreground,
        db,
        blocks,
        model,
        workers,
        mesh,
        cluster,
        resync,
        scrub,
        tables_synced,
        reports,
        history,
        histories,
    })
}

/// Runs the node until a termination signal.
pub async fn run(cfg: Config) -> Result<(), NodeError> {
    let node = open(&cfg).await?;
    serve(cfg, node, || {}).await
}

/// Serves an opened node until a termination signal; `on_ready` runs once
/// every endpoint is listening.
pub async fn serve(cfg: Config, node: Node, on_ready: impl FnOnce()) -> Result<(), NodeError> {
    if let Some(path) = cfg.admin_token_to_create() {
        let token = create_admin_token(path)?;
        // The one time it is shown: later starts read it from the file.
        tracing::info!(
            "generated an admin token (console login, admin API), kept in {}: {token}",
            path.display()
        );
    }
    let sock = cfg.metadata_dir.join(SOCKET_NAME);
    let state = Arc::new(AdminState {
        model: node.model.clone(),
        workers: node.workers.clone(),
        mesh: node.mesh.clone(),
        cluster: node.cluster.clone(),
        blocks: node.blocks.clone(),
        resync: node.resync.clone(),
        scrub: node.scrub.clone(),
        reports: node.reports.clone(),
        history: node.history.clone(),
        histories: node.histories.clone(),
        presign: crate::admin::presign::PresignSettings::new(
            &cfg.s3_api.s3_region,
            cfg.s3_api.api_bind_addr.as_deref(),
        ),
        token_signer: cfg
            .admin_token()?
            .as_deref()
            .map(hangar_api_admin::auth::TokenSigner::new),
    });
    hangar_api_admin::socket::serve(&sock, state.clone())
        .await
        .map_err(io(format!("cannot listen on {}", sock.display())))?;

    let Some(addr) = cfg.s3_api.api_bind_addr.clone() else {
        tracing::warn!("[s3_api] api_bind_addr is not set: the S3 API is off");
        on_ready();
        shutdown_signal().await;
        node.mesh.shutdown().await;
        return flush(&node).await;
    };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(io(format!(
            "cannot listen on [s3_api] api_bind_addr {addr}"
        )))?;
    let api = S3Api::new(
        node.model.clone(),
        S3Settings {
            region: cfg.s3_api.s3_region.clone(),
            root_domain: cfg.s3_api.root_domain.clone(),
            block_size: cfg.block_size.as_usize(),
            inline_threshold: cfg.inline_threshold.as_usize(),
            ram_buffer_max: cfg.s3_ram_buffer_max.0,
            ram_queue_max: cfg.s3_ram_queue_max.unwrap_or(cfg.s3_ram_buffer_max).0,
            admission_wait: Duration::from_millis(cfg.s3_admission_wait_msec),
            shed_after_overload: Duration::from_millis(cfg.s3_shed_after_overload_msec),
            upload_latency_target: Duration::from_millis(cfg.s3_upload_latency_target_msec),
            sse_c_require_https: cfg.s3_api.sse_c_require_https,
            sse_master_key: sse_master_key(&cfg)?,
            access_log_flush: Duration::from_secs(cfg.s3_access_log_flush_secs.max(1)),
            access_log_spool: Some(cfg.metadata_dir.join("access-log-spool")),
            allow_signature_v2: cfg.s3_api.allow_signature_v2,
            notify_targets: hangar_api_s3::notify_targets::NotifyTarget::all(
                &cfg.notify_webhook,
                &cfg.notify_redis,
                &cfg.notify_nats,
                &cfg.notify_amqp,
            ),
        },
    );
    tracing::info!(
        "S3 API on http://{addr} (region {}), metadata engine {}, data in {:?}",
        cfg.s3_api.s3_region,
        cfg.db_engine.name(),
        cfg.data_dir.writable()
    );
    let budget = api.budget().clone();
    node.foreground
        .set(move || budget.active_within(hangar_util::foreground::RECENT));
    let s3_metrics = Arc::new(S3Metrics::default());
    // One endpoint for the S3 port and the console's proxy: one set of
    // access logs, written by one flusher.
    let endpoint = hangar_api_s3::server::service(api.clone());
    let registry = Arc::new(metrics_registry(&cfg, &node, &api, &endpoint, &s3_metrics));
    node.history.start(registry.clone(), node.db.clone());
    start_admin(&cfg, &endpoint, &s3_metrics, registry, state).await?;
    let limits = ConnLimits {
        max_connections: cfg.s3_max_connections,
        max_per_address: cfg.s3_max_connections_per_address,
        header_timeout: Duration::from_millis(cfg.s3_header_timeout_msec.max(1)),
        idle_timeout: Duration::from_millis(cfg.s3_idle_timeout_msec.max(1)),
    };
    start_web(&cfg, &api, limits).await?;
    on_ready();
    endpoint.start_access_logs(node.workers.register("access-logs"));
    endpoint.start_notifications(node.workers.register("notifications"));
    hangar_api_s3::server::serve(listener, endpoint, s3_metrics, limits, shutdown_signal())
        .await
        .map_err(io("S3 server"))?;
    tracing::info!("stopping");
    node.mesh.shutdown().await;
    let _ = std::fs::remove_file(&sock);
    flush(&node).await
}

/// Starts the website endpoint when `[s3_web] bind_addr` is set; it stops
/// with the process.
async fn start_web(cfg: &Config, api: &S3Api, limits: ConnLimits) -> Result<(), NodeError> {
    let Some(web) = &cfg.s3_web else {
        return Ok(());
    };
    let Some(addr) = web.bind_addr.clone() else {
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(io(format!("cannot listen on [s3_web] bind_addr {addr}")))?;
    tracing::info!("website endpoint on http://{addr}");
    let endpoint = hangar_api_s3::web::WebEndpoint::new(api.clone(), web.root_domain.clone());
    tokio::spawn(async move {
        if let Err(e) =
            hangar_api_s3::web::serve(listener, endpoint, limits, std::future::pending()).await
        {
            tracing::error!("website endpoint: {e}");
        }
    });
    Ok(())
}

/// Makes every acknowledged metadata write durable in the engine before the
/// process exits: with `metadata_fsync = false` it is only journalled
/// without fsync, which survives a process crash but not a power cut.
async fn flush(node: &Node) -> Result<(), NodeError> {
    node.db.close_async().await?;
    tracing::info!("metadata flushed and closed; stopped");
    Ok(())
}

/// The node's metrics, as `/metrics` renders them and the history
/// records them.
fn metrics_registry(
    cfg: &Config,
    node: &Node,
    api: &S3Api,
    endpoint: &hangar_api_s3::server::Endpoint,
    s3_metrics: &Arc<S3Metrics>,
) -> Registry {
    let mut registry = Registry::default();
    s3_metrics.register(&mut registry, api.budget().clone(), api.uploads().clone());
    endpoint.register_metrics(&mut registry);
    node.mesh.metrics().register(&mut registry);
    let samples = sampler::spawn_sampler(sampler::Sources {
        db: node.db.clone(),
        cluster: node.cluster.clone(),
        scrub: node.scrub.clone(),
        sharded: node.model.tables().sharded_tables(),
        full: node.model.tables().full_tables(),
        gc_queues: vec![
            ("version", hangar_model::garbage::VERSION_GC_TREE),
            ("block", hangar_block::BLOCK_GC_TREE),
            ("tombstone", hangar_table::tombstones::TOMBSTONE_GC_TREE),
            (
                "tombstone_burial",
                hangar_table::tombstones::TOMBSTONE_BURIAL_TREE,
            ),
        ],
    });
    registry.register_collector(Box::new(NodeCollector {
        db: node.db.clone(),
        blocks: node.blocks.clone(),
        block_ram_buffer_max: cfg.block_ram_buffer_max.0,
        workers: node.workers.clone(),
        resync: node.resync.clone(),
        samples: samples.clone(),
    }));
    registry.register_collector(Box::new(ClusterCollector {
        cluster: node.cluster.clone(),
        sync: node.tables_synced.clone(),
        samples,
    }));
    registry
}

/// Starts the admin HTTP API, `/metrics` and `/health` on `[admin]
/// api_bind_addr`, if set.
async fn start_admin(
    cfg: &Config,
    endpoint: &hangar_api_s3::server::Endpoint,
    s3_metrics: &Arc<S3Metrics>,
    registry: Arc<Registry>,
    ops: Arc<AdminState>,
) -> Result<(), NodeError> {
    let Some(addr) = cfg.admin.api_bind_addr.clone() else {
        return Ok(());
    };
    let (admin, read) = (cfg.admin_token()?, cfg.admin_read_token()?);
    let tokens = Tokens::new(
        admin.as_deref(),
        read.as_deref(),
        cfg.metrics_token()?.as_deref(),
    );
    let ep = Arc::new(AdminEndpoint {
        registry,
        tokens,
        ops,
        s3: Some(hangar_api_admin::console::NodeS3 {
            endpoint: endpoint.clone(),
            metrics: s3_metrics.clone(),
        }),
    });
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(io(format!("cannot listen on [admin] api_bind_addr {addr}")))?;
    let api_state = match (&admin, &read) {
        (None, None) => "off: no admin_token",
        (Some(_), None) => "on",
        (None, Some(_)) => "read-only: admin_read_token only",
        (Some(_), Some(_)) => "on, with a read-only token",
    };
    tracing::info!("admin endpoint on http://{addr}: /metrics, /health, admin API {api_state}");
    let limits = ConnLimits {
        max_connections: cfg.admin_max_connections,
        max_per_address: 0,
        header_timeout: Duration::from_millis(cfg.admin_header_timeout_msec.max(1)),
        idle_timeout: Duration::from_millis(cfg.admin_idle_timeout_msec.max(1)),
    };
    tokio::spawn(hangar_api_admin::serve(
        listener,
        ep,
        limits,
        std::future::pending(),
    ));
    Ok(())
}

/// Writes a new random admin token to `path`, readable by this user only;
/// never over an existing file.
fn create_admin_token(path: &std::path::Path) -> Result<String, NodeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let token = hex::encode(rand::random::<[u8; 24]>());
    let what = || format!("cannot create admin_token_file {}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io(what()))?;
    f.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io(what()))?;
    Ok(token)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
