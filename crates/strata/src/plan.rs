//! The static memory plan: storage groups (tensors that share bytes through
//! views and in-place updates), their lifetimes over the unified schedule
//! (training step, then optimizer), one placement problem per memory level
//! solved by `memplan`, and an independent checker that replays the schedule
//! and proves every read sees the value it should.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::ir::TensorId;
use crate::lir::Level;
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
    /// Byte offset in its level's arena.
    pub offset: u64,
    /// Its home: L2, or L3 when it does not fit L2 (or the default level is L3).
    pub level: Level,
}

/// One planned arena.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LevelArena {
    pub capacity: u64,
    /// Bytes the arena needs (the placement's peak).
    pub arena_bytes: u64,
    /// The most bytes of the level's groups live at one time.
    pub lower_bound: u64,
    pub optimal: bool,
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
    /// The L3 arena, when some groups live in L3.
    pub l3: Option<LevelArena>,
    /// Bytes of L2 after the L2 groups where tiles of L3 tensors are staged
    /// on their way to and from L1 (0: nothing lives in L3). The lowering
    /// fills exactly this much: the largest staging need of any node.
    pub staging: u64,
    /// The L1 budget the tiles were chosen, and the nodes split, for, when
    /// below the target's: L2 could not stage the tiles chosen for the
    /// whole L1 (`driver::plan_and_lower`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tile_l1: Option<u64>,
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
    /// The offset of a tensor in its home level's arena.
    pub fn offset(&self, t: TensorId) -> Option<u64> {
        self.group_of[t.idx()].map(|g| self.groups[g].offset)
    }
    /// A tensor's home: its level and the offset in that level's arena
    /// (`None`: a read-only constant outside the arenas).
    pub fn home(&self, t: TensorId) -> Option<(Level, u64)> {
        self.group_of[t.idx()].map(|g| (self.groups[g].level, self.groups[g].offset))
    }
    /// Where the L2 staging area begins.
    pub fn staging_base(&self) -> u64 {
        self.arena_bytes.div_ceil(ALIGN) * ALIGN
    }
    /// The whole L2 arena: the L2 groups and the staging area.
    pub fn l2_bytes(&self) -> u64 {
        if self.staging > 0 {
            self.staging_base() + self.staging
        } else {
            self.arena_bytes
        }
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
            level: Level::L2,
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

/// Where the groups of a plan live when some live in L3.
#[derive(Clone, Debug)]
pub struct Homes {
    /// Per group (in [`lifetimes`] order): whether it lives in L3.
    pub l3: Vec<bool>,
    /// The L3 budget.
    pub l3_capacity: u64,
    /// L2 bytes kept after the L2 groups for staging tiles of L3 tensors.
    pub staging: u64,
}

/// Plan the program into one level of `capacity` bytes. The search stops after `node_limit` nodes (deterministic) or at
/// `time_limit`, whichever comes first.
pub fn plan(
    p: &Program,
    capacity: u64,
    time_limit: Duration,
    node_limit: u64,
) -> Result<MemoryPlan> {
    plan_homes(p, capacity, None, time_limit, node_limit)
}

/// Plan the program over L2 (`capacity` bytes, staging included) and, for
/// the groups `homes` puts there, L3: one placement problem per level.
pub fn plan_homes(
    p: &Program,
    capacity: u64,
    homes: Option<&Homes>,
    time_limit: Duration,
    node_limit: u64,
) -> Result<MemoryPlan> {
    let g = &p.graph;
    let (group_of, mut gs) = lifetimes(p);
    let in_l3 = |i: usize| homes.is_some_and(|h| h.l3[i]);
    let staging = homes.map_or(0, |h| h.staging);
    if staging > capacity {
        return Err(Error::DoesNotFit {
            level: "L2 (staging tiles of L3 tensors)".into(),
            needed: staging,
            capacity,
            missing: staging - capacity,
            proven: true,
            lower_bound: staging,
        });
    }
    let opts = memplan::Options {
        time_limit,
        minimize: true,
        threads: 1,
        node_limit: Some(node_limit),
    };
    // Place the groups `idx` into one level; returns its arena.
    let place = |gs: &mut [Group], level: Level, cap: u64, extra: u64| -> Result<LevelArena> {
        let idx: Vec<usize> = (0..gs.len())
            .filter(|&i| in_l3(i) == (level == Level::L3))
            .collect();
        for &i in &idx {
            gs[i].level = level;
        }
        if idx.is_empty() {
            return Ok(LevelArena {
                capacity: cap,
                arena_bytes: 0,
                lower_bound: 0,
                optimal: true,
            });
        }
        let sub: Vec<Group> = idx.iter().map(|&i| gs[i].clone()).collect();
        let sol = memplan::solve(&problem(p, &sub, Some(cap)), &opts).map_err(|e| match e {
            memplan::Error::DoesNotFit {
                capacity,
                best_peak,
                lower_bound,
                ..
            } => {
                let proven = lower_bound > capacity;
                let needed = if proven { lower_bound } else { best_peak };
                Error::DoesNotFit {
                    level: if extra > 0 {
                        format!("{level} ({extra} of its bytes staging tiles of L3 tensors)")
                    } else {
                        level.to_string()
                    },
                    needed: needed + extra,
                    capacity: capacity + extra,
                    missing: needed - capacity,
                    proven,
                    lower_bound: lower_bound + extra,
                }
            }
            #[allow(unreachable_patterns)]
            other => Error::PlanCheck(other.to_string()),
        })?;
        for (&i, off) in idx.iter().zip(&sol.offsets) {
            gs[i].offset = *off;
        }
        Ok(LevelArena {
            capacity: cap,
            arena_bytes: sol.peak,
            lower_bound: sol.lower_bound,
            optimal: sol.optimal,
        })
    };
    let l2_cap = (capacity - staging) / ALIGN * ALIGN;
    let l2 = place(&mut gs, Level::L2, l2_cap, staging)?;
    let l3 = match homes {
        Some(h) if h.l3.iter().any(|&b| b) => Some(place(&mut gs, Level::L3, h.l3_capacity, 0)?),
        _ => None,
    };
    let plan = MemoryPlan {
        level: "L2",
        capacity,
        arena_bytes: l2.arena_bytes,
        lower_bound: l2.lower_bound,
        optimal: l2.optimal,
        l3,
        staging,
        tile_l1: None,
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

/// Every group in `level`, one after another (in L3: with an unbounded
/// staging area): a layout for lowering a program only to learn its tiles
/// (not checked, not for emission).
pub fn flat(p: &Program, level: Level) -> MemoryPlan {
    let (group_of, mut gs) = lifetimes(p);
    let mut at = 0;
    for grp in &mut gs {
        grp.offset = at;
        grp.level = level;
        at += grp.size;
    }
    let l3 = level == Level::L3;
    MemoryPlan {
        level: "L2",
        capacity: u64::MAX / 4,
        arena_bytes: if l3 { 0 } else { at },
        lower_bound: 0,
        optimal: false,
        l3: l3.then_some(LevelArena {
            capacity: at,
            arena_bytes: at,
            lower_bound: at,
            optimal: false,
        }),
        staging: if l3 { u64::MAX / 8 } else { 0 },
        tile_l1: None,
        schedule: p.schedule.clone(),
        reuse: p.reuse.clone(),
        constant_bytes: 0,
        groups: gs,
        group_of,
    }
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
    // One address space, the levels far apart: a group's bytes are
    // (level base + offset ..).
    let at = |gi: usize| -> u64 {
        let grp = &plan.groups[gi];
        grp.offset
            + match grp.level {
                Level::L3 => 1 << 56,
                _ => 0,
            }
    };
    let holds = |owned: &Vec<(u64, u64, usize)>, gi: usize| -> bool {
        let grp = &plan.groups[gi];
        let (s, e) = (at(gi), at(gi) + grp.size);
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
        let arena = match grp.level {
            Level::L3 => plan.l3.as_ref().map_or(0, |a| a.arena_bytes),
            _ => plan.arena_bytes,
        };
        if grp.offset + grp.size > arena {
            return fail(format!(
                "group of `{}` ends at {} beyond the {} arena's {arena} bytes",
                g.name(grp.tensors[0]),
                grp.offset + grp.size,
                grp.level
            ));
        }
        let _ = gi;
    }
    if plan.l2_bytes() > plan.capacity {
        return fail(format!(
            "L2 arena of {} bytes ({} staging) exceeds the capacity {}",
            plan.l2_bytes(),
            plan.staging,
            plan.capacity
        ));
    }
    if let Some(a) = &plan.l3 {
        if a.arena_bytes > a.capacity {
            return fail(format!(
                "L3 arena of {} bytes exceeds the capacity {}",
                a.arena_bytes, a.capacity
            ));
        }
    }
    // Before the step: persistent state, data and flags are in place.
    for (gi, grp) in plan.groups.iter().enumerate() {
        if grp
            .tensors
            .iter()
            .any(|t| matches!(p.role(*t), Role::Data | Role::Flag) || p.role(*t).persistent())
        {
            claim(&mut owned, at(gi), at(gi) + grp.size, gi);
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
            claim(&mut owned, at(gi), at(gi) + grp.size, gi);
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
