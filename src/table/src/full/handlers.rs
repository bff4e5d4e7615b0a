//! The handlers of a fully replicated table's endpoints, and the digest
//! its anti-entropy compares ([`super::sync`]).

use async_trait::async_trait;
use hangar_db::{Db, DbError};
use hangar_net::{Handler, HandlerError, Request, Response};
use serde_bytes::ByteBuf;

use crate::serve::{serve_read, serve_update};
use crate::wire::{MAX_ROWS_PER_MESSAGE, PullRows, ReadRow, RowPage, UpdateRows, WireRow};
use crate::{Replica, Schema};

/// The handlers of a full table's endpoints.
pub(super) struct Handlers<S: Schema> {
    pub(super) replica: Replica<S>,
}

impl<S: Schema> Clone for Handlers<S> {
    fn clone(&self) -> Self {
        Handlers {
            replica: self.replica.clone(),
        }
    }
}

#[async_trait]
impl<S: Schema> Handler<UpdateRows, ()> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<UpdateRows>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        serve_update(&self.replica, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRow, Option<ByteBuf>> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRow>,
    ) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
        serve_read(&self.replica, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<PullRows, RowPage> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<PullRows>,
    ) -> std::result::Result<Response<RowPage>, HandlerError> {
        // A limit of 0 asks for the digest alone.
        let limit = (req.msg.limit as usize).min(MAX_ROWS_PER_MESSAGE);
        let start = match &req.msg.after {
            Some(k) => std::ops::Bound::Excluded(k.to_vec()),
            None => std::ops::Bound::Unbounded,
        };
        let db = self.replica.db();
        let rows = if limit == 0 {
            Vec::new()
        } else {
            db.range_async(S::TREE, start, std::ops::Bound::Unbounded, false, limit + 1)
                .await
                .map_err(HandlerError::new)?
        };
        let more = rows.len() > limit;
        let rows = rows
            .into_iter()
            .take(limit)
            .map(|(k, v)| WireRow {
                key: ByteBuf::from(k),
                value: ByteBuf::from(v),
            })
            .collect();
        let digest = digest::<S>(db).await.map_err(HandlerError::new)?;
        Ok(Response::new(RowPage {
            rows,
            more,
            digest: ByteBuf::from(digest.to_vec()),
        }))
    }
}

/// The digest of a whole table: blake3 over every (key, value) in key
/// order, each length-prefixed. Two nodes whose digests agree hold the
/// same rows, byte for byte.
pub async fn digest<S: Schema>(db: &Db) -> std::result::Result<[u8; 32], DbError> {
    let mut h = blake3::Hasher::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let page = db
            .range_async(S::TREE, start, std::ops::Bound::Unbounded, false, 1024)
            .await?;
        for (k, v) in &page {
            h.update(&(k.len() as u64).to_be_bytes());
            h.update(k);
            h.update(&(v.len() as u64).to_be_bytes());
            h.update(v);
        }
        if page.len() < 1024 {
            return Ok(*h.finalize().as_bytes());
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}
