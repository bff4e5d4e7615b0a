//! Typed answers of the admin operations on blocks and their workers
//! (`hangar worker info|set`, `hangar repair …`, `hangar block …`): the
//! node builds them (`src/hangar/src/admin/block.rs`), the CLI reads them
//! (`src/hangar/src/cli/block.rs`, `worker set` in
//! `src/hangar/src/cli/commands.rs`), the web console reads the worker ones
//! by field name, and both transports carry them as the JSON objects
//! doc/admin-api.yaml describes — the same bytes as the untyped answers
//! these replace. Hashes and node ids are hex strings.
//!
//! Every field has a default when read, so a CLI reads the answer of a
//! node that does not send a field yet (a cluster being upgraded).

use std::collections::BTreeMap;

use hangar_util::worker::WorkerStatus;
use serde::{Deserialize, Serialize};

/// `worker info NAME`: the worker's status as `worker list` shows it, and
/// for the block workers what they add (absent for the other workers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerInfo {
    #[serde(flatten)]
    pub status: WorkerStatus,
    /// `block-resync` and `block-scrub`: the settings the worker reads
    /// (name → value), which `worker set` changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<BTreeMap<String, String>>,
    /// `block-resync`: its counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ResyncStats>,
    /// `block-scrub`: the scrub's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrub: Option<ScrubState>,
}

/// The resync worker's counters since the node started (`worker info
/// block-resync`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResyncStats {
    /// Queued blocks looked at.
    pub checked: u64,
    /// Blocks fetched from other nodes, and their bytes.
    pub blocks_fetched: u64,
    pub bytes_fetched: u64,
    /// Blocks handed over to the nodes that store them now, and their
    /// bytes.
    pub blocks_handed_over: u64,
    pub bytes_handed_over: u64,
    pub errors: u64,
    /// Block transfers running now.
    pub in_flight: u64,
}

/// The scrub's state: `repair scrub start|pause|resume|cancel` (after the
/// command) and `worker info block-scrub`: the state the node stores.
pub use hangar_block::ScrubState;

/// `worker set SETTING VALUE`: the setting's value now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerSetting {
    pub setting: String,
    pub value: String,
}

/// `repair blocks`: how many blocks were queued for the resync worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlocksQueued {
    pub queued: u64,
}

/// `repair tables`: what the anti-entropy pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TablesRepaired {
    pub partitions_differed: u64,
    pub rows_pulled: u64,
    pub rows_pushed: u64,
    /// Every partition this node holds compared equal with enough of its
    /// other nodes: this node holds every acknowledged write.
    pub complete: bool,
    /// What went wrong with the peers that could not be compared.
    pub errors: Vec<String>,
}

/// `repair clear-resync-queue`: how many queued blocks were dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResyncQueueCleared {
    pub cleared: u64,
}

/// One block of `block list-errors`: its last resync attempt failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResyncError {
    /// The block's hash, 64 hex digits.
    pub hash: String,
    /// Failed attempts in a row.
    pub tries: u32,
    /// When the first of them failed, ms since the epoch.
    pub first_msec: u64,
    /// When the last one failed.
    pub last_msec: u64,
    /// When the block is tried next.
    pub next_msec: u64,
    pub error: String,
}

/// `block retry-now [HASH]`: how many failed blocks are due now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlocksRetried {
    pub retried: u64,
}

/// `block info HASH`: what this node knows of a block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockInfo {
    /// 64 hex digits.
    pub hash: String,
    /// The partition the block belongs to (its hash's first byte).
    pub partition: u8,
    /// The references counted on this node.
    pub refcount: u64,
    /// The local block file; `None` (null) when this node has none.
    pub file: Option<BlockFile>,
    /// The object versions that reference it (the first 100).
    pub references: Vec<BlockReference>,
    /// The nodes that store it, per active layout version.
    pub stored_on: Vec<BlockStorageSet>,
    /// Its last resync attempt, when that failed; `None` (null) otherwise.
    pub resync_error: Option<LastResyncError>,
}

/// The local file of `block info`: what it holds, or why it could not be
/// read. One JSON object either way, told apart by its fields
/// (`Unreadable` is tried first: its `error` is required, so an object
/// without one reads as `Stored`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BlockFile {
    Unreadable(BlockFileError),
    Stored(BlockFileStored),
}

