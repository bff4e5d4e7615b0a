//! Property tests of the assignment algorithm on random clusters (seeded
//! loops: every run checks the same cases, a failure names its seed).

use std::collections::{BTreeMap, BTreeSet};

use hangar_layout::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GB: u64 = 1_000_000_000;

fn id(rng: &mut StdRng) -> NodeId {
    NodeId(rng.random())
}

/// A random cluster: 1–4 zones, `rf`..=rf+8 storage nodes, 0–2 gateways,
/// capacities 100 GB–2 TB.
fn random_roles(rng: &mut StdRng, rf: usize) -> BTreeMap<NodeId, NodeRole> {
    let zones = rng.random_range(1..=4);
    let n = rng.random_range(rf..=rf + 8);
    let mut roles = BTreeMap::new();
    for i in 0..n {
        // The first nodes cover every zone, so the zone count is exact.
        let z = if i < zones {
            i
        } else {
            rng.random_range(0..zones)
        };
        roles.insert(
            id(rng),
            NodeRole::storage(format!("z{z}"), rng.random_range(1..=20) * 100 * GB),
        );
    }
    for _ in 0..rng.random_range(0..=2) {
        roles.insert(
            id(rng),
            NodeRole::gateway(format!("z{}", rng.random_range(0..zones))),
        );
    }
    roles
}

fn random_params(rng: &mut StdRng, rf: usize) -> LayoutParameters {
    LayoutParameters {
        zone_redundancy: if rng.random_bool(0.5) {
            ZoneRedundancy::Maximum
        } else {
            ZoneRedundancy::AtLeast(rng.random_range(1..=rf))
        },
    }
}

fn zone_count(roles: &BTreeMap<NodeId, NodeRole>) -> usize {
    roles
        .values()
        .filter(|r| !r.is_gateway())
        .map(|r| r.zone.clone())
        .collect::<BTreeSet<_>>()
        .len()
}

/// The hard constraints and the capacity bounds every assignment must meet.
fn check_valid(v: &LayoutVersion, report: &AssignmentReport, seed: u64) {
    let rf = v.replication_factor;
    let zr = v
        .parameters
        .zone_redundancy
        .required(rf, zone_count(&v.roles));
    assert_eq!(report.zone_redundancy, zr, "seed {seed}");
    v.check().unwrap();
    for p in 0..PARTITION_COUNT {
        let nodes = v.nodes_of_partition(p as u8);
        assert_eq!(nodes.len(), rf, "seed {seed} partition {p}");
        let distinct: BTreeSet<_> = nodes.iter().collect();
        assert_eq!(
            distinct.len(),
            rf,
            "seed {seed}: repeated node in partition {p}"
        );
        let zones: BTreeSet<_> = nodes.iter().map(|n| &v.roles[n].zone).collect();
        assert!(
            zones.len() >= zr,
            "seed {seed}: partition {p} in {} zones < {zr}",
            zones.len()
        );
        for n in &nodes {
            assert!(!v.roles[n].is_gateway(), "seed {seed}: gateway assigned");
        }
    }
    let counts = v.partition_counts();
    assert_eq!(counts.values().sum::<usize>(), PARTITION_COUNT * rf);
    for u in &report.nodes {
        let cap = v.roles[&u.id].capacity.unwrap();
        let max = (cap / v.partition_size).min(256) as usize;
        assert_eq!(u.max_partitions, max);
        assert_eq!(u.partitions, counts[&u.id]);
        assert!(u.partitions <= max, "seed {seed}: node over its capacity");
        assert!(u.usable <= cap);
    }
    assert_eq!(report.usable_capacity, v.partition_size * (256 * rf) as u64);
    assert!(report.usable_capacity <= report.total_capacity);
}

