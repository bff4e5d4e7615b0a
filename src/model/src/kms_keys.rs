//! The KMS key service: creates, lists, rotates, disables and enables the
//! keys of SSE-KMS ([`crate::kms`]), and tells the S3 API whether a key may
//! be used now. It owns the `kms_key` table, a full table (on every node).

use hangar_db::Db;
use hangar_table::{Replica, Table};
use hangar_util::time::now_msec;

use crate::kms::{DEFAULT_KEY, KeyVersion, KmsKeyRow, KmsKeyTable, key_id_of};
use crate::sse_c::Managed;
use crate::{ModelError, Result};

/// The KMS key service of one node.
pub struct KmsKeys {
    db: Db,
    table: Table<KmsKeyTable>,
}

impl KmsKeys {
    pub(crate) fn new(db: Db, table: Table<KmsKeyTable>) -> KmsKeys {
        KmsKeys { db, table }
    }

    /// The key table (replication and sync).
    pub(crate) fn table(&self) -> &Table<KmsKeyTable> {
        &self.table
    }

    /// Creates an enabled key with a fresh id and one version of material.
    pub async fn create(&self, description: &str) -> Result<KmsKeyRow> {
        self.table.check_writable()?;
        let row = KmsKeyRow::new(description, now_msec());
        let written = row.clone();
        let row: KmsKeyRow = self
            .db
            .write(move |tx| {
                Ok::<_, ModelError>(Replica::<KmsKeyTable>::tx_insert(
                    tx,
                    b"",
                    written.id.as_bytes(),
                    &written,
                )?)
            })
            .await?;
        self.replicate(&row).await?;
        Ok(row)
    }

    /// The key a request names (its id, or an ARN of it).
    pub async fn get(&self, named: &str) -> Result<Option<KmsKeyRow>> {
        Ok(self.table.get(b"", key_id_of(named).as_bytes()).await?)
    }

    /// [`Self::get`], or `NoSuchKmsKey`.
    pub async fn find(&self, named: &str) -> Result<KmsKeyRow> {
        self.get(named)
            .await?
            .ok_or_else(|| ModelError::NoSuchKmsKey(named.to_owned()))
    }

    /// Every key.
    pub async fn list(&self) -> Result<Vec<KmsKeyRow>> {
        Ok(self.table.local().all(b"").await?)
    }

    /// Adds a version of material: new data is sealed under it, data
    /// sealed before keeps opening with its own.
    pub async fn rotate(&self, named: &str) -> Result<KmsKeyRow> {
        self.update(named, |k, now| {
            // After every version known here, even with a clock behind.
            let after = k.current().map_or(0, |v| v.created_msec + 1);
            k.versions.insert(KeyVersion {
                created_msec: now.max(after),
                id: rand::random(),
            });
        })
        .await
    }

    /// Enables or disables a key: a disabled key neither seals nor opens
    /// (S3 answers `KMS.DisabledException`), and works again once enabled.
    pub async fn set_enabled(&self, named: &str, enabled: bool) -> Result<KmsKeyRow> {
        self.update(named, move |k, now| k.enabled.update(now, enabled))
            .await
    }

    /// The managed key new data sealed under `named` (`None`: the default
    /// key) uses: its current version. Refused when the key does not exist
    /// or is disabled.
    pub async fn for_sealing(&self, named: Option<&str>) -> Result<Managed> {
        let Some(named) = named.filter(|n| *n != DEFAULT_KEY) else {
            return Ok(Managed::kms(DEFAULT_KEY, [0; 16]));
        };
        let k = self.find(named).await?;
        if !k.is_enabled() {
            return Err(ModelError::KmsKeyDisabled(k.id));
        }
        let v = k
            .current()
            .ok_or_else(|| ModelError::Corrupt(format!("KMS key {} has no material", k.id)))?;
        Ok(Managed::kms(&k.id, v.id))
    }

    /// Whether data sealed under `managed` may be opened now: its KMS key
    /// exists and is enabled (SSE-S3 and the default key always may).
    pub async fn check_usable(&self, managed: &Managed) -> Result<()> {
        match managed.kms_key.as_deref() {
            None | Some(DEFAULT_KEY) => Ok(()),
            Some(id) => {
                let k = self.find(id).await?;
                if k.is_enabled() {
                    Ok(())
                } else {
                    Err(ModelError::KmsKeyDisabled(k.id))
                }
            }
        }
    }

    async fn update(
        &self,
        named: &str,
        f: impl FnOnce(&mut KmsKeyRow, u64) + Send + 'static,
    ) -> Result<KmsKeyRow> {
        self.table.check_writable()?;
        // A key known to another node only is fetched first.
        let id = self.find(named).await?.id;
        let row: KmsKeyRow = self
            .db
            .write(move |tx| {
                let mut k = Replica::<KmsKeyTable>::tx_get(tx, b"", id.as_bytes())?
                    .ok_or_else(|| ModelError::NoSuchKmsKey(id.clone()))?;
                f(&mut k, now_msec());
                Ok::<_, ModelError>(Replica::<KmsKeyTable>::tx_insert(
                    tx,
                    b"",
                    id.as_bytes(),
                    &k,
                )?)
            })
            .await?;
        self.replicate(&row).await?;
        Ok(row)
    }

    async fn replicate(&self, row: &KmsKeyRow) -> Result<()> {
        Ok(self
            .table
            .replicate(vec![(Vec::new(), row.id.as_bytes().to_vec(), row.clone())])
            .await?)
    }
}
