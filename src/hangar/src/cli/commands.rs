//! The operator commands that talk to a running node: `hangar key …`,
//! `hangar bucket …`, `hangar worker list`.

use clap::{Args, Subcommand};
use hangar_api_admin::answers::{
    AdminToken, BucketInfo, BucketQuotas, BucketSummary, KeyDeleted, KeyInfo, KeySummary, NodeAddr,
    NodeConnected, Quotas, TableStatus,
};
use hangar_api_admin::block_answers::WorkerSetting;
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::{AliasChange, Request};
use hangar_util::worker::WorkerStatus;
use serde_json::Value;

use crate::cli::error::CliError;
use crate::cli::expiry::ExpiryArgs;

/// `hangar key --help` examples.
pub const KEY_EXAMPLES: &str = "\
Examples:
  hangar key create my-app                   prints the key id and its secret
  hangar key create ci --expires-in 30d      a key that stops working in 30 days
  hangar key set ci --never-expires
  hangar key set-identity my-app --display-name \"Photo app\"
  hangar key allow my-app --create-bucket
  hangar key info my-app --json
  hangar key delete my-app --yes";

/// `hangar bucket --help` examples.
pub const BUCKET_EXAMPLES: &str = "\
Examples:
  hangar bucket create photos
  hangar bucket allow photos --key my-app --read --write
  hangar bucket info photos                  objects, bytes, quotas, aliases and the keys allowed
  hangar bucket alias photos pictures        another name of the bucket, for every client
  hangar bucket unalias photos pictures      the name is free again; the bucket stays
  hangar bucket set-quotas photos --max-size 10G --max-objects 1000
  hangar bucket set-quotas photos --max-size none
  hangar bucket delete photos --yes          only when it is empty";

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Create an access key.
    Create {
        /// A name for the key.
        #[arg(default_value = "")]
        name: String,
        #[command(flatten)]
        expiry: ExpiryArgs,
    },
    /// Change when a key stops working.
    Set {
        key: String,
        #[command(flatten)]
        expiry: ExpiryArgs,
        /// The key never expires.
        #[arg(long)]
        never_expires: bool,
    },
    /// Set who a key is to S3 clients: the canonical user id and display
    /// name shown as the Owner of the buckets it creates, in listings and
    /// ACLs.
    SetIdentity {
        key: String,
        /// 1 to 128 letters, digits, '-', '_' or '.' (several keys may share
        /// one); "" goes back to the id derived from the access key id.
        #[arg(long)]
        canonical_id: Option<String>,
        /// Up to 128 bytes; "" for none.
        #[arg(long)]
        display_name: Option<String>,
    },
    /// Import an existing access key id and secret.
    Import {
        id: String,
        secret: String,
        #[arg(short = 'n', long, default_value = "")]
        name: String,
    },
    /// List access keys.
    List,
    /// Show a key (by id, id prefix or name).
    Info {
        key: String,
        /// Print the secret key too.
        #[arg(long)]
        show_secret: bool,
    },
    /// Delete a key.
    Delete {
        key: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Grant a key the right to create buckets.
    Allow {
        key: String,
        #[arg(long)]
        create_bucket: bool,
    },
    /// Revoke a key's right to create buckets.
    Deny {
        key: String,
        #[arg(long)]
        create_bucket: bool,
    },
}

#[derive(Args, Debug)]
pub struct PermFlags {
    /// The access key (id, id prefix or name).
    #[arg(long)]
    pub key: String,
    #[arg(long)]
    pub read: bool,
    #[arg(long)]
    pub write: bool,
    #[arg(long)]
    pub owner: bool,
}

