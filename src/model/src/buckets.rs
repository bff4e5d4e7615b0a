//! Buckets and their names: the service that owns the bucket table and
//! the bucket alias table (full tables, on every node). It creates buckets
//! and aliases through the coordinator of their name
//! ([`crate::bucket_create`], [`crate::alias`]), finds a bucket by name,
//! alias or id, changes a bucket's configuration registers
//! ([`crate::bucket_config`]) and a key's permissions on a bucket. What
//! reaches other tables is the model's: deleting a bucket
//! ([`crate::Model::delete_bucket`]) fences and checks its objects and
//! uploads first.

use std::ops::Bound;
use std::sync::Arc;

use hangar_db::Db;
use hangar_table::TableError;

use crate::alias::AliasTable;
use crate::bucket::{BucketRow, BucketTable};
use crate::bucket_create::{BucketCreation, NameLocks};
use crate::key::KeyRow;
use crate::keys::Keys;
use crate::{ModelError, Result};
use hangar_table::Table;

/// A change of permissions: `Some(true)` grants, `Some(false)` revokes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PermissionChange {
    pub read: Option<bool>,
    pub write: Option<bool>,
    pub owner: Option<bool>,
}

/// The bucket service of one node.
pub struct Buckets {
    db: Db,
    keys: Arc<Keys>,
    table: Table<BucketTable>,
    aliases: Table<AliasTable>,
    /// Bucket and alias creations coordinated by other nodes.
    creation: BucketCreation,
    /// The locks of the names this node coordinates.
    locks: NameLocks,
    allow_punycode: bool,
}

impl Buckets {
    /// The service over `cluster`, serving the coordinator endpoints of
    /// the names this node coordinates.
    pub(crate) fn start(
        db: Db,
        keys: Arc<Keys>,
        cluster: &hangar_cluster::Cluster,
        allow_punycode: bool,
    ) -> Result<Arc<Buckets>> {
        let buckets = Arc::new(Buckets {
            table: Table::new(db.clone(), cluster.clone()).map_err(TableError::from)?,
            aliases: Table::new(db.clone(), cluster.clone()).map_err(TableError::from)?,
            creation: BucketCreation::new(cluster)?,
            locks: NameLocks::new(),
            db,
            keys,
            allow_punycode,
        });
        buckets.creation.serve(Arc::downgrade(&buckets));
        Ok(buckets)
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    pub(crate) fn bucket_locks(&self) -> &NameLocks {
        &self.locks
    }

    pub(crate) fn bucket_creation(&self) -> &BucketCreation {
        &self.creation
    }

    pub(crate) fn bucket_table(&self) -> &Table<BucketTable> {
        &self.table
    }

    pub(crate) fn alias_table(&self) -> &Table<AliasTable> {
        &self.aliases
    }

    pub(crate) fn allow_punycode(&self) -> bool {
        self.allow_punycode
    }

    /// Fails at once when a bucket change could not reach its quorum.
    pub(crate) fn buckets_writable(&self) -> Result<()> {
        Ok(self.table.check_writable()?)
    }

    /// Sends a bucket row merged here to the other nodes.
    pub(crate) async fn replicate_bucket(&self, row: &BucketRow) -> Result<()> {
        let name = row.name.as_bytes().to_vec();
        Ok(self
            .table
            .replicate(vec![(Vec::new(), name, row.clone())])
            .await?)
    }

    /// Changes a key's permissions on an existing bucket.
    pub async fn set_permission(
        &self,
        bucket: &str,
        key_id: &str,
        change: PermissionChange,
    ) -> Result<KeyRow> {
        // Permissions name the bucket by its own name, also when given
        // through an alias.
        let b = self
            .get_bucket(bucket)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(bucket.to_owned()))?
            .name;
        self.keys()
            .update(key_id, move |k, now| {
                let mut p = k.permission(&b);
                p.read = change.read.unwrap_or(p.read);
                p.write = change.write.unwrap_or(p.write);
                p.owner = change.owner.unwrap_or(p.owner);
                k.buckets.update(b, now, p);
            })
            .await
    }

    /// The live bucket named `name`, or that alias `name` points to
    /// ([`crate::alias`]): the bucket's own row either way, whose `name`
    /// is what permissions and policies name.
    pub async fn get_bucket(&self, name: &str) -> Result<Option<BucketRow>> {
        // A request through an alias does not ask the other nodes whether
        // a bucket of its name exists: the name's coordinator let no bucket
        // take a live alias's name.
        let local = self
            .table
            .local()
            .get(b"", name.as_bytes())
            .await?
            .filter(|b| !b.deleted);
        if local.is_some() {
            return Ok(local);
        }
        if let Some(b) = self.resolve_alias_locally(name).await? {
            return Ok(Some(b));
        }
        if let Some(b) = self
            .table
            .get(b"", name.as_bytes())
            .await?
            .filter(|b| !b.deleted)
        {
            return Ok(Some(b));
        }
        self.resolve_alias(name).await
    }

    /// The live bucket of name or alias `name_or_id`, or of that id
    /// (64 hex digits, as `bucket info` shows it).
    pub async fn find_bucket(&self, name_or_id: &str) -> Result<BucketRow> {
        if let Some(b) = self.get_bucket(name_or_id).await? {
            return Ok(b);
        }
        self.list_buckets()
            .await?
            .into_iter()
            .find(|b| b.id == name_or_id)
            .ok_or_else(|| ModelError::NoSuchBucket(name_or_id.to_owned()))
    }

    /// Every live bucket.
    pub async fn list_buckets(&self) -> Result<Vec<BucketRow>> {
        let rows = self
            .table
            .local()
            .range(b"", Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(_, b)| b)
            .filter(|b| !b.deleted)
            .collect())
    }
}
