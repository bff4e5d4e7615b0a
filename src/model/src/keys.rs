//! Access keys and their rights on buckets: the service that owns the key
//! table (a full table, on every node). It creates, imports, finds,
//! changes and deletes keys, and tells the S3 API whether a key may sign
//! requests now. Permissions on a bucket are changed through the model
//! ([`crate::Buckets::set_permission`]), which checks the bucket first.

use hangar_db::Db;
use hangar_table::Replica;
use hangar_util::time::now_msec;

use crate::key::{
    Identity, KeyRow, KeyTable, MAX_IDENTITY_LEN, derived_canonical_id, new_key_id, new_secret,
    valid_canonical_id, valid_display_name, valid_key_id,
};
use crate::{ModelError, Result};
use hangar_table::Table;

/// The key service of one node.
pub struct Keys {
    db: Db,
    table: Table<KeyTable>,
}

impl Keys {
    pub(crate) fn new(db: Db, table: Table<KeyTable>) -> Keys {
        Keys { db, table }
    }

    /// The key table (replication and sync).
    pub(crate) fn table(&self) -> &Table<KeyTable> {
        &self.table
    }

    /// Creates a key with a fresh id and secret.
    pub async fn create(&self, name: &str) -> Result<KeyRow> {
        self.create_expiring(name, None).await
    }

    /// Creates a key that stops working at `expires_msec` (ms since the
    /// epoch; `None`: never), in one write.
    pub async fn create_expiring(&self, name: &str, expires_msec: Option<u64>) -> Result<KeyRow> {
        self.import_expiring(&new_key_id(), &new_secret(), name, expires_msec)
            .await
    }

    /// Creates a key with a given id and secret (`hangar key import`).
    pub async fn import(&self, id: &str, secret: &str, name: &str) -> Result<KeyRow> {
        self.import_expiring(id, secret, name, None).await
    }

    /// [`Self::import`], with an expiry.
    pub async fn import_expiring(
        &self,
        id: &str,
        secret: &str,
        name: &str,
        expires_msec: Option<u64>,
    ) -> Result<KeyRow> {
        if !valid_key_id(id) {
            return Err(ModelError::Invalid(format!(
                "access key id {id:?} must be GK followed by 24 hex digits"
            )));
        }
        if secret.len() < 16 {
            return Err(ModelError::Invalid("secret key too short".into()));
        }
        self.table.check_writable()?;
        let (id, secret, name) = (id.to_owned(), secret.to_owned(), name.to_owned());
        let row: KeyRow = self
            .db
            .write(move |tx| {
                let now = now_msec();
                let row = match Replica::<KeyTable>::tx_get(tx, b"", id.as_bytes())? {
                    Some(old) if !old.is_deleted() => {
                        return Err(ModelError::KeyAlreadyExists(id));
                    }
                    // A deleted key imported again: every register moves
                    // past the tombstone's, its revoked rights stay revoked.
                    Some(mut old) => {
                        old.name.update(now, name);
                        old.secret.update(now, secret);
                        old.allow_create_bucket.update(now, false);
                        old.deleted.update(now, false);
                        // Not the old key's expiry: only the one given now.
                        if expires_msec.is_some() || !old.expires_msec.is_unset() {
                            old.expires_msec.update(now, expires_msec);
                        }
                        old
                    }
                    None => {
                        let mut k = KeyRow::new(&id, &secret, &name, now);
                        if expires_msec.is_some() {
                            k.expires_msec.update(now, expires_msec);
                        }
                        k
                    }
                };
                Ok(Replica::<KeyTable>::tx_insert(
                    tx,
                    b"",
                    id.as_bytes(),
                    &row,
                )?)
            })
            .await?;
        self.replicate(&row).await?;
        Ok(row)
    }

    /// The live key with this id.
    pub async fn get(&self, id: &str) -> Result<Option<KeyRow>> {
        Ok(self
            .table
            .get(b"", id.as_bytes())
            .await?
            .filter(|k| !k.is_deleted()))
    }

    /// Every live key.
    pub async fn list(&self) -> Result<Vec<KeyRow>> {
        let all = self.table.local().all(b"").await?;
        Ok(all.into_iter().filter(|k| !k.is_deleted()).collect())
    }

