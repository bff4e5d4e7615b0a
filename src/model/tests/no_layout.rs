//! A node of a cluster with replication factor 3 that has no layout yet
//! (joining, or replacing a node, in the moment before the layout reaches
//! it) refuses to read or write object rows instead of using its own
//! store, which holds none of the cluster's: a read there would call an
//! object absent, and an admin's DeleteBucket would find a bucket empty
//! whose objects other nodes hold. Three real meshes in one process, no
//! layout applied.

mod common;

use hangar_model::ModelError;
use hangar_model::object::{ObjectData, ObjectRow, ObjectTable};
use hangar_table::ReplicationError;
use hangar_table::{Replica, TableError};

fn no_layout_yet<T>(r: &hangar_model::Result<T>) -> bool {
    matches!(
        r,
        Err(ModelError::Table(TableError::Replication(
            ReplicationError::NoLayoutYet { .. }
        )))
    )
}

#[tokio::test]
async fn a_node_without_a_layout_neither_reads_its_own_object_rows_nor_empties_a_bucket() {
    let nodes = common::three_model_nodes().await;
    // Buckets are control rows, on every node: they can be made before a
    // layout (an operator preparing a cluster does).
    let bucket = nodes[0]
        .model
        .buckets()
        .create_bucket("full", None)
        .await
        .unwrap();
    // An object of the bucket that another node holds: the cluster's rows
    // are on other nodes than this one.
    let mut row = ObjectRow::tombstone([1; 16], 1_000);
    row.data = ObjectData::Inline(b"kept".to_vec());
    row.size = 4;
    let part = bucket.id_bytes();
    nodes[1]
        .db
        .write(move |tx| Replica::<ObjectTable>::tx_insert(tx, &part, b"k", &row))
        .await
        .unwrap();

    let got = nodes[0].model.objects().get(&bucket, "k").await;
    assert!(no_layout_yet(&got), "{got:?}");
    let listed = nodes[0]
        .model
        .objects()
        .list(&bucket, std::ops::Bound::Unbounded, 10)
        .await;
    assert!(no_layout_yet(&listed), "{listed:?}");
    let deleted = nodes[0].model.delete_bucket("full").await;
    assert!(no_layout_yet(&deleted), "{deleted:?}");
    for n in &nodes {
        assert!(
            n.model
                .buckets()
                .get_bucket("full")
                .await
                .unwrap()
                .is_some(),
            "the bucket is still there"
        );
    }
}
