//! The layout history: staging, apply/revert, the CRDT merge laws under
//! random operation orders, version conflicts, and layout transitions.

use hangar_layout::*;
use hangar_util::Hash;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TB: u64 = 1_000_000_000_000;

fn node(i: u8) -> NodeId {
    NodeId([i; 32])
}

/// A history with version 1 applied: nodes 1–4 in zones a, b, c, a.
fn base() -> LayoutHistory {
    let mut h = LayoutHistory::new(3);
    for (i, z) in [(1, "a"), (2, "b"), (3, "c"), (4, "a")] {
        h.stage_role(node(1), 1000, node(i), NodeRole::storage(z, TB))
            .unwrap();
    }
    h.apply(1, node(1), 1001).unwrap();
    h
}

fn joined(a: &LayoutHistory, b: &LayoutHistory) -> LayoutHistory {
    let mut x = a.clone();
    x.merge(b).unwrap();
    x
}

#[test]
fn assign_show_apply_revert() {
    let mut h = LayoutHistory::new(3);
    assert!(h.show().outcome.is_none());
    assert_eq!(h.apply(1, node(1), 5), Err(LayoutError::NothingStaged(0)));
    for (i, z) in [(1, "a"), (2, "b")] {
        h.stage_role(node(9), 10, node(i), NodeRole::storage(z, TB))
            .unwrap();
    }
    // Two nodes cannot hold three copies: show says so, apply refuses.
    let preview = h.show();
    assert_eq!(preview.roles.len(), 2);
    assert!(matches!(
        preview.outcome,
        Some(Err(LayoutError::NotEnoughNodes { .. }))
    ));
    assert!(matches!(
        h.apply(1, node(9), 11),
        Err(LayoutError::NotEnoughNodes { .. })
    ));
    h.stage_role(node(9), 12, node(3), NodeRole::storage("c", TB))
        .unwrap();
    h.stage_role(node(9), 12, node(5), NodeRole::gateway("c"))
        .unwrap();
    let predicted = h.show().outcome.unwrap().unwrap();
    assert_eq!(
        h.apply(2, node(9), 13),
        Err(LayoutError::WrongVersion {
            asked: 2,
            current: 0
        })
    );
    let applied = h.apply(1, node(9), 13).unwrap();
    assert_eq!(predicted, applied);
    assert_eq!(applied.moves, 768);
    assert_eq!(
        applied.zones.iter().map(|z| z.usable).sum::<u64>(),
        applied.usable_capacity
    );
    assert!(h.staging.is_empty());
    assert_eq!(h.current().version, 1);
    // The empty version 0 is retired as soon as version 1 exists.
    assert!(h.prune());
    assert_eq!(h.versions.len(), 1);

    // Staging the role a node already has changes nothing.
    h.stage_role(node(9), 20, node(3), NodeRole::storage("c", TB))
        .unwrap();
    assert!(h.show().outcome.is_none());
    assert_eq!(h.apply(2, node(9), 21), Err(LayoutError::NothingStaged(1)));
    // A real change, then revert.
    h.stage_role(node(9), 22, node(4), NodeRole::storage("a", TB))
        .unwrap();
    let preview = h.show();
    let report = preview.outcome.unwrap().unwrap();
    // Node 4 joins node 1 in zone a, which holds one copy of every
    // partition: it takes half of them.
    assert_eq!(report.moves, 128);
    assert!(h.revert(node(9), 23));
    assert!(h.show().outcome.is_none());
    assert!(!h.revert(node(9), 24));

    // Bad stagings are refused at once.
    assert!(matches!(
        h.stage_role(node(9), 25, node(6), NodeRole::storage("a", 0)),
        Err(LayoutError::CapacityTooSmall { .. })
    ));
    assert_eq!(
        h.stage_removal(node(9), 25, node(7)),
        Err(LayoutError::NoRole(node(7).short()))
    );
    assert!(matches!(
        h.stage_parameters(
            node(9),
            25,
            LayoutParameters {
                zone_redundancy: ZoneRedundancy::AtLeast(4)
            }
        ),
        Err(LayoutError::RedundancyAboveRf { asked: 4, rf: 3 })
    ));
    // Removing a node and asking for two zones.
    h.stage_removal(node(9), 26, node(5)).unwrap();
    h.stage_parameters(
        node(9),
        26,
        LayoutParameters {
            zone_redundancy: ZoneRedundancy::AtLeast(2),
        },
    )
    .unwrap();
    h.apply(2, node(9), 27).unwrap();
    assert!(!h.current().roles.contains_key(&node(5)));
    assert_eq!(
        h.current().parameters.zone_redundancy,
        ZoneRedundancy::AtLeast(2)
    );
}

