//! The schedule: the order the program's nodes run in, chosen to lower the
//! peak of live bytes, between the program and the plan.
//!
//! The ONNX file's node order is one valid order among many. This pass
//! chooses another: any order that keeps every dependency ([`dependencies`]:
//! data, and the reads of state around its in-place updates) and keeps the
//! training step's nodes before the optimizer's (they become two C
//! functions). The chosen order is applied by reordering
//! `Program::graph.nodes` itself, so the plan, its checker, the interpreter
//! and the C emitter all see it without change.
//!
//! How the order is chosen ([`memory_order`]): a greedy list scheduler over
//! an exact model of the plan's lifetimes (a storage group lives from its
//! first writer to its last reader, state and persistent tensors
//! throughout) picks, among the ready nodes, the one that adds the fewest
//! live bytes (net of what it frees), so a gradient's accumulator runs right
//! after the gradient and a producer waits until it is the cheapest thing
//! left to do. A local search then moves runs of one to three consecutive
//! nodes (a weight gradient with its accumulator, say) within their
//! dependency window while the peak (then the sum of live bytes over time)
//! falls, under a fixed work budget, not a clock, so compiles stay fast and
//! byte-identical. The ONNX order is kept when nothing beats it. The model
//! counts reuse (below) the way the plan will, so the scheduler sees that a
//! Relu over a dying input costs nothing.
//!
//! In-place reuse ([`Reuse`]): an element-wise node whose input dies at it
//! (the node is its last reader, the input is an intermediate value) writes
//! its output over that input, when the op allows it (`Op::may_overwrite`)
//! and the two have the same type. The plan gives both one home; its checker
//! proves no later node reads the overwritten value.

use crate::error::{Error, Result};
use crate::ir::{NodeId, TensorId};
use crate::ops::AliasKind;
use crate::program::{Program, Role};

/// Which node order the program runs in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// The order of the ONNX files, unchanged (and no in-place reuse).
    Onnx,
    /// The memory-aware order, with in-place reuse of dying inputs.
    #[default]
    Memory,
}

/// Output `output` of node `node` is written over its input `input`, which
/// dies at the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Reuse {
    #[serde(serialize_with = "ser_node")]
    pub node: NodeId,
    pub output: usize,
    pub input: usize,
}

fn ser_node<S: serde::Serializer>(n: &NodeId, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u32(n.0)
}

/// What the schedule pass did, for the plan summary and the bench.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    pub schedule: Schedule,
    /// The planner's lower bound (peak live bytes) in the ONNX order, without reuse.
    pub onnx_peak: u64,
    /// The same for the program as planned: chosen order and reuse.
    pub chosen_peak: u64,
    /// Nodes that run at another position than in the ONNX order.
    pub moved: usize,
    /// Outputs written over a dying input.
    pub reused: usize,
    /// Per node, in the order it runs: its position in the ONNX order.
    pub onnx_position: Vec<usize>,
}

/// Why one node must run before another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// `after` reads this tensor, which `before` produces.
    Data(TensorId),
    /// `before` uses this tensor's storage before `after` updates it in place.
    OldValue(TensorId),
    /// `after` uses this tensor's storage after `before` updated it in place.
    NewValue(TensorId),
}

/// `before` must run before `after` (positions in the program's current order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    pub before: usize,
    pub after: usize,
    pub why: Why,
}

