//! The node's configuration file, with Garage's key names.
//!
//! Unlike Garage, an unknown key is an error that names the key: a typo in a
//! config file must not silently fall back to a default. Secrets may come from
//! the file, from a `*_file` key, or from `HANGAR_*` / `GARAGE_*` environment
//! variables.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::notify_targets::{NotifyAmqp, NotifyNats, NotifyRedis, NotifyWebhook};
use crate::size::Size;

/// Why a configuration could not be loaded. The message always names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// Metadata engines Hangar can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DbEngine {
    Sled,
    Redb,
}

impl DbEngine {
    pub const NAMES: &'static str = "\"sled\" or \"redb\"";

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "sled" => Ok(DbEngine::Sled),
            "redb" => Ok(DbEngine::Redb),
            "lmdb" | "sqlite" | "fjall" => Err(format!(
                "db_engine = \"{s}\" is a Garage engine that Hangar does not have; \
                 Hangar's engines are {}. Start with an empty metadata_dir, or convert a \
                 Hangar node's metadata with `hangar convert-db`",
                Self::NAMES
            )),
            other => Err(format!(
                "db_engine = \"{other}\" is unknown; Hangar's engines are {}",
                Self::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DbEngine::Sled => "sled",
            DbEngine::Redb => "redb",
        }
    }
}

impl<'de> Deserialize<'de> for DbEngine {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DbEngine::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `compression_level`: a zstd level, or `"none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CompressionLevel(pub Option<i32>);

impl<'de> Deserialize<'de> for CompressionLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(i) if (-7..=22).contains(&i) => Ok(CompressionLevel(Some(i as i32))),
            Raw::Int(i) => Err(serde::de::Error::custom(format!(
                "compression_level {i} is out of zstd's range -7..=22"
            ))),
            Raw::Str(s) if s == "none" => Ok(CompressionLevel(None)),
            Raw::Str(s) => Err(serde::de::Error::custom(format!(
                "compression_level \"{s}\": expected an integer zstd level or \"none\""
            ))),
        }
    }
}

/// `consistency_mode`, with Garage's quorum rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ConsistencyMode {
    #[default]
    Consistent,
    Degraded,
    Dangerous,
}

/// `rpc_congestion_control`: how QUIC connections between nodes pace their
/// sending (doc/netlab.md, "The mesh across the test bed's links").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RpcCongestion {
    /// Per connection: Cubic on a link whose round trip is under 2 ms, BBR
    /// on a longer one.
    #[default]
    Auto,
    /// Model-based (bandwidth and round trip): keeps a lossy or long link
    /// full; quinn marks its implementation experimental. On a short link
    /// between busy nodes its bursts overflow the receivers' socket buffers.
    Bbr,
    /// Loss-based: backs off at every loss, which a link losing 0.1 % of
    /// its packets turns into a few MiB/s.
    Cubic,
    NewReno,
}

/// The largest `resync_chunks_in_flight`, and where the `auto` window stops.
pub const MAX_RESYNC_CHUNKS_IN_FLIGHT: usize = 64;

/// `resync_chunks_in_flight`: `"auto"` or a number of transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(try_from = "ChunksInFlightRaw", into = "ChunksInFlightRaw")]
pub enum ChunksInFlight {
    /// Sized by the resync worker from what its transfers take
    /// (doc/block-files.md, "The window").
    #[default]
    Auto,
    Fixed(usize),
}

impl ChunksInFlight {
    /// The number the resync settings keep: 0 for `auto`.
    pub fn as_count(self) -> usize {
        match self {
            ChunksInFlight::Auto => 0,
            ChunksInFlight::Fixed(n) => n,
        }
    }
}

/// How `resync_chunks_in_flight` is written: a number or `"auto"`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
enum ChunksInFlightRaw {
    Count(u64),
    Word(String),
}

impl TryFrom<ChunksInFlightRaw> for ChunksInFlight {
    type Error = String;

    fn try_from(raw: ChunksInFlightRaw) -> Result<Self, String> {
        match raw {
            ChunksInFlightRaw::Word(w) if w == "auto" => Ok(ChunksInFlight::Auto),
            ChunksInFlightRaw::Count(n)
                if (1..=MAX_RESYNC_CHUNKS_IN_FLIGHT as u64).contains(&n) =>
            {
                Ok(ChunksInFlight::Fixed(n as usize))
            }
            _ => Err(format!(
                "resync_chunks_in_flight must be \"auto\" or a number from 1 to {MAX_RESYNC_CHUNKS_IN_FLIGHT}"
            )),
        }
    }
}

impl From<ChunksInFlight> for ChunksInFlightRaw {
    fn from(c: ChunksInFlight) -> Self {
        match c {
            ChunksInFlight::Auto => ChunksInFlightRaw::Word("auto".into()),
            ChunksInFlight::Fixed(n) => ChunksInFlightRaw::Count(n as u64),
        }
    }
}

/// One entry of `data_dir` when it is given as a list.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DataDir {
    pub path: PathBuf,
    #[serde(default)]
    pub capacity: Option<Size>,
    #[serde(default)]
    pub read_only: bool,
}

/// `data_dir`: one path, or a list of directories with capacities.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum DataDirs {
    One(PathBuf),
    Many(Vec<DataDir>),
}

impl DataDirs {
    /// The directories new blocks may be written to.
    pub fn writable(&self) -> Vec<PathBuf> {
        match self {
            DataDirs::One(p) => vec![p.clone()],
            DataDirs::Many(v) => v
                .iter()
                .filter(|d| !d.read_only)
                .map(|d| d.path.clone())
                .collect(),
        }
    }
}

/// `[s3_api]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct S3ApiConfig {
    pub api_bind_addr: Option<String>,
    pub s3_region: String,
    pub root_domain: Option<String>,
    /// Hangar's own: refuse SSE-C requests that did not reach the TLS
    /// proxy in front of Hangar over HTTPS (`X-Forwarded-Proto: https`),
    /// as AWS refuses SSE-C over HTTP. Off by default: Hangar speaks HTTP.
    #[serde(default)]
    pub sse_c_require_https: bool,
    /// Hangar's own: accept requests signed with AWS Signature Version 2,
    /// held to Version 4's time bounds. Off by default: V2 is refused with
    /// `400 InvalidRequest`, as AWS's newer regions refuse it.
    #[serde(default)]
    pub allow_signature_v2: bool,
}

/// `[s3_web]`: the website endpoint (`bind_addr`; buckets named by
/// `<bucket>.<root_domain>` hosts). `add_host_to_metrics` is accepted and ignored.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    pub bind_addr: Option<String>,
    pub root_domain: Option<String>,
    #[serde(default)]
    pub add_host_to_metrics: bool,
}

