//! The assignment algorithm: from roles and parameters (and the previous
//! version), choose `replication_factor` storage nodes for every partition.
//!
//! The objective, in priority order (doc/layout.md gives the proofs):
//! 1. hard constraints: each partition gets `rf` distinct storage nodes in at
//!    least `zone_redundancy` distinct zones;
//! 2. the largest partition size `s` (bytes per partition replica) such that
//!    no node holds more than `capacity / s` partitions: this maximizes the
//!    usable capacity `s × 256 × rf`, as Garage does;
//! 3. the most even fill: node `n` may hold up to `u_n = min(256, capacity_n / s)`
//!    partitions, and the k-th of them costs more the fuller the node is
//!    (convex tiers), so nodes fill in proportion to `u_n`, i.e. to capacity;
//! 4. the fewest partition replicas moved from the previous version.
//!
//! Steps 2–4 are flows on one network (source → partitions → partition ×
//! zone → nodes → sink): a binary search on `s` with maximum flows, then one
//! minimum-cost flow whose costs encode 3 and 4 lexicographically.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::error::LayoutError;
use crate::flow::FlowGraph;
use crate::node::NodeId;
use crate::role::{LayoutParameters, NodeRole};
use crate::version::{LayoutVersion, PARTITION_COUNT};

/// The smallest capacity a storage node may have: with at least this many
/// bytes every node can hold every partition at partition size 1, so any
/// cluster that passes the node and zone count checks has an assignment.
pub const MIN_CAPACITY: u64 = PARTITION_COUNT as u64;

/// Fill tiers per node (step 3): the fill fractions of nodes competing for
/// the same partitions end up within `1/TIERS` of each other.
const TIERS: usize = 8;

/// What an assignment gives each storage node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    pub id: NodeId,
    pub zone: String,
    pub capacity: u64,
    /// Partitions this node holds.
    pub partitions: usize,
    /// The most it could hold at this partition size: `min(256, capacity / partition_size)`.
    pub max_partitions: usize,
    /// `partitions × partition_size`.
    pub usable: u64,
}

/// What an assignment gives each zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneUsage {
    pub zone: String,
    pub nodes: usize,
    pub capacity: u64,
    pub partitions: usize,
    pub usable: u64,
}

/// A summary of an assignment, for `layout show` and `layout apply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentReport {
    pub version: u64,
    pub partition_size: u64,
    /// The number of distinct zones each partition spans at least.
    pub zone_redundancy: usize,
    /// Partition replicas placed on a node that did not hold them before.
    pub moves: usize,
    pub total_capacity: u64,
    /// `partition_size × 256 × replication_factor`.
    pub usable_capacity: u64,
    pub nodes: Vec<NodeUsage>,
    pub zones: Vec<ZoneUsage>,
}

