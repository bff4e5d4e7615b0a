//! `hangar kms`: the keys of SSE-KMS — create, list, show, rotate,
//! disable, enable (doc/operations.md, "SSE-KMS keys").

use clap::Subcommand;
use hangar_api_admin::answers::KmsKey;
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

use crate::cli::commands::{call, print_json, typed};
use crate::cli::error::CliError;

pub const KMS_EXAMPLES: &str = "Examples:
  hangar kms create --description archive
  hangar kms list
  hangar kms rotate 1f0c6b1e-…               new data under new material
  hangar kms disable 1f0c6b1e-…              its objects answer KMS.DisabledException
  aws s3 cp f s3://b/f --sse aws:kms --sse-kms-key-id 1f0c6b1e-…";

#[derive(Subcommand, Debug)]
pub enum KmsCmd {
    /// Create an enabled key.
    Create {
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List the keys.
    List,
    /// Show a key.
    Info { key: String },
    /// Add a version of the key's material: new data is sealed under it,
    /// older data keeps opening with its own.
    Rotate { key: String },
    /// Disable a key: its objects can be neither written nor read.
    Disable { key: String },
    /// Enable a disabled key again.
    Enable { key: String },
}

/// Runs a `kms` command.
pub async fn kms(client: &AdminClient, cmd: KmsCmd, json: bool) -> Result<(), CliError> {
    let update = |key, rotate, enabled| Request::KmsKeyUpdate {
        key,
        rotate,
        enabled,
    };
    let req = match cmd {
        KmsCmd::Create { description } => Request::KmsKeyCreate { description },
        KmsCmd::List => Request::KmsKeyList,
        KmsCmd::Info { key } => Request::KmsKeyInfo { key },
        KmsCmd::Rotate { key } => update(key, true, None),
        KmsCmd::Disable { key } => update(key, false, Some(false)),
        KmsCmd::Enable { key } => update(key, false, Some(true)),
    };
    let list = matches!(req, Request::KmsKeyList);
    let v = call(client, &req).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    let keys = if list {
        typed::<Vec<KmsKey>>(&v)?
    } else {
        vec![typed::<KmsKey>(&v)?]
    };
    println!(
        "{:<36} {:<8} {:>8} {:<24} DESCRIPTION",
        "ID", "STATE", "VERSIONS", "CURRENT SINCE"
    );
    for k in keys {
        println!(
            "{:<36} {:<8} {:>8} {:<24} {}",
            k.id,
            if k.enabled { "enabled" } else { "disabled" },
            k.versions,
            hangar_util::time::rfc3339(k.current_version_msec),
            k.description
        );
    }
    Ok(())
}
