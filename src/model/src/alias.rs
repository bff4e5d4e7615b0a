//! Bucket aliases: more names under which every client reaches a bucket
//! (Garage's global aliases, `hangar bucket alias|unalias`), or one key
//! does (local aliases).
//!
//! A bucket keeps its own name (the `bucket` table's sort key, which key
//! permissions name); an alias is a row of the `bucket_alias` table, keyed
//! by the alias, that names the bucket by name and id. Looking a bucket up
//! by name ([`Buckets::get_bucket`]) takes the bucket of that name, else the
//! bucket an alias of that name points to, if that bucket is still the
//! same incarnation (same id) and live: everything a request does then
//! works on the bucket's row, as through its own name.
//!
//! A name is a bucket or an alias, never both: alias changes go to the
//! coordinator of the alias name ([`crate::bucket_create`]), on
//! [`PATH`], and are decided under the same lock of the name as bucket
//! creations, after a quorum read of both tables; a creation of a name
//! that is a live alias answers [`ModelError::BucketAlreadyExists`].
//! Deleting a bucket turns its aliases into tombstones; an alias whose
//! bucket is gone (deleted, or deleted and re-created under another id)
//! resolves to nothing whatever the order in which the rows arrive.
//!
//! A local alias (Garage's `--local <key>`) is a name of a bucket that one
//! access key alone sees: a row of the same table keyed `<key id>/<alias>`
//! ([`alias_sort_key`]), changed by the same coordinator, resolved first
//! for the requests that key signs ([`Buckets::get_bucket_as`]). It may take
//! a bucket's name (hiding it from that key only); that key cannot create
//! a bucket under it.

use std::ops::Bound;
use std::sync::Weak;

use async_trait::async_trait;
use hangar_db::Tx;
use hangar_net::{Handler, HandlerError, Request, Response};
use hangar_table::{Crdt, Replica, Schema, max_by_content};
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::bucket::{BucketRow, BucketTable, check_bucket_name};
use crate::key::{KeyTable, valid_key_id};
use crate::{Buckets, ModelError, Result};

/// The endpoint of alias changes, served by the coordinator of the alias.
pub const PATH: &str = "hangar/bucket/alias";

/// One alias: a last-writer-wins register as a whole. The greater of
/// (last change, then deleted over live, then the content) wins, so an
/// alias made and removed at the same millisecond resolves the same way on
/// every node. A removed alias keeps its row as a tombstone (alias
/// tombstones are kept, as bucket tombstones are).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AliasRow {
    pub updated_msec: u64,
    pub deleted: bool,
    /// The id of the bucket it names: an alias reaches only that
    /// incarnation of the bucket.
    pub bucket_id: String,
    /// The bucket's own name.
    pub bucket: String,
}

impl Crdt for AliasRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

impl AliasRow {
    /// Whether this alias names `bucket` (live or not, this incarnation).
    pub fn names(&self, bucket: &BucketRow) -> bool {
        !self.deleted && self.bucket_id == bucket.id && self.bucket == bucket.name
    }
}

/// The alias table: partition empty, sort key = the alias.
pub struct AliasTable;

impl Schema for AliasTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "bucket_alias";
    const PARTITION_LEN: usize = 0;
    type Row = AliasRow;
    type Replication = hangar_table::Full;
}

/// The live bucket the live alias `name` points to, read in `tx`.
pub(crate) fn tx_resolve(tx: &Tx<'_>, name: &str) -> hangar_table::Result<Option<BucketRow>> {
    let Some(a) = Replica::<AliasTable>::tx_get(tx, b"", name.as_bytes())?.filter(|a| !a.deleted)
    else {
        return Ok(None);
    };
    Ok(
        Replica::<BucketTable>::tx_get(tx, b"", a.bucket.as_bytes())?
            .filter(|b| !b.deleted && b.id == a.bucket_id),
    )
}

/// An alias change, sent to the coordinator of the alias name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AliasChange {
    pub alias: String,
    /// The bucket's own name and id.
    pub bucket: String,
    pub bucket_id: String,
    /// true: make `alias` a name of the bucket; false: remove it.
    pub add: bool,
    /// For a local alias, the access key whose name it is.
    #[serde(default)]
    pub key: Option<String>,
}

/// The sort key of alias `alias`: itself for a global alias, `<access key
/// id>/<alias>` for a local one (a bucket name has no `/`, so the two never
/// meet).
pub fn alias_sort_key(key: Option<&str>, alias: &str) -> String {
    match key {
        Some(k) => format!("{k}/{alias}"),
        None => alias.to_owned(),
    }
}

