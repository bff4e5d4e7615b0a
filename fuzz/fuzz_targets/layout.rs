//! Layout histories as a node reads them from `metadata_dir/cluster_layout`
//! or receives them from a peer (`LayoutHistory::decode`), then what a node
//! does with one it accepted: merge it into its own, look partitions up,
//! describe it, and encode it back (which must decode to the same history).

#![no_main]

use hangar_fuzz as _;
use hangar_layout::LayoutHistory;
use hangar_util::Hash;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = LayoutHistory::decode(data) else {
        return;
    };
    let again = LayoutHistory::decode(&h.encode()).expect("an encoded history decodes");
    assert_eq!(again.encode(), h.encode(), "encoding is stable");

    let _ = h.history();
    let _ = h.describe_current();
    let _ = h.show();
    let _ = h.storage_nodes();
    let _ = (h.min_ack(), h.synced_version(), h.min_sync_ack());
    for p in [0u8, 1, 127, 255] {
        let _ = h.read_nodes_of_partition(p);
        let _ = h.write_sets_of_partition(p);
        let _ = h.write_nodes_of_partition(p);
    }
    let _ = h.read_nodes_of_partition(hangar_layout::partition_of(&Hash::of(data)));

    // A fresh node merging what a peer pushed, and the peer merging it back.
    // What either side holds after the merge must still be a history it
    // would accept from disk.
    let mut fresh = LayoutHistory::new(h.replication_factor);
    if fresh.merge(&h).is_ok() {
        fresh.check().expect("a merge of valid histories is valid");
        let mut back = h.clone();
        back.merge(&fresh).expect("same replication factor");
        back.check().expect("a merge of valid histories is valid");
        fresh.prune();
        fresh.check().expect("a pruned history is valid");
    }
});