/// `[k2v_api]`: accepted so a Garage file loads; K2V is not built yet.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct K2vConfig {
    pub api_bind_addr: Option<String>,
}

/// `[admin]`. Its `Debug` never shows a token.
#[derive(Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    pub api_bind_addr: Option<String>,
    /// Bearer token of the admin API (every operation).
    pub admin_token: Option<String>,
    pub admin_token_file: Option<PathBuf>,
    /// Hangar's own: when `admin_token_file` names a file that does not
    /// exist, the node writes a new random token to it (mode 0600) when it
    /// starts, and logs the token that once. For images and first runs; a
    /// token from the environment (`HANGAR_ADMIN_TOKEN`) still wins.
    #[serde(default)]
    pub generate_admin_token: bool,
    /// Hangar's own: a bearer token for the admin API's read-only
    /// operations (`GET`), for dashboards and monitoring.
    pub admin_read_token: Option<String>,
    pub admin_read_token_file: Option<PathBuf>,
    pub metrics_token: Option<String>,
    pub metrics_token_file: Option<PathBuf>,
    pub trace_sink: Option<String>,
}

impl std::fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |t: &Option<String>| t.as_ref().map(|_| "(set)");
        f.debug_struct("AdminConfig")
            .field("api_bind_addr", &self.api_bind_addr)
            .field("admin_token", &set(&self.admin_token))
            .field("admin_token_file", &self.admin_token_file)
            .field("generate_admin_token", &self.generate_admin_token)
            .field("admin_read_token", &set(&self.admin_read_token))
            .field("admin_read_token_file", &self.admin_read_token_file)
            .field("metrics_token", &set(&self.metrics_token))
            .field("metrics_token_file", &self.metrics_token_file)
            .field("trace_sink", &self.trace_sink)
            .finish()
    }
}

fn default_true() -> bool {
    true
}
/// redb: chosen by measurement (doc/metadata-engines.md).
fn default_db_engine() -> DbEngine {
    DbEngine::Redb
}
fn default_block_size() -> Size {
    Size(1 << 20)
}
fn default_ram_buffer() -> Size {
    Size(256 << 20)
}
fn default_compression() -> CompressionLevel {
    CompressionLevel(Some(1))
}
fn default_rpc_timeout() -> u64 {
    300_000
}
fn default_ping_timeout() -> u64 {
    10_000
}
fn default_inline_threshold() -> Size {
    Size(3072)
}
fn default_commit_batch() -> usize {
    256
}
fn default_block_gc_delay() -> u64 {
    600
}
fn default_resync_serve_max() -> usize {
    8
}
fn default_resync_yield_msec() -> u64 {
    0
}
fn default_metadata_stall_timeout() -> u64 {
    10_000
}
fn default_scrub_tranquility() -> u32 {
    4
}
fn default_lifecycle_day_secs() -> u64 {
    86_400
}

fn default_lifecycle_interval_secs() -> u64 {
    3_600
}

fn default_tombstone_gc_delay() -> u64 {
    86_400
}
fn default_max_connections() -> usize {
    1024
}
fn default_shed_after_overload() -> u64 {
    1000
}
fn default_access_log_flush() -> u64 {
    60
}