/// Every ordering constraint of the program, from its current order (the
/// order that defines its meaning). Data: a tensor's producer runs before
/// its readers. State: every node that reads or writes the storage of a
/// tensor updated in place (through any view or alias of it) keeps its side
/// of the update, so reads of the old value stay before it and reads of the
/// new value after.
pub fn dependencies(p: &Program) -> Vec<Dep> {
    let g = &p.graph;
    let mut deps = Vec::new();
    for (a, n) in g.nodes.iter().enumerate() {
        for t in n.inputs.iter().flatten() {
            if let Some(pr) = g.tensor(*t).producer {
                deps.push(Dep {
                    before: pr.idx(),
                    after: a,
                    why: Why::Data(*t),
                });
            }
        }
    }
    // Storage homes through the ops' own aliases (views and in-place updates).
    let home = op_homes(p);
    let mut touchers: Vec<Vec<usize>> = vec![Vec::new(); g.tensors.len()];
    for (a, n) in g.nodes.iter().enumerate() {
        for t in n.inputs.iter().chain(&n.outputs).flatten() {
            let h = &mut touchers[home[t.idx()]];
            if h.last() != Some(&a) {
                h.push(a);
            }
        }
    }
    for (u, n) in g.nodes.iter().enumerate() {
        for al in n.op.aliases() {
            if al.kind != AliasKind::InPlace {
                continue;
            }
            let Some(Some(t)) = n.inputs.get(al.input) else {
                continue;
            };
            for &x in &touchers[home[t.idx()]] {
                if x < u {
                    deps.push(Dep {
                        before: x,
                        after: u,
                        why: Why::OldValue(*t),
                    });
                } else if x > u {
                    deps.push(Dep {
                        before: u,
                        after: x,
                        why: Why::NewValue(*t),
                    });
                }
            }
        }
    }
    deps.sort_by_key(|d| (d.after, d.before));
    deps.dedup_by_key(|d| (d.after, d.before));
    deps
}