#[derive(Subcommand, Debug)]
pub enum BucketCmd {
    /// Create a bucket.
    Create { name: String },
    /// List buckets.
    List,
    /// Show a bucket, its usage and the keys allowed on it.
    Info { name: String },
    /// Delete an empty bucket.
    Delete {
        name: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Give a bucket another name, under which every client reaches it
    /// (a global alias).
    Alias {
        /// The bucket: its name, an alias or its id.
        bucket: String,
        /// The new name (S3 bucket naming rules; not a bucket's nor another
        /// alias's name).
        alias: String,
        /// A name only this key sees (a local alias): key id, id prefix or
        /// name.
        #[arg(long, value_name = "KEY")]
        local: Option<String>,
    },
    /// Remove an alias of a bucket; the bucket stays, under its own name.
    Unalias {
        /// The bucket (its name, an alias or its id); alone, the alias.
        bucket: String,
        /// The alias to remove.
        alias: Option<String>,
        /// A local alias of this key (key id, id prefix or name).
        #[arg(long, value_name = "KEY")]
        local: Option<String>,
    },
    /// Grant a key permissions on a bucket.
    Allow {
        bucket: String,
        #[command(flatten)]
        perm: PermFlags,
    },
    /// Revoke a key's permissions on a bucket.
    Deny {
        bucket: String,
        #[command(flatten)]
        perm: PermFlags,
    },
    /// Set a bucket's quotas: the most bytes and objects it may hold
    /// (`none` removes a limit; a flag not given keeps its limit).
    SetQuotas {
        bucket: String,
        /// The most bytes (`10G`, `500MiB`, a number of bytes) or `none`.
        #[arg(long, value_parser = parse_quota_size)]
        max_size: Option<Quota>,
        /// The most object versions, or `none`.
        #[arg(long, value_parser = parse_quota_count)]
        max_objects: Option<Quota>,
    },
    /// Make a bucket a website served by `[s3_web]`, or no longer one.
    Website {
        bucket: String,
        /// Serve the bucket as a website.
        #[arg(long, conflicts_with = "deny", required_unless_present = "deny")]
        allow: bool,
        /// Stop serving it.
        #[arg(long)]
        deny: bool,
        /// The index document suffix (with --allow).
        #[arg(short = 'i', long, default_value = "index.html", requires = "allow")]
        index_document: String,
        /// The error document key (with --allow).
        #[arg(short = 'e', long, requires = "allow")]
        error_document: Option<String>,
    },
}

/// `hangar admin-token --help` examples.
pub const ADMIN_TOKEN_EXAMPLES: &str = "\
Examples:
  hangar admin-token create --scope read --expires-in 30d     for a dashboard, for a month
  hangar admin-token create --scope full --expires-in 12h     for a one-off script
  curl -H \"Authorization: Bearer $(hangar admin-token create --scope read --expires-in 1h -q)\" \\
       http://node1:3903/v2/GetClusterStatus

A token works on every node whose admin_token is this node's; changing
admin_token revokes every token made with it.";

#[derive(Subcommand, Debug)]
pub enum AdminTokenCmd {
    /// Make a bearer token for the admin API with a scope and an expiry.
    Create {
        /// `read`: the GET operations and /metrics; `full`: everything.
        #[arg(long, value_parser = ["read", "full"])]
        scope: String,
        #[command(flatten)]
        expiry: ExpiryArgs,
        /// Print the token alone.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
}

/// Runs an admin-token command.
pub async fn admin_token(
    client: &AdminClient,
    cmd: AdminTokenCmd,
    json: bool,
) -> Result<(), CliError> {
    let AdminTokenCmd::Create {
        scope,
        expiry,
        quiet,
    } = cmd;
    let req = Request::AdminTokenCreate {
        scope,
        expires_msec: expiry.at(hangar_util::time::now_msec()),
    };
    let v = call(client, &req).await?;
    if json {
        print_json(&v);
    } else {
        let t: AdminToken = typed(&v)?;
        if quiet {
            println!("{}", t.token);
        } else {
            println!("Token: {}", t.token);
            println!("Scope: {}", t.scope);
            println!(
                "Expires: {}",
                crate::cli::expiry::describe(t.expires_msec, hangar_util::time::now_msec())
            );
        }
    }
    Ok(())
}

/// A quota given on the command line: a limit, or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota(pub Option<u64>);

fn parse_quota_size(s: &str) -> Result<Quota, String> {
    if s == "none" {
        return Ok(Quota(None));
    }
    hangar_util::size::Size::parse(s).map(|v| Quota(Some(v.0)))
}

fn parse_quota_count(s: &str) -> Result<Quota, String> {
    if s == "none" {
        return Ok(Quota(None));
    }
    s.parse::<u64>()
        .map(|n| Quota(Some(n)))
        .map_err(|_| format!("{s:?} is not a number of objects, nor none"))
}

/// A quota as `bucket info` shows it.
fn quota_text(v: Option<u64>, unit: &str) -> String {
    match v {
        Some(n) if unit == "bytes" => format!("{n} bytes ({})", crate::cli::units::human(n)),
        Some(n) => format!("{n} {unit}"),
        None => "none".into(),
    }
}

#[derive(Subcommand, Debug)]
pub enum NodeCmd {
    /// Print this node's `<id>@<address>`, the string other nodes connect to.
    Id {
        /// Print only that line.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Connect the node to a peer.
    Connect {
        /// The peer, as `<node id>@<host:port>`.
        peer: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkerCmd {
    /// List the node's background workers and their progress.
    List,
    /// One worker's status, statistics and settings.
    Info {
        /// The worker's name, as `worker list` shows it (`block-resync`…).
        name: String,
    },
    /// Change a worker setting on the running node (until it restarts):
    /// `resync-chunks-in-flight` (`auto` or 1-64), `resync-max-bytes-per-sec`
    /// (0: no limit), `resync-tranquility`, `resync-yield-msec` (0-1000),
    /// `scrub-tranquility`.
    Set { setting: String, value: String },
}

#[derive(Subcommand, Debug)]
pub enum TableCmd {
    /// For each replicated table, the rows this node holds and the digest
    /// of its Merkle roots: replicas holding the same rows show the same
    /// digest.
    Status,
}

/// Sends one request to the node, through its socket or its admin API.
pub async fn call(client: &AdminClient, req: &Request) -> Result<Value, CliError> {
    Ok(client.call(req).await?)
}

/// Prints `v` as pretty JSON, the `--json` output of every command; a
/// closed pipe (`| head`) ends the output quietly.
pub fn print_json(v: &Value) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(v).expect("json")
    );
}

/// Prints a JSON object as indented `field: value` lines, the human form
/// of the commands that show one thing's details (`worker info`, `block
/// info`, `repair tables`).
pub fn print_fields(v: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    let scalar = |x: &Value| match x {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::Object(o) if !o.is_empty() => {
                        println!("{pad}{k}:");
                        print_fields(x, indent + 1);
                    }
                    Value::Array(a) if a.iter().any(|e| e.is_object() || e.is_array()) => {
                        println!("{pad}{k}:");
                        for e in a {
                            println!("{pad}  -");
                            print_fields(e, indent + 2);
                        }
                    }
                    Value::Array(a) => {
                        let items: Vec<String> = a.iter().map(scalar).collect();
                        println!("{pad}{k}: {}", items.join(", "));
                    }
                    other => println!("{pad}{k}: {}", scalar(other)),
                }
            }
        }
        Value::Array(a) => {
            for e in a {
                println!("{pad}-");
                print_fields(e, indent + 1);
            }
        }
        other => println!("{pad}{}", scalar(other)),
    }
}