#[test]
fn concurrent_assigns_on_two_nodes_both_survive() {
    let mut a = base();
    let mut b = a.clone();
    a.stage_role(node(1), 2000, node(5), NodeRole::storage("b", TB))
        .unwrap();
    b.stage_role(node(2), 2000, node(6), NodeRole::storage("c", TB))
        .unwrap();
    let ab = joined(&a, &b);
    assert_eq!(ab, joined(&b, &a));
    let roles = ab.staged_roles();
    assert!(roles.contains_key(&node(5)) && roles.contains_key(&node(6)));
    // The same node assigned on both: the later write wins on both sides.
    a.stage_role(node(1), 3000, node(7), NodeRole::storage("a", TB))
        .unwrap();
    b.stage_role(node(2), 3001, node(7), NodeRole::storage("b", 2 * TB))
        .unwrap();
    assert_eq!(joined(&a, &b).staged_roles()[&node(7)].zone, "b");
    assert_eq!(joined(&b, &a).staged_roles()[&node(7)].zone, "b");
    // A revert clears what it saw; a change staged after it survives.
    let mut c = joined(&a, &b);
    c.revert(node(3), 4000);
    b.stage_role(node(2), 4001, node(8), NodeRole::gateway("a"))
        .unwrap();
    let cb = joined(&c, &b);
    assert_eq!(
        cb.staging.roles.keys().copied().collect::<Vec<_>>(),
        vec![node(8)]
    );
}

#[test]
fn the_same_version_applied_twice_is_detected_and_settled() {
    let mut a = base();
    let mut b = a.clone();
    a.stage_role(node(1), 2000, node(5), NodeRole::storage("b", TB))
        .unwrap();
    b.stage_role(node(2), 2000, node(6), NodeRole::storage("c", TB))
        .unwrap();
    a.apply(2, node(1), 2001).unwrap();
    b.apply(2, node(2), 2001).unwrap();
    let (ha, hb) = (a.current().content_hash(), b.current().content_hash());
    assert_ne!(ha, hb);
    // Each node acknowledged and synced its own version 2.
    a.ack_version(node(1), 2);
    b.ack_version(node(2), 2);
    // The side whose content will lose saw every node sync it.
    let losing_side = if ha < hb { &mut a } else { &mut b };
    for n in 1..=6 {
        losing_side.ack_version(node(n), 2);
    }
    for n in 1..=6 {
        assert!(losing_side.mark_synced(node(n), 2));
    }
    assert_eq!(losing_side.read_version().version, 2);
    let ab = joined(&a, &b);
    let ba = joined(&b, &a);
    assert_eq!(ab, ba, "both sides settle on the same content");
    assert_eq!(ab.current().content_hash(), ha.max(hb));
    assert_eq!(ab.conflicts[&2], [ha, hb].into_iter().collect());
    // Reports made for the losing content count only for version 1: with
    // every other node acknowledging the kept version 2, the loser's old
    // acknowledgement holds the minimum at 1 until it acknowledges again.
    let loser = if ha < hb { node(1) } else { node(2) };
    let mut settled = ab.clone();
    for n in settled.all_nodes() {
        if n != loser {
            settled.ack_version(n, 2);
        }
    }
    assert_eq!(settled.min_ack(), 1);
    assert!(!settled.sync_may_start(2));
    assert!(settled.ack_version(loser, 2));
    assert_eq!(settled.min_ack(), 2);
    // Syncs reported for the losing content do not move reads either.
    assert_eq!(ab.read_version().version, 1);
    // And the conflict survives further merges.
    let mut c = LayoutHistory::new(3);
    c.merge(&ab).unwrap();
    assert_eq!(c.conflicts.len(), 1);
}