/// What the coordinator decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AliasDecision {
    /// Done (or already so: adding an alias the bucket has is no change).
    Done,
    /// A live bucket has that name.
    NameTaken,
    /// The alias names another live bucket.
    AliasTaken,
    /// The bucket is gone (deleted, or re-created under another id).
    NoSuchBucket,
    /// Removal of a name that is no alias of the bucket.
    NotAnAlias,
    /// The alias is refused (the coordinator's naming rules).
    InvalidName,
    /// The key of a local alias does not exist.
    NoSuchKey,
    /// The coordinator could not reach its quorums: `message` says why.
    Unavailable,
}

/// The coordinator's answer, with the alias row as it holds it now, as
/// stored (format byte and row), for the requester to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AliasReply {
    pub decision: AliasDecision,
    pub row: Option<ByteBuf>,
    pub message: String,
}

fn reply(decision: AliasDecision, row: Option<&AliasRow>, message: String) -> AliasReply {
    AliasReply {
        decision,
        row: row.map(|r| ByteBuf::from(hangar_table::encode::<AliasTable>(r))),
        message,
    }
}

impl Buckets {
    /// Makes `alias` another name of bucket `bucket` (its name or one of
    /// its aliases), through the coordinator of the alias name; returns
    /// the bucket. Adding an alias the bucket already has changes nothing.
    pub async fn add_bucket_alias(&self, bucket: &str, alias: &str) -> Result<BucketRow> {
        self.add_alias(None, bucket, alias).await
    }

    /// Makes `alias` a name of bucket `bucket` that only access key `key`
    /// sees (a local alias): its requests naming `alias` reach the bucket,
    /// before any bucket or global alias of that name. Its permissions on
    /// the bucket still decide what it may do there.
    pub async fn add_local_bucket_alias(
        &self,
        key: &str,
        bucket: &str,
        alias: &str,
    ) -> Result<BucketRow> {
        self.add_alias(Some(key), bucket, alias).await
    }

