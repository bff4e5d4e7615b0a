//! `hangar`: the node (`hangar server`) and the operator CLI.

mod admin;
mod cli;
mod node;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use hangar_api_admin::client::{AdminClient, HttpTarget};
use hangar_api_admin::proto::SOCKET_NAME;
use hangar_util::config::Config;

use crate::cli::error::{CliError, Exit};
use crate::cli::progress::Progress;

const EXAMPLES: &str = "\
Examples:
  hangar -c /etc/hangar.toml server            run a node
  hangar status                                every node: up/down, what it is doing, disks
  hangar stats --json                          buckets, disks, tables and blocks, as JSON
  hangar key create my-app                     a new access key
  hangar bucket create photos
  hangar bucket allow photos --key my-app --read --write
  hangar --admin-url http://node2:3903 status  the same through a node's admin API
  hangar completions bash > /etc/bash_completion.d/hangar
  hangar man | man -l -

Exit codes: 0 ok, 1 failed, 2 usage, 3 not found, 4 conflict, 5 too few nodes up,
6 node unreachable, 7 refused by the admin API (doc/cli.md).";

#[derive(Parser, Debug)]
#[command(
    name = "hangar",
    version,
    about = "Hangar, an S3-compatible object store cluster",
    after_help = EXAMPLES
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
    /// Print machine-readable JSON instead of tables (errors too, on
    /// stderr: {"error": {"kind", "exit_code", "message"}}).
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
    #[command(
        after_help = "Example:\n  hangar convert-db --from sled:/var/lib/hangar/meta/db.sled --to redb:/var/lib/hangar/meta/db.redb"
    )]
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
        /// S3 port on 127.0.0.1 (the next port is used for RPC, the third after it
        /// for the admin API, the web console and `/metrics`).
        #[arg(long, default_value_t = 3900)]
        port: u16,
    },
    /// Manage access keys.
    #[command(subcommand, after_help = cli::commands::KEY_EXAMPLES)]
    Key(cli::commands::KeyCmd),
    /// Manage the keys of SSE-KMS.
    #[command(subcommand, after_help = cli::kms::KMS_EXAMPLES)]
    Kms(cli::kms::KmsCmd),
    /// Manage buckets and permissions.
    #[command(subcommand, after_help = cli::commands::BUCKET_EXAMPLES)]
    Bucket(cli::commands::BucketCmd),
    /// Bearer tokens for the admin API with a scope and an expiry.
    #[command(subcommand, name = "admin-token", after_help = cli::commands::ADMIN_TOKEN_EXAMPLES)]
    AdminToken(cli::commands::AdminTokenCmd),
    /// Node identity and peering.
    #[command(subcommand)]
    Node(cli::commands::NodeCmd),
    /// Every known node at a glance: up/down, layout version and sync,
    /// resync queue, scrub, disk free; and the cluster health.
    #[command(after_help = cli::status::EXAMPLES)]
    Status,
    /// Per bucket its objects and bytes; per node its disks, table rows
    /// and block files.
    #[command(after_help = cli::stats::EXAMPLES)]
    Stats,
    /// The cluster layout: roles, staged changes, versions.
    #[command(subcommand, after_help = cli::layout::EXAMPLES)]
    Layout(cli::layout::LayoutCmd),
    /// Inspect background workers.
    #[command(subcommand)]
    Worker(cli::commands::WorkerCmd),
    /// Inspect this node's metadata tables.
    #[command(subcommand)]
    Table(cli::commands::TableCmd),
    /// Repairs: requeue blocks, sync tables, clear the resync queue.
    #[command(subcommand, after_help = cli::block::REPAIR_EXAMPLES)]
    Repair(cli::block::RepairCmd),
    /// Inspect blocks and their resync errors.
    #[command(subcommand)]
    Block(cli::block::BlockCmd),
    /// A presigned S3 URL for one request (get, put, delete an object, or
    /// list a bucket), signed on the node with one of its keys.
    #[command(after_help = cli::presign::EXAMPLES)]
    Presign(cli::presign::PresignArgs),
    /// Ask the running node's `/health` (on `[admin] api_bind_addr`):
    /// one line, exit 0 when healthy, 1 when not.
    Health,
    /// Print the completion script of a shell on stdout.
    #[command(
        after_help = "Examples:\n  source <(hangar completions bash)\n  hangar completions zsh > \"${fpath[1]}/_hangar\"\n  hangar completions fish > ~/.config/fish/completions/hangar.fish"
    )]
    Completions {
        #[arg(value_enum)]
        shell: cli::docs::CompletionShell,
    },
    /// Print the man page hangar(1) on stdout, or write it and one page
    /// per subcommand into a directory.
    #[command(
        after_help = "Examples:\n  hangar man | man -l -\n  hangar man --dir /usr/local/share/man/man1"
    )]
    Man {
        /// Write hangar.1, hangar-key.1, hangar-key-create.1… here.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
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

/// Parses the command line. Clap's own help and version go out as clap
/// prints them; its usage errors too, unless `--json` is on the line (it
/// cannot be parsed when the rest of the line is wrong, so it is looked for
/// in the arguments): then the error is the JSON object every other
/// failure gives, with the usage exit code (doc/cli.md).
fn parse_cli() -> Result<Cli, ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match Cli::try_parse_from(&args) {
        Ok(cli) => Ok(cli),
        Err(e) if e.use_stderr() && wants_json(&args) => {
            let rendered = e.render().to_string();
            // Clap's text starts with `error: ` and ends with a hint to
            // `--help`; the message keeps its first line and the tip.
            let message = rendered
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("Usage:"))
                .map(|l| l.strip_prefix("error: ").unwrap_or(l))
                .collect::<Vec<_>>()
                .join(" ");
            Err(CliError::new(Exit::Usage, message).report(true))
        }
        Err(e) => e.exit(),
    }
}

