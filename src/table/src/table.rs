//! [`Table`]: a schema's rows, replicated over the cluster the way the
//! schema says ([`Schema::Replication`]).
//!
//! One type for every table. What every table has is here: this node's
//! [`Replica`], the cluster, and the mesh endpoints of its replication.
//! What a replication promises, and the operations that keep it, are the
//! `impl` blocks of its own module: [`crate::full`] (every node holds every
//! row: keys, buckets, aliases; digest anti-entropy) and [`crate::sharded`]
//! (each row on the nodes of its layout partition: objects, versions,
//! uploads, block references; Merkle anti-entropy, tombstone collection,
//! fences). A cluster of one node runs the same code as any other (its
//! quorums are that node).

use std::sync::Arc;

use hangar_cluster::Cluster;
use hangar_db::Db;
use hangar_net::NetError;

use crate::{Replica, Schema};

/// How a table's rows are spread over the cluster: the mesh endpoints a
/// table replicated so serves and calls. Implemented by [`crate::Full`]
/// and [`crate::Sharded`] only.
pub trait Replication: Send + Sync + Sized + 'static {
    /// The table's endpoints (`hangar/table/<tree>/<op>`, [`crate::wire`]).
    type Endpoints: Send + Sync + 'static;

    /// Registers the endpoints of table `S` on `cluster`'s mesh and
    /// installs their handlers, which serve `replica`.
    fn endpoints<S: Schema>(
        replica: &Replica<S>,
        cluster: &Cluster,
    ) -> Result<Self::Endpoints, NetError>;
}

/// The rows of schema `S`, replicated by `R` (the schema's choice).
pub struct Table<S: Schema, R: Replication = <S as Schema>::Replication> {
    pub(crate) replica: Replica<S>,
    pub(crate) cluster: Cluster,
    pub(crate) eps: Arc<R::Endpoints>,
}

impl<S: Schema, R: Replication> Clone for Table<S, R> {
    fn clone(&self) -> Self {
        Table {
            replica: self.replica.clone(),
            cluster: self.cluster.clone(),
            eps: self.eps.clone(),
        }
    }
}

impl<S: Schema<Replication = R>, R: Replication> Table<S, R> {
    /// The table on `db`, replicated over `cluster`; installs the handlers
    /// of its endpoints on the cluster's mesh (once per schema and mesh).
    pub fn new(db: Db, cluster: Cluster) -> Result<Self, NetError> {
        let replica = Replica::new(db);
        let eps = Arc::new(R::endpoints(&replica, &cluster)?);
        Ok(Table {
            replica,
            cluster,
            eps,
        })
    }
}

impl<S: Schema, R: Replication> Table<S, R> {
    /// This node's replica (what it stores; no remote call).
    pub fn local(&self) -> &Replica<S> {
        &self.replica
    }

    /// The cluster the table is replicated over.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}