/// A block file read: its size and encoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockFileStored {
    /// Bytes as stored on disk.
    pub stored_bytes: u64,
    /// Bytes of the plain content.
    pub plain_bytes: u64,
    /// Whether it is stored zstd-compressed.
    pub compressed: bool,
}

/// A block file that could not be read (other than missing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockFileError {
    pub error: String,
}

/// An object version referencing the block (`block info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockReference {
    /// The version's id, hex.
    pub version: String,
    /// The version no longer uses the block (a tombstone).
    pub deleted: bool,
}

/// The nodes that store the block's partition in one active layout
/// version (`block info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockStorageSet {
    pub layout_version: u64,
    pub nodes: Vec<BlockHolder>,
}

/// One node of a [`BlockStorageSet`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockHolder {
    /// The node id, 64 hex digits.
    pub node: String,
    /// Whether this node sees it up.
    pub up: bool,
    /// Whether it is the node that answered.
    pub this_node: bool,
}

/// The block's last failed resync attempt (`block info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LastResyncError {
    /// Failed attempts in a row.
    pub tries: u32,
    /// When the last one failed, ms since the epoch.
    pub last_msec: u64,
    /// When the block is tried next.
    pub next_msec: u64,
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi_check::{fields, properties_in_doc, required_in_doc};
    use hangar_block::ScrubStatus;
    use hangar_util::worker::WorkerState;
    use serde_json::{Value, json};

    fn hash() -> String {
        "ab".repeat(32)
    }

    /// `block info` writes the JSON the untyped answer wrote: same keys,
    /// same values, `null` for no file and no error.
    #[test]
    fn a_block_info_is_the_json_it_was() {
        let mut b = BlockInfo {
            hash: hash(),
            partition: 0xab,
            refcount: 2,
            file: Some(BlockFile::Stored(BlockFileStored {
                stored_bytes: 10,
                plain_bytes: 20,
                compressed: true,
            })),
            references: vec![BlockReference {
                version: "01".into(),
                deleted: false,
            }],
            stored_on: vec![BlockStorageSet {
                layout_version: 3,
                nodes: vec![BlockHolder {
                    node: "cd".repeat(32),
                    up: true,
                    this_node: false,
                }],
            }],
            resync_error: Some(LastResyncError {
                tries: 1,
                last_msec: 5,
                next_msec: 6,
                error: "e".into(),
            }),
        };
        let before = json!({
            "hash": hash(), "partition": 0xab, "refcount": 2,
            "file": {"stored_bytes": 10, "plain_bytes": 20, "compressed": true},
            "references": [{"version": "01", "deleted": false}],
            "stored_on": [{"layout_version": 3, "nodes": [
                {"node": "cd".repeat(32), "up": true, "this_node": false}]}],
            "resync_error": {"tries": 1, "last_msec": 5, "next_msec": 6, "error": "e"},
        });
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v, before);
        assert_eq!(serde_json::to_string(&v).unwrap(), before.to_string());
        assert_eq!(serde_json::from_value::<BlockInfo>(before).unwrap(), b);

        b.file = Some(BlockFile::Unreadable(BlockFileError {
            error: "bad".into(),
        }));
        b.resync_error = None;
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["file"], json!({"error": "bad"}));
        assert_eq!(v["resync_error"], Value::Null);
        assert_eq!(serde_json::from_value::<BlockInfo>(v).unwrap(), b);

        b.file = None;
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["file"], Value::Null);
        assert_eq!(serde_json::from_value::<BlockInfo>(v).unwrap(), b);
    }

    /// A worker without block extras has no `settings`, `stats` or `scrub`
    /// key (the console tests their presence); the block workers' have
    /// them, and the scrub state's empty options are `null`.
    #[test]
    fn a_worker_info_is_the_json_it_was() {
        let w = WorkerInfo {
            status: WorkerStatus {
                name: "lifecycle".into(),
                state: WorkerState::Busy,
                processed: 3,
                errors: 1,
                queue_length: None,
                progress: "p".into(),
                last_error: Some("x".into()),
                updated_msec: 9,
            },
            ..WorkerInfo::default()
        };
        let before = json!({
            "name": "lifecycle", "state": "busy", "processed": 3, "errors": 1,
            "queue_length": null, "progress": "p", "last_error": "x", "updated_msec": 9,
        });
        assert_eq!(serde_json::to_value(&w).unwrap(), before);
        assert_eq!(serde_json::from_value::<WorkerInfo>(before).unwrap(), w);

        let scrub = WorkerInfo {
            status: WorkerStatus {
                name: "block-scrub".into(),
                ..WorkerStatus::default()
            },
            settings: Some(BTreeMap::from([(
                "scrub-tranquility".to_owned(),
                "4".to_owned(),
            )])),
            scrub: Some(ScrubState {
                status: ScrubStatus::Running,
                checked: 7,
                ..ScrubState::default()
            }),
            ..WorkerInfo::default()
        };
        let v = serde_json::to_value(&scrub).unwrap();
        assert_eq!(v["settings"], json!({"scrub-tranquility": "4"}));
        assert_eq!(
            v["scrub"],
            json!({"status": "running", "cursor": null, "pass_started_msec": null,
                   "last_pass_done_msec": null, "checked": 7, "corrupt": 0, "bytes": 0})
        );
        assert!(v.get("stats").is_none());
        assert_eq!(serde_json::from_value::<WorkerInfo>(v).unwrap(), scrub);
    }

    #[test]
    fn an_answer_without_a_newer_field_is_read() {
        let w: WorkerInfo = serde_json::from_value(json!({"name": "block-resync"})).unwrap();
        assert_eq!(w.status.state, WorkerState::Idle);
        assert_eq!(w.stats, None);
        let b: BlockInfo = serde_json::from_value(json!({"hash": hash(), "refcount": 1})).unwrap();
        assert_eq!(b.file, None);
        assert!(b.stored_on.is_empty());
        let s: ResyncStats = serde_json::from_value(json!({"in_flight": 2})).unwrap();
        assert_eq!(s.in_flight, 2);
    }

    /// The hand-written OpenAPI document and the types agree field by
    /// field on the block answers (the worker's block extras are optional,
    /// so not required).
    #[test]
    fn the_openapi_document_names_every_field_of_the_block_answers() {
        let ok = "\"200\"";
        assert_eq!(fields(WorkerInfo::default()), required_in_doc(&["Worker"]));
        assert_eq!(
            fields(ResyncStats::default()),
            required_in_doc(&["ResyncStats"])
        );
        assert_eq!(fields(ScrubState::default()), required_in_doc(&["Scrub"]));
        assert_eq!(
            fields(ResyncError::default()),
            required_in_doc(&["ResyncError"])
        );
        assert_eq!(
            fields(WorkerSetting::default()),
            required_in_doc(&["/v2/SetWorkerVariable", ok])
        );
        assert_eq!(
            fields(BlocksQueued::default()),
            required_in_doc(&["/v2/RepairBlocks", ok])
        );
        assert_eq!(
            fields(TablesRepaired::default()),
            required_in_doc(&["/v2/RepairTables", ok])
        );
        assert_eq!(
            fields(ResyncQueueCleared::default()),
            required_in_doc(&["/v2/ClearResyncQueue", ok])
        );
        assert_eq!(
            fields(BlocksRetried::default()),
            required_in_doc(&["/v2/RetryBlockResync", ok])
        );
        let info = ["/v2/GetBlockInfo", ok];
        assert_eq!(fields(BlockInfo::default()), required_in_doc(&info));
        assert_eq!(
            fields(BlockReference::default()),
            required_in_doc(&[&info[..], &["references"]].concat())
        );
        assert_eq!(
            fields(BlockStorageSet::default()),
            required_in_doc(&[&info[..], &["stored_on"]].concat())
        );
        assert_eq!(
            fields(BlockHolder::default()),
            required_in_doc(&[&info[..], &["stored_on", "nodes"]].concat())
        );
        assert_eq!(
            fields(LastResyncError::default()),
            required_in_doc(&[&info[..], &["resync_error"]].concat())
        );
        // The file's two forms together are its properties, none required.
        let mut file = fields(BlockFileStored::default());
        file.extend(fields(BlockFileError { error: "e".into() }));
        file.sort();
        assert_eq!(file, properties_in_doc(&[&info[..], &["file"]].concat()));
    }
}
