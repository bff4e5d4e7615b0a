//! Reads of a sharded table: one row or a range of one partition key's
//! rows from a read quorum, with read repair.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use futures::StreamExt;
use hangar_cluster::QuorumError;
use hangar_layout::Partition;
use hangar_net::{CallOpts, NetError};
use hangar_util::NodeId;
use serde_bytes::ByteBuf;

use super::Sharded;
use crate::wire::{
    MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE, ReadRange, ReadRow, UpdateRows, WireRow, batches,
};
use crate::{Crdt, ReplicationError, Result, Schema, Table, TableError, decode, encode};

/// How many times a read is made again when a blocking read repair finds
/// that the partition's read nodes moved under it (a layout this node
/// learnt of on the way).
const READ_ATTEMPTS: usize = 3;

/// A key of a range read being merged: the merge of the rows decoded so
/// far, and the value each replica sent.
type Merging<S> = (Option<<S as Schema>::Row>, BTreeMap<NodeId, Vec<u8>>);

/// How a read repair ended ([`Table::read_repair`]).
enum Repaired {
    /// The repairs were written, or sent in the background where a write
    /// quorum held the rows already: the read may answer.
    Done,
    /// The partition's read nodes moved under the read: read again.
    LayoutMoved,
}

/// One quorum range read: the rows, and where to go on when a replica's
/// answer was cut by its byte budget.
struct RangePage<S: Schema> {
    rows: Vec<(Vec<u8>, S::Row)>,
    cut: Option<Vec<u8>>,
}

impl<S: Schema> Table<S, Sharded> {
    /// The read nodes of layout partition `p` (the read orders them).
    fn read_nodes(&self, p: Partition) -> Vec<NodeId> {
        self.cluster.read_nodes_of_partition(p)
    }