#[test]
fn transitions_write_to_every_active_version_and_read_the_synced_one() {
    let mut h = base();
    h.prune();
    let v1 = h.current().clone();
    h.stage_role(node(1), 2000, node(5), NodeRole::storage("b", TB))
        .unwrap();
    h.stage_role(node(1), 2000, node(6), NodeRole::gateway("c"))
        .unwrap();
    let report = h.apply(2, node(1), 2001).unwrap();
    let v2 = h.current().clone();
    assert!(report.moves > 0);
    let key = Hash::of(b"some object");
    // Writes go to both versions, reads stay on version 1.
    let sets = |h: &LayoutHistory| -> Vec<Vec<NodeId>> {
        h.write_sets_of_partition(partition_of(&key))
            .into_iter()
            .map(|s| s.nodes)
            .collect()
    };
    assert_eq!(
        sets(&h),
        vec![v1.nodes_of_hash(&key), v2.nodes_of_hash(&key)]
    );
    assert_eq!(
        h.read_nodes_of_partition(partition_of(&key)),
        v1.nodes_of_hash(&key)
    );
    let mut union = v1.nodes_of_hash(&key);
    union.extend(v2.nodes_of_hash(&key));
    union.sort();
    union.dedup();
    assert_eq!(h.write_nodes_of_partition(partition_of(&key)), union);
    // The same sets, each with the version it comes from; every partition
    // has one set per active version, rf nodes each.
    let p = partition_of(&key);
    assert_eq!(
        h.write_sets_of_partition(p),
        vec![
            WriteSet {
                version: 1,
                nodes: v1.nodes_of_hash(&key)
            },
            WriteSet {
                version: 2,
                nodes: v2.nodes_of_hash(&key)
            },
        ]
    );
    assert_eq!(h.write_nodes_of_partition(p), union);
    for p in 0..PARTITION_COUNT {
        let sets = h.write_sets_of_partition(p as Partition);
        assert_eq!(sets.iter().map(|s| s.version).collect::<Vec<_>>(), [1, 2]);
        assert!(sets.iter().all(|s| s.nodes.len() == 3));
    }
    // Sync may start once every node (gateway included) acknowledged 2.
    assert!(!h.mark_synced(node(1), 2));
    for n in 1..=5 {
        h.ack_version(node(n), 2);
    }
    assert!(!h.sync_may_start(2));
    h.ack_version(node(6), 2);
    assert!(h.sync_may_start(2));
    // Reads move when every storage node has synced.
    for n in 1..=4 {
        h.mark_synced(node(n), 2);
    }
    assert_eq!(h.read_version().version, 1);
    let statuses: Vec<_> = h.history().iter().map(|s| (s.version, s.status)).collect();
    assert_eq!(statuses, vec![(1, "read"), (2, "current")]);
    h.mark_synced(node(5), 2);
    assert_eq!(h.read_version().version, 2);
    assert!(!h.prune(), "version 1 is kept until everyone reads from 2");
    let statuses: Vec<_> = h.history().iter().map(|s| (s.version, s.status)).collect();
    assert_eq!(statuses, vec![(1, "draining"), (2, "current")]);
    let described = h.describe_current().unwrap();
    assert_eq!(described.moves, report.moves);
    assert_eq!(described.nodes.len(), 5);
    for n in 1..=6 {
        assert!(h.ack_sync(node(n), 2));
    }
    assert!(h.prune());
    assert_eq!(h.versions.len(), 1);
    assert_eq!(
        h.write_sets_of_partition(partition_of(&key))
            .into_iter()
            .map(|s| s.nodes)
            .collect::<Vec<_>>(),
        vec![v2.nodes_of_hash(&key)]
    );
    assert_eq!(
        h.write_sets_of_partition(p),
        vec![WriteSet {
            version: 2,
            nodes: v2.nodes_of_hash(&key)
        }]
    );
    // Reports for versions that are not kept are ignored.
    assert!(!h.mark_synced(node(1), 9));

    // A node removed while dead would hold version 2 back forever; the
    // operator skips it.
    h.stage_removal(node(1), 3000, node(4)).unwrap();
    h.apply(3, node(1), 3001).unwrap();
    for n in [1, 2, 3, 5, 6] {
        h.ack_version(node(n), 3);
    }
    assert!(
        !h.sync_may_start(3),
        "node 4 is dead and never acknowledges"
    );
    assert!(h.skip_dead_nodes(9, &[node(4)], false).is_err());
    assert_eq!(h.skip_dead_nodes(3, &[node(4)], false).unwrap(), 1);
    assert!(h.sync_may_start(3));
    for n in [1, 2, 3, 5] {
        assert!(h.mark_synced(node(n), 3));
    }
    assert_eq!(
        h.read_version().version,
        3,
        "node 4 holds nothing in version 3"
    );
    for n in [1, 2, 3, 5, 6] {
        assert!(h.ack_sync(node(n), 3));
    }
    assert!(!h.prune(), "node 4 never said it stopped reading version 2");
    assert_eq!(h.skip_dead_nodes(3, &[node(4)], false).unwrap(), 1);
    assert!(h.prune());
    assert_eq!(h.versions.len(), 1);

    // A dead node that the new version gives data to: reads move only if
    // the operator accepts that its data is missing.
    h.stage_role(node(1), 4000, node(7), NodeRole::storage("c", TB))
        .unwrap();
    h.apply(4, node(1), 4001).unwrap();
    for n in [1, 2, 3, 5, 6] {
        h.ack_version(node(n), 4);
    }
    h.skip_dead_nodes(4, &[node(7)], false).unwrap();
    for n in [1, 2, 3, 5] {
        assert!(h.mark_synced(node(n), 4));
    }
    assert_eq!(h.read_version().version, 3);
    h.skip_dead_nodes(4, &[node(7)], true).unwrap();
    assert_eq!(h.read_version().version, 4);
}