fn default_upload_latency_target() -> u64 {
    1000
}
fn default_s3_header_timeout() -> u64 {
    10_000
}
fn default_max_connections_per_address() -> usize {
    256
}
fn default_s3_idle_timeout() -> u64 {
    60_000
}
fn default_admin_max_connections() -> usize {
    64
}
fn default_admin_header_timeout() -> u64 {
    10_000
}
fn default_admin_idle_timeout() -> u64 {
    30_000
}
fn default_s3_ram() -> Size {
    Size(512 << 20)
}
fn default_admission_wait() -> u64 {
    2000
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub metadata_dir: PathBuf,
    pub data_dir: DataDirs,
    pub metadata_snapshots_dir: Option<PathBuf>,
    /// Sync each metadata commit to disk before acknowledging it (default
    /// true). `false` keeps acknowledged writes across a process crash (the
    /// journal) but may lose the last half second of them to a power cut or
    /// kernel crash: doc/configuration.md, "Durability".
    #[serde(default = "default_true")]
    pub metadata_fsync: bool,
    /// Sync each block file (and its directory) before acknowledging the
    /// write that stored it (default true); same trade as `metadata_fsync`.
    #[serde(default = "default_true")]
    pub data_fsync: bool,
    /// A metadata commit that has waited for the disk longer than this
    /// makes the node answer its peers' pings "unfit": they report it down
    /// and go around it (quorums, bucket coordinators) until its commits go
    /// through again. 0: never.
    #[serde(default = "default_metadata_stall_timeout")]
    pub metadata_stall_timeout_msec: u64,
    #[serde(default)]
    pub disable_scrub: bool,
    #[serde(default)]
    pub use_local_tz: bool,
    pub metadata_auto_snapshot_interval: Option<String>,
    #[serde(default = "default_db_engine")]
    pub db_engine: DbEngine,
    #[serde(default = "default_block_size")]
    pub block_size: Size,
    #[serde(default = "default_ram_buffer")]
    pub block_ram_buffer_max: Size,
    /// LMDB only; accepted so that a Garage file loads, and ignored.
    pub lmdb_map_size: Option<Size>,
    #[serde(default = "default_compression")]
    pub compression_level: CompressionLevel,

    /// Copies of each partition. Required, as in Garage (or via `replication_mode`).
    pub replication_factor: Option<usize>,
    /// Legacy pre-1.0 form of `replication_factor` + `consistency_mode`.
    pub replication_mode: Option<String>,
    #[serde(default)]
    pub consistency_mode: ConsistencyMode,

    pub rpc_secret: Option<String>,
    pub rpc_secret_file: Option<PathBuf>,
    /// The cluster's master key of SSE-S3 and SSE-KMS (64 hex characters,
    /// the same on every node); derived from the cluster secret when unset.
    pub sse_master_key: Option<String>,
    pub sse_master_key_file: Option<PathBuf>,
    pub rpc_bind_addr: SocketAddr,
    #[serde(default)]
    pub rpc_bind_outgoing: bool,
    pub rpc_public_addr: Option<String>,
    pub rpc_public_addr_subnet: Option<String>,
    #[serde(default = "default_rpc_timeout")]
    pub rpc_timeout_msec: u64,
    #[serde(default = "default_ping_timeout")]
    pub rpc_ping_timeout_msec: u64,
    #[serde(default)]
    pub rpc_congestion_control: RpcCongestion,
    #[serde(default)]
    pub bootstrap_peers: Vec<String>,
    #[serde(default)]
    pub allow_world_readable_secrets: bool,
    #[serde(default)]
    pub allow_punycode: bool,

    pub s3_api: S3ApiConfig,
    pub s3_web: Option<WebConfig>,
    pub k2v_api: Option<K2vConfig>,
    #[serde(default)]
    pub admin: AdminConfig,

    // Hangar's own keys (documented in doc/configuration.md).
    /// Objects up to this size are stored inside their metadata row.
    #[serde(default = "default_inline_threshold")]
    pub inline_threshold: Size,
    /// Most metadata writes one group commit may carry (1 = no batching).
    #[serde(default = "default_commit_batch")]
    pub metadata_commit_batch: usize,
    /// Seconds a block's reference count must stay zero before its file is deleted.
    #[serde(default = "default_block_gc_delay")]
    pub block_gc_delay_secs: u64,
    /// Seconds a tombstone (a deleted object, version block, upload or part
    /// row) is kept before it is removed from the metadata store.
    #[serde(default = "default_tombstone_gc_delay")]
    pub tombstone_gc_delay_secs: u64,
    /// Seconds in a lifecycle "day" (86 400; shorter only for tests).
    #[serde(default = "default_lifecycle_day_secs")]
    pub lifecycle_day_secs: u64,
    /// Seconds between two passes of the lifecycle worker.
    #[serde(default = "default_lifecycle_interval_secs")]
    pub lifecycle_interval_secs: u64,
    /// Block transfers the resync worker keeps in flight: `"auto"` (sized
    /// from what the transfers take) or a fixed number (1 to 64).
    #[serde(default)]
    pub resync_chunks_in_flight: ChunksInFlight,
    /// Total bytes per second of resync transfers (0: no limit).
    #[serde(default)]
    pub resync_max_bytes_per_sec: u64,
    /// The resync worker idles this many times the time of each transfer.
    #[serde(default)]
    pub resync_tranquility: u32,
    /// Resync transfers a node serves as a source, and accepts as a target,
    /// at once (each); more are answered busy and retried.
    #[serde(default = "default_resync_serve_max")]
    pub resync_serve_max: usize,
    /// As a resync source, how long (ms) a block asked for by another node
    /// waits at most for this node's S3 clients to go quiet (0: never).
    #[serde(default = "default_resync_yield_msec")]
    pub resync_yield_msec: u64,
    /// The scrub idles this many times the time it spent on each block.
    #[serde(default = "default_scrub_tranquility")]
    pub scrub_tranquility: u32,
    /// Concurrent S3 connections served. At the limit the connection that
    /// has waited longest for a request head is closed to make room; when
    /// every connection is inside a request, one more is answered 503 and
    /// closed.
    #[serde(default = "default_max_connections")]
    pub s3_max_connections: usize,
    /// Concurrent S3 connections from one client address (0: no bound of
    /// its own); past it the address's longest-waiting idle connection is
    /// closed to make room, or the new one refused.
    #[serde(default = "default_max_connections_per_address")]
    pub s3_max_connections_per_address: usize,
    /// Longest wait for a request's head (also an idle keep-alive connection).
    #[serde(default = "default_s3_header_timeout")]
    pub s3_header_timeout_msec: u64,
    /// Longest time without a byte read or written on an S3 connection.
    #[serde(default = "default_s3_idle_timeout")]
    pub s3_idle_timeout_msec: u64,
    /// Concurrent connections to the admin endpoint; one more is answered
    /// 503 and closed.
    #[serde(default = "default_admin_max_connections")]
    pub admin_max_connections: usize,
    /// Longest wait for an admin request's head (also an idle keep-alive
    /// connection).
    #[serde(default = "default_admin_header_timeout")]
    pub admin_header_timeout_msec: u64,
    /// Longest time without a byte read or written on an admin connection.
    #[serde(default = "default_admin_idle_timeout")]
    pub admin_idle_timeout_msec: u64,
    /// RAM for the block buffers of S3 requests in flight; past it, requests
    /// wait up to `s3_admission_wait_msec`, then get `503 SlowDown`.
    #[serde(default = "default_s3_ram")]
    pub s3_ram_buffer_max: Size,
    /// RAM that the requests waiting for their share may ask for together
    /// (unset: as much as `s3_ram_buffer_max`); a request that would queue
    /// past it gets `503 SlowDown` at once instead of waiting.
    #[serde(default)]
    pub s3_ram_queue_max: Option<Size>,
    #[serde(default = "default_admission_wait")]
    pub s3_admission_wait_msec: u64,
    /// For this long after one of this node's block puts failed for
    /// overload (its `block_ram_buffer_max` spent, or a replica's queue
    /// full), new uploads are refused with `503 SlowDown` on arrival
    /// instead of waiting to be refused; 0: never.
    #[serde(default = "default_shed_after_overload")]
    pub s3_shed_after_overload_msec: u64,
    /// The upload gate: while a new upload's blocks would wait on this
    /// node longer than this (its queue of block writes over its measured
    /// rate), an upload from a client that sent `Expect: 100-continue` is
    /// refused with `503 SlowDown` before its body; 0: never.
    #[serde(default = "default_upload_latency_target")]
    pub s3_upload_latency_target_msec: u64,
    /// How often a node writes the server access log lines it holds into
    /// their target buckets (PutBucketLogging).
    #[serde(default = "default_access_log_flush")]
    pub s3_access_log_flush_secs: u64,
    /// Verify a block's hash every time it is read from disk.
    #[serde(default = "default_true")]
    pub verify_blocks_on_read: bool,
    /// `[[notify_webhook]]`: the HTTP endpoints bucket notifications may
    /// be sent to, each named by its `id` in a bucket's configuration
    /// (`arn:hangar:sqs::<id>:webhook`).
    #[serde(default)]
    pub notify_webhook: Vec<NotifyWebhook>,
    /// `[[notify_redis]]`: the Redis streams bucket notifications may be
    /// appended to (`arn:hangar:sqs::<id>:redis`).
    #[serde(default)]
    pub notify_redis: Vec<NotifyRedis>,
    /// `[[notify_nats]]`: the NATS JetStream subjects bucket notifications
    /// may be published to (`arn:hangar:sqs::<id>:nats`).
    #[serde(default)]
    pub notify_nats: Vec<NotifyNats>,
    /// `[[notify_amqp]]`: the AMQP 0-9-1 exchanges (RabbitMQ) bucket
    /// notifications may be published to (`arn:hangar:sqs::<id>:amqp`).
    #[serde(default)]
    pub notify_amqp: Vec<NotifyAmqp>,
}

