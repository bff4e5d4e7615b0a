//! The handler of `hangar/table/<tree>/gc`, the endpoint
//! of tombstone collection for sharded tables (the protocol is in
//! [`super::gc`]).

use async_trait::async_trait;
use hangar_db::DbError;
use hangar_net::{Handler, HandlerError, Request, Response};
use hangar_util::Hash;

use crate::wire::{GcRows, MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE};
use crate::{Replica, RowTrees, Schema};

/// The handler of `hangar/table/<tree>/gc`.
pub(super) struct GcHandler<S: Schema> {
    pub(super) replica: Replica<S>,
}

#[async_trait]
impl<S: Schema> Handler<GcRows, Vec<bool>> for GcHandler<S> {
    async fn handle(
        &self,
        req: Request<GcRows>,
    ) -> std::result::Result<Response<Vec<bool>>, HandlerError> {
        let GcRows { rows, commit } = req.msg;
        if rows.len() > MAX_ROWS_PER_MESSAGE {
            return Err(HandlerError::new(format!(
                "{} rows in one message",
                rows.len()
            )));
        }
        for r in &rows {
            if r.key.len() > MAX_KEY_LEN || r.key.len() < S::PARTITION_LEN || r.hash.len() != 32 {
                return Err(HandlerError::new("bad tombstone key or hash"));
            }
        }
        if !commit {
            // A check only reads: no write transaction (and no fsync).
            let mut answers = Vec::with_capacity(rows.len());
            for r in rows {
                let v = RowTrees::of::<S>()
                    .get_async(self.replica.db(), r.key.into_vec())
                    .await
                    .map_err(HandlerError::new)?;
                answers.push(
                    v.is_some_and(|v| Hash::of(&v).as_bytes().as_slice() == r.hash.as_slice()),
                );
            }
            return Ok(Response::new(answers));
        }
        let answers = self
            .replica
            .db()
            .write(move |tx| {
                let mut answers = Vec::with_capacity(rows.len());
                for r in &rows {
                    let same = RowTrees::of::<S>().tx_get(tx, &r.key)?.is_some_and(|s| {
                        Hash::of(&s.value).as_bytes().as_slice() == r.hash.as_slice()
                    });
                    if same {
                        let (p, s) = r.key.split_at(S::PARTITION_LEN);
                        Replica::<S>::tx_remove(tx, p, s).map_err(DbError::from)?;
                    }
                    answers.push(same);
                }
                Ok::<_, DbError>(answers)
            })
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(answers))
    }
}