/// A typed answer read from the node's JSON.
pub fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, CliError> {
    serde_json::from_value(v.clone())
        .map_err(|e| CliError::from(format!("the node's answer cannot be read: {e}")))
}

fn print_key(k: &KeyInfo, show_secret: bool) {
    println!("Key name: {}", k.name);
    println!("Key ID: {}", k.access_key_id);
    if show_secret {
        println!(
            "Secret key: {}",
            k.secret_access_key.as_deref().unwrap_or_default()
        );
    } else {
        println!("Secret key: (redacted, use --show-secret)");
    }
    println!("Can create buckets: {}", k.allow_create_bucket);
    println!("Canonical ID: {}", k.canonical_id);
    if let Some(name) = &k.display_name {
        println!("Display name: {name}");
    }
    println!(
        "Expires: {}",
        crate::cli::expiry::describe(k.expires_msec, hangar_util::time::now_msec())
    );
    if !k.buckets.is_empty() {
        println!("Buckets:");
        for b in &k.buckets {
            println!(
                "  {:<40} {}",
                b.bucket,
                perm_string(b.read, b.write, b.owner)
            );
        }
    }
}

fn perm_string(read: bool, write: bool, owner: bool) -> String {
    let f = |on: bool, c: char| if on { c } else { '-' };
    format!("{}{}{}", f(read, 'R'), f(write, 'W'), f(owner, 'O'))
}