    async fn add_alias(&self, key: Option<&str>, bucket: &str, alias: &str) -> Result<BucketRow> {
        check_bucket_name(alias, self.allow_punycode())?;
        let b = self
            .get_bucket(bucket)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(bucket.to_owned()))?;
        self.change_alias(&b, key, alias, true).await?;
        Ok(b)
    }

    /// Removes local alias `alias` of access key `key` from bucket
    /// `bucket`; the bucket stays.
    pub async fn remove_local_bucket_alias(
        &self,
        key: &str,
        bucket: &str,
        alias: &str,
    ) -> Result<BucketRow> {
        let b = self
            .get_bucket(bucket)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(bucket.to_owned()))?;
        self.change_alias(&b, Some(key), alias, false).await?;
        Ok(b)
    }

    /// Removes alias `alias` of bucket `bucket` (its name or one of its
    /// aliases); the bucket stays. A bucket's own name is no alias and
    /// cannot be removed; returns the bucket.
    pub async fn remove_bucket_alias(&self, bucket: &str, alias: &str) -> Result<BucketRow> {
        let b = self
            .get_bucket(bucket)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(bucket.to_owned()))?;
        if b.name == alias {
            return Err(ModelError::Invalid(format!(
                "{alias} is the bucket's own name, not an alias: a bucket keeps its name \
                 (delete the bucket to free it)"
            )));
        }
        self.change_alias(&b, None, alias, false).await?;
        Ok(b)
    }

    /// The live global aliases of `bucket`, sorted.
    pub async fn bucket_aliases(&self, bucket: &BucketRow) -> Result<Vec<String>> {
        Ok(self
            .live_aliases()
            .await?
            .into_iter()
            .filter(|(k, _, a)| k.is_none() && a.names(bucket))
            .map(|(_, n, _)| n)
            .collect())
    }

    /// The live local aliases of `bucket`: (access key id, alias), sorted.
    pub async fn bucket_local_aliases(&self, bucket: &BucketRow) -> Result<Vec<(String, String)>> {
        Ok(self
            .live_aliases()
            .await?
            .into_iter()
            .filter_map(|(k, n, a)| Some((k?, n)).filter(|_| a.names(bucket)))
            .collect())
    }

    /// Every live global alias whose bucket is live, with that bucket,
    /// sorted by alias (ListBuckets lists them as buckets).
    pub async fn list_aliases(&self) -> Result<Vec<(String, BucketRow)>> {
        self.aliases_of(None).await
    }

    /// The live local aliases of access key `key` whose bucket is live,
    /// with that bucket, sorted by alias.
    pub async fn list_local_aliases(&self, key: &str) -> Result<Vec<(String, BucketRow)>> {
        self.aliases_of(Some(key)).await
    }

    async fn aliases_of(&self, key: Option<&str>) -> Result<Vec<(String, BucketRow)>> {
        let buckets: std::collections::BTreeMap<String, BucketRow> = self
            .list_buckets()
            .await?
            .into_iter()
            .map(|b| (b.id.clone(), b))
            .collect();
        Ok(self
            .live_aliases()
            .await?
            .into_iter()
            .filter(|(k, _, _)| k.as_deref() == key)
            .filter_map(|(_, n, a)| {
                let b = buckets.get(&a.bucket_id).filter(|b| a.names(b))?;
                Some((n, b.clone()))
            })
            .collect())
    }

    /// The live alias rows this node holds (every node holds them all):
    /// (the key of a local alias, the alias, the row).
    async fn live_aliases(&self) -> Result<Vec<(Option<String>, String, AliasRow)>> {
        let rows = self
            .alias_table()
            .local()
            .range(b"", Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
            .await?;
        Ok(rows
            .into_iter()
            .filter(|(_, a)| !a.deleted)
            .map(|(k, a)| {
                let k = String::from_utf8_lossy(&k).into_owned();
                match k.split_once('/') {
                    Some((key, alias)) => (Some(key.to_owned()), alias.to_owned(), a),
                    None => (None, k, a),
                }
            })
            .collect())
    }

    /// The live bucket named `name` for requests signed by access key
    /// `key`: its local alias of that name first (this node's rows alone:
    /// a local alias is not asked of the other nodes on every request),
    /// then [`Buckets::get_bucket`].
    pub async fn get_bucket_as(&self, name: &str, key: Option<&str>) -> Result<Option<BucketRow>> {
        if let Some(k) = key
            && let Some(b) = self
                .resolve_alias_locally(&alias_sort_key(Some(k), name))
                .await?
        {
            return Ok(Some(b));
        }
        self.get_bucket(name).await
    }

    /// [`Buckets::resolve_alias`] from this node's rows alone (no other node
    /// asked when it lacks one).
    pub(crate) async fn resolve_alias_locally(&self, name: &str) -> Result<Option<BucketRow>> {
        let Some(a) = self
            .alias_table()
            .local()
            .get(b"", name.as_bytes())
            .await?
            .filter(|a| !a.deleted)
        else {
            return Ok(None);
        };
        Ok(self
            .bucket_table()
            .local()
            .get(b"", a.bucket.as_bytes())
            .await?
            .filter(|b| !b.deleted && b.id == a.bucket_id))
    }

    /// The live bucket alias `name` points to, if it is an alias (the
    /// other nodes asked for a row this node lacks).
    pub(crate) async fn resolve_alias(&self, name: &str) -> Result<Option<BucketRow>> {
        let Some(a) = self
            .alias_table()
            .get(b"", name.as_bytes())
            .await?
            .filter(|a| !a.deleted)
        else {
            return Ok(None);
        };
        Ok(self
            .bucket_table()
            .get(b"", a.bucket.as_bytes())
            .await?
            .filter(|b| !b.deleted && b.id == a.bucket_id))
    }

    /// Turns every live alias of `bucket` (just deleted) into a tombstone
    /// and replicates them.
    pub(crate) async fn drop_aliases_of(&self, bucket: &BucketRow) -> Result<()> {
        let names: Vec<String> = self
            .live_aliases()
            .await?
            .into_iter()
            .filter(|(_, _, a)| a.names(bucket))
            .map(|(k, n, _)| alias_sort_key(k.as_deref(), &n))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let id = bucket.id.clone();
        let rows: Vec<(Vec<u8>, Vec<u8>, AliasRow)> = self
            .db()
            .write(move |tx| {
                let now = now_msec();
                let mut rows = Vec::new();
                for n in names {
                    let Some(mut a) = Replica::<AliasTable>::tx_get(tx, b"", n.as_bytes())?
                        .filter(|a| !a.deleted && a.bucket_id == id)
                    else {
                        continue;
                    };
                    a.deleted = true;
                    a.updated_msec = now.max(a.updated_msec + 1);
                    let a = Replica::<AliasTable>::tx_insert(tx, b"", n.as_bytes(), &a)?;
                    rows.push((Vec::new(), n.into_bytes(), a));
                }
                Ok::<_, ModelError>(rows)
            })
            .await?;
        Ok(self.alias_table().replicate(rows).await?)
    }

    /// Sends the change to the coordinator of the alias (or decides it
    /// here: one node, or a coordinator of an older binary), merges the
    /// row of its answer here, and maps its decision.
    async fn change_alias(
        &self,
        bucket: &BucketRow,
        key: Option<&str>,
        alias: &str,
        add: bool,
    ) -> Result<()> {
        let change = AliasChange {
            alias: alias.to_owned(),
            bucket: bucket.name.clone(),
            bucket_id: bucket.id.clone(),
            add,
            key: key.map(str::to_owned),
        };
        let c = self.bucket_creation();
        let remote = match c.coordinator(alias)? {
            Some(to) if to != c.cluster().id() => c
                .call(&*c.alias_endpoint, to, alias, change.clone())
                .await?
                .map(|r| (to, r)),
            _ => None,
        };
        let reply = match remote {
            Some((to, r)) => {
                if r.decision == AliasDecision::Unavailable {
                    return Err(ModelError::BucketCoordinator {
                        bucket: alias.to_owned(),
                        node: to.short(),
                        reason: format!("could not store it: {}", r.message),
                        overloaded: false,
                    });
                }
                if let Some(row) = &r.row {
                    let row = hangar_table::decode::<AliasTable>(row)?;
                    if row.bucket_id != change.bucket_id && r.decision == AliasDecision::Done {
                        return Err(ModelError::Corrupt(format!(
                            "the coordinator of alias {alias} answered with another bucket's row"
                        )));
                    }
                    let name = alias_sort_key(key, alias);
                    self.db()
                        .write(move |tx| {
                            Replica::<AliasTable>::tx_insert(tx, b"", name.as_bytes(), &row)?;
                            Ok::<_, ModelError>(())
                        })
                        .await?;
                }
                r
            }
            None => self.decide_alias(change).await?,
        };
        match reply.decision {
            AliasDecision::Done => Ok(()),
            AliasDecision::NameTaken => Err(ModelError::BucketAlreadyExists(alias.to_owned())),
            AliasDecision::AliasTaken => Err(ModelError::BucketAlreadyExists(format!(
                "{alias} (an alias of another bucket)"
            ))),
            AliasDecision::NoSuchBucket => Err(ModelError::NoSuchBucket(bucket.name.clone())),
            AliasDecision::NotAnAlias => Err(ModelError::NoSuchAlias {
                alias: alias.to_owned(),
                bucket: bucket.name.clone(),
            }),
            AliasDecision::InvalidName => Err(ModelError::Invalid(reply.message)),
            AliasDecision::NoSuchKey => {
                Err(ModelError::NoSuchKey(key.unwrap_or_default().to_owned()))
            }
            AliasDecision::Unavailable => Err(ModelError::BucketCoordinator {
                bucket: alias.to_owned(),
                node: "(this node)".into(),
                reason: format!("could not store it: {}", reply.message),
                overloaded: false,
            }),
        }
    }

    /// The coordinator's part: under the alias name's lock (the lock of
    /// bucket creations), quorum reads of the name in both tables and of
    /// the bucket, the decision, the row written here and replicated.
    pub(crate) async fn decide_alias(&self, c: AliasChange) -> Result<AliasReply> {
        let _held = self.bucket_locks().lock(&c.alias).await;
        let unavailable = |e: ModelError| reply(AliasDecision::Unavailable, None, e.to_string());
        if let Err(e) = self
            .buckets_writable()
            .and_then(|()| Ok(self.alias_table().check_writable()?))
        {
            return Ok(unavailable(e));
        }
        let sort = alias_sort_key(c.key.as_deref(), &c.alias);
        if let Some(k) = &c.key
            && let Err(e) = self.keys().get(k).await
        {
            return match e {
                e @ ModelError::Table(_) => Ok(unavailable(e)),
                e => Err(e),
            };
        }
        for (t, name) in [(true, &c.alias), (false, &sort), (true, &c.bucket)] {
            let read = if t {
                self.bucket_table()
                    .get_quorum(b"", name.as_bytes())
                    .await
                    .map(|_| ())
            } else {
                self.alias_table()
                    .get_quorum(b"", name.as_bytes())
                    .await
                    .map(|_| ())
            };
            if let Err(e) = read {
                return Ok(unavailable(e.into()));
            }
        }
        let alias = sort.as_bytes().to_vec();
        let (decision, row, changed) = self
            .db()
            .write(move |tx| {
                let now = now_msec();
                let old = Replica::<AliasTable>::tx_get(tx, b"", sort.as_bytes())?;
                if let Some(k) = &c.key
                    && Replica::<KeyTable>::tx_get(tx, b"", k.as_bytes())?
                        .is_none_or(|k| k.is_deleted())
                {
                    return Ok((AliasDecision::NoSuchKey, None, false));
                }
                let target = Replica::<BucketTable>::tx_get(tx, b"", c.bucket.as_bytes())?
                    .filter(|b| !b.deleted && b.id == c.bucket_id);
                if !c.add {
                    let Some(mut a) = old.filter(|a| !a.deleted && a.bucket_id == c.bucket_id)
                    else {
                        return Ok((AliasDecision::NotAnAlias, None, false));
                    };
                    a.deleted = true;
                    a.updated_msec = now.max(a.updated_msec + 1);
                    let a = Replica::<AliasTable>::tx_insert(tx, b"", sort.as_bytes(), &a)?;
                    return Ok((AliasDecision::Done, Some(a), true));
                }
                // A local alias may take a bucket's name: the key reaches
                // the bucket it names instead.
                if c.key.is_none()
                    && Replica::<BucketTable>::tx_get(tx, b"", c.alias.as_bytes())?
                        .is_some_and(|b| !b.deleted)
                {
                    return Ok((AliasDecision::NameTaken, None, false));
                }
                let Some(target) = target else {
                    return Ok((AliasDecision::NoSuchBucket, None, false));
                };
                if let Some(current) = tx_resolve(tx, &sort)? {
                    return Ok(if current.id == target.id {
                        // Again, for a retry whose first attempt stored the
                        // row on fewer nodes than a quorum.
                        (AliasDecision::Done, old, true)
                    } else {
                        (AliasDecision::AliasTaken, None, false)
                    });
                }
                let row = AliasRow {
                    updated_msec: old.as_ref().map_or(now, |o| now.max(o.updated_msec + 1)),
                    deleted: false,
                    bucket_id: target.id,
                    bucket: target.name,
                };
                let row = Replica::<AliasTable>::tx_insert(tx, b"", sort.as_bytes(), &row)?;
                Ok::<_, ModelError>((AliasDecision::Done, Some(row), true))
            })
            .await?;
        if changed
            && let Some(r) = &row
            && let Err(e) = self
                .alias_table()
                .replicate(vec![(Vec::new(), alias, r.clone())])
                .await
        {
            return Ok(unavailable(e.into()));
        }
        Ok(reply(decision, row.as_ref(), String::new()))
    }
}