#[test]
fn encoding_round_trips_and_is_checked() {
    let mut h = base();
    h.stage_role(node(1), 2000, node(5), NodeRole::storage("b", TB))
        .unwrap();
    h.stage_parameters(
        node(1),
        2000,
        LayoutParameters {
            zone_redundancy: ZoneRedundancy::AtLeast(2),
        },
    )
    .unwrap();
    h.ack_version(node(1), 1);
    let bytes = h.encode();
    assert_eq!(LayoutHistory::decode(&bytes).unwrap(), h);
    // JSON works too (for `--json`).
    let js = serde_json::to_string(&h).unwrap();
    assert_eq!(serde_json::from_str::<LayoutHistory>(&js).unwrap(), h);
    assert!(LayoutHistory::decode(b"\x93garbage").is_err());
    let mut gap = h.clone();
    gap.versions[1].version = 7;
    assert!(matches!(
        LayoutHistory::decode(&gap.encode()),
        Err(LayoutError::Encoding(_))
    ));
    let mut short = h.clone();
    short.versions[1].assignment.pop();
    assert!(LayoutHistory::decode(&short.encode()).is_err());
    // A history of another replication factor is refused, and nothing changes.
    let mut other = LayoutHistory::new(2);
    assert_eq!(
        other.merge(&h),
        Err(LayoutError::ReplicationFactorMismatch { ours: 2, theirs: 3 })
    );
    assert_eq!(other, LayoutHistory::new(2));
    assert!(
        h.check_replication_factor(2)
            .unwrap_err()
            .to_string()
            .contains("cannot join")
    );
}

/// One random operation by replica `me` at time `t`.
fn random_op(rng: &mut StdRng, h: &mut LayoutHistory, me: NodeId, t: u64) {
    let target = node(rng.random_range(1..=8));
    let _ = match rng.random_range(0..10) {
        0..=2 => {
            let zone = ["a", "b", "c"][rng.random_range(0..3)];
            let role = if rng.random_bool(0.2) {
                NodeRole::gateway(zone)
            } else {
                NodeRole::storage(zone, rng.random_range(1..=4) * TB)
            };
            h.stage_role(me, t, target, role).map(|_| ())
        }
        3 => h.stage_removal(me, t, target),
        4 => {
            let zone_redundancy = if rng.random_bool(0.5) {
                ZoneRedundancy::Maximum
            } else {
                ZoneRedundancy::AtLeast(rng.random_range(1..=3))
            };
            h.stage_parameters(me, t, LayoutParameters { zone_redundancy })
        }
        5 => {
            h.revert(me, t);
            Ok(())
        }
        6 => {
            let v = h.current().version + 1;
            h.apply(v, me, t).map(|_| ())
        }
        7 => {
            let v = h.versions[rng.random_range(0..h.versions.len())].version;
            match rng.random_range(0..3) {
                0 => h.ack_version(target, v),
                1 => h.mark_synced(target, v),
                _ => h.ack_sync(target, v),
            };
            Ok(())
        }
        _ => {
            h.prune();
            Ok(())
        }
    };
}