/// Runs a key command.
pub async fn key(client: &AdminClient, cmd: KeyCmd, json: bool) -> Result<(), CliError> {
    let (req, show_secret) = match cmd {
        KeyCmd::Create { name, expiry } => (
            Request::KeyCreate {
                name,
                expires_msec: expiry.at(hangar_util::time::now_msec()),
            },
            true,
        ),
        KeyCmd::Set {
            key,
            expiry,
            never_expires,
        } => {
            let expires_msec = crate::cli::expiry::set_value(
                &expiry,
                never_expires,
                hangar_util::time::now_msec(),
            )?;
            (Request::KeySetExpiry { key, expires_msec }, false)
        }
        KeyCmd::SetIdentity {
            key,
            canonical_id,
            display_name,
        } => {
            if canonical_id.is_none() && display_name.is_none() {
                return Err("nothing to change: give --canonical-id or --display-name".into());
            }
            (
                Request::KeySetIdentity {
                    key,
                    canonical_id,
                    display_name,
                },
                false,
            )
        }
        KeyCmd::Import { id, secret, name } => (Request::KeyImport { id, secret, name }, true),
        KeyCmd::List => (Request::KeyList, false),
        KeyCmd::Info { key, show_secret } => (Request::KeyInfo { key }, show_secret),
        KeyCmd::Delete { key, yes } => {
            if !yes {
                return Err(format!("add --yes to really delete key {key}").into());
            }
            (Request::KeyDelete { key }, false)
        }
        KeyCmd::Allow { key, create_bucket } | KeyCmd::Deny { key, create_bucket }
            if !create_bucket =>
        {
            return Err(format!("nothing to change for {key}: give --create-bucket").into());
        }
        KeyCmd::Allow { key, .. } => (Request::KeySetCreateBucket { key, allow: true }, false),
        KeyCmd::Deny { key, .. } => (Request::KeySetCreateBucket { key, allow: false }, false),
    };
    let list = matches!(req, Request::KeyList);
    let deleted = matches!(req, Request::KeyDelete { .. });
    let mut v = call(client, &req).await?;
    if !show_secret && let Some(o) = v.as_object_mut() {
        o.remove("secret_access_key");
    }
    if json {
        print_json(&v);
    } else if list {
        println!("{:<28} {:<24} NAME", "ID", "EXPIRES");
        for k in typed::<Vec<KeySummary>>(&v)? {
            let expires = match k.expires_msec {
                None => "never".to_owned(),
                Some(_) if k.expired => "EXPIRED".to_owned(),
                Some(t) => hangar_util::time::rfc3339(t),
            };
            println!("{:<28} {:<24} {}", k.access_key_id, expires, k.name);
        }
    } else if deleted {
        println!("Key {} deleted.", typed::<KeyDeleted>(&v)?.deleted);
    } else {
        print_key(&typed(&v)?, show_secret);
    }
    Ok(())
}

/// The alias of `hangar bucket alias|unalias`: global, or for `--local
/// <key>` a local one of that key.
fn alias_names(
    alias: String,
    local: Option<String>,
) -> (Option<String>, Option<hangar_api_admin::proto::LocalAlias>) {
    match local {
        None => (Some(alias), None),
        Some(access_key_id) => (
            None,
            Some(hangar_api_admin::proto::LocalAlias {
                access_key_id,
                alias,
            }),
        ),
    }
}

/// How the CLI names an alias in its sentences: a local alias with the id
/// of its key as the bucket `info` lists it (the key as given otherwise).
fn alias_text(
    global: Option<String>,
    local: Option<hangar_api_admin::proto::LocalAlias>,
    info: &BucketInfo,
) -> String {
    match (global, local) {
        (_, Some(l)) => {
            let id = info
                .local_aliases
                .iter()
                .find(|x| x.alias == l.alias)
                .map_or(l.access_key_id.clone(), |x| x.access_key_id.clone());
            format!("Local alias {} of key {id}", l.alias)
        }
        (g, None) => format!("Alias {}", g.unwrap_or_default()),
    }
}