/// The coordinator's side of [`PATH`].
pub(crate) struct AliasCoordinator {
    pub(crate) model: Weak<Buckets>,
}

#[async_trait]
impl Handler<AliasChange, AliasReply> for AliasCoordinator {
    async fn handle(
        &self,
        req: Request<AliasChange>,
    ) -> std::result::Result<Response<AliasReply>, HandlerError> {
        let c = req.msg;
        let model = self
            .model
            .upgrade()
            .ok_or_else(|| HandlerError::new("the node is stopping"))?;
        if c.add
            && let Err(e) = check_bucket_name(&c.alias, model.allow_punycode())
        {
            return Ok(Response::new(reply(
                AliasDecision::InvalidName,
                None,
                e.to_string(),
            )));
        }
        if c.key.as_deref().is_some_and(|k| !valid_key_id(k)) {
            return Ok(Response::new(reply(
                AliasDecision::NoSuchKey,
                None,
                String::new(),
            )));
        }
        match model.decide_alias(c).await {
            Ok(r) => Ok(Response::new(r)),
            Err(e @ ModelError::Table(_)) => Ok(Response::new(reply(
                AliasDecision::Unavailable,
                None,
                e.to_string(),
            ))),
            Err(e) => Err(HandlerError::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of doc/table-rows.md ("The bucket_alias table").
    #[test]
    fn an_alias_row_is_stored_as_documented() {
        let row = AliasRow {
            updated_msec: 1_796_169_600_000,
            deleted: false,
            bucket_id: "ab".repeat(32),
            bucket: "photos".into(),
        };
        let mut want = hex::decode(
            "0284ac757064617465645f6d736563cf000001a2340d0c00a764656c65746564c2\
             a96275636b65745f6964d940",
        )
        .unwrap();
        want.extend_from_slice("ab".repeat(32).as_bytes());
        want.extend_from_slice(&hex::decode("a66275636b6574a670686f746f73").unwrap());
        let bytes = hangar_table::encode::<AliasTable>(&row);
        assert_eq!(hex::encode(&bytes), hex::encode(&want));
        assert_eq!(bytes.len(), 123);
        assert_eq!(hangar_table::decode::<AliasTable>(&bytes).unwrap(), row);
    }
}