    /// Reads row (`partition`, `sort`) from a read quorum of its nodes (the
    /// closest first, the others only if those fail or are slow:
    /// [`hangar_cluster::Cluster::call_read_quorum`]) and returns the merge of their answers
    /// (`None` when none holds it). Replicas that answered without it or
    /// with an older row are repaired (`read_repair`: before the
    /// answer when fewer than a write quorum held what it returns).
    pub async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let p = S::layout_partition(partition);
        let key = crate::storage_key::<S>(partition, sort);
        for _ in 0..READ_ATTEMPTS {
            let targets = self.read_nodes(p);
            if targets.is_empty() {
                return Err(self.quorum_error("get", p, &[], QuorumError::NoLayout));
            }
            // A partition whose one read node is this one (a lone node, or
            // replication factor 1): the row is this node's, read in the
            // caller's task. Through the quorum call it cost a lone node's
            // GET of 4 KiB 9 % more instructions (script/profile-requests).
            if let [only] = targets[..]
                && only == self.cluster.id()
            {
                return self.replica.get(partition, sort).await;
            }
            let answers = self
                .cluster
                .call_read_quorum(
                    &self.eps.read,
                    &targets,
                    ReadRow {
                        key: ByteBuf::from(key.clone()),
                    },
                    CallOpts::default(),
                )
                .await
                .map_err(|e| self.quorum_error("get", p, &targets, e))?;
            let mut merged: Option<S::Row> = None;
            for (node, v) in &answers {
                let Some(v) = v else { continue };
                match decode::<S>(v) {
                    Ok(row) => match &mut merged {
                        Some(m) => m.merge(&row),
                        None => merged = Some(row),
                    },
                    Err(e) => tracing::warn!("{}: row from {}: {e}", S::TREE, node.short()),
                }
            }
            let Some(m) = merged else { return Ok(None) };
            let value = encode::<S>(&m);
            let stale: Vec<NodeId> = answers
                .iter()
                .filter(|(_, v)| v.as_deref().map(|v| v.as_slice()) != Some(value.as_slice()))
                .map(|(n, _)| *n)
                .collect();
            // The usual case, replicas in agreement: nothing more to build.
            if stale.is_empty() {
                return Ok(Some(m));
            }
            let held = BTreeMap::from([(key.clone(), answers.len() - stale.len())]);
            let row = WireRow {
                key: ByteBuf::from(key.clone()),
                value: ByteBuf::from(value),
            };
            let answered = answers.iter().map(|(n, _)| *n).collect();
            let repairs = stale.into_iter().map(|n| (n, vec![row.clone()])).collect();
            match self
                .read_repair("get", p, &targets, &answered, repairs, held)
                .await?
            {
                Repaired::Done => return Ok(Some(m)),
                Repaired::LayoutMoved => continue,
            }
        }
        Err(self.layout_moving("get", p))
    }

    /// Read repair: `repairs` are the rows each replica that answered a
    /// read of partition `p` from `targets` lacked or held older, `held`
    /// how many of them answered with each of those rows (by storage
    /// key). When every such row was held by a write quorum, the
    /// repairs go in the background. Otherwise they are written before the
    /// read answers: a row that a write put on one replica only (the others
    /// crashed, or its coordinator did, before it reached them) would be
    /// seen by a read whose quorum holds that replica and missed by the
    /// next, whose quorum does not — reads would go back in time. Once the
    /// row is on a write quorum, every later read quorum meets it. The
    /// blocking repair goes to the stale replicas that answered and to the
    /// read nodes that were not asked (`targets` not in `answered`), and
    /// returns as soon as every short row is on a write quorum, so a stale
    /// replica slow to write does not hold the read when another replica
    /// can take the row. Fails when it could not be put on one.
    ///
    /// A node repairs a replica only once it exchanged layouts with it
    /// since it started: a node that was away may read under a layout the
    /// others retired, and its "merged" row be one they deleted and
    /// collected since. A blocking repair exchanges first (a few seconds
    /// at most, once per peer); if that moved the partition's read nodes,
    /// the read was made under an old layout and must be made again
    /// ([`Repaired::LayoutMoved`]).
    async fn read_repair(
        &self,
        op: &'static str,
        p: Partition,
        targets: &[NodeId],
        answered: &BTreeSet<NodeId>,
        repairs: BTreeMap<NodeId, Vec<WireRow>>,
        held: BTreeMap<Vec<u8>, usize>,
    ) -> Result<Repaired> {
        let needed = self.cluster.quorums().write;
        let short: Vec<(&Vec<u8>, usize)> = held
            .iter()
            .filter(|(_, h)| **h < needed)
            .map(|(k, h)| (k, *h))
            .collect();
        if repairs.is_empty() || short.is_empty() {
            for (node, rows) in repairs {
                self.repair_soon(node, rows);
            }
            return Ok(Repaired::Done);
        }
        let layout = self.cluster.layout();
        let strangers: Vec<NodeId> = repairs
            .keys()
            .copied()
            .filter(|n| !layout.has_exchanged_with(*n))
            .collect();
        if !strangers.is_empty() {
            layout.exchange_with(&strangers).await;
            if self.read_nodes(p) != targets {
                return Ok(Repaired::LayoutMoved);
            }
        }
        // The read nodes that did not answer take the short rows too: a
        // stale replica that is slow to write must not hold the read when
        // another can give the row its quorum. Each repair runs in its own
        // task, so that those still running when the quorum is reached
        // finish in the background.
        let short_rows: Vec<WireRow> = {
            let mut by_key: BTreeMap<&[u8], &WireRow> = BTreeMap::new();
            for rows in repairs.values() {
                for w in rows {
                    by_key.entry(w.key.as_slice()).or_insert(w);
                }
            }
            short
                .iter()
                .filter_map(|(k, _)| by_key.get(k.as_slice()).map(|w| (*w).clone()))
                .collect()
        };
        let mut repairs = repairs;
        for n in targets {
            if !answered.contains(n) && !short_rows.is_empty() {
                repairs.entry(*n).or_insert_with(|| short_rows.clone());
            }
        }
        let mut calls: futures::stream::FuturesUnordered<_> = repairs
            .into_iter()
            .map(|(node, rows)| {
                let ep = self.eps.update.clone();
                let exchanged = layout.has_exchanged_with(node);
                tokio::spawn(async move {
                    if !exchanged {
                        // A node this one could not exchange layouts with.
                        return (node, rows, Err(NetError::NotConnected(node)));
                    }
                    for batch in batches(rows.clone()) {
                        let msg = UpdateRows { rows: batch };
                        if let Err(e) = ep.call(node, msg, CallOpts::default()).await {
                            return (node, rows, Err(e));
                        }
                    }
                    (node, rows, Ok(()))
                })
            })
            .collect();
        let mut counts: Vec<usize> = short.iter().map(|(_, h)| *h).collect();
        let mut errors = Vec::new();
        while let Some(done) = calls.next().await {
            let Ok((node, rows, r)) = done else { continue };
            match r {
                Ok(()) => {
                    for ((key, _), c) in short.iter().zip(counts.iter_mut()) {
                        if rows.iter().any(|w| w.key.as_slice() == key.as_slice()) {
                            *c += 1;
                        }
                    }
                }
                Err(e) => errors.push((node, e)),
            }
            if counts.iter().all(|c| *c >= needed) {
                return Ok(Repaired::Done);
            }
        }
        let worst = counts.iter().copied().min().unwrap_or(0);
        let failed = QuorumError::Failed {
            needed,
            ok: worst,
            down: targets.iter().filter(|n| !self.cluster.is_up(**n)).count(),
            targets: targets.len(),
            version: None,
            errors,
        };
        Err(self.quorum_error(op, p, targets, failed))
    }

    /// The error of a read that saw the partition's read nodes move under
    /// it [`READ_ATTEMPTS`] times.
    fn layout_moving(&self, op: &'static str, p: Partition) -> TableError {
        TableError::Replication(ReplicationError::LayoutMoving {
            op,
            tree: S::TREE,
            partition: p,
            attempts: READ_ATTEMPTS,
        })
    }

    /// Sends `rows` to `node` in the background (read repair of rows a
    /// write quorum holds already), if this node exchanged layouts with it
    /// ([`Self::read_repair`] says why).
    fn repair_soon(&self, node: NodeId, rows: Vec<WireRow>) {
        if !self.cluster.layout().has_exchanged_with(node) {
            tracing::debug!(
                "{}: no read repair of {} before a layout exchange with it",
                S::TREE,
                node.short()
            );
            return;
        }
        let ep = self.eps.update.clone();
        tokio::spawn(async move {
            let n = rows.len();
            for rows in batches(rows) {
                let msg = UpdateRows { rows };
                if let Err(e) = ep.call(node, msg, CallOpts::background()).await {
                    tracing::debug!("{}: read repair of {}: {e}", S::TREE, node.short());
                    return;
                }
            }
            tracing::debug!("{}: read repair sent {n} rows to {}", S::TREE, node.short());
        });
    }

    /// Reads up to `limit` (at most [`MAX_ROWS_PER_MESSAGE`]) rows of
    /// `partition` whose sort key is within (`start`, `end`), in sort-key
    /// order (descending when `reverse`), from a read quorum of the
    /// partition's nodes: each replica answers its first rows, the answers
    /// are merged by key, and the first `limit` keys are returned. A key
    /// among the true first `limit` is among the first `limit` of every
    /// replica holding it, so none is missed; fewer than `limit` rows means
    /// the range holds no more. Tombstones are returned like other rows, but
    /// not those buried (every replica holds them: [`crate::tombstones`]).
    /// Replicas found lacking a returned row, or holding an older one, are
    /// repaired as [`Self::get`]'s are.
    pub async fn range(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        assert_eq!(
            partition.len(),
            S::PARTITION_LEN,
            "partition key of {}",
            S::TREE
        );
        let limit = limit.min(MAX_ROWS_PER_MESSAGE);
        let owned = |b: Bound<&[u8]>| b.map(|s| ByteBuf::from(s.to_vec()));
        let (mut start, mut end) = (owned(start), owned(end));
        let mut out = Vec::new();
        while out.len() < limit {
            let mut page = None;
            for _ in 0..READ_ATTEMPTS {
                page = self
                    .range_once(
                        partition,
                        start.clone(),
                        end.clone(),
                        reverse,
                        limit - out.len(),
                    )
                    .await?;
                if page.is_some() {
                    break;
                }
            }
            let Some(page) = page else {
                return Err(self.layout_moving("range", S::layout_partition(partition)));
            };
            let cut = page.cut;
            out.extend(page.rows);
            match cut {
                // A replica stopped at its byte budget before the limit:
                // go on after the last key every answer covered.
                Some(k) if out.len() < limit => {
                    // The cut is a storage key; bounds are sort keys.
                    let next = Bound::Excluded(ByteBuf::from(k[S::PARTITION_LEN..].to_vec()));
                    if reverse {
                        end = next;
                    } else {
                        start = next;
                    }
                }
                _ => break,
            }
        }
        Ok(out)
    }

    async fn range_once(
        &self,
        partition: &[u8],
        start: Bound<ByteBuf>,
        end: Bound<ByteBuf>,
        reverse: bool,
        limit: usize,
    ) -> Result<Option<RangePage<S>>> {
        let p = S::layout_partition(partition);
        let targets = self.read_nodes(p);
        if targets.is_empty() {
            return Err(self.quorum_error("range", p, &[], QuorumError::NoLayout));
        }
        // A partition whose one read node is this one: its rows, read in
        // the caller's task, as `get` does (no message, so no byte budget
        // and no cut).
        if let [only] = targets[..]
            && only == self.cluster.id()
        {
            let rows = self
                .replica
                .range(
                    partition,
                    start.as_ref().map(|k| k.as_slice()),
                    end.as_ref().map(|k| k.as_slice()),
                    reverse,
                    limit,
                )
                .await?;
            return Ok(Some(RangePage { rows, cut: None }));
        }
        let msg = ReadRange {
            partition: ByteBuf::from(partition.to_vec()),
            start,
            end,
            reverse,
            limit: limit as u32,
        };
        let answers = self
            .cluster
            .call_read_quorum(&self.eps.range, &targets, msg, CallOpts::default())
            .await
            .map_err(|e| self.quorum_error("range", p, &targets, e))?;
        let bad = |message: String| TableError::BadAnswer {
            tree: S::TREE,
            message,
        };
        // Per key: the merged row and what each replica sent.
        let mut union: BTreeMap<Vec<u8>, Merging<S>> = BTreeMap::new();
        // Per replica with more rows: the last key it covered.
        let mut lasts: Vec<(NodeId, Option<Vec<u8>>)> = Vec::new();
        let mut cut: Option<Vec<u8>> = None;
        for (node, a) in answers {
            if a.rows.len() > limit || (a.more && a.rows.is_empty()) {
                return Err(bad(format!("{} rows from {}", a.rows.len(), node.short())));
            }
            let last = a.rows.last().map(|r| r.key.to_vec());
            if a.more
                && let Some(l) = &last
            {
                let nearer = match &cut {
                    None => true,
                    Some(c) => (l < c) != reverse,
                };
                if nearer {
                    cut = Some(l.clone());
                }
            }
            lasts.push((node, if a.more { last } else { None }));
            for w in a.rows {
                if w.key.len() > MAX_KEY_LEN || !w.key.starts_with(partition) {
                    return Err(bad(format!(
                        "a key of another partition from {}",
                        node.short()
                    )));
                }
                let entry = union.entry(w.key.to_vec()).or_default();
                match decode::<S>(&w.value) {
                    Ok(row) => match &mut entry.0 {
                        Some(m) => m.merge(&row),
                        None => entry.0 = Some(row),
                    },
                    Err(e) => tracing::warn!("{}: row from {}: {e}", S::TREE, node.short()),
                }
                entry.1.insert(node, w.value.into_vec());
            }
        }
        let covered = |node: NodeId, key: &[u8]| match lasts.iter().find(|(n, _)| *n == node) {
            Some((_, Some(last))) => (key <= last.as_slice()) != reverse || key == last.as_slice(),
            _ => true,
        };
        let in_order: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(union.into_iter().rev())
        } else {
            Box::new(union.into_iter())
        };
        let mut rows = Vec::new();
        let mut repairs: BTreeMap<NodeId, Vec<WireRow>> = BTreeMap::new();
        let mut held: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for (key, (row, sent)) in in_order {
            if rows.len() == limit {
                break;
            }
            if let Some(c) = &cut
                && (key.as_slice() > c.as_slice()) != reverse
                && key != *c
            {
                break;
            }
            let Some(row) = row else { continue };
            let value = encode::<S>(&row);
            let mut holders = 0;
            let mut lacking = false;
            for (node, _) in &lasts {
                if !covered(*node, &key) {
                    continue;
                }
                if sent.get(node) == Some(&value) {
                    holders += 1;
                } else {
                    lacking = true;
                    repairs.entry(*node).or_default().push(WireRow {
                        key: ByteBuf::from(key.clone()),
                        value: ByteBuf::from(value.clone()),
                    });
                }
            }
            // Only rows some replica lacked can need a blocking repair.
            if lacking {
                held.insert(key.clone(), holders);
            }
            rows.push((key[S::PARTITION_LEN..].to_vec(), row));
        }
        if !repairs.is_empty() {
            let answered = lasts.iter().map(|(n, _)| *n).collect();
            match self
                .read_repair("range", p, &targets, &answered, repairs, held)
                .await?
            {
                Repaired::Done => {}
                Repaired::LayoutMoved => return Ok(None),
            }
        }
        let cut = if rows.len() < limit { cut } else { None };
        Ok(Some(RangePage { rows, cut }))
    }
}
