//! `hangar presign`: a presigned S3 URL for one request, signed on the
//! node with one of the cluster's keys (the `PresignObject` operation), so
//! that `curl` or a browser can fetch or upload without credentials.

use clap::Args;
use hangar_api_admin::answers::PresignedUrl;
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

use crate::cli::commands::{call, print_json, typed};
use crate::cli::error::CliError;

/// `hangar presign --help` examples.
pub const EXAMPLES: &str = "\
Examples:
  curl -o photo.jpg \"$(hangar presign photos 2026/photo.jpg --key my-app)\"
  curl -T report.pdf \"$(hangar presign docs report.pdf --key my-app --action put --expires-in 1h)\"
  hangar presign photos --key my-app --action list --prefix 2026/ --json";

/// The flags of `hangar presign`.
#[derive(Args, Debug)]
pub struct PresignArgs {
    /// The bucket.
    pub bucket: String,
    /// The object key (not for `--action list`).
    #[arg(default_value = "")]
    pub object: String,
    /// The access key that signs (id, id prefix or name); it needs the
    /// right the request needs.
    #[arg(long)]
    pub key: String,
    /// What the URL does.
    #[arg(long, default_value = "get", value_parser = ["get", "put", "delete", "list"])]
    pub action: String,
    /// How long the URL works: 90m, 12h, 7d… (at most 7 days; default 15 minutes).
    #[arg(long, value_parser = crate::cli::expiry::parse_duration_secs)]
    pub expires_in: Option<u64>,
    /// `get`: the answer downloads as an attachment.
    #[arg(long)]
    pub download: bool,
    /// `list`: only keys starting with this.
    #[arg(long)]
    pub prefix: Option<String>,
    /// The S3 endpoint the URL is for (`https://s3.example.com`); default:
    /// the node's S3 address.
    #[arg(long)]
    pub endpoint: Option<String>,
}

/// Runs `hangar presign`: prints the URL alone, or with `--json` the
/// operation's answer (url, method, host, path_and_query, expiry).
pub async fn presign(client: &AdminClient, a: PresignArgs, json: bool) -> Result<(), CliError> {
    let req = Request::PresignObject {
        bucket: a.bucket,
        key: a.key,
        action: a.action,
        object: a.object,
        prefix: a.prefix,
        delimiter: None,
        continuation_token: None,
        download: a.download,
        expires_secs: a.expires_in,
        endpoint: a.endpoint,
    };
    let v = call(client, &req).await?;
    if json {
        print_json(&v);
    } else {
        println!("{}", typed::<PresignedUrl>(&v)?.url);
    }
    Ok(())
}
