//! The object, version and multipart tables as the model uses them: one
//! row at a time, read or merged, never a transaction spanning tables.
//!
//! That is the shape a table has once its rows live on other nodes: every
//! effect of a change on another table comes from the table's update hook
//! ([`hangar_table::Schema::updated`]) on whichever node merges the row, and
//! the model orders its steps so that a crash between two of them leaves
//! nothing that the version collector or the start-up scan cannot finish
//! (doc/table-rows.md, "Life of an object version"). Today the rows are
//! this node's ([`Rows::local`]).

use std::ops::Bound;

use hangar_db::DbError;
use hangar_table::{Schema, Table};

use crate::Result;

/// One table's rows, read and merged a row (or a batch of rows) at a time.
pub(crate) struct Rows<S: Schema> {
    local: Table<S>,
}

impl<S: Schema> Rows<S> {
    pub(crate) fn new(local: Table<S>) -> Rows<S> {
        Rows { local }
    }

    pub(crate) async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(self.local.get(partition, sort).await?)
    }

    /// Merges `row` into row (`partition`, `sort`), running the table's hook.
    pub(crate) async fn insert(&self, partition: &[u8], sort: &[u8], row: S::Row) -> Result<()> {
        self.insert_many(vec![(partition.to_vec(), sort.to_vec(), row)])
            .await
    }

    /// Merges several rows, each with the table's hook.
    pub(crate) async fn insert_many(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.local
            .db()
            .write(move |tx| {
                for (p, s, row) in &rows {
                    Table::<S>::tx_insert(tx, p, s, row).map_err(DbError::from)?;
                }
                Ok::<_, DbError>(())
            })
            .await?;
        Ok(())
    }

    pub(crate) async fn range(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        Ok(self
            .local
            .range(partition, start, Bound::Unbounded, false, limit)
            .await?)
    }

    pub(crate) async fn range_filtered(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        limit: usize,
        keep: impl Fn(&S::Row) -> bool,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        Ok(self
            .local
            .range_filtered(partition, start, limit, keep)
            .await?)
    }

    pub(crate) async fn range_numbered(
        &self,
        partition: &[u8],
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, S::Row)>> {
        Ok(self.local.range_numbered(partition, from, limit).await?)
    }
}