/// Whether `--json` is one of the arguments (before a `--` that ends the
/// options).
fn wants_json(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != "--")
        .any(|a| a.as_os_str() == "--json")
}

fn main() -> ExitCode {
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if !matches!(cli.cmd, Cmd::Server | Cmd::SingleNode { .. }) {
        end_on_closed_stdout();
    }
    init_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let json = cli.json;
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(json),
    }
}

/// Lets a CLI command whose reader went away (`hangar status | head`) end
/// the way Unix tools do, killed by SIGPIPE, where Rust's default (the
/// signal ignored) turns every later `println!` into a panic. A node
/// (`server`, `single-node`) keeps the default: a peer or client closing a
/// socket must not kill it.
fn end_on_closed_stdout() {
    // SAFETY: called once at start, before any other thread exists;
    // restoring a signal's default disposition has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `convert-db`, with its progress on stderr.
async fn convert_db(from: String, to: String, json: bool) -> Result<(), CliError> {
    let (f, t) = (from.clone(), to.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::task::spawn_blocking(move || {
        hangar_db::convert_db_with_progress(&f, &t, &mut |p| {
            let _ = tx.send(p);
        })
    });
    let mut bar = Progress::new();
    while let Some(p) = rx.recv().await {
        bar.update(
            p.trees_done,
            Some(p.trees),
            &format!("tree {}: {} keys copied", p.tree, p.keys),
        );
    }
    let n = task
        .await
        .map_err(|e| CliError::failed(e.to_string()))?
        .map_err(|e| CliError::failed(e.to_string()))?;
    bar.finish(&format!("convert-db: {n} keys copied"));
    if json {
        cli::commands::print_json(
            &serde_json::json!({"converted_keys": n, "from": from, "to": to}),
        );
    } else {
        println!("Converted {n} keys from {from} to {to}.");
        println!(
            "Set db_engine to the new engine in the config: the node opens \
             metadata_dir/db.redb or metadata_dir/db.sled."
        );
    }
    Ok(())
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let config_error = |e: hangar_util::config::ConfigError| {
        let hint = match e {
            hangar_util::config::ConfigError::Read { .. } => {
                " (give the node's config with -c or HANGAR_CONFIG_FILE, or use --admin-url)"
            }
            _ => "",
        };
        CliError::new(Exit::Usage, format!("{e}{hint}"))
    };
    match cli.cmd {
        Cmd::Completions { shell } => {
            cli::docs::completions(Cli::command(), shell);
            Ok(())
        }
        Cmd::Man { dir } => cli::docs::man(Cli::command(), dir.as_deref()),
        Cmd::ConvertDb { from, to } => convert_db(from, to, cli.json).await,
        Cmd::SingleNode { dir, port } => node::single_node::run(dir, port)
            .await
            .map_err(|e| CliError::failed(e.to_string())),
        Cmd::Server => {
            let cfg =
                Config::load(&cli.config).map_err(|e| CliError::new(Exit::Usage, e.to_string()))?;
            node::server::run(cfg)
                .await
                .map_err(|e| CliError::failed(e.to_string()))
        }
        cmd => {
            // Over --admin-url the config only lends its admin token.
            let cfg = match &cli.admin_url {
                Some(_) => Config::load(&cli.config).ok(),
                None => Some(Config::load(&cli.config).map_err(config_error)?),
            };
            if let Cmd::Health = cmd {
                // Every failure of `health` exits 1, as container health
                // checks expect.
                let t = cli::health::target(cli.admin_url.as_deref(), cfg.as_ref())
                    .map_err(|e| CliError::new(Exit::Failed, e))?;
                return cli::health::run(&t, cli.json)
                    .await
                    .map_err(|e| CliError::new(Exit::Failed, e));
            }
            let client = match (&cli.admin_url, &cfg) {
                (Some(url), _) => {
                    let token = match cli.admin_token {
                        Some(t) => Some(t),
                        None => cfg
                            .as_ref()
                            .map(Config::admin_token)
                            .transpose()
                            .map_err(config_error)?
                            .flatten(),
                    };
                    AdminClient::Http(HttpTarget::new(url, token)?)
                }
                (None, Some(cfg)) => AdminClient::Socket(cfg.metadata_dir.join(SOCKET_NAME)),
                (None, None) => unreachable!("the config is loaded without --admin-url"),
            };
            let c = &client;
            match cmd {
                Cmd::Key(k) => cli::commands::key(c, k, cli.json).await,
                Cmd::Kms(k) => cli::kms::kms(c, k, cli.json).await,
                Cmd::Bucket(b) => cli::commands::bucket(c, b, cli.json).await,
                Cmd::AdminToken(t) => cli::commands::admin_token(c, t, cli.json).await,
                Cmd::Worker(w) => cli::commands::worker(c, w, cli.json).await,
                Cmd::Table(t) => cli::commands::table(c, t, cli.json).await,
                Cmd::Repair(r) => cli::block::repair(c, r, cli.json).await,
                Cmd::Block(b) => cli::block::block(c, b, cli.json).await,
                Cmd::Node(n) => cli::commands::node(c, cfg.as_ref(), n, cli.json).await,
                Cmd::Status => cli::status::status(c, cli.json).await,
                Cmd::Stats => cli::stats::stats(c, cli.json).await,
                Cmd::Presign(p) => cli::presign::presign(c, p, cli.json).await,
                Cmd::Layout(l) => cli::layout::run(c, l, cli.json).await,
                Cmd::Health
                | Cmd::Server
                | Cmd::SingleNode { .. }
                | Cmd::ConvertDb { .. }
                | Cmd::Completions { .. }
                | Cmd::Man { .. } => {
                    unreachable!("handled above")
                }
            }
        }
    }
}
