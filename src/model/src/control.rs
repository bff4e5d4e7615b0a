//! The tables every node holds (keys, buckets, bucket aliases): local on a node without a
//! cluster (tests, tools), replicated to every node otherwise
//! ([`hangar_table::full_table::FullTable`]).

use hangar_db::Db;
use hangar_table::full_table::FullTable;
use hangar_table::{Schema, Table};

use crate::Result;

/// A control table: the local rows, and their replication when there is a
/// cluster.
pub(crate) struct ControlTable<S: Schema> {
    local: Table<S>,
    full: Option<FullTable<S>>,
}

impl<S: Schema> ControlTable<S> {
    pub(crate) fn new(db: Db, cluster: Option<&hangar_cluster::Cluster>) -> Result<Self> {
        let full = match cluster {
            Some(c) => Some(
                FullTable::new(db.clone(), c.clone()).map_err(hangar_table::TableError::from)?,
            ),
            None => None,
        };
        Ok(ControlTable {
            local: Table::new(db),
            full,
        })
    }

    pub(crate) fn local(&self) -> &Table<S> {
        &self.local
    }

    /// The replicated table, for the anti-entropy worker.
    pub(crate) fn full(&self) -> Option<&FullTable<S>> {
        self.full.as_ref()
    }

    /// Reads a row: locally, or from the other nodes when missing here.
    pub(crate) async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(match &self.full {
            Some(f) => f.get(partition, sort).await?,
            None => self.local.get(partition, sort).await?,
        })
    }

    /// Reads a row from this node and a read quorum of the others (always
    /// asked), for a decision that must see every acknowledged write.
    pub(crate) async fn get_quorum(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(match &self.full {
            Some(f) => f.get_quorum(partition, sort).await?,
            None => self.local.get(partition, sort).await?,
        })
    }

    /// Fails at once when a change could not reach its quorum.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if let Some(f) = &self.full {
            f.check_writable()?;
        }
        Ok(())
    }

    /// Sends rows already merged locally to the other nodes.
    pub(crate) async fn replicate(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        if let Some(f) = &self.full {
            f.replicate(rows).await?;
        }
        Ok(())
    }
}
