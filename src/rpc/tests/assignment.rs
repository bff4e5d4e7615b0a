//! Property tests of the assignment algorithm on random clusters (seeded
//! loops: every run checks the same cases, a failure names its seed).

use std::collections::{BTreeMap, BTreeSet};

use hangar_rpc::*;
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
