//! `hangar`: the node (`hangar server`) and the operator CLI.

mod admin_server;
mod block_admin;
mod block_cli;
mod cli;
mod health;
mod layout_admin;
mod layout_cli;
mod layout_progress;
mod node;
mod node_health;
mod presign_admin;
mod single_node;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hangar_api_admin::client::{AdminClient, HttpTarget};
use hangar_api_admin::proto::SOCKET_NAME;
use hangar_util::config::Config;

#[derive(Parser, Debug)]
#[command(
    name = "hangar",
    version,
    about = "Hangar, an S3-compatible object store cluster"
)]
struct Cli {
    /// Configuration file (before the subcommand, as in Garage: `layout
    /// assign` has its own `-c`, the capacity).
    #[arg(
        short = 'c',
        long = "config",
        env = "HANGAR_CONFIG_FILE",
        default_value = "/etc/hangar.toml"
    )]
    config: PathBuf,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Send the command to this admin API (`http://host:3903`) instead of
    /// the local node's socket; the config file is then optional.
    #[arg(long, global = true, env = "HANGAR_ADMIN_URL")]
    admin_url: Option<String>,
    /// Bearer token for --admin-url (default: the config's admin_token).
    #[arg(
        long,
        global = true,
        env = "HANGAR_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a node with the configuration file.
    Server,
    /// Convert a stopped node's metadata from one engine to another.
    ConvertDb {
        /// Source, as `sled:PATH` or `redb:PATH` (the engine's own path, e.g. …/db.sled).
        #[arg(long)]
        from: String,
        /// Destination, as `sled:PATH` or `redb:PATH`; must not hold data.
        #[arg(long)]
        to: String,
    },
    /// Run a ready-to-use single node with embedded defaults (first-time setup included).
    SingleNode {
        /// Directory for the config, metadata and data.
        #[arg(long, default_value = ".hangar-dev")]
        dir: PathBuf,
        /// S3 port on 127.0.0.1 (the next port is used for RPC).
        #[arg(long, default_value_t = 3900)]
        port: u16,
    },
    /// Manage access keys.
    #[command(subcommand)]
    Key(cli::KeyCmd),
    /// Manage buckets and permissions.
    #[command(subcommand)]
    Bucket(cli::BucketCmd),
    /// Node identity and peering.
    #[command(subcommand)]
    Node(cli::NodeCmd),
    /// Every known node (address, hostname, zone, capacity, up/down, last
    /// seen, disks) and the cluster health.
    Status,
    /// The cluster layout: roles, staged changes, versions.
    #[command(subcommand)]
    Layout(layout_cli::LayoutCmd),
    /// Inspect background workers.
    #[command(subcommand)]
    Worker(cli::WorkerCmd),
    /// Inspect this node's metadata tables.
    #[command(subcommand)]
    Table(cli::TableCmd),
    /// Repairs: requeue blocks, sync tables, clear the resync queue.
    #[command(subcommand)]
    Repair(block_cli::RepairCmd),
    /// Inspect blocks and their resync errors.
    #[command(subcommand)]
    Block(block_cli::BlockCmd),
    /// Ask the running node's `/health` (on `[admin] api_bind_addr`):
    /// one line, exit 0 when healthy, 1 when not.
    Health,
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,s3s::ops=off,s3s::service=warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let res: Result<(), String> = rt.block_on(async move {
        match cli.cmd {
            Cmd::ConvertDb { from, to } => {
                let (f, t) = (from.clone(), to.clone());
                let n = tokio::task::spawn_blocking(move || hangar_db::convert_db(&f, &t))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                println!("Converted {n} keys from {from} to {to}.");
                println!(
                    "Set db_engine to the new engine in the config: the node opens \
                     metadata_dir/db.redb or metadata_dir/db.sled."
                );
                Ok(())
            }
            Cmd::SingleNode { dir, port } => {
                single_node::run(dir, port).await.map_err(|e| e.to_string())
            }
            Cmd::Server => {
                let cfg = Config::load(&cli.config).map_err(|e| e.to_string())?;
                node::run(cfg).await.map_err(|e| e.to_string())
            }
            cmd => {
                // Over --admin-url the config only lends its admin token.
                let cfg = match &cli.admin_url {
                    Some(_) => Config::load(&cli.config).ok(),
                    None => Some(Config::load(&cli.config).map_err(|e| e.to_string())?),
                };
                if let Cmd::Health = cmd {
                    let t = health::target(cli.admin_url.as_deref(), cfg.as_ref())?;
                    return health::run(&t, cli.json).await;
                }
                let client = match (&cli.admin_url, &cfg) {
                    (Some(url), _) => {
                        let token = match cli.admin_token {
                            Some(t) => Some(t),
                            None => cfg
                                .as_ref()
                                .map(Config::admin_token)
                                .transpose()
                                .map_err(|e| e.to_string())?
                                .flatten(),
                        };
                        AdminClient::Http(HttpTarget::new(url, token)?)
                    }
                    (None, Some(cfg)) => AdminClient::Socket(cfg.metadata_dir.join(SOCKET_NAME)),
                    (None, None) => unreachable!("the config is loaded without --admin-url"),
                };
                let c = &client;
                match cmd {
                    Cmd::Key(k) => cli::key(c, k, cli.json).await,
                    Cmd::Bucket(b) => cli::bucket(c, b, cli.json).await,
                    Cmd::Worker(w) => cli::worker(c, w, cli.json).await,
                    Cmd::Table(t) => cli::table(c, t, cli.json).await,
                    Cmd::Repair(r) => block_cli::repair(c, r, cli.json).await,
                    Cmd::Block(b) => block_cli::block(c, b, cli.json).await,
                    Cmd::Node(n) => cli::node(c, cfg.as_ref(), n, cli.json).await,
                    Cmd::Status => cli::status(c, cli.json).await,
                    Cmd::Layout(l) => layout_cli::run(c, l, cli.json).await,
                    Cmd::Health | Cmd::Server | Cmd::SingleNode { .. } | Cmd::ConvertDb { .. } => {
                        unreachable!("handled above")
                    }
                }
            }
        }
    });
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