/// Replication settings derived from `replication_factor` / `replication_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    pub factor: usize,
    pub consistency: ConsistencyMode,
}

impl Config {
    /// Reads and validates a config file, applying environment overrides.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }

    /// Parses and validates config text (environment overrides included).
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Self::parse_with_env(text, |name| std::env::var(name).ok())
    }

    /// [`Config::parse`] with the environment read through `var`.
    fn parse_with_env(
        text: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        cfg.apply_env(var);
        cfg.validate()?;
        Ok(cfg)
    }

    /// `HANGAR_<NAME>` (else `GARAGE_<NAME>`) over the file's value.
    fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) {
        let env =
            |name: &str| var(&format!("HANGAR_{name}")).or_else(|| var(&format!("GARAGE_{name}")));
        // One config file for every container of a cluster: each node
        // gets its own address from its environment.
        if let Some(v) = env("RPC_PUBLIC_ADDR") {
            self.rpc_public_addr = Some(v);
        }
        if let Some(v) = env("RPC_SECRET") {
            self.rpc_secret = Some(v);
        }
        if let Some(v) = env("RPC_SECRET_FILE") {
            self.rpc_secret_file = Some(v.into());
        }
        if let Some(v) = env("SSE_MASTER_KEY") {
            self.sse_master_key = Some(v);
        }
        if let Some(v) = env("SSE_MASTER_KEY_FILE") {
            self.sse_master_key_file = Some(v.into());
        }
        // A token given in the environment replaces the file's, whichever
        // form (inline or `_file`) either uses; both forms in the
        // environment are refused by the validation, as in the file.
        let a = &mut self.admin;
        for (name, inline, file) in [
            ("ADMIN_TOKEN", &mut a.admin_token, &mut a.admin_token_file),
            (
                "ADMIN_READ_TOKEN",
                &mut a.admin_read_token,
                &mut a.admin_read_token_file,
            ),
            (
                "METRICS_TOKEN",
                &mut a.metrics_token,
                &mut a.metrics_token_file,
            ),
        ] {
            let (v, f) = (env(name), env(&format!("{name}_FILE")));
            if v.is_some() || f.is_some() {
                *inline = v;
                *file = f.map(PathBuf::from);
            }
        }
        if env("ALLOW_WORLD_READABLE_SECRETS").is_some_and(|v| v == "true" || v == "1") {
            self.allow_world_readable_secrets = true;
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        self.replication()?;
        if self.rpc_secret.is_some() && self.rpc_secret_file.is_some() {
            return bad("rpc_secret and rpc_secret_file are both set; keep one".into());
        }
        if self.rpc_secret.is_none() && self.rpc_secret_file.is_none() {
            return bad("rpc_secret (or rpc_secret_file) is required".into());
        }
        if let Some(s) = &self.rpc_secret {
            check_secret_hex(s, "rpc_secret")?;
        }
        if self.sse_master_key.is_some() && self.sse_master_key_file.is_some() {
            return bad("sse_master_key and sse_master_key_file are both set; keep one".into());
        }
        if let Some(s) = &self.sse_master_key {
            check_secret_hex(s, "sse_master_key")?;
        }
        if self.block_size.0 < 4096 || self.block_size.0 > (64 << 20) {
            return bad(format!(
                "block_size = {} must be between 4 KiB and 64 MiB",
                self.block_size
            ));
        }
        if self.inline_threshold.0 > 64 * 1024 {
            return bad("inline_threshold must be at most 64 KiB".into());
        }
        if self.metadata_commit_batch == 0 {
            return bad("metadata_commit_batch must be at least 1".into());
        }
        if self.data_dir.writable().is_empty() {
            return bad("data_dir has no writable directory".into());
        }
        if self.s3_api.s3_region.is_empty() {
            return bad("[s3_api] s3_region must not be empty".into());
        }
        crate::notify_targets::validate(
            &self.notify_webhook,
            &self.notify_redis,
            &self.notify_nats,
            &self.notify_amqp,
        )
        .or_else(bad)?;
        for (key, inline, file) in [
            (
                "admin_token",
                &self.admin.admin_token,
                &self.admin.admin_token_file,
            ),
            (
                "admin_read_token",
                &self.admin.admin_read_token,
                &self.admin.admin_read_token_file,
            ),
            (
                "metrics_token",
                &self.admin.metrics_token,
                &self.admin.metrics_token_file,
            ),
        ] {
            if inline.is_some() && file.is_some() {
                return bad(format!(
                    "[admin] {key} and {key}_file are both set; keep one"
                ));
            }
            if inline.as_deref().is_some_and(|t| t.trim().is_empty()) {
                return bad(format!("[admin] {key} is empty"));
            }
        }
        if self.admin.generate_admin_token
            && self.admin.admin_token.is_none()
            && self.admin.admin_token_file.is_none()
        {
            return bad(
                "[admin] generate_admin_token needs admin_token_file: where to keep it".into(),
            );
        }
        if self.rpc_timeout_msec == 0 || self.rpc_ping_timeout_msec == 0 {
            return bad("rpc_timeout_msec and rpc_ping_timeout_msec must be positive".into());
        }
        Ok(())
    }

    /// The replication factor and consistency mode, from `replication_factor`
    /// (preferred) or the legacy `replication_mode`.
    pub fn replication(&self) -> Result<Replication, ConfigError> {
        match (self.replication_factor, &self.replication_mode) {
            (Some(_), Some(_)) => Err(ConfigError::Invalid(
                "replication_factor and replication_mode are both set; keep replication_factor"
                    .into(),
            )),
            (Some(0), None) => Err(ConfigError::Invalid(
                "replication_factor must be at least 1".into(),
            )),
            (Some(f), None) => Ok(Replication {
                factor: f,
                consistency: self.consistency_mode,
            }),
            (None, Some(mode)) => {
                tracing::warn!(
                    "replication_mode is deprecated; use replication_factor and consistency_mode"
                );
                let (n, consistency) = match mode.as_str() {
                    "none" | "1" => (1, ConsistencyMode::Consistent),
                    "2" => (2, ConsistencyMode::Consistent),
                    "2-dangerous" => (2, ConsistencyMode::Dangerous),
                    "3" => (3, ConsistencyMode::Consistent),
                    "3-degraded" => (3, ConsistencyMode::Degraded),
                    "3-dangerous" => (3, ConsistencyMode::Dangerous),
                    other => {
                        return Err(ConfigError::Invalid(format!(
                            "replication_mode = \"{other}\" is not a known mode"
                        )));
                    }
                };
                Ok(Replication {
                    factor: n,
                    consistency,
                })
            }
            (None, None) => Err(ConfigError::Invalid(
                "replication_factor is required (e.g. replication_factor = 1 for a single node)"
                    .into(),
            )),
        }
    }

    /// The cluster secret as 32 bytes, read from `rpc_secret` or `rpc_secret_file`.
    pub fn rpc_secret_bytes(&self) -> Result<[u8; 32], ConfigError> {
        self.secret_bytes(&self.rpc_secret, &self.rpc_secret_file, "rpc_secret")?
            .ok_or_else(|| ConfigError::Invalid("rpc_secret is required".into()))
    }

    /// The SSE master key as 32 bytes, from `sse_master_key` or
    /// `sse_master_key_file`; `None` when neither is set (the key is then
    /// derived from the cluster secret).
    pub fn sse_master_key_bytes(&self) -> Result<Option<[u8; 32]>, ConfigError> {
        self.secret_bytes(
            &self.sse_master_key,
            &self.sse_master_key_file,
            "sse_master_key",
        )
    }

    /// A 32-byte secret given inline or in a file (of mode 600 unless
    /// `allow_world_readable_secrets`).
    fn secret_bytes(
        &self,
        inline: &Option<String>,
        file: &Option<PathBuf>,
        name: &str,
    ) -> Result<Option<[u8; 32]>, ConfigError> {
        let text = match (inline, file) {
            (Some(s), _) => s.clone(),
            (None, Some(p)) => {
                check_secret_file_mode(p, self.allow_world_readable_secrets)?;
                std::fs::read_to_string(p)
                    .map_err(|e| {
                        ConfigError::Invalid(format!(
                            "{name}_file {}: cannot read: {e}",
                            p.display()
                        ))
                    })?
                    .trim()
                    .to_owned()
            }
            (None, None) => return Ok(None),
        };
        check_secret_hex(&text, name).map(Some)
    }

    /// The admin bearer token, from `admin_token` or `admin_token_file`.
    pub fn admin_token(&self) -> Result<Option<String>, ConfigError> {
        read_token(
            &self.admin.admin_token,
            &self.admin.admin_token_file,
            "admin_token",
            self.allow_world_readable_secrets,
        )
    }

    /// Where the node must write a new admin token before it starts:
    /// `admin_token_file` when `generate_admin_token` is set, no inline
    /// token replaces it, and the file does not exist yet.
    pub fn admin_token_to_create(&self) -> Option<&Path> {
        let a = &self.admin;
        match (&a.admin_token, &a.admin_token_file) {
            (None, Some(p)) if a.generate_admin_token && !p.exists() => Some(p),
            _ => None,
        }
    }

    /// The read-only admin bearer token, from `admin_read_token` or
    /// `admin_read_token_file`.
    pub fn admin_read_token(&self) -> Result<Option<String>, ConfigError> {
        read_token(
            &self.admin.admin_read_token,
            &self.admin.admin_read_token_file,
            "admin_read_token",
            self.allow_world_readable_secrets,
        )
    }

    /// The metrics bearer token, from `metrics_token` or `metrics_token_file`.
    pub fn metrics_token(&self) -> Result<Option<String>, ConfigError> {
        read_token(
            &self.admin.metrics_token,
            &self.admin.metrics_token_file,
            "metrics_token",
            self.allow_world_readable_secrets,
        )
    }
}