/// Runs a bucket command.
pub async fn bucket(client: &AdminClient, cmd: BucketCmd, json: bool) -> Result<(), CliError> {
    let perm = |bucket: String, p: PermFlags, allow: bool| -> Result<Request, String> {
        Ok(Request::BucketPermission {
            bucket,
            key: p.key,
            read: p.read,
            write: p.write,
            owner: p.owner,
            allow,
        })
    };
    let req = match cmd {
        BucketCmd::Create { name } => Request::BucketCreate { name },
        BucketCmd::List => Request::BucketList,
        BucketCmd::Info { name } => Request::BucketInfo { name },
        BucketCmd::Delete { name, yes } => {
            if !yes {
                return Err(format!("add --yes to really delete bucket {name}").into());
            }
            Request::BucketDelete { name }
        }
        BucketCmd::Alias {
            bucket,
            alias,
            local,
        } => {
            let (global_alias, local_alias) = alias_names(alias, local);
            Request::BucketAlias(AliasChange {
                bucket_id: None,
                bucket: Some(bucket),
                global_alias,
                local_alias,
            })
        }
        BucketCmd::Unalias {
            bucket,
            alias,
            local,
        } => {
            // Given alone, the alias names its bucket.
            let alias = alias.unwrap_or_else(|| bucket.clone());
            let (global_alias, local_alias) = alias_names(alias, local);
            Request::BucketUnalias(AliasChange {
                bucket_id: None,
                bucket: Some(bucket),
                global_alias,
                local_alias,
            })
        }
        BucketCmd::Allow { bucket, perm: p } => perm(bucket, p, true)?,
        BucketCmd::Deny { bucket, perm: p } => perm(bucket, p, false)?,
        BucketCmd::SetQuotas {
            bucket,
            max_size,
            max_objects,
        } => {
            if max_size.is_none() && max_objects.is_none() {
                return Err(format!(
                    "nothing to change for {bucket}: give --max-size and/or --max-objects (a limit or none)"
                )
                .into());
            }
            // A flag not given keeps the bucket's limit.
            let cur = if max_size.is_none() || max_objects.is_none() {
                let info = call(
                    client,
                    &Request::BucketInfo {
                        name: bucket.clone(),
                    },
                )
                .await?;
                typed::<BucketInfo>(&info)?.quotas
            } else {
                Quotas::default()
            };
            Request::BucketSetQuotas {
                max_size: max_size.map_or(cur.max_size, |q| q.0),
                max_objects: max_objects.map_or(cur.max_objects, |q| q.0),
                bucket,
            }
        }
        BucketCmd::Website {
            bucket,
            allow,
            deny: _,
            index_document,
            error_document,
        } => Request::BucketWebsite {
            bucket,
            allow,
            index_document: allow.then_some(index_document),
            error_document,
        },
    };
    let v = call(client, &req).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    match req {
        Request::BucketCreate { name } => println!("Bucket {name} created."),
        Request::BucketAlias(AliasChange {
            global_alias,
            local_alias,
            ..
        }) => {
            let b: BucketInfo = typed(&v)?;
            println!(
                "{} now names bucket {}.",
                alias_text(global_alias, local_alias, &b),
                b.name
            )
        }
        Request::BucketUnalias(AliasChange {
            global_alias,
            local_alias,
            ..
        }) => {
            let b: BucketInfo = typed(&v)?;
            println!(
                "{} of bucket {} removed.",
                alias_text(global_alias, local_alias, &b),
                b.name
            )
        }
        Request::BucketDelete { name } => println!("Bucket {name} deleted."),
        Request::BucketWebsite { bucket, allow, .. } => {
            if allow {
                println!("Website access allowed for {bucket}.");
            } else {
                println!("Website access denied for {bucket}.");
            }
        }
        Request::BucketSetQuotas { bucket, .. } => {
            let q = typed::<BucketQuotas>(&v)?.quotas;
            println!("Quotas of {bucket}:");
            println!("  max size: {}", quota_text(q.max_size, "bytes"));
            println!("  max objects: {}", quota_text(q.max_objects, "objects"));
        }
        Request::BucketList => {
            for b in typed::<Vec<BucketSummary>>(&v)? {
                if b.aliases.is_empty() {
                    println!("{}", b.name);
                } else {
                    println!("{}  (aliases: {})", b.name, b.aliases.join(", "));
                }
            }
        }
        Request::BucketInfo { .. } => {
            let b: BucketInfo = typed(&v)?;
            println!("Bucket: {}", b.name);
            println!("ID: {}", b.id);
            if !b.aliases.is_empty() {
                println!("Aliases: {}", b.aliases.join(", "));
            }
            let local: Vec<String> = b
                .local_aliases
                .iter()
                .map(|l| format!("{} (key {})", l.alias, l.access_key_id))
                .collect();
            if !local.is_empty() {
                println!("Local aliases: {}", local.join(", "));
            }
            println!("Objects: {}", b.objects);
            println!("Size: {} bytes", b.bytes);
            println!(
                "Quotas: max size {}, max objects {}",
                quota_text(b.quotas.max_size, "bytes"),
                quota_text(b.quotas.max_objects, "objects")
            );
            match &b.website {
                Some(w) => println!(
                    "Website: yes (index {}, error document {})",
                    w.index_document.as_deref().unwrap_or_default(),
                    w.error_document.as_deref().unwrap_or_default()
                ),
                None => println!("Website: no"),
            }
            println!("Keys:");
            for k in &b.keys {
                println!(
                    "  {} {:<28} {}",
                    perm_string(k.read, k.write, k.owner),
                    k.access_key_id,
                    k.name
                );
            }
        }
        _ => print_key(&typed(&v)?, false),
    }
    Ok(())
}

