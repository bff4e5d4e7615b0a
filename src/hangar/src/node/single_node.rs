//! `hangar single-node`: a working single-node Hangar in one command, with
//! embedded defaults, for trying it out and for development.

use std::path::{Path, PathBuf};

use hangar_util::config::Config;

use crate::node::server::{self, NodeError};

const BUCKET: &str = "hangar";
const KEY_NAME: &str = "single-node";

/// The admin endpoint (API, console, `/metrics`) is on this port past the
/// S3 port, as in `script/cluster` and the image (3900 and 3903).
const ADMIN_PORT_OFFSET: u16 = 3;

fn default_config(dir: &Path, port: u16) -> String {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    format!(
        r#"# Written by `hangar single-node`; edit freely (reference: doc/configuration.md).
metadata_dir = "{meta}"
data_dir = "{data}"
metadata_fsync = true
replication_factor = 1
rpc_secret = "{secret}"
rpc_bind_addr = "127.0.0.1:{rpc}"

[s3_api]
api_bind_addr = "127.0.0.1:{port}"
s3_region = "garage"
root_domain = ".s3.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin}"
admin_token = "{token}"
"#,
        meta = abs.join("meta").display(),
        data = abs.join("data").display(),
        secret = hex::encode(rand::random::<[u8; 32]>()),
        rpc = port + 1,
        admin = port + ADMIN_PORT_OFFSET,
        token = hex::encode(rand::random::<[u8; 24]>()),
    )
}

/// Writes the config if missing, starts the node, creates a key and a
/// bucket the first time, and prints how to use them.
pub async fn run(dir: PathBuf, port: u16) -> Result<(), NodeError> {
    if port.checked_add(ADMIN_PORT_OFFSET).is_none() {
        return Err(NodeError::Setup(format!(
            "--port {port} leaves no room for the RPC and admin ports after it"
        )));
    }
    let io = |what: String| move |source| NodeError::Io { what, source };
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let cfg_path = dir.join("hangar.toml");
    if !cfg_path.exists() {
        std::fs::write(&cfg_path, default_config(&dir, port))
            .map_err(io(format!("cannot write {}", cfg_path.display())))?;
    }
    let cfg = Config::load(&cfg_path)?;
    let node = server::open(&cfg).await?;
    if crate::admin::layout::assign_self_if_empty(node.cluster.layout())
        .await
        .map_err(|e| NodeError::Setup(e.to_string()))?
    {
        tracing::info!("this node now holds every partition (layout version 1, zone dc1)");
    }
    let model = &node.model;
    let key = match model
        .keys()
        .list()
        .await?
        .into_iter()
        .find(|k| k.name.value == KEY_NAME)
    {
        Some(k) => k,
        None => {
            let k = model.keys().create(KEY_NAME).await?;
            model
                .keys()
                .set_create_bucket(&k.access_key_id, true)
                .await?
        }
    };
    if model.buckets().get_bucket(BUCKET).await?.is_none() {
        model
            .buckets()
            .create_bucket(BUCKET, Some(&key.access_key_id))
            .await?;
    }
    let endpoint = format!(
        "http://{}",
        cfg.s3_api
            .api_bind_addr
            .as_deref()
            .unwrap_or("127.0.0.1:3900")
    );
    let banner = format!(
        "Hangar is running: a single node, everything under {dir}.
  endpoint    {endpoint}
  region      {region}
  access key  {id}
  secret key  {secret}
  bucket      {BUCKET}
  config      {cfg}   (operator CLI: hangar -c {cfg} bucket list)

Point aws-cli at it (in another shell):
  export AWS_ACCESS_KEY_ID={id} AWS_SECRET_ACCESS_KEY={secret}
  export AWS_DEFAULT_REGION={region} AWS_ENDPOINT_URL={endpoint}
  aws s3 cp README.md s3://{BUCKET}/ && aws s3 ls s3://{BUCKET}

{console}
Stop with Ctrl-C; data stays in {dir} for the next start.",
        dir = dir.display(),
        region = cfg.s3_api.s3_region,
        id = key.access_key_id,
        secret = key.secret.value,
        cfg = cfg_path.display(),
        console = console_banner(&cfg)?,
    );
    server::serve(cfg, node, move || println!("{banner}")).await
}

/// How to open the web console, or why it is off (a config written before
/// `single-node` turned the admin endpoint on, or edited since).
fn console_banner(cfg: &Config) -> Result<String, NodeError> {
    let token = cfg.admin_token()?;
    Ok(match (&cfg.admin.api_bind_addr, token) {
        (Some(addr), Some(token)) => format!(
            "Open the web console in a browser, and log in with the admin token:
  console     http://{addr}/console/
  admin token {token}
  metrics     http://{addr}/metrics
"
        ),
        _ => "The web console is off: this config has no [admin] api_bind_addr and
admin_token (doc/console.md says how to turn it on).
"
        .to_owned(),
    })
}
