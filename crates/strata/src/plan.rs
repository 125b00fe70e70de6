//! The static memory plan: storage groups (tensors that share bytes through
//! views and in-place updates), their lifetimes over the unified schedule
//! (training step, then optimizer), one placement problem per memory level
//! solved by `memplan`, and an independent checker that replays the schedule
//! and proves every read sees the value it should.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::ir::TensorId;
use crate::ops::AliasKind;
use crate::program::{Program, Role};

/// Every buffer's offset is a multiple of this (the widest element, and DMA friendly).
pub const ALIGN: u64 = 16;

/// Tensors that share storage, with their common lifetime.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Group {
    pub tensors: Vec<TensorId>,
    /// First schedule position whose node writes the group (0 for inputs and state).
    pub lower: u64,
    /// One past the last position that reads it (exclusive).
    pub upper: u64,
    pub size: u64,
    pub offset: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct MemoryPlan {
    pub level: &'static str,
    pub capacity: u64,
    /// Bytes the arena needs (the plan's peak).
    pub arena_bytes: u64,
    /// The largest total size live at one time: no plan can use less.
    pub lower_bound: u64,
    /// Read-only constants kept outside the arena (frozen parameters, shape
    /// data), emitted as C arrays: on a device they live in L2 as well.
    pub constant_bytes: u64,
    pub optimal: bool,
    /// The schedule the lifetimes are over (`None`: the program was not scheduled).
    pub schedule: Option<crate::schedule::Report>,
    /// Outputs written over an input that dies at their node.
    pub reuse: Vec<crate::schedule::Reuse>,
    pub groups: Vec<Group>,
    /// Per tensor: its group, or `None` when it lives outside the arena (read-only constants).
    #[serde(skip)]
    pub group_of: Vec<Option<usize>>,
}