    /// Finds a key by id, or by name when exactly one key has that name.
    pub async fn find(&self, id_or_name: &str) -> Result<KeyRow> {
        if let Some(k) = self.get(id_or_name).await? {
            return Ok(k);
        }
        let matches: Vec<_> = self
            .list()
            .await?
            .into_iter()
            .filter(|k| k.name.value == id_or_name || k.access_key_id.starts_with(id_or_name))
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().expect("one match")),
            0 => Err(ModelError::NoSuchKey(id_or_name.to_owned())),
            _ => Err(ModelError::Invalid(format!(
                "{id_or_name:?} matches several keys; give the full key id"
            ))),
        }
    }

    /// Applies `f` to the live key `id` (with the time of the change, read
    /// in the transaction) and stores the result.
    pub(crate) async fn update(
        &self,
        id: &str,
        f: impl FnOnce(&mut KeyRow, u64) + Send + 'static,
    ) -> Result<KeyRow> {
        self.table.check_writable()?;
        // A key known to another node only is fetched first.
        self.get(id).await?;
        let id = id.to_owned();
        let row: KeyRow = self
            .db
            .write(move |tx| {
                let mut k = Replica::<KeyTable>::tx_get(tx, b"", id.as_bytes())?
                    .filter(|k| !k.is_deleted())
                    .ok_or_else(|| ModelError::NoSuchKey(id.clone()))?;
                f(&mut k, now_msec());
                Ok::<_, ModelError>(Replica::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?)
            })
            .await?;
        self.replicate(&row).await?;
        Ok(row)
    }

    pub(crate) async fn replicate(&self, row: &KeyRow) -> Result<()> {
        let id = row.access_key_id.as_bytes().to_vec();
        Ok(self
            .table
            .replicate(vec![(Vec::new(), id, row.clone())])
            .await?)
    }

    /// Deletes a key (a tombstone row, every right revoked).
    pub async fn delete(&self, id: &str) -> Result<()> {
        self.update(id, |k, now| k.delete(now)).await.map(|_| ())
    }

    /// Grants or revokes the right to create buckets.
    pub async fn set_create_bucket(&self, id: &str, allow: bool) -> Result<KeyRow> {
        self.update(id, move |k, now| k.allow_create_bucket.update(now, allow))
            .await
    }

    /// Sets when a key stops working (ms since the epoch), or with `None`
    /// that it never does.
    pub async fn set_expiry(&self, id: &str, expires_msec: Option<u64>) -> Result<KeyRow> {
        self.update(id, move |k, now| k.expires_msec.update(now, expires_msec))
            .await
    }

    /// The live key `id` if it may sign requests now: an expired key is
    /// [`ModelError::KeyExpired`], for the S3 API to refuse.
    pub async fn signing_key(&self, id: &str) -> Result<Option<KeyRow>> {
        match self.get(id).await? {
            Some(k) if k.is_expired(hangar_util::time::now_msec()) => Err(ModelError::KeyExpired {
                id: k.access_key_id,
                expired_msec: k.expires_msec.value.unwrap_or(0),
            }),
            other => Ok(other),
        }
    }

    /// Sets who a key is to S3 clients: `canonical_id` and `display_name`
    /// each `None` to leave it, `Some(None)` to clear it (back to the
    /// derived canonical id, to no display name), `Some(Some(v))` to set
    /// it. Another key may already have the same canonical id: they are
    /// then one user to S3 (grants to that id apply to both), as an AWS
    /// account's keys are.
    pub async fn set_identity(
        &self,
        id: &str,
        canonical_id: Option<Option<String>>,
        display_name: Option<Option<String>>,
    ) -> Result<KeyRow> {
        if let Some(Some(c)) = &canonical_id
            && !valid_canonical_id(c)
        {
            return Err(ModelError::Invalid(format!(
                "canonical id {c:?} must be 1 to {MAX_IDENTITY_LEN} letters, digits, '-', '_' or '.'"
            )));
        }
        if let Some(Some(n)) = &display_name
            && !valid_display_name(n)
        {
            return Err(ModelError::Invalid(format!(
                "display name {n:?} must be 1 to {MAX_IDENTITY_LEN} bytes without control characters"
            )));
        }
        self.update(id, move |k, now| {
            if let Some(c) = canonical_id {
                k.canonical_id.update(now, c);
            }
            if let Some(n) = display_name {
                k.display_name.update(now, n);
            }
        })
        .await
    }

    /// Who the key `id` is to S3 clients, read on this node (the key table
    /// is on every node). A deleted key keeps the identity it had, so the
    /// buckets it created keep their owner; a key this node has never seen
    /// has the derived one.
    pub async fn identity(&self, id: &str) -> Result<Identity> {
        Ok(match self.table.local().get(b"", id.as_bytes()).await? {
            Some(k) => k.identity(),
            None => Identity {
                canonical_id: derived_canonical_id(id),
                display_name: None,
            },
        })
    }

    /// The live keys whose canonical user id is `canonical_id`, read on
    /// this node.
    pub async fn with_canonical_id(&self, canonical_id: &str) -> Result<Vec<KeyRow>> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter(|k| k.canonical_id() == canonical_id)
            .collect())
    }
}
