//! The tables every node holds (keys, buckets, bucket aliases), replicated
//! to every node ([`hangar_table::full_table::FullTable`]).

use hangar_db::Db;
use hangar_table::full_table::FullTable;
use hangar_table::{Schema, Table};

use crate::Result;

/// A control table: this node's rows, and their replication to the others.
pub(crate) struct ControlTable<S: Schema> {
    local: Table<S>,
    full: FullTable<S>,
}

impl<S: Schema> ControlTable<S> {
    pub(crate) fn new(db: Db, cluster: &hangar_cluster::Cluster) -> Result<Self> {
        let full =
            FullTable::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?;
        Ok(ControlTable {
            local: Table::new(db),
            full,
        })
    }

    pub(crate) fn local(&self) -> &Table<S> {
        &self.local
    }

    /// The replicated table, for the anti-entropy worker.
    pub(crate) fn full(&self) -> &FullTable<S> {
        &self.full
    }

    /// Reads a row: locally, or from the other nodes when missing here.
    pub(crate) async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(self.full.get(partition, sort).await?)
    }

    /// Reads a row from this node and a read quorum of the others (always
    /// asked), for a decision that must see every acknowledged write.
    pub(crate) async fn get_quorum(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(self.full.get_quorum(partition, sort).await?)
    }

    /// Fails at once when a change could not reach its quorum.
    pub(crate) fn check_writable(&self) -> Result<()> {
        Ok(self.full.check_writable()?)
    }

    /// Sends rows already merged locally to the other nodes.
    pub(crate) async fn replicate(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        Ok(self.full.replicate(rows).await?)
    }
}