/// Runs a table command.
pub async fn table(client: &AdminClient, cmd: TableCmd, json: bool) -> Result<(), CliError> {
    let TableCmd::Status = cmd;
    let v = call(client, &Request::TableStatus).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    println!("{:<12} {:>10}  DIGEST", "TABLE", "ROWS");
    for t in typed::<Vec<TableStatus>>(&v)? {
        println!("{:<12} {:>10}  {}", t.table, t.rows, t.digest);
    }
    Ok(())
}

/// Runs a worker command.
pub async fn worker(client: &AdminClient, cmd: WorkerCmd, json: bool) -> Result<(), CliError> {
    match cmd {
        WorkerCmd::List => {}
        WorkerCmd::Info { name } => {
            let v = call(client, &Request::WorkerInfo { name }).await?;
            if json {
                print_json(&v);
            } else {
                print_fields(&v, 0);
            }
            return Ok(());
        }
        WorkerCmd::Set { setting, value } => {
            let v = call(client, &Request::WorkerSet { setting, value }).await?;
            if json {
                print_json(&v);
            } else {
                let set = typed::<WorkerSetting>(&v)?;
                println!("{} = {}", set.setting, set.value);
            }
            return Ok(());
        }
    }
    let v = call(client, &Request::WorkerList).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    println!(
        "{:<16} {:<6} {:>10} {:>7} {:>8}  PROGRESS",
        "WORKER", "STATE", "PROCESSED", "ERRORS", "QUEUE"
    );
    for w in typed::<Vec<WorkerStatus>>(&v)? {
        let state = serde_json::to_value(w.state)
            .ok()
            .and_then(|s| s.as_str().map(str::to_owned))
            .unwrap_or_default();
        println!(
            "{:<16} {:<6} {:>10} {:>7} {:>8}  {}",
            w.name,
            state,
            w.processed,
            w.errors,
            w.queue_length.map(|q| q.to_string()).unwrap_or_default(),
            w.progress
        );
    }
    Ok(())
}

/// Runs a node command.
pub async fn node(
    client: &AdminClient,
    cfg: Option<&hangar_util::config::Config>,
    cmd: NodeCmd,
    json: bool,
) -> Result<(), CliError> {
    match cmd {
        NodeCmd::Id { quiet } => {
            // The id lives in metadata_dir, so it is known even while the
            // node is stopped (when the CLI has the node's config).
            let addr = match (call(client, &Request::NodeId).await, cfg) {
                (Ok(v), _) => typed::<NodeAddr>(&v)?.node,
                (Err(_), Some(cfg)) => hangar_net::MeshConfig::from_config(cfg)
                    .and_then(|m| m.node_peer_addr())
                    .map_err(|e| e.to_string())?
                    .to_string(),
                (Err(e), None) => return Err(e),
            };
            if json {
                println!("{}", serde_json::json!({ "node": addr }));
            } else if quiet {
                println!("{addr}");
            } else {
                println!("{addr}");
                println!();
                println!("Give this string to other nodes with `hangar node connect {addr}`,");
                println!("or list it in their bootstrap_peers.");
            }
        }
        NodeCmd::Connect { peer } => {
            let v = call(client, &Request::NodeConnect { peer }).await?;
            if json {
                print_json(&v);
            } else {
                println!("Connected to {}.", typed::<NodeConnected>(&v)?.connected);
            }
        }
    }
    Ok(())
}
