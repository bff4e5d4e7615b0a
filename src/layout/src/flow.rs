//! A small flow network: maximum flow (Dinic) and minimum-cost flow
//! (primal-dual: Dijkstra with potentials, then a blocking flow on the
//! shortest-path edges). The layout algorithm is written on top of it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A directed graph with capacities and costs on its edges. Edge `e` and its
/// residual twin are `e` and `e ^ 1`.
pub(crate) struct FlowGraph {
    adj: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<i64>,
    cost: Vec<i64>,
}

const INF: i64 = i64::MAX / 4;

impl FlowGraph {
    pub fn new(vertices: usize) -> Self {
        FlowGraph {
            adj: vec![Vec::new(); vertices],
            to: Vec::new(),
            cap: Vec::new(),
            cost: Vec::new(),
        }
    }

    /// Adds `u -> v` and returns its index (for [`FlowGraph::flow`]).
    pub fn add_edge(&mut self, u: usize, v: usize, cap: i64, cost: i64) -> usize {
        let e = self.to.len();
        self.to.extend([v, u]);
        self.cap.extend([cap, 0]);
        self.cost.extend([cost, -cost]);
        self.adj[u].push(e);
        self.adj[v].push(e + 1);
        e
    }

    /// The flow currently on edge `e` (as returned by `add_edge`).
    pub fn flow(&self, e: usize) -> i64 {
        self.cap[e ^ 1]
    }

    /// Pushes as much flow from `s` to `t` as possible (costs ignored).
    pub fn max_flow(&mut self, s: usize, t: usize) -> i64 {
        self.blocking_flows(s, t, i64::MAX, &|_, _| true)
    }

    /// Pushes up to `need` units from `s` to `t` at minimum total cost and
    /// returns the flow pushed. Costs may be negative only if the graph has
    /// no cycle (true for the layout graph before any flow is pushed).
    pub fn min_cost_flow(&mut self, s: usize, t: usize, need: i64) -> i64 {
        let n = self.adj.len();
        let mut potential = self.initial_potentials(s);
        let mut pushed = 0;
        while pushed < need {
            // Shortest distances from `s` in reduced costs (all >= 0).
            let mut dist = vec![INF; n];
            let mut heap = BinaryHeap::new();
            dist[s] = 0;
            heap.push(Reverse((0i64, s)));
            while let Some(Reverse((d, u))) = heap.pop() {
                if d > dist[u] {
                    continue;
                }
                for &e in &self.adj[u] {
                    if self.cap[e] <= 0 {
                        continue;
                    }
                    let v = self.to[e];
                    let nd = d + self.cost[e] + potential[u] - potential[v];
                    if nd < dist[v] {
                        dist[v] = nd;
                        heap.push(Reverse((nd, v)));
                    }
                }
            }
            if dist[t] >= INF {
                break;
            }
            // Clamping at dist[t] keeps every residual reduced cost >= 0,
            // including edges into vertices farther than `t`.
            let dt = dist[t];
            for v in 0..n {
                potential[v] += dist[v].min(dt);
            }
            // Every s-t path made of zero reduced-cost edges is a shortest
            // path: saturate them all before searching again.
            let admissible = |g: &FlowGraph, e: usize| {
                let (u, v) = (g.to[e ^ 1], g.to[e]);
                g.cost[e] + potential[u] - potential[v] == 0
            };
            let got = self.blocking_flows(s, t, need - pushed, &admissible);
            if got == 0 {
                break;
            }
            pushed += got;
        }
        pushed
    }

    /// Shortest distances from `s` by Bellman-Ford; used once, before any
    /// flow, to make the reduced costs non-negative.
    fn initial_potentials(&self, s: usize) -> Vec<i64> {
        let n = self.adj.len();
        let mut dist = vec![INF; n];
        dist[s] = 0;
        for _ in 0..n {
            let mut changed = false;
            for u in 0..n {
                if dist[u] >= INF {
                    continue;
                }
                for &e in &self.adj[u] {
                    if self.cap[e] > 0 && dist[u] + self.cost[e] < dist[self.to[e]] {
                        dist[self.to[e]] = dist[u] + self.cost[e];
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        // Unreachable vertices stay unreachable until flow reaches them,
        // which only happens through edges whose reduced cost is then checked
        // against the clamped update above.
        dist.iter().map(|&d| if d >= INF { 0 } else { d }).collect()
    }

    /// Dinic's algorithm restricted to the edges `allowed` accepts.
    fn blocking_flows(
        &mut self,
        s: usize,
        t: usize,
        limit: i64,
        allowed: &dyn Fn(&FlowGraph, usize) -> bool,
    ) -> i64 {
        let n = self.adj.len();
        let mut total = 0;
        while total < limit {
            let mut level = vec![u32::MAX; n];
            let mut queue = std::collections::VecDeque::new();
            level[s] = 0;
            queue.push_back(s);
            while let Some(u) = queue.pop_front() {
                for &e in &self.adj[u] {
                    let v = self.to[e];
                    if self.cap[e] > 0 && level[v] == u32::MAX && allowed(self, e) {
                        level[v] = level[u] + 1;
                        queue.push_back(v);
                    }
                }
            }
            if level[t] == u32::MAX {
                break;
            }
            let mut next = vec![0usize; n];
            loop {
                let f = self.augment(s, t, limit - total, &level, &mut next, allowed);
                if f == 0 {
                    break;
                }
                total += f;
                if total >= limit {
                    break;
                }
            }
        }
        total
    }

    fn augment(
        &mut self,
        u: usize,
        t: usize,
        want: i64,
        level: &[u32],
        next: &mut [usize],
        allowed: &dyn Fn(&FlowGraph, usize) -> bool,
    ) -> i64 {
        if u == t {
            return want;
        }
        while next[u] < self.adj[u].len() {
            let e = self.adj[u][next[u]];
            let v = self.to[e];
            if self.cap[e] > 0 && level[v] == level[u] + 1 && allowed(self, e) {
                let got = self.augment(v, t, want.min(self.cap[e]), level, next, allowed);
                if got > 0 {
                    self.cap[e] -= got;
                    self.cap[e ^ 1] += got;
                    return got;
                }
            }
            next[u] += 1;
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_flow_of_a_small_network() {
        // s=0, t=3: two routes of capacity 2 and 1, joined by a cross edge.
        let mut g = FlowGraph::new(4);
        g.add_edge(0, 1, 2, 0);
        g.add_edge(0, 2, 2, 0);
        g.add_edge(1, 3, 1, 0);
        g.add_edge(2, 3, 3, 0);
        g.add_edge(1, 2, 5, 0);
        assert_eq!(g.max_flow(0, 3), 4);
    }

    #[test]
    fn min_cost_flow_prefers_cheap_routes() {
        let mut g = FlowGraph::new(4);
        let cheap = g.add_edge(0, 1, 1, 1);
        let dear = g.add_edge(0, 2, 2, 5);
        g.add_edge(1, 3, 2, 0);
        g.add_edge(2, 3, 2, -1);
        assert_eq!(g.min_cost_flow(0, 3, 2), 2);
        assert_eq!(g.flow(cheap), 1);
        assert_eq!(g.flow(dear), 1);
    }
}
