//! What a replica does with the rows and reads a peer sends, whatever the
//! table's replication: check them against the bounds of [`crate::wire`],
//! decode them, and merge them in one local transaction (so the schema's
//! update hook runs on every replica).

use hangar_db::DbError;
use hangar_net::{HandlerError, Request, Response};
use serde_bytes::ByteBuf;

use crate::wire::{MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE, MAX_VALUE_LEN, ReadRow, UpdateRows, WireRow};
use crate::{Replica, Result, Schema, TableError, decode};

/// Rows by storage key, decoded.
pub(crate) type KeyedRows<S> = Vec<(Vec<u8>, <S as Schema>::Row)>;

/// Decodes and checks rows from a peer: bounded sizes, keys of the table's
/// shape, values that decode.
pub(crate) fn check_rows<S: Schema>(
    rows: Vec<WireRow>,
) -> std::result::Result<KeyedRows<S>, String> {
    if rows.len() > MAX_ROWS_PER_MESSAGE {
        return Err(format!(
            "{} rows in one message, at most {MAX_ROWS_PER_MESSAGE}",
            rows.len()
        ));
    }
    rows.into_iter()
        .map(|w| {
            if w.key.len() > MAX_KEY_LEN || w.key.len() < S::PARTITION_LEN {
                return Err(format!("bad key length {}", w.key.len()));
            }
            if w.value.len() > MAX_VALUE_LEN {
                return Err(format!("row of {} bytes", w.value.len()));
            }
            let row = decode::<S>(&w.value).map_err(|e| e.to_string())?;
            Ok((w.key.into_vec(), row))
        })
        .collect()
}

/// Merges decoded rows into the local replica in one transaction.
pub(crate) async fn merge_rows<S: Schema>(
    replica: &Replica<S>,
    rows: KeyedRows<S>,
) -> std::result::Result<(), DbError> {
    replica
        .db()
        .write(move |tx| {
            for (k, row) in &rows {
                let (p, s) = k.split_at(S::PARTITION_LEN);
                Replica::<S>::tx_insert(tx, p, s, row).map_err(DbError::from)?;
            }
            Ok::<_, DbError>(())
        })
        .await
}

/// Merges a writer's rows (not anti-entropy's) in one transaction, with
/// [`Replica::tx_insert_admitted`]: nothing is stored when one is refused by
/// a fence.
pub(crate) async fn merge_written<S: Schema>(
    replica: &Replica<S>,
    rows: KeyedRows<S>,
) -> Result<()> {
    replica
        .db()
        .write(move |tx| {
            for (k, row) in &rows {
                let (p, s) = k.split_at(S::PARTITION_LEN);
                Replica::<S>::tx_insert_admitted(tx, p, s, row)?;
            }
            Ok::<_, TableError>(())
        })
        .await
}

/// Serves an update: checks the rows a peer sent and merges them (a live
/// row of a fenced partition key is refused, `crate::fence`).
pub(crate) async fn serve_update<S: Schema>(
    replica: &Replica<S>,
    req: Request<UpdateRows>,
) -> std::result::Result<Response<()>, HandlerError> {
    let rows = check_rows::<S>(req.msg.rows).map_err(HandlerError::new)?;
    merge_written(replica, rows)
        .await
        .map_err(HandlerError::new)?;
    Ok(Response::new(()))
}

/// Serves a read of one stored row, by storage key.
pub(crate) async fn serve_read<S: Schema>(
    replica: &Replica<S>,
    req: Request<ReadRow>,
) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
    let key = req.msg.key.into_vec();
    if key.len() > MAX_KEY_LEN || key.len() < S::PARTITION_LEN {
        return Err(HandlerError::new(format!("bad key length {}", key.len())));
    }
    let v = crate::RowTrees::of::<S>()
        .get_async(replica.db(), key)
        .await
        .map_err(HandlerError::new)?;
    Ok(Response::new(v.map(ByteBuf::from)))
}