#[test]
fn merge_is_commutative_associative_idempotent_and_converges() {
    let (mut applied, mut conflicted) = (0, 0);
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut replicas = vec![base(), base(), base()];
        let mut seen: Vec<LayoutHistory> = Vec::new();
        for step in 0..30u64 {
            let i = rng.random_range(0..replicas.len());
            if rng.random_bool(0.25) {
                let j = rng.random_range(0..replicas.len());
                let other = replicas[j].clone();
                replicas[i].merge(&other).unwrap();
            } else {
                // Clocks are close but not equal between replicas.
                let t = 10_000 + step * 10 + rng.random_range(0..15);
                random_op(&mut rng, &mut replicas[i], node(i as u8 + 1), t);
            }
            replicas[i].check().unwrap();
            if step % 3 == 0 {
                seen.push(replicas[i].clone());
            }
        }
        seen.extend(replicas.iter().cloned());
        for _ in 0..20 {
            let x = &seen[rng.random_range(0..seen.len())];
            let y = &seen[rng.random_range(0..seen.len())];
            let z = &seen[rng.random_range(0..seen.len())];
            assert_eq!(joined(x, y), joined(y, x), "seed {seed}: commutativity");
            assert_eq!(
                joined(&joined(x, y), z),
                joined(x, &joined(y, z)),
                "seed {seed}: associativity"
            );
            assert_eq!(joined(x, x), *x, "seed {seed}: idempotence");
            let xy = joined(x, y);
            assert_eq!(joined(&xy, y), xy, "seed {seed}: absorbs");
        }
        // Gossip until everyone has everything: all replicas are equal.
        for _ in 0..2 {
            for i in 0..replicas.len() {
                for j in 0..replicas.len() {
                    let other = replicas[j].clone();
                    replicas[i].merge(&other).unwrap();
                }
            }
        }
        assert!(
            replicas.windows(2).all(|w| w[0] == w[1]),
            "seed {seed}: no convergence"
        );
        for r in &replicas {
            r.check().unwrap();
        }
        applied += usize::from(replicas[0].current().version > 1);
        conflicted += usize::from(!replicas[0].conflicts.is_empty());
        let mut same = replicas[0].clone();
        assert!(
            !same.merge(&replicas[1]).unwrap(),
            "merging an equal state changes nothing"
        );
    }
    // The random operations did exercise applies and version conflicts.
    assert!(
        applied >= 10 && conflicted >= 3,
        "applied {applied}, conflicted {conflicted}"
    );
}

#[test]
fn an_unassigned_layout_has_no_write_sets() {
    let h = LayoutHistory::new(3);
    let key = Hash::of(b"anything");
    assert!(h.write_sets_of_partition(partition_of(&key)).is_empty());
    assert!(h.write_nodes_of_partition(partition_of(&key)).is_empty());
    assert!(h.write_nodes_of_partition(partition_of(&key)).is_empty());
}

/// A history whose oldest kept version is above its retirement bound (a
/// crafted push from a peer, or a damaged file) used to pass `check`:
/// merged into a node's own history it left a gap in the versions, which
/// the node wrote to its layout file and then refused at its next start
/// ("layout versions are not consecutive"). Every history a node makes
/// starts at its bound, so a decoder refuses any other.
#[test]
fn a_history_starts_at_its_retirement_bound() {
    let mut h = base();
    h.stage_role(node(1), 2000, node(5), NodeRole::storage("b", TB))
        .unwrap();
    h.apply(2, node(1), 2001).unwrap();
    // Every node moves to version 2, syncs, and stops reading version 1.
    for i in 1..=5 {
        h.ack_version(node(i), 2);
    }
    for i in 1..=5 {
        h.mark_synced(node(i), 2);
    }
    for i in 1..=5 {
        h.ack_sync(node(i), 2);
    }
    assert!(h.prune());
    assert_eq!(h.versions[0].version, 2);
    assert_eq!(h.retired_below, 2);
    LayoutHistory::decode(&h.encode()).expect("what a node makes is valid");

    let mut crafted = h.clone();
    crafted.retired_below = 0;
    assert!(
        LayoutHistory::decode(&crafted.encode()).is_err(),
        "a history whose first version is not its bound"
    );
    // What a fresh node made of it when it was let through: versions 0
    // and 2, a history its own file could not hold.
    let mut fresh = LayoutHistory::new(3);
    fresh.merge(&crafted).unwrap();
    let numbers: Vec<u64> = fresh.versions.iter().map(|v| v.version).collect();
    assert_eq!(numbers, [0, 2]);
    assert!(LayoutHistory::decode(&fresh.encode()).is_err());
}