#[test]
fn random_clusters_meet_constraints_and_capacity() {
    let mut proportional_cases = 0;
    for seed in 0..60u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let rf = rng.random_range(1..=3);
        let roles = random_roles(&mut rng, rf);
        let params = random_params(&mut rng, rf);
        let zr = params.zone_redundancy.required(rf, zone_count(&roles));
        let prev = LayoutVersion::initial(rf);
        let res = compute_assignment(&prev, 1, roles.clone(), params);
        if zr > zone_count(&roles) {
            assert!(
                matches!(res, Err(LayoutError::NotEnoughZones { .. })),
                "seed {seed}"
            );
            continue;
        }
        let (v, report) = res.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The same cluster cut down to rf - 1 storage nodes is refused.
        let mut few = roles.clone();
        let storage: Vec<NodeId> = v.node_ids.clone();
        for n in &storage[rf - 1..] {
            few.remove(n);
        }
        match compute_assignment(&prev, 1, few, params) {
            Err(LayoutError::NotEnoughNodes { rf: r, have, .. }) => {
                assert_eq!((r, have), (rf, rf - 1), "seed {seed}")
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        check_valid(&v, &report, seed);
        assert_eq!(
            report.moves,
            PARTITION_COUNT * rf,
            "from nothing, every replica is new"
        );
        if zr == 1 {
            // No zone constraint: each node is within one partition of its
            // bound, and so within one of its share of usable capacity.
            proportional_cases += 1;
            for u in &report.nodes {
                assert!(
                    u.partitions + 1 >= u.max_partitions,
                    "seed {seed}: {} holds {} of at most {}",
                    u.id.short(),
                    u.partitions,
                    u.max_partitions
                );
            }
        }
    }
    assert!(proportional_cases >= 10);
}

/// Replicas a change must move at the least: every node that ends up with
/// more partitions than it kept has to receive the difference.
fn moves_lower_bound(prev: &LayoutVersion, next: &LayoutVersion) -> usize {
    let old = prev.replicas();
    next.partition_counts()
        .iter()
        .map(|(n, &c)| {
            let kept = old.iter().filter(|(_, m)| m == n).count();
            c.saturating_sub(kept)
        })
        .sum()
}

#[test]
fn unchanged_cluster_moves_nothing() {
    for seed in 100..130u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let rf = rng.random_range(1..=3);
        let roles = random_roles(&mut rng, rf);
        let params = LayoutParameters {
            zone_redundancy: ZoneRedundancy::AtLeast(1),
        };
        let (v1, _) =
            compute_assignment(&LayoutVersion::initial(rf), 1, roles.clone(), params).unwrap();
        let (v2, r2) = compute_assignment(&v1, 2, roles, params).unwrap();
        assert_eq!(r2.moves, 0, "seed {seed}");
        assert_eq!(v1.assignment, v2.assignment, "seed {seed}");
    }
}

#[test]
fn adding_a_node_only_moves_partitions_onto_it() {
    let (mut unconstrained, mut only_onto_new) = (0, 0);
    for seed in 200..240u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let rf = rng.random_range(1..=3);
        let mut roles = random_roles(&mut rng, rf);
        let params = random_params(&mut rng, rf);
        let Ok((v1, _)) = compute_assignment(&LayoutVersion::initial(rf), 1, roles.clone(), params)
        else {
            continue;
        };
        // The new node joins an existing zone, so the zone count is the same.
        let zone = roles
            .values()
            .find(|r| !r.is_gateway())
            .unwrap()
            .zone
            .clone();
        let new = id(&mut rng);
        roles.insert(
            new,
            NodeRole::storage(zone, rng.random_range(1..=20) * 100 * GB),
        );
        let (v2, r2) = compute_assignment(&v1, 2, roles, params).unwrap();
        check_valid(&v2, &r2, seed);
        assert!(r2.moves >= moves_lower_bound(&v1, &v2));
        if r2.zone_redundancy == 1 {
            // No detours: an old node receives a replica only when its own
            // count must grow (the partition size can grow with a new node,
            // raising an old node's bound), so moves meet the lower bound.
            assert_eq!(r2.moves, moves_lower_bound(&v1, &v2), "seed {seed}");
            let old = v1.replicas();
            if v2.replicas().difference(&old).all(|(_, n)| *n == new) {
                only_onto_new += 1;
            }
            unconstrained += 1;
        }
    }
    assert!(
        unconstrained >= 10 && only_onto_new * 4 >= unconstrained * 3,
        "{only_onto_new} of {unconstrained}"
    );
}

#[test]
fn random_changes_move_no_more_than_needed() {
    let mut exact = 0;
    let mut cases = 0;
    for seed in 300..350u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let rf = rng.random_range(1..=3);
        let mut roles = random_roles(&mut rng, rf);
        let params = random_params(&mut rng, rf);
        let Ok((v1, _)) = compute_assignment(&LayoutVersion::initial(rf), 1, roles.clone(), params)
        else {
            continue;
        };
        // One change: a capacity changes, a node leaves, or a node joins.
        let storage: Vec<NodeId> = v1.node_ids.clone();
        match rng.random_range(0..3) {
            0 => {
                let n = storage[rng.random_range(0..storage.len())];
                roles.get_mut(&n).unwrap().capacity = Some(rng.random_range(1..=20) * 100 * GB);
            }
            1 => {
                roles.remove(&storage[rng.random_range(0..storage.len())]);
            }
            _ => {
                let z = format!("z{}", rng.random_range(0..4));
                roles.insert(
                    id(&mut rng),
                    NodeRole::storage(z, rng.random_range(1..=20) * 100 * GB),
                );
            }
        }
        let Ok((v2, r2)) = compute_assignment(&v1, 2, roles, params) else {
            continue;
        };
        cases += 1;
        check_valid(&v2, &r2, seed);
        let bound = moves_lower_bound(&v1, &v2);
        assert!(r2.moves >= bound);
        if r2.moves == bound {
            exact += 1;
        }
    }
    // Most changes need no detour; some do, when a node that must gain
    // already holds most of the partitions the losers give up.
    assert!(
        cases >= 30 && exact >= cases / 2,
        "cases {cases}, exact {exact}"
    );
}