/// Each tensor's storage home (a representative tensor index) through the ops' aliases.
fn op_homes(p: &Program) -> Vec<usize> {
    let g = &p.graph;
    let mut parent: Vec<usize> = (0..g.tensors.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for n in &g.nodes {
        for a in n.op.aliases() {
            if let (Some(Some(i)), Some(Some(o))) = (n.inputs.get(a.input), n.outputs.get(a.output))
            {
                let (ri, ro) = (find(&mut parent, i.idx()), find(&mut parent, o.idx()));
                parent[ri.max(ro)] = ri.min(ro);
            }
        }
    }
    (0..parent.len()).map(|t| find(&mut parent, t)).collect()
}

fn sched_err(msg: String) -> Error {
    Error::Graph {
        graph: "schedule".into(),
        msg,
    }
}

/// Check that `order` (the current positions of the nodes, in the order
/// they are to run) is a valid schedule of the program: a permutation that
/// keeps the training step before the optimizer and every [`dependencies`]
/// edge. The error names the two nodes and the tensor.
pub fn check_order(p: &Program, order: &[usize]) -> Result<()> {
    let g = &p.graph;
    let n = g.nodes.len();
    if order.len() != n {
        return Err(sched_err(format!(
            "the order lists {} nodes, the program has {n}",
            order.len()
        )));
    }
    let mut pos = vec![usize::MAX; n];
    for (k, &v) in order.iter().enumerate() {
        if v >= n || pos[v] != usize::MAX {
            return Err(sched_err(format!(
                "the order is not a permutation of the program's nodes (position {k} holds {v})"
            )));
        }
        pos[v] = k;
        if (k < p.train_end) != (v < p.train_end) {
            return Err(sched_err(format!(
                "node `{}` of the {} runs at position {k}, in the {}",
                g.nodes[v].name,
                if v < p.train_end {
                    "training step"
                } else {
                    "optimizer"
                },
                if k < p.train_end {
                    "training step"
                } else {
                    "optimizer"
                },
            )));
        }
    }
    for d in dependencies(p) {
        if pos[d.before] < pos[d.after] {
            continue;
        }
        let (b, a) = (&g.nodes[d.before].name, &g.nodes[d.after].name);
        return Err(sched_err(match d.why {
            Why::Data(t) => format!(
                "node `{a}` reads `{}` before its producer `{b}` runs",
                g.name(t)
            ),
            Why::OldValue(t) => format!(
                "node `{b}` would read `{}` after node `{a}` updated it in place, but it reads the old value",
                g.name(t)
            ),
            Why::NewValue(t) => format!(
                "node `{a}` would use `{}` before node `{b}` updated it in place, but it uses the new value",
                g.name(t)
            ),
        }));
    }
    Ok(())
}

/// Run the program's nodes in `order` (current positions): check it, then
/// move the nodes and renumber their producers. In-place reuse decided for
/// the old order no longer holds and is dropped.
pub fn reorder(p: &mut Program, order: &[usize]) -> Result<()> {
    check_order(p, order)?;
    let mut new_pos = vec![0u32; order.len()];
    for (k, &v) in order.iter().enumerate() {
        new_pos[v] = k as u32;
    }
    let mut old: Vec<Option<crate::ir::Node>> = p.graph.nodes.drain(..).map(Some).collect();
    p.graph.nodes = order
        .iter()
        .map(|&v| old[v].take().expect("a permutation"))
        .collect();
    for t in &mut p.graph.tensors {
        if let Some(pr) = &mut t.producer {
            *pr = NodeId(new_pos[pr.idx()]);
        }
    }
    p.reuse.clear();
    crate::verify::verify(&p.graph)
}

/// Choose the schedule and apply it: with [`Schedule::Memory`], reorder the
/// nodes by [`memory_order`] and add in-place [`Reuse`]; with
/// [`Schedule::Onnx`], leave the program as it is. Either way record the
/// planner's lower bound in the ONNX order and as planned. A program already
/// scheduled is left alone.
pub fn apply(p: &mut Program, schedule: Schedule) -> Result<()> {
    if p.schedule.is_some() {
        return Ok(());
    }
    let onnx_peak = crate::plan::live_peak(p);
    let (mut moved, mut reused) = (0, 0);
    let mut onnx_position: Vec<usize> = (0..p.nodes_total()).collect();
    if schedule == Schedule::Memory {
        let order = memory_order(p);
        moved = order.iter().enumerate().filter(|(k, v)| k != *v).count();
        reorder(p, &order)?;
        onnx_position = order;
        p.reuse = reuse(p);
        reused = p.reuse.len();
    }
    let chosen_peak = crate::plan::live_peak(p);
    p.schedule = Some(Report {
        schedule,
        onnx_peak,
        chosen_peak,
        moved,
        reused,
        onnx_position,
    });
    Ok(())
}

/// The in-place reuse of the program in its current order (see the module
/// documentation).
pub fn reuse(p: &Program) -> Vec<Reuse> {
    let m = Model::new(p);
    let order: Vec<usize> = (0..m.n).collect();
    m.reuse_in(&order)
        .into_iter()
        .map(|(v, k)| Reuse {
            node: NodeId(v as u32),
            output: m.cand[v][k].out,
            input: m.cand[v][k].input,
        })
        .collect()
}

/// Peak live bytes of the program in `order` (current positions) with the
/// reuse that order allows, by the scheduler's model of the plan.
pub fn model_peak(p: &Program, order: &[usize]) -> u64 {
    Model::new(p).evaluate(order).0
}

/// A reuse candidate: output `out` (group `og`) over input `input` (group `ig`).
#[derive(Clone, Copy, Debug)]
struct Cand {
    out: usize,
    input: usize,
    og: usize,
    ig: usize,
}

/// The plan's lifetimes as a function of the order (see `plan::lifetimes`).
struct Model {
    n: usize,
    train_end: usize,
    size: Vec<u64>,
    /// Live from the program's start (data, flags, state, persistent).
    fixed: Vec<bool>,
    /// Live to the program's end (persistent).
    pinned: Vec<bool>,
    /// Holds an output read after the step: live to the step's end.
    output: Vec<bool>,
    /// May be overwritten where it dies: intermediate values only.
    overwritable: Vec<bool>,
    /// Per node: the groups it reads or writes, and those it writes.
    touch: Vec<Vec<usize>>,
    writes: Vec<Vec<usize>>,
    cand: Vec<Vec<Cand>>,
    preds: Vec<Vec<usize>>,
    succs: Vec<Vec<usize>>,
    /// Per node: its position in the ONNX order (the tie-break).
    rank: Vec<usize>,
}

fn uf_find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

impl Model {
    fn new(p: &Program) -> Model {
        let g = &p.graph;
        let n = g.nodes.len();
        let (group_of, gs) = crate::plan::lifetimes(p);
        let ng = gs.len();
        let mut m = Model {
            n,
            train_end: p.train_end,
            size: gs.iter().map(|x| x.size).collect(),
            fixed: vec![false; ng],
            pinned: vec![false; ng],
            output: vec![false; ng],
            overwritable: vec![true; ng],
            touch: vec![Vec::new(); n],
            writes: vec![Vec::new(); n],
            cand: vec![Vec::new(); n],
            preds: vec![Vec::new(); n],
            succs: vec![Vec::new(); n],
            rank: (0..n).collect(),
        };
        for (t, gi) in group_of.iter().enumerate() {
            let Some(gi) = *gi else { continue };
            let role = p.roles[t];
            if role.persistent() {
                m.pinned[gi] = true;
                m.fixed[gi] = true;
            }
            if matches!(role, Role::Data | Role::Flag | Role::State) {
                m.fixed[gi] = true;
            }
            if p.outputs.contains(&TensorId(t as u32)) {
                m.output[gi] = true;
            }
            if role != Role::Value {
                m.overwritable[gi] = false;
            }
        }
        for gi in 0..ng {
            if m.fixed[gi] || m.output[gi] {
                m.overwritable[gi] = false;
            }
        }
        for (v, node) in g.nodes.iter().enumerate() {
            for t in node.inputs.iter().chain(&node.outputs).flatten() {
                if let Some(gi) = group_of[t.idx()] {
                    if !m.touch[v].contains(&gi) {
                        m.touch[v].push(gi);
                    }
                }
            }
            for t in node.outputs.iter().flatten() {
                if let Some(gi) = group_of[t.idx()] {
                    if !m.writes[v].contains(&gi) {
                        m.writes[v].push(gi);
                    }
                }
            }
            for (out, input) in node.op.may_overwrite() {
                let (Some(Some(o)), Some(Some(i))) =
                    (node.outputs.get(out), node.inputs.get(input))
                else {
                    continue;
                };
                let (Some(og), Some(ig)) = (group_of[o.idx()], group_of[i.idx()]) else {
                    continue;
                };
                if og != ig && g.ty(*o) == g.ty(*i) && gs[og].size == gs[ig].size {
                    m.cand[v].push(Cand { out, input, og, ig });
                }
            }
        }
        for d in dependencies(p) {
            m.preds[d.after].push(d.before);
            m.succs[d.before].push(d.after);
        }
        m
    }

    /// The reuse `order` allows, as (node, candidate index), in order.
    fn reuse_in(&self, order: &[usize]) -> Vec<(usize, usize)> {
        self.run(order).2
    }

    /// (peak, sum of live bytes over positions) of `order`.
    fn evaluate(&self, order: &[usize]) -> (u64, u64) {
        let (peak, area, _) = self.run(order);
        (peak, area)
    }

    /// Lifetimes, reuse and live bytes of `order`.
    fn run(&self, order: &[usize]) -> (u64, u64, Vec<(usize, usize)>) {
        let ng = self.size.len();
        let n = self.n;
        let mut first = vec![usize::MAX; ng];
        let mut last = vec![0usize; ng];
        for (k, &v) in order.iter().enumerate() {
            for &gi in &self.touch[v] {
                first[gi] = first[gi].min(k);
                last[gi] = k;
            }
        }
        // Reuse in order: the input's group (with what joined it) must die
        // at the node; the output's group then continues its bytes.
        let mut parent: Vec<usize> = (0..ng).collect();
        let mut set_last = last.clone();
        let mut set_ok = self.overwritable.clone();
        let mut reused = Vec::new();
        for (k, &v) in order.iter().enumerate() {
            let mut taken: Vec<usize> = Vec::new();
            for (ci, c) in self.cand[v].iter().enumerate() {
                let ri = uf_find(&mut parent, c.ig);
                let ro = uf_find(&mut parent, c.og);
                if ri == ro || !set_ok[ri] || set_last[ri] != k || first[c.og] != k {
                    continue;
                }
                if taken.contains(&ri) || taken.contains(&ro) {
                    continue;
                }
                taken.push(ri);
                taken.push(ro);
                parent[ro] = ri;
                set_last[ri] = set_last[ro];
                set_ok[ri] = set_ok[ro];
                reused.push((v, ci));
            }
        }
        let mut lo = vec![usize::MAX; ng];
        let mut hi = vec![0usize; ng];
        let mut sz = vec![0u64; ng];
        for gi in 0..ng {
            let r = uf_find(&mut parent, gi);
            let (mut a, mut b) = (first[gi], last[gi]);
            if a == usize::MAX {
                a = 0;
                b = 0;
            }
            if self.fixed[gi] {
                a = 0;
            }
            if self.pinned[gi] {
                b = n.max(1) - 1;
            }
            if self.output[gi] && self.train_end > 0 {
                b = b.max(self.train_end - 1);
            }
            lo[r] = lo[r].min(a);
            hi[r] = hi[r].max(b);
            sz[r] = sz[r].max(self.size[gi]);
        }
        let mut delta = vec![0i64; n + 2];
        for r in 0..ng {
            if lo[r] == usize::MAX {
                continue;
            }
            delta[lo[r]] += sz[r] as i64;
            delta[hi[r].max(lo[r]) + 1] -= sz[r] as i64;
        }
        let (mut live, mut peak, mut area) = (0i64, 0i64, 0u64);
        for d in delta.iter().take(n.max(1)) {
            live += d;
            peak = peak.max(live);
            area += live as u64;
        }
        (peak as u64, area, reused)
    }

    /// Greedy list scheduling of nodes `range` (see the module documentation).
    fn greedy(&self, range: std::ops::Range<usize>, out: &mut Vec<usize>) {
        let ng = self.size.len();
        // Touchers still to run per group; a group whose count reaches zero dies.
        let mut rem = vec![0usize; ng];
        let mut started = self.fixed.clone();
        for v in 0..self.n {
            for &gi in &self.touch[v] {
                rem[gi] += 1;
                if v < range.start {
                    started[gi] = true;
                }
            }
        }
        for v in 0..range.start {
            for &gi in &self.touch[v] {
                rem[gi] -= 1;
            }
        }
        let mut missing: Vec<usize> = vec![0; self.n];
        for v in range.clone() {
            missing[v] = self.preds[v]
                .iter()
                .filter(|&&u| range.contains(&u))
                .count();
        }
        let mut ready: Vec<usize> = range.clone().filter(|&v| missing[v] == 0).collect();
        let holds = |gi: usize| self.pinned[gi] || self.output[gi];
        while !ready.is_empty() {
            let mut best: Option<(i64, i64, usize, usize)> = None;
            for (slot, &v) in ready.iter().enumerate() {
                let mut alloc = 0u64;
                let mut free = 0u64;
                for &gi in &self.writes[v] {
                    if !started[gi] {
                        alloc += self.size[gi];
                    }
                }
                for &gi in &self.touch[v] {
                    if rem[gi] == 1 && !holds(gi) {
                        free += self.size[gi];
                    }
                }
                // An output over a dying input neither allocates nor frees.
                let mut used: Vec<usize> = Vec::new();
                for c in &self.cand[v] {
                    if self.overwritable[c.ig]
                        && rem[c.ig] == 1
                        && !started[c.og]
                        && !used.contains(&c.ig)
                        && !used.contains(&c.og)
                    {
                        used.push(c.ig);
                        used.push(c.og);
                        alloc -= self.size[c.og];
                        free -= self.size[c.ig];
                    }
                }
                let net = alloc as i64 - free as i64;
                let key = (net, alloc as i64, self.rank[v], slot);
                if best.is_none_or(|b| (key.0, key.1, key.2) < (b.0, b.1, b.2)) {
                    best = Some(key);
                }
            }
            let (_, _, _, slot) = best.expect("ready is not empty");
            let v = ready.swap_remove(slot);
            out.push(v);
            for &gi in &self.touch[v] {
                rem[gi] -= 1;
                started[gi] = true;
            }
            for &s in &self.succs[v] {
                if range.contains(&s) {
                    missing[s] -= 1;
                    if missing[s] == 0 {
                        ready.push(s);
                    }
                }
            }
        }
    }

    /// Move blocks of one to [`BLOCK`] consecutive nodes within their
    /// dependency window while (peak, area) falls, until no move helps or
    /// `budget` evaluations are spent.
    fn improve(&self, order: &mut Vec<usize>, mut budget: u64) {
        let n = self.n;
        let mut best = self.evaluate(order);
        let mut pos = vec![0usize; n];
        loop {
            let mut improved = false;
            for len in 1..=BLOCK.min(n) {
                for k in 0..=n - len {
                    for (i, &v) in order.iter().enumerate() {
                        pos[v] = i;
                    }
                    let block = &order[k..k + len];
                    let train = block[0] < self.train_end;
                    if block.iter().any(|&v| (v < self.train_end) != train) {
                        continue;
                    }
                    let (part_lo, part_hi) = if train {
                        (0, self.train_end)
                    } else {
                        (self.train_end, n)
                    };
                    let inside = |u: usize| (k..k + len).contains(&pos[u]);
                    // After every predecessor, before every successor, in its partition.
                    let mut lo = part_lo;
                    let mut hi = part_hi;
                    for &v in block {
                        for &u in self.preds[v].iter().filter(|&&u| !inside(u)) {
                            lo = lo.max(pos[u] + 1);
                        }
                        for &u in self.succs[v].iter().filter(|&&u| !inside(u)) {
                            hi = hi.min(pos[u]);
                        }
                    }
                    // Insertion points in the order without the block.
                    let Some(hi) = hi.checked_sub(len) else {
                        continue;
                    };
                    let block: Vec<usize> = block.to_vec();
                    let mut rest = order.clone();
                    rest.drain(k..k + len);
                    let mut found = None;
                    for q in lo..=hi {
                        if q == k {
                            continue;
                        }
                        if budget == 0 {
                            return;
                        }
                        budget -= 1;
                        let trial: Vec<usize> = rest[..q]
                            .iter()
                            .chain(&block)
                            .chain(&rest[q..])
                            .copied()
                            .collect();
                        let e = self.evaluate(&trial);
                        if e < best {
                            best = e;
                            found = Some(trial);
                        }
                    }
                    if let Some(t) = found {
                        *order = t;
                        improved = true;
                    }
                }
            }
            if !improved {
                return;
            }
        }
    }
}

/// The longest run of consecutive nodes the local search moves at once.
const BLOCK: usize = 3;

/// Evaluations the local search may spend, scaled so that a program's
/// search costs about the same work whatever its size.
const SEARCH_WORK: u64 = 40_000_000;

/// The memory-aware order of the program's nodes (current positions): the
/// better of the greedy list schedule refined by local search and the
/// current order, by the model's (peak, area).
pub fn memory_order(p: &Program) -> Vec<usize> {
    let m = Model::new(p);
    let mut order = Vec::with_capacity(m.n);
    m.greedy(0..m.train_end, &mut order);
    m.greedy(m.train_end..m.n, &mut order);
    let touches: usize = m.touch.iter().map(|t| t.len()).sum();
    let budget = SEARCH_WORK / (m.n + touches + m.size.len()).max(1) as u64;
    m.improve(&mut order, budget);
    let current: Vec<usize> = (0..m.n).collect();
    if m.evaluate(&current) <= m.evaluate(&order) {
        return current;
    }
    order
}