/// Computes version `version` from `roles` and `parameters`, moving as few
/// replicas as possible away from `prev`'s assignment.
pub fn compute_assignment(
    prev: &LayoutVersion,
    version: u64,
    roles: BTreeMap<NodeId, NodeRole>,
    parameters: LayoutParameters,
) -> Result<(LayoutVersion, AssignmentReport), LayoutError> {
    let rf = prev.replication_factor;
    let problem = Problem::new(prev, &roles, parameters)?;
    let need = (PARTITION_COUNT * rf) as i64;

    // Step 2: the largest feasible partition size. Feasibility only gets
    // harder as `s` grows (every bound shrinks), so binary search works.
    // The bounds only change where `capacity_n / s` crosses an integer, so
    // the search runs over those points: `capacity_n / k` for k in 1..=256.
    let mut candidates: Vec<u64> = problem
        .caps
        .iter()
        .flat_map(|&c| (1..=PARTITION_COUNT as u64).map(move |k| c / k))
        .chain([1])
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    // candidates[0] = 1 is feasible by the checks in `Problem::new`; find
    // the last feasible one.
    let (mut lo, mut hi) = (0usize, candidates.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if problem.feasible(candidates[mid]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let size = candidates[lo];
    let upper = problem.upper_bounds(size);

    // Steps 3 and 4: one minimum-cost flow.
    let (mut graph, replica_edges) = problem.graph(&upper, true);
    let got = graph.min_cost_flow(SOURCE, SINK, need);
    if got != need {
        return Err(LayoutError::Infeasible {
            got: got as u64,
            need: need as u64,
        });
    }
    let mut per_partition: Vec<Vec<u16>> = vec![Vec::new(); PARTITION_COUNT];
    for (e, p, n) in replica_edges {
        if graph.flow(e) > 0 {
            per_partition[p].push(n as u16);
        }
    }
    let mut assignment = Vec::with_capacity(PARTITION_COUNT * rf);
    for mut nodes in per_partition {
        nodes.sort_unstable();
        assignment.extend(nodes);
    }
    let next = LayoutVersion {
        version,
        replication_factor: rf,
        parameters,
        roles,
        node_ids: problem.ids.clone(),
        partition_size: size,
        assignment,
    };
    next.check()?;
    let report = report(&next, prev, &problem, &upper);
    debug!(
        version,
        partition_size = size,
        moves = report.moves,
        "layout assignment computed"
    );
    Ok((next, report))
}

/// Describes an existing version (moves counted from `prev`).
pub fn describe(version: &LayoutVersion, prev: &LayoutVersion) -> Option<AssignmentReport> {
    if !version.is_assigned() {
        return None;
    }
    let problem = Problem::new(prev, &version.roles, version.parameters).ok()?;
    let upper = problem.upper_bounds(version.partition_size);
    Some(report(version, prev, &problem, &upper))
}

fn report(
    next: &LayoutVersion,
    prev: &LayoutVersion,
    problem: &Problem,
    upper: &[i64],
) -> AssignmentReport {
    let counts = next.partition_counts();
    let nodes: Vec<NodeUsage> = problem
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let partitions = counts.get(id).copied().unwrap_or(0);
            NodeUsage {
                id: *id,
                zone: problem.zones[problem.zone_of[i]].clone(),
                capacity: problem.caps[i],
                partitions,
                max_partitions: upper[i] as usize,
                usable: partitions as u64 * next.partition_size,
            }
        })
        .collect();
    let zones = problem
        .zones
        .iter()
        .map(|z| {
            let here = nodes.iter().filter(|n| &n.zone == z);
            ZoneUsage {
                zone: z.clone(),
                nodes: here.clone().count(),
                capacity: here.clone().map(|n| n.capacity).sum(),
                partitions: here.clone().map(|n| n.partitions).sum(),
                usable: here.map(|n| n.usable).sum(),
            }
        })
        .collect();
    AssignmentReport {
        version: next.version,
        partition_size: next.partition_size,
        zone_redundancy: problem.zr,
        moves: next.moves_from(prev),
        total_capacity: problem.caps.iter().sum(),
        usable_capacity: next.partition_size * (PARTITION_COUNT * next.replication_factor) as u64,
        nodes,
        zones,
    }
}

const SOURCE: usize = 0;
const SINK: usize = 1;

/// The validated input of the algorithm, with nodes and zones numbered.
struct Problem {
    rf: usize,
    /// Required distinct zones per partition.
    zr: usize,
    ids: Vec<NodeId>,
    caps: Vec<u64>,
    zone_of: Vec<usize>,
    zones: Vec<String>,
    /// (partition, node index) pairs of the previous assignment.
    prev: BTreeSet<(usize, usize)>,
    /// Whether each node held any partition in the previous assignment.
    held: Vec<bool>,
}