fn check_secret_hex(s: &str, name: &str) -> Result<[u8; 32], ConfigError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s.trim(), &mut out).map_err(|_| {
        ConfigError::Invalid(format!(
            "{name} must be 64 hex characters (32 bytes; `openssl rand -hex 32` makes one)"
        ))
    })?;
    Ok(out)
}

fn read_token(
    inline: &Option<String>,
    file: &Option<PathBuf>,
    key: &str,
    allow_world_readable: bool,
) -> Result<Option<String>, ConfigError> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(ConfigError::Invalid(format!(
            "[admin] {key} and {key}_file are both set; keep one"
        ))),
        (Some(t), None) => Ok(Some(t.trim().to_owned())),
        (None, Some(p)) => {
            check_secret_file_mode(p, allow_world_readable)?;
            let t = std::fs::read_to_string(p).map_err(|e| {
                ConfigError::Invalid(format!("[admin] {key}_file {}: {e}", p.display()))
            })?;
            let t = t.trim();
            if t.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "[admin] {key}_file {} is empty",
                    p.display()
                )));
            }
            Ok(Some(t.to_owned()))
        }
        (None, None) => Ok(None),
    }
}

#[cfg(unix)]
fn check_secret_file_mode(p: &Path, allow: bool) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    if allow {
        return Ok(());
    }
    let meta = std::fs::metadata(p)
        .map_err(|e| ConfigError::Invalid(format!("secret file {}: {e}", p.display())))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(ConfigError::Invalid(format!(
            "secret file {} is readable by group or others; chmod 600 it, or set \
             allow_world_readable_secrets = true",
            p.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_secret_file_mode(_: &Path, _: bool) -> Result<(), ConfigError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
metadata_dir = "/tmp/m"
data_dir = "/tmp/d"
replication_factor = 1
rpc_secret = "0000000000000000000000000000000000000000000000000000000000000000"
rpc_bind_addr = "127.0.0.1:3901"
[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:3900"
"#;

    #[test]
    fn minimal_config_loads_with_defaults() {
        let c = Config::parse(BASE).unwrap();
        assert_eq!(c.block_size.0, 1 << 20);
        assert_eq!(c.db_engine, DbEngine::Redb);
        assert_eq!(c.compression_level, CompressionLevel(Some(1)));
        assert_eq!(c.rpc_timeout_msec, 300_000);
        assert_eq!(c.replication().unwrap().factor, 1);
        // Durable by default: doc/configuration.md, "Durability".
        assert!(c.metadata_fsync && c.data_fsync);
        assert_eq!(c.metadata_stall_timeout_msec, 10_000);
    }

    #[test]
    fn resync_window_and_congestion_control_parse_and_bad_ones_are_named() {
        let c = Config::parse(BASE).unwrap();
        assert_eq!(c.resync_chunks_in_flight, ChunksInFlight::Auto);
        assert_eq!(c.rpc_congestion_control, RpcCongestion::Auto);
        for (line, want) in [
            ("resync_chunks_in_flight = \"auto\"", ChunksInFlight::Auto),
            ("resync_chunks_in_flight = 8", ChunksInFlight::Fixed(8)),
            ("resync_chunks_in_flight = 64", ChunksInFlight::Fixed(64)),
        ] {
            let c = Config::parse(&format!("{line}\n{BASE}")).unwrap();
            assert_eq!(c.resync_chunks_in_flight, want, "{line}");
        }
        for bad in ["0", "65", "\"fast\"", "-1"] {
            let err = Config::parse(&format!("resync_chunks_in_flight = {bad}\n{BASE}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("resync_chunks_in_flight"), "{bad}: {err}");
        }
        for (name, want) in [
            ("auto", RpcCongestion::Auto),
            ("bbr", RpcCongestion::Bbr),
            ("cubic", RpcCongestion::Cubic),
        ] {
            let c = Config::parse(&format!("rpc_congestion_control = \"{name}\"\n{BASE}")).unwrap();
            assert_eq!(c.rpc_congestion_control, want);
        }
        assert!(Config::parse(&format!("rpc_congestion_control = \"vegas\"\n{BASE}")).is_err());
    }

    #[test]
    fn unknown_key_is_named() {
        let text = format!("metdata_fsync = true\n{BASE}");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("metdata_fsync"), "{err}");
    }

    #[test]
    fn unknown_key_in_section_is_named() {
        let text = format!("{BASE}root_domian = \".s3\"\n");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("root_domian"), "{err}");
    }

    #[test]
    fn signature_v2_is_refused_unless_the_config_allows_it() {
        assert!(!Config::parse(BASE).unwrap().s3_api.allow_signature_v2);
        let on = Config::parse(&format!("{BASE}allow_signature_v2 = true\n")).unwrap();
        assert!(on.s3_api.allow_signature_v2);
        let err = Config::parse(&format!("{BASE}allow_signature_v2 = \"yes\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("allow_signature_v2"), "{err}");
    }

    #[test]
    fn missing_required_key_is_named() {
        let text = BASE.replace("metadata_dir = \"/tmp/m\"\n", "");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("metadata_dir"), "{err}");
    }

    #[test]
    fn notify_webhooks_are_checked_and_their_tokens_not_shown() {
        let hook = |id: &str, endpoint: &str| {
            format!(
                "{BASE}\n[[notify_webhook]]\nid = \"{id}\"\nendpoint = \"{endpoint}\"\nauth_token = \"s3cret\"\n"
            )
        };
        let c = Config::parse(&hook("hook-1", "http://127.0.0.1:9000/events")).unwrap();
        assert_eq!(c.notify_webhook[0].arn(), "arn:hangar:sqs::hook-1:webhook");
        assert!(!format!("{:?}", c.notify_webhook[0]).contains("s3cret"));
        for (id, endpoint, says) in [
            ("hook", "https://example.test/", "HTTPS"),
            ("hook", "ftp://example.test/", "http://"),
            ("hook", "http:///path", "http://"),
            ("a:b", "http://127.0.0.1:9000/", "letters"),
        ] {
            let err = Config::parse(&hook(id, endpoint)).unwrap_err().to_string();
            assert!(err.contains(says), "{endpoint}: {err}");
        }
        let twice =
            hook("h", "http://a/") + "[[notify_webhook]]\nid = \"h\"\nendpoint = \"http://b/\"\n";
        let err = Config::parse(&twice).unwrap_err().to_string();
        assert!(err.contains("unique"), "{err}");
        let redis = |address: &str| {
            format!(
                "{BASE}\n[[notify_redis]]\nid = \"r\"\naddress = \"{address}\"\nstream = \"s\"\n"
            )
        };
        let c = Config::parse(&redis("redis://:pw@127.0.0.1:6379/0")).unwrap();
        assert_eq!(c.notify_redis[0].arn(), "arn:hangar:sqs::r:redis");
        assert!(!format!("{:?}", c.notify_redis[0]).contains("pw"));
        let err = Config::parse(&redis("http://127.0.0.1:6379"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("redis://"), "{err}");
        let nats = format!(
            "{BASE}\n[[notify_nats]]\nid = \"n\"\naddress = \"nats://127.0.0.1:4222\"\nsubject = \"s.e\"\nauth_token = \"tok3n\"\n"
        );
        let c = Config::parse(&nats).unwrap();
        assert_eq!(c.notify_nats[0].arn(), "arn:hangar:sqs::n:nats");
        assert!(!format!("{:?}", c.notify_nats[0]).contains("tok3n"));
        let err = Config::parse(&nats.replace("nats://", "tcp://"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nats://"), "{err}");
        let amqp = format!(
            "{BASE}\n[[notify_amqp]]\nid = \"q\"\naddress = \"amqp://u:pw@127.0.0.1:5672/%2f\"\nrouting_key = \"k\"\n"
        );
        let c = Config::parse(&amqp).unwrap();
        assert_eq!(c.notify_amqp[0].arn(), "arn:hangar:sqs::q:amqp");
        assert_eq!(c.notify_amqp[0].exchange, "");
        assert!(!format!("{:?}", c.notify_amqp[0]).contains("pw"));
    }

    #[test]
    fn malformed_values_are_refused() {
        let text = format!("block_size = \"huge\"\n{BASE}");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("block_size"), "{err}");
        let text = format!("db_engine = \"lmdb\"\n{BASE}");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("lmdb") && err.contains("sled"), "{err}");
        let text = BASE.replace("0000000000000000", "zz");
        let err = Config::parse(&text).unwrap_err().to_string();
        assert!(err.contains("rpc_secret"), "{err}");
    }

    #[test]
    fn sizes_and_data_dir_lists() {
        let text = format!(
            "block_size = \"4MiB\"\ncompression_level = \"none\"\n{}",
            BASE.replace(
                "data_dir = \"/tmp/d\"",
                "data_dir = [{ path = \"/a\", capacity = \"1T\" }, { path = \"/b\", read_only = true }]"
            )
        );
        let c = Config::parse(&text).unwrap();
        assert_eq!(c.block_size.0, 4 << 20);
        assert_eq!(c.compression_level, CompressionLevel(None));
        assert_eq!(c.data_dir.writable(), vec![PathBuf::from("/a")]);
    }

    /// An environment holding just `vars`.
    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn environment_overrides() {
        let text = format!("rpc_public_addr = \"file:3901\"\n{BASE}");
        let c = Config::parse_with_env(&text, env_of(&[])).unwrap();
        assert_eq!(c.rpc_public_addr.as_deref(), Some("file:3901"));

        // HANGAR_ wins over GARAGE_, both over the file; a secret may come
        // from the environment alone.
        let secret = "ab".repeat(32);
        let no_secret = text.replace("rpc_secret = ", "# rpc_secret = ");
        assert!(Config::parse_with_env(&no_secret, env_of(&[])).is_err());
        let c = Config::parse_with_env(
            &no_secret,
            env_of(&[
                ("HANGAR_RPC_PUBLIC_ADDR", "node2:3901"),
                ("GARAGE_RPC_PUBLIC_ADDR", "garage:3901"),
                ("GARAGE_RPC_SECRET", &secret),
            ]),
        )
        .unwrap();
        assert_eq!(c.rpc_public_addr.as_deref(), Some("node2:3901"));
        assert_eq!(c.rpc_secret_bytes().unwrap(), [0xab; 32]);

        let c = Config::parse_with_env(
            BASE,
            env_of(&[
                ("GARAGE_RPC_PUBLIC_ADDR", "garage:3901"),
                ("HANGAR_METRICS_TOKEN", "t"),
            ]),
        )
        .unwrap();
        assert_eq!(c.rpc_public_addr.as_deref(), Some("garage:3901"));
        assert_eq!(c.metrics_token().unwrap().as_deref(), Some("t"));
    }

    #[test]
    fn admin_tokens_from_files_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.token");
        std::fs::write(&file, "from-file\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let text = format!(
            "{BASE}[admin]\nadmin_token_file = \"{}\"\nmetrics_token = \"m\"\n",
            file.display()
        );
        let c = Config::parse_with_env(&text, env_of(&[])).unwrap();
        assert_eq!(c.admin_token().unwrap().as_deref(), Some("from-file"));
        assert_eq!(c.admin_read_token().unwrap(), None);
        // The environment's token replaces the file's, whatever its form.
        let c = Config::parse_with_env(&text, env_of(&[("HANGAR_ADMIN_TOKEN", "env")])).unwrap();
        assert_eq!(c.admin_token().unwrap().as_deref(), Some("env"));
        let f = file.display().to_string();
        let c = Config::parse_with_env(
            BASE,
            env_of(&[
                ("GARAGE_ADMIN_TOKEN_FILE", f.as_str()),
                ("HANGAR_ADMIN_READ_TOKEN", "r"),
            ]),
        )
        .unwrap();
        assert_eq!(c.admin_token().unwrap().as_deref(), Some("from-file"));
        assert_eq!(c.admin_read_token().unwrap().as_deref(), Some("r"));
        // Both forms at once, or an empty token, are refused.
        let both = Config::parse_with_env(
            BASE,
            env_of(&[
                ("HANGAR_ADMIN_TOKEN", "a"),
                ("HANGAR_ADMIN_TOKEN_FILE", f.as_str()),
            ]),
        );
        assert!(both.unwrap_err().to_string().contains("both set"));
        let empty = Config::parse_with_env(
            &format!("{BASE}[admin]\nadmin_token = \" \"\n"),
            env_of(&[]),
        );
        assert!(empty.unwrap_err().to_string().contains("empty"));
        // The Debug form shows no token.
        let c = Config::parse_with_env(&text, env_of(&[("HANGAR_ADMIN_TOKEN", "sekrit")])).unwrap();
        assert!(!format!("{c:?}").contains("sekrit"));
    }

    #[test]
    fn a_missing_admin_token_file_is_created_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.token");
        let with = |extra: &str| {
            format!(
                "{BASE}[admin]\nadmin_token_file = \"{}\"\n{extra}",
                file.display()
            )
        };
        let c =
            Config::parse_with_env(&with("generate_admin_token = true\n"), env_of(&[])).unwrap();
        assert_eq!(c.admin_token_to_create(), Some(file.as_path()));
        // Not without the setting, nor once the file exists, nor when the
        // environment gives the token.
        let c = Config::parse_with_env(&with(""), env_of(&[])).unwrap();
        assert_eq!(c.admin_token_to_create(), None);
        let env = env_of(&[("HANGAR_ADMIN_TOKEN", "env")]);
        let c = Config::parse_with_env(&with("generate_admin_token = true\n"), env).unwrap();
        assert_eq!(c.admin_token_to_create(), None);
        std::fs::write(&file, "t").unwrap();
        let c =
            Config::parse_with_env(&with("generate_admin_token = true\n"), env_of(&[])).unwrap();
        assert_eq!(c.admin_token_to_create(), None);
        // The setting needs a file to keep the token in.
        let e = Config::parse_with_env(
            &format!("{BASE}[admin]\ngenerate_admin_token = true\n"),
            env_of(&[]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs admin_token_file"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn world_readable_token_file_is_refused_unless_allowed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.token");
        std::fs::write(&file, "t").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let text = format!("{BASE}[admin]\nadmin_token_file = \"{}\"\n", file.display());
        let c = Config::parse_with_env(&text, env_of(&[])).unwrap();
        let e = c.admin_token().unwrap_err().to_string();
        assert!(e.contains("readable by group or others"), "{e}");
        let allowed = format!("allow_world_readable_secrets = true\n{text}");
        let c = Config::parse_with_env(&allowed, env_of(&[])).unwrap();
        assert_eq!(c.admin_token().unwrap().as_deref(), Some("t"));
    }

    #[test]
    fn legacy_replication_mode() {
        let text = BASE.replace(
            "replication_factor = 1",
            "replication_mode = \"3-degraded\"",
        );
        let r = Config::parse(&text).unwrap().replication().unwrap();
        assert_eq!(r.factor, 3);
        assert_eq!(r.consistency, ConsistencyMode::Degraded);
    }
}