impl MemoryPlan {
    pub fn offset(&self, t: TensorId) -> Option<u64> {
        self.group_of[t.idx()].map(|g| self.groups[g].offset)
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// The storage groups of a program, before placement.
pub fn groups(p: &Program) -> Vec<Option<usize>> {
    let g = &p.graph;
    let n = g.tensors.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for node in &g.nodes {
        for a in node.op.aliases() {
            if let (Some(Some(i)), Some(Some(o))) =
                (node.inputs.get(a.input), node.outputs.get(a.output))
            {
                let (ri, ro) = (find(&mut parent, i.idx()), find(&mut parent, o.idx()));
                if ri != ro {
                    let (lo, hi) = (ri.min(ro), ri.max(ro));
                    parent[hi] = lo;
                }
            }
        }
    }
    // Outputs the schedule writes over a dying input share its home.
    for r in &p.reuse {
        let node = g.node(r.node);
        if let (Some(Some(i)), Some(Some(o))) =
            (node.inputs.get(r.input), node.outputs.get(r.output))
        {
            let (ri, ro) = (find(&mut parent, i.idx()), find(&mut parent, o.idx()));
            if ri != ro {
                let (lo, hi) = (ri.min(ro), ri.max(ro));
                parent[hi] = lo;
            }
        }
    }
    // Groups rooted at a read-only constant stay out of the arena.
    let mut index = vec![None; n];
    let mut next = 0;
    let mut out = vec![None; n];
    for (t, slot) in out.iter_mut().enumerate() {
        let r = find(&mut parent, t);
        if p.roles[r] == Role::Constant {
            continue;
        }
        let gi = *index[r].get_or_insert_with(|| {
            next += 1;
            next - 1
        });
        *slot = Some(gi);
    }
    out
}

/// The storage groups of a program with their lifetimes over its node
/// order and their sizes rounded up to [`ALIGN`] (offsets still 0), and each
/// tensor's group. This is the placement problem the planner solves.
pub fn lifetimes(p: &Program) -> (Vec<Option<usize>>, Vec<Group>) {
    let g = &p.graph;
    let group_of = groups(p);
    let n_groups = group_of.iter().flatten().max().map_or(0, |m| m + 1);
    let end = p.nodes_total() as u64;
    let mut gs: Vec<Group> = (0..n_groups)
        .map(|_| Group {
            tensors: vec![],
            lower: u64::MAX,
            upper: 0,
            size: 0,
            offset: 0,
        })
        .collect();
    for (t, gi) in group_of.iter().enumerate() {
        if let Some(gi) = gi {
            let grp = &mut gs[*gi];
            grp.tensors.push(TensorId(t as u32));
            grp.size = grp.size.max(g.tensors[t].ty.bytes() as u64);
        }
    }
    for (t, gi) in group_of.iter().enumerate() {
        let Some(gi) = *gi else { continue };
        let tid = TensorId(t as u32);
        let role = p.role(tid);
        let grp = &mut gs[gi];
        if role.persistent() {
            grp.lower = 0;
            grp.upper = end.max(1);
        } else if matches!(role, Role::Data | Role::Flag | Role::State) {
            grp.lower = 0;
        } else if let Some(pr) = g.tensor(tid).producer {
            grp.lower = grp.lower.min(pr.0 as u64);
            grp.upper = grp.upper.max(pr.0 as u64 + 1);
        }
        if p.outputs.contains(&tid) {
            grp.upper = grp.upper.max(p.train_end as u64);
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for t in node.inputs.iter().flatten() {
            if let Some(gi) = group_of[t.idx()] {
                gs[gi].upper = gs[gi].upper.max(i as u64 + 1);
            }
        }
    }
    for grp in &mut gs {
        if grp.lower == u64::MAX {
            grp.lower = 0;
        }
        grp.upper = grp.upper.max(grp.lower + 1);
        grp.size = grp.size.div_ceil(ALIGN) * ALIGN;
    }
    (group_of, gs)
}

/// The placement problem of [`lifetimes`] for `memplan`.
fn problem(p: &Program, gs: &[Group], capacity: Option<u64>) -> memplan::Problem {
    memplan::Problem {
        buffers: gs
            .iter()
            .enumerate()
            .map(|(i, grp)| memplan::Buffer {
                id: format!("{i}:{}", p.graph.name(grp.tensors[0])),
                lower: grp.lower,
                upper: grp.upper,
                size: grp.size,
                alignment: ALIGN,
                offset: None,
            })
            .collect(),
        capacity,
    }
}

/// The planner's lower bound for the program in its current node order:
/// the most bytes live at one time (no placement can use less).
pub fn live_peak(p: &Program) -> u64 {
    let (_, gs) = lifetimes(p);
    memplan::lower_bound(&problem(p, &gs, None))
}

/// Plan the program into one level of `capacity` bytes. The search stops after `node_limit` nodes (deterministic) or at
/// `time_limit`, whichever comes first.
pub fn plan(
    p: &Program,
    capacity: u64,
    time_limit: Duration,
    node_limit: u64,
) -> Result<MemoryPlan> {
    let g = &p.graph;
    let (group_of, mut gs) = lifetimes(p);
    let problem = problem(p, &gs, Some(capacity));
    let sol = memplan::solve(
        &problem,
        &memplan::Options {
            time_limit,
            minimize: true,
            threads: 1,
            node_limit: Some(node_limit),
        },
    )
    .map_err(|e| match e {
        memplan::Error::DoesNotFit {
            capacity,
            best_peak,
            lower_bound,
        } => {
            let proven = lower_bound > capacity;
            let needed = if proven { lower_bound } else { best_peak };
            Error::DoesNotFit {
                level: "L2".into(),
                needed,
                capacity,
                missing: needed - capacity,
                proven,
                lower_bound,
            }
        }
        #[allow(unreachable_patterns)]
        other => Error::PlanCheck(other.to_string()),
    })?;
    for (grp, off) in gs.iter_mut().zip(&sol.offsets) {
        grp.offset = *off;
    }
    let plan = MemoryPlan {
        level: "L2",
        capacity,
        arena_bytes: sol.peak,
        lower_bound: sol.lower_bound,
        optimal: sol.optimal,
        schedule: p.schedule.clone(),
        reuse: p.reuse.clone(),
        constant_bytes: g
            .constants
            .iter()
            .filter(|(t, _)| group_of[t.idx()].is_none())
            .map(|(_, v)| v.ty().bytes() as u64)
            .sum(),
        groups: gs,
        group_of,
    };
    check(p, &plan)?;
    Ok(plan)
}

/// The independent checker: replay the schedule over byte ranges. Every
/// group claims its bytes when it is written (inputs and state at the start);
/// every read must find the bytes still owned by the group it reads, and
/// state and outputs must survive to the end of their phase.
pub fn check(p: &Program, plan: &MemoryPlan) -> Result<()> {
    let g = &p.graph;
    let fail = |m: String| Err(Error::PlanCheck(m));
    // Owned byte ranges: (start, end, group).
    let mut owned: Vec<(u64, u64, usize)> = Vec::new();
    fn claim(owned: &mut Vec<(u64, u64, usize)>, s: u64, e: u64, gi: usize) {
        let mut next = Vec::with_capacity(owned.len() + 2);
        for &(a, b, o) in owned.iter() {
            if b <= s || e <= a {
                next.push((a, b, o));
            } else {
                if a < s {
                    next.push((a, s, o));
                }
                if e < b {
                    next.push((e, b, o));
                }
            }
        }
        next.push((s, e, gi));
        *owned = next;
    }
    let holds = |owned: &Vec<(u64, u64, usize)>, gi: usize| -> bool {
        let grp = &plan.groups[gi];
        let (s, e) = (grp.offset, grp.offset + grp.size);
        let mut covered: u64 = 0;
        for &(a, b, o) in owned {
            if o == gi && a < e && s < b {
                covered += b.min(e) - a.max(s);
            }
        }
        covered == e - s
    };
    for (gi, grp) in plan.groups.iter().enumerate() {
        if grp.offset % ALIGN != 0 {
            return fail(format!(
                "group of `{}` at offset {} is not {ALIGN}-byte aligned",
                g.name(grp.tensors[0]),
                grp.offset
            ));
        }
        if grp.offset + grp.size > plan.arena_bytes {
            return fail(format!(
                "group of `{}` ends at {} beyond the arena's {} bytes",
                g.name(grp.tensors[0]),
                grp.offset + grp.size,
                plan.arena_bytes
            ));
        }
        let _ = gi;
    }
    if plan.arena_bytes > plan.capacity {
        return fail(format!(
            "arena of {} bytes exceeds level {} capacity {}",
            plan.arena_bytes, plan.level, plan.capacity
        ));
    }
    // Before the step: persistent state, data and flags are in place.
    for (gi, grp) in plan.groups.iter().enumerate() {
        if grp
            .tensors
            .iter()
            .any(|t| matches!(p.role(*t), Role::Data | Role::Flag) || p.role(*t).persistent())
        {
            claim(&mut owned, grp.offset, grp.offset + grp.size, gi);
        }
    }
    let group = |t: &TensorId| plan.group_of[t.idx()];
    // Which tensors' values a group's bytes hold: a view adds its output; an
    // in-place update of persistent state keeps the state's name (later
    // readers want the new value); any other write, and an output the
    // schedule writes over a dying input, leaves only the output valid.
    let mut valid = vec![false; g.tensors.len()];
    let mut clobbered: Vec<Option<usize>> = vec![None; g.tensors.len()];
    for (t, v) in valid.iter_mut().enumerate() {
        let r = p.roles[t];
        *v = matches!(r, Role::Data | Role::Flag) || r.persistent();
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for t in node.inputs.iter().flatten() {
            if let Some(gi) = group(t) {
                if !holds(&owned, gi) {
                    return fail(format!("node `{}` (position {i}) reads `{}`, whose bytes [{}, {}) were overwritten", node.name, g.name(*t), plan.groups[gi].offset, plan.groups[gi].offset + plan.groups[gi].size));
                }
                if !valid[t.idx()] {
                    return fail(format!(
                        "node `{}` (position {i}) reads `{}`, whose bytes {}",
                        node.name,
                        g.name(*t),
                        match clobbered[t.idx()] {
                            Some(w) => format!(
                                "node `{}` (position {w}) overwrote in place",
                                g.nodes[w].name
                            ),
                            None => "hold no value of it yet".to_string(),
                        }
                    ));
                }
            }
        }
        let aliases = node.op.aliases();
        for (k, t) in node.outputs.iter().enumerate() {
            let Some(t) = t else { continue };
            let Some(gi) = group(t) else { continue };
            let grp = &plan.groups[gi];
            claim(&mut owned, grp.offset, grp.offset + grp.size, gi);
            let source = |a_in: usize| node.inputs.get(a_in).copied().flatten();
            let keeps = aliases.iter().any(|a| {
                a.output == k
                    && source(a.input)
                        .is_some_and(|i| a.kind == AliasKind::View || p.role(i).persistent())
            });
            if !keeps {
                for &u in &grp.tensors {
                    if valid[u.idx()] && u != *t {
                        valid[u.idx()] = false;
                        clobbered[u.idx()] = Some(i);
                    }
                }
            }
            valid[t.idx()] = true;
        }
        if i + 1 == p.train_end {
            for t in &p.outputs {
                if let Some(gi) = group(t) {
                    if !holds(&owned, gi) || !valid[t.idx()] {
                        return fail(format!(
                            "output `{}` is overwritten before the step ends",
                            g.name(*t)
                        ));
                    }
                }
            }
        }
    }
    for t in p.persistent() {
        if let Some(gi) = group(&t) {
            if !holds(&owned, gi) {
                return fail(format!(
                    "persistent `{}` is overwritten during the program",
                    g.name(t)
                ));
            }
        }
    }
    Ok(())
}