impl Problem {
    fn new(
        prev: &LayoutVersion,
        roles: &BTreeMap<NodeId, NodeRole>,
        parameters: LayoutParameters,
    ) -> Result<Problem, LayoutError> {
        let rf = prev.replication_factor;
        if rf == 0 {
            return Err(LayoutError::ZeroReplicationFactor);
        }
        for (id, role) in roles {
            if role.zone.trim().is_empty() {
                return Err(LayoutError::EmptyZone { node: id.short() });
            }
            if let Some(c) = role.capacity
                && c < MIN_CAPACITY
            {
                return Err(LayoutError::CapacityTooSmall {
                    node: id.short(),
                    capacity: c,
                    min: MIN_CAPACITY,
                });
            }
        }
        let storage: Vec<(NodeId, &str, u64)> = roles
            .iter()
            .filter_map(|(id, r)| r.capacity.map(|c| (*id, r.zone.as_str(), c)))
            .collect();
        if let crate::role::ZoneRedundancy::AtLeast(n) = parameters.zone_redundancy {
            if n == 0 {
                return Err(LayoutError::ZeroRedundancy);
            }
            if n > rf {
                return Err(LayoutError::RedundancyAboveRf { asked: n, rf });
            }
        }
        if storage.len() < rf {
            return Err(LayoutError::NotEnoughNodes {
                rf,
                have: storage.len(),
                nodes: storage.iter().map(|(id, _, _)| id.short()).collect(),
            });
        }
        let zones: Vec<String> = storage
            .iter()
            .map(|(_, z, _)| z.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let zr = parameters.zone_redundancy.required(rf, zones.len());
        if zr > zones.len() {
            return Err(LayoutError::NotEnoughZones {
                asked: zr,
                have: zones.len(),
                zones,
            });
        }
        let ids: Vec<NodeId> = storage.iter().map(|s| s.0).collect();
        let index: BTreeMap<NodeId, usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut old = BTreeSet::new();
        if prev.is_assigned() {
            for p in 0..PARTITION_COUNT {
                for n in prev.nodes_of_partition(p as u8) {
                    if let Some(&i) = index.get(&n) {
                        old.insert((p, i));
                    }
                }
            }
        }
        Ok(Problem {
            rf,
            zr,
            zone_of: storage
                .iter()
                .map(|(_, z, _)| zones.iter().position(|x| x == z).expect("zone listed"))
                .collect(),
            caps: storage.iter().map(|s| s.2).collect(),
            held: (0..ids.len())
                .map(|i| old.iter().any(|&(_, n)| n == i))
                .collect(),
            ids,
            zones,
            prev: old,
        })
    }

    /// `u_n = min(256, capacity_n / s)` for each node.
    fn upper_bounds(&self, size: u64) -> Vec<i64> {
        self.caps
            .iter()
            .map(|&c| (c / size.max(1)).min(PARTITION_COUNT as u64) as i64)
            .collect()
    }

    fn feasible(&self, size: u64) -> bool {
        let upper = self.upper_bounds(size);
        let need = (PARTITION_COUNT * self.rf) as i64;
        if upper.iter().sum::<i64>() < need {
            return false;
        }
        let (mut g, _) = self.graph(&upper, false);
        g.max_flow(SOURCE, SINK) == need
    }

    /// The flow network. Vertices: source, sink, then per partition an
    /// "up" vertex (the `zr` replicas that must be in distinct zones) and a
    /// "down" vertex (the other `rf - zr`), then one vertex per (partition,
    /// zone), then one per node. Returns the graph and, for every
    /// (partition, zone) → node edge, (edge, partition, node).
    fn graph(&self, upper: &[i64], costs: bool) -> (FlowGraph, Vec<(usize, usize, usize)>) {
        let (p_count, z_count, n_count) = (PARTITION_COUNT, self.zones.len(), self.ids.len());
        let up = |p: usize| 2 + p;
        let down = |p: usize| 2 + p_count + p;
        let pz = |p: usize, z: usize| 2 + 2 * p_count + p * z_count + z;
        let node = |n: usize| 2 + 2 * p_count + p_count * z_count + n;
        let mut g = FlowGraph::new(2 + 2 * p_count + p_count * z_count + n_count);
        let (rf, zr) = (self.rf as i64, self.zr as i64);
        // One move costs more than all the tie-breakers together (at most
        // one per replica), so fewer moves always win.
        let move_cost = (p_count as i64) * rf + 1;
        let mut by_zone: Vec<Vec<usize>> = vec![Vec::new(); z_count];
        for (n, &z) in self.zone_of.iter().enumerate() {
            by_zone[z].push(n);
        }
        let mut replica_edges = Vec::with_capacity(p_count * n_count);
        for p in 0..p_count {
            g.add_edge(SOURCE, up(p), zr, 0);
            if rf > zr {
                g.add_edge(SOURCE, down(p), rf - zr, 0);
            }
            for (z, members) in by_zone.iter().enumerate() {
                // One unit per zone from "up": the zr units land in zr zones.
                g.add_edge(up(p), pz(p, z), 1, 0);
                if rf > zr {
                    g.add_edge(down(p), pz(p, z), rf - zr, 0);
                }
                for &n in members {
                    let moved = match (costs, self.prev.contains(&(p, n))) {
                        (false, _) | (true, true) => 0,
                        // Among equally few moves, prefer moving replicas
                        // onto nodes that held nothing before: a node that
                        // joins takes the data, the others only give.
                        (true, false) if self.held[n] => move_cost + 1,
                        (true, false) => move_cost,
                    };
                    let e = g.add_edge(pz(p, z), node(n), 1, moved);
                    replica_edges.push((e, p, n));
                }
            }
        }
        // Any difference in fill cost outweighs every possible move cost.
        let big = (p_count as i64) * rf * (move_cost + 1) + 1;
        for (n, &u) in upper.iter().enumerate() {
            if !costs {
                if u > 0 {
                    g.add_edge(node(n), SINK, u, 0);
                }
                continue;
            }
            for (tier, count) in fill_tiers(u).into_iter().enumerate() {
                if count > 0 {
                    g.add_edge(node(n), SINK, count, big * tier as i64);
                }
            }
        }
        (g, replica_edges)
    }
}

/// How many of a node's `u` slots fall in each fill tier: slot `k < u`
/// is in tier `ceil(k × TIERS / u)` (1..=TIERS), the last slot `k = u`
/// alone in tier `TIERS + 1`. Tier `t` costs `t` times a big constant, so
/// the cost of a node's fill is convex in its fill fraction.
fn fill_tiers(u: i64) -> Vec<i64> {
    let mut tiers = vec![0i64; TIERS + 2];
    if u <= 0 {
        return tiers;
    }
    for k in 1..u {
        tiers[((k * TIERS as i64) as u64).div_ceil(u as u64) as usize] += 1;
    }
    tiers[TIERS + 1] += 1;
    tiers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_cover_every_slot_in_order() {
        for u in 0..=256 {
            let t = fill_tiers(u);
            assert_eq!(t.iter().sum::<i64>(), u);
            assert_eq!(t[0], 0);
        }
        assert_eq!(fill_tiers(1), vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    }

    /// A tiny deterministic generator, so this test needs no dependency.
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn partition_size_is_the_largest_feasible() {
        for seed in 0..25u64 {
            let mut st = seed;
            let rf = 1 + (lcg(&mut st) % 3) as usize;
            let zones = 1 + lcg(&mut st) % 4;
            let mut roles = BTreeMap::new();
            for i in 0..(rf as u64 + lcg(&mut st) % 6) {
                let mut id = [0u8; 32];
                id[..8].copy_from_slice(&lcg(&mut st).to_be_bytes());
                let zone = format!("z{}", if i < zones { i } else { lcg(&mut st) % zones });
                roles.insert(
                    NodeId(id),
                    NodeRole::storage(zone, (1 + lcg(&mut st) % 50) * 1_000_000_000),
                );
            }
            let prev = LayoutVersion::initial(rf);
            let params = LayoutParameters::default();
            let Ok((v, _)) = compute_assignment(&prev, 1, roles.clone(), params) else {
                continue;
            };
            let problem = Problem::new(&prev, &roles, params).unwrap();
            assert!(problem.feasible(v.partition_size), "seed {seed}");
            // The next size at which any bound changes is infeasible.
            let next = problem
                .caps
                .iter()
                .flat_map(|&c| (1..=256u64).map(move |k| c / k))
                .filter(|&s| s > v.partition_size)
                .min();
            if let Some(next) = next {
                assert!(!problem.feasible(next), "seed {seed}: {next} also fits");
            }
        }
    }
}