#[test]
fn impossible_layouts_say_what_is_wrong() {
    let mut rng = StdRng::seed_from_u64(7);
    let prev = LayoutVersion::initial(3);
    let max = LayoutParameters::default();
    let err = |roles: &BTreeMap<NodeId, NodeRole>, params| {
        compute_assignment(&prev, 1, roles.clone(), params).unwrap_err()
    };

    // Two storage nodes and a gateway cannot hold three copies.
    let mut roles = BTreeMap::new();
    roles.insert(id(&mut rng), NodeRole::storage("a", GB));
    roles.insert(id(&mut rng), NodeRole::storage("b", GB));
    roles.insert(id(&mut rng), NodeRole::gateway("c"));
    let e = err(&roles, max);
    assert!(
        matches!(e, LayoutError::NotEnoughNodes { rf: 3, have: 2, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("at least 3 storage nodes"), "{e}");

    // Three zones asked, two zones have storage (the third only a gateway).
    roles.insert(id(&mut rng), NodeRole::storage("a", GB));
    let three = LayoutParameters {
        zone_redundancy: ZoneRedundancy::AtLeast(3),
    };
    let e = err(&roles, three);
    assert!(
        matches!(
            e,
            LayoutError::NotEnoughZones {
                asked: 3,
                have: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("only 2 (a, b)"), "{e}");

    // All the capacity in one zone while two zones are asked.
    let mut one_zone = BTreeMap::new();
    for _ in 0..4 {
        one_zone.insert(id(&mut rng), NodeRole::storage("a", GB));
    }
    one_zone.insert(id(&mut rng), NodeRole::gateway("b"));
    let two = LayoutParameters {
        zone_redundancy: ZoneRedundancy::AtLeast(2),
    };
    let e = err(&one_zone, two);
    assert!(
        matches!(
            e,
            LayoutError::NotEnoughZones {
                asked: 2,
                have: 1,
                ..
            }
        ),
        "{e}"
    );
    // ... while `maximum` adapts to the one zone there is.
    let (v, r) = compute_assignment(&prev, 1, one_zone.clone(), max).unwrap();
    assert_eq!(r.zone_redundancy, 1);
    v.check().unwrap();

    // Redundancy above the replication factor.
    let four = LayoutParameters {
        zone_redundancy: ZoneRedundancy::AtLeast(4),
    };
    assert!(matches!(
        err(&one_zone, four),
        LayoutError::RedundancyAboveRf { asked: 4, rf: 3 }
    ));

    // A zero capacity.
    let zero = id(&mut rng);
    one_zone.insert(zero, NodeRole::storage("a", 0));
    let e = err(&one_zone, max);
    assert!(
        matches!(e, LayoutError::CapacityTooSmall { capacity: 0, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("gateway"), "{e}");

    // An empty zone name.
    one_zone.insert(zero, NodeRole::storage(" ", GB));
    assert!(matches!(err(&one_zone, max), LayoutError::EmptyZone { .. }));

    // An empty layout.
    let e = err(&BTreeMap::new(), max);
    assert!(
        matches!(e, LayoutError::NotEnoughNodes { have: 0, .. }),
        "{e}"
    );
}

#[test]
fn zone_redundancy_spreads_a_lopsided_cluster() {
    // Zone a has 10x the capacity of b and c; with three copies in three
    // zones each zone holds exactly one copy of every partition, so the
    // usable capacity is bounded by the small zones.
    let mut rng = StdRng::seed_from_u64(8);
    let mut roles = BTreeMap::new();
    roles.insert(id(&mut rng), NodeRole::storage("a", 5000 * GB));
    roles.insert(id(&mut rng), NodeRole::storage("a", 5000 * GB));
    roles.insert(id(&mut rng), NodeRole::storage("b", 1000 * GB));
    roles.insert(id(&mut rng), NodeRole::storage("c", 1000 * GB));
    let (v, r) = compute_assignment(
        &LayoutVersion::initial(3),
        1,
        roles,
        LayoutParameters::default(),
    )
    .unwrap();
    check_valid(&v, &r, 8);
    for z in &r.zones {
        assert_eq!(z.partitions, 256, "zone {}", z.zone);
    }
    // Within zone a, the two equal nodes share evenly (the fill tiers).
    let a: Vec<_> = r
        .nodes
        .iter()
        .filter(|n| n.zone == "a")
        .map(|n| n.partitions)
        .collect();
    assert!(a[0].abs_diff(a[1]) <= 256 / 8, "{a:?}");
    assert_eq!(r.partition_size, 1000 * GB / 256);
}
