//! Anytime exact search. Groups whose alignments divide the gcd of their
//! sizes and whose fixed buffers, if any, are a floor (stacked from offset
//! 0 up without holes, `skyline::fixed_floor`) use the skyline search
//! (`skyline.rs`) in a restart portfolio (both time directions, two branching modes, and a
//! share of the general search below); other groups use the general search.
//!
//! General search: branch and bound over canonical placements.
//!
//! **Canonical placements.** Take any valid placement and repeatedly drop a
//! buffer to the lowest aligned offset at which it still fits (never crossing
//! a fixed buffer's bytes); this never raises the peak and ends in a
//! placement where, sorted by offset, every movable buffer sits at
//! `f(b) = lowest aligned offset >= max(top of the earlier buffers that
//! overlap it in time)` that avoids fixed buffers. The search enumerates
//! exactly such placements: it places buffers in nondecreasing offset order,
//! each at its `f(b)` (with the running offset `W` of the last placement as an
//! extra floor). Every branch therefore picks *which* buffer comes next.
//!
//! **Pruning** (each argument keeps at least one optimal canonical placement):
//! * capacity: `f(b) + size(b) > cap` for an unplaced `b` kills the node;
//! * sections: the time axis is cut at every start/end into sections; in a
//!   section `s` all unplaced buffers live there lie at or above
//!   `m(s) = min f(b)` over them and are pairwise disjoint, so
//!   `m(s) + remaining size in s (+ fixed bytes above m(s)) <= cap` must hold
//!   (a per-level version, for every `z` the buffers with `f >= z` fit in
//!   `[z, cap)`, was tried: it pruned almost nothing more on A..K at half the
//!   node rate);
//! * dominance: choosing `b` next (at `f(b)`) is useless if some other
//!   unplaced `c` has `f(c) + size(c) <= f(b)`: in every completion `c` would
//!   lie at or above `f(b)` and could drop to `f(c)`, so the completion is not
//!   canonical and the canonical version is reached through `c`;
//! * ties: buffers placed at the same offset are placed in a fixed key
//!   order (the sorted order of a canonical placement, ties broken by key,
//!   is one sequence, so other interleavings are redundant);
//! * symmetry: identical buffers (same lifetime, size, alignment) are placed
//!   in index order;
//! * decomposition: buffers are split into groups whose lifetimes never
//!   touch another group's; each group is searched on its own.
//!
//! **Minimisation** is one depth-first branch and bound, not a binary search:
//! the capacity `cap` starts at the incumbent's peak minus one and, each time
//! a placement is found, drops to its peak minus one *in place*, so nothing
//! explored is thrown away. Running out of the space proves the last
//! incumbent optimal; running out of time leaves the gap to the lower bound.

use crate::{align_up, greedy::Graph, Deadline, Problem};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) struct Outcome {
    pub offsets: Vec<u64>,
    pub peak: u64,
    /// A proven lower bound on the optimum (>= the one passed in).
    pub proven_lb: u64,
}

/// One time-connected group of buffers, searched independently.
struct Dfs {
    /// Global index of each local movable buffer.
    gid: Vec<usize>,
    size: Vec<u64>,
    align: Vec<u64>,
    span: Vec<(u32, u32)>,
    nb: Vec<Vec<u32>>,
    /// Per movable buffer: (offset, top) of fixed buffers overlapping in time.
    fixed_nb: Vec<Vec<(u64, u64)>>,
    /// Per section: (offset, top) of fixed buffers live there.
    sec_fixed: Vec<Vec<(u64, u64)>>,
    has_fixed: bool,
    nsec: usize,
    rem: Vec<u64>,
    base: Vec<u64>,
    placed: Vec<bool>,
    off: Vec<u64>,
    unplaced: Vec<u32>,
    pos: Vec<u32>,
    prev_same: Vec<u32>,
    key: Vec<u32>,
    trail: Vec<(u32, u64)>,
    parent: Vec<u32>,
    fixed_peak: u64,
    /// The deadline is checked every `check_mask + 1` nodes (a power of
    /// two): 256 up to 512 buffers, fewer above, since a node reads every
    /// unplaced buffer and section (a group of 4,458 buffers overran a
    /// 2 s limit by 56 ms checking every 256 nodes, by 19 ms checking
    /// every node).
    check_mask: u64,
    cap: u64,
    goal: u64,
    best: Option<(u64, Vec<u64>)>,
    nodes: u64,
    /// Node budget of the current run (restarts); `u64::MAX` for none.
    node_limit: u64,
    aborted: bool,
    /// Heuristic (incomplete) runs branch only on buffers at the lowest f.
    restrict: bool,
    deadline: Deadline,
    timed_out: bool,
    stop: bool,
    /// Stop flag shared by the threads of a parallel portfolio.
    halt: Option<Arc<AtomicBool>>,
    halted: bool,
}

impl Dfs {
    fn new(p: &Problem, members: &[usize], deadline: Deadline) -> Dfs {
        let bs = &p.buffers;
        let movable: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| bs[i].offset.is_none() && bs[i].size > 0)
            .collect();
        let fixed: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| bs[i].offset.is_some() && bs[i].size > 0)
            .collect();
        let mut times: Vec<u64> = members
            .iter()
            .flat_map(|&i| [bs[i].lower, bs[i].upper])
            .collect();
        times.sort_unstable();
        times.dedup();
        let sec = |t: u64| times.binary_search(&t).unwrap() as u32;
        let nsec = times.len().saturating_sub(1);
        let n = movable.len();
        let size: Vec<u64> = movable.iter().map(|&i| bs[i].size).collect();
        let align: Vec<u64> = movable.iter().map(|&i| bs[i].alignment).collect();
        let span: Vec<(u32, u32)> = movable
            .iter()
            .map(|&i| (sec(bs[i].lower), sec(bs[i].upper)))
            .collect();
        let lower: Vec<u64> = movable.iter().map(|&i| bs[i].lower).collect();
        let upper: Vec<u64> = movable.iter().map(|&i| bs[i].upper).collect();
        let g = Graph::build(&lower, &upper, &size, usize::MAX).expect("no limit");
        let nb: Vec<Vec<u32>> = (0..n).map(|i| g.neighbors(i).to_vec()).collect();
        let mut fixed_nb = vec![Vec::new(); n];
        let mut sec_fixed = vec![Vec::new(); nsec];
        for &k in &fixed {
            let f = &bs[k];
            let r = (f.offset.unwrap(), f.offset.unwrap() + f.size);
            for (i, &m) in movable.iter().enumerate() {
                if f.lower < bs[m].upper && bs[m].lower < f.upper {
                    fixed_nb[i].push(r);
                }
            }
            for s in sec(f.lower)..sec(f.upper) {
                sec_fixed[s as usize].push(r);
            }
        }
        for v in &mut fixed_nb {
            v.sort_unstable();
        }
        let mut rem = vec![0u64; nsec];
        for i in 0..n {
            for s in span[i].0..span[i].1 {
                rem[s as usize] += size[i];
            }
        }
        // Identical buffers: link each to the previous identical one.
        let mut prev_same = vec![u32::MAX; n];
        let mut ids: Vec<usize> = (0..n).collect();
        ids.sort_by_key(|&i| (span[i], size[i], align[i], i));
        for w in ids.windows(2) {
            let (a, b) = (w[0], w[1]);
            if (span[a], size[a], align[a]) == (span[b], size[b], align[b]) {
                prev_same[b] = a as u32;
            }
        }
        let fixed_peak = fixed
            .iter()
            .map(|&k| bs[k].offset.unwrap() + bs[k].size)
            .max()
            .unwrap_or(0);
        Dfs {
            gid: movable,
            size,
            align,
            span,
            nb,
            fixed_nb,
            sec_fixed,
            has_fixed: !fixed.is_empty(),
            nsec,
            rem,
            base: vec![0; n],
            placed: vec![false; n],
            off: vec![0; n],
            unplaced: (0..n as u32).collect(),
            pos: (0..n as u32).collect(),
            prev_same,
            key: vec![0; n],
            trail: Vec::new(),
            parent: vec![0; nsec + 1],
            fixed_peak,
            check_mask: ((1u64 << 16) / n.max(1) as u64)
                .clamp(1, 256)
                .next_power_of_two()
                - 1,
            cap: 0,
            goal: 0,
            best: None,
            nodes: 0,
            node_limit: u64::MAX,
            aborted: false,
            restrict: false,
            deadline,
            timed_out: false,
            stop: false,
            halt: None,
            halted: false,
        }
    }

    /// Tie-break among equal `f`. Variants 0..3: longer-lived first, larger
    /// first, larger area first; above that, one of those with a
    /// deterministic random perturbation of the ranks (for restarts).
    fn set_key_order(&mut self, variant: u32) {
        let n = self.size.len();
        let mut ids: Vec<usize> = (0..n).collect();
        let len = |i: usize| (self.span[i].1 - self.span[i].0) as u64;
        match variant % 3 {
            0 => ids.sort_by_key(|&i| (std::cmp::Reverse((len(i), self.size[i])), i)),
            1 => ids.sort_by_key(|&i| (std::cmp::Reverse((self.size[i], len(i))), i)),
            _ => {
                ids.sort_by_key(|&i| (std::cmp::Reverse(self.size[i] as u128 * len(i) as u128), i))
            }
        }
        let mut rank = vec![0u64; n];
        let mut x = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(variant as u64 + 1) | 1;
        let spread = if variant < 3 {
            0
        } else {
            (n as u64 / 6).max(2)
        };
        for (r, &i) in ids.iter().enumerate() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            rank[i] = r as u64 * 4 + if spread > 0 { (x % spread) * 4 } else { 0 };
        }
        ids.sort_by_key(|&i| (rank[i], i));
        for (r, &i) in ids.iter().enumerate() {
            self.key[i] = r as u32;
        }
    }

    fn avoid_fixed(&self, b: usize, mut v: u64) -> u64 {
        loop {
            let mut moved = false;
            for &(o, t) in &self.fixed_nb[b] {
                if v < t && o < v.saturating_add(self.size[b]) {
                    v = align_up(t, self.align[b]);
                    moved = true;
                }
            }
            if !moved {
                return v;
            }
        }
    }

    fn fixed_above(&self, s: usize, m: u64) -> u64 {
        self.sec_fixed[s]
            .iter()
            .map(|&(o, t)| t.saturating_sub(o.max(m)))
            .sum()
    }

    fn find(&mut self, mut s: u32) -> u32 {
        while self.parent[s as usize] != s {
            let up = self.parent[self.parent[s as usize] as usize];
            self.parent[s as usize] = up;
            s = up;
        }
        s
    }

    fn remove(&mut self, b: u32) {
        let p = self.pos[b as usize] as usize;
        let last = self.unplaced.pop().unwrap();
        if last != b {
            self.unplaced[p] = last;
            self.pos[last as usize] = p as u32;
        }
    }

    fn restore(&mut self, b: u32) {
        let p = self.pos[b as usize] as usize;
        if p == self.unplaced.len() {
            self.unplaced.push(b);
        } else {
            let moved = self.unplaced[p];
            self.pos[moved as usize] = self.unplaced.len() as u32;
            self.unplaced.push(moved);
            self.unplaced[p] = b;
        }
    }

    fn dfs(&mut self, w: u64, prev_key: u32, peak: u64) {
        self.nodes += 1;
        if self.nodes & self.check_mask == 0 && self.deadline.passed(self.check_mask + 1) {
            self.timed_out = true;
            self.stop = true;
        }
        if self.nodes & 63 == 0
            && self
                .halt
                .as_ref()
                .is_some_and(|h| h.load(Ordering::Relaxed))
        {
            self.halted = true;
            self.aborted = true;
            self.stop = true;
        }
        if self.nodes >= self.node_limit {
            self.aborted = true;
            self.stop = true;
        }
        if self.stop {
            return;
        }
        if self.unplaced.is_empty() {
            let pk = peak.max(self.fixed_peak);
            if pk <= self.cap {
                self.best = Some((pk, self.off.clone()));
                if pk <= self.goal {
                    self.stop = true;
                }
                self.cap = pk.saturating_sub(1);
            }
            return;
        }
        let cap = self.cap;
        let mut cands: Vec<(u64, u32, u32)> = Vec::with_capacity(self.unplaced.len());
        let (mut m1, mut m1i, mut m2) = (u64::MAX, u32::MAX, u64::MAX);
        for &b in &self.unplaced {
            let bi = b as usize;
            let mut v = align_up(self.base[bi].max(w), self.align[bi]);
            if self.has_fixed {
                v = self.avoid_fixed(bi, v);
            }
            let top = v.saturating_add(self.size[bi]);
            if top > cap {
                return;
            }
            if top < m1 {
                m2 = m1;
                m1 = top;
                m1i = b;
            } else if top < m2 {
                m2 = top;
            }
            cands.push((v, self.key[bi], b));
        }
        cands.sort_unstable();
        // Section bound by painting sections with the lowest f covering them.
        for s in 0..=self.nsec {
            self.parent[s] = s as u32;
        }
        for &(v, _, b) in &cands {
            let (lo, hi) = self.span[b as usize];
            let mut s = self.find(lo);
            while s < hi {
                let su = s as usize;
                let mut need = v.saturating_add(self.rem[su]);
                if self.has_fixed {
                    need = need.saturating_add(self.fixed_above(su, v));
                }
                if need > cap {
                    return;
                }
                self.parent[su] = s + 1;
                s = self.find(s + 1);
            }
        }
        for &(v, _, b) in &cands {
            if self.stop {
                return;
            }
            let bi = b as usize;
            let dom = if b == m1i { m2 } else { m1 };
            if v >= dom || (self.restrict && v > cands[0].0) {
                // Sorted by v: every later candidate is dominated as well.
                break;
            }
            // Equal offsets are placed in key order (prev_key == MAX: none).
            if v == w && prev_key != u32::MAX && self.key[bi] < prev_key {
                continue;
            }
            let ps = self.prev_same[bi];
            if ps != u32::MAX && !self.placed[ps as usize] {
                continue;
            }
            let top = v + self.size[bi];
            if top > self.cap {
                continue;
            }
            self.placed[bi] = true;
            self.off[bi] = v;
            self.remove(b);
            let mark = self.trail.len();
            for k in 0..self.nb[bi].len() {
                let c = self.nb[bi][k] as usize;
                if !self.placed[c] && self.base[c] < top {
                    self.trail.push((c as u32, self.base[c]));
                    self.base[c] = top;
                }
            }
            let (lo, hi) = self.span[bi];
            for s in lo..hi {
                self.rem[s as usize] -= self.size[bi];
            }
            self.dfs(v, self.key[bi], peak.max(top));
            for s in lo..hi {
                self.rem[s as usize] += self.size[bi];
            }
            while self.trail.len() > mark {
                let (c, old) = self.trail.pop().unwrap();
                self.base[c as usize] = old;
            }
            self.restore(b);
            self.placed[bi] = false;
        }
    }
}

const RESTART_BASE: u64 = 2000;
/// Node budget per buffer of the first runs aimed straight at the lower
/// bound (at least `RESTART_BASE`). One dive places every buffer and, where
/// there is slack, raises floors several times in between: on
/// somas_resnet50 (1,042 buffers, slack everywhere but two sections) a
/// successful dive takes about 6,900 nodes, so a flat 2,000 could never
/// succeed there and the search fell back to descending from the greedy's
/// peak (about 63k nodes instead of 23k).
const PRE_PER_BUFFER: u64 = 8;

/// Rungs (1% apart above the goal) a minimising search tries to fit at
/// before its runs at the cap (`run_skyline_one`).
const RUNGS: u64 = 8;

/// Nodes for which a minimising search thread, other than the first of
/// several, makes only a fit's runs at the goal before it climbs the
/// rungs (see `run_skyline_one`).
const GOAL_NODES: u64 = 20_000;

/// The Luby sequence 1 1 2 1 1 2 4 1 1 2 ... (1-based).
fn luby(i: u64) -> u64 {
    let mut k = 1;
    while (1u64 << k) - 1 < i {
        k += 1;
    }
    if (1u64 << k) - 1 == i {
        1 << (k - 1)
    } else {
        luby(i - (1u64 << (k - 1)) + 1)
    }
}

/// Time-connected groups of buffers (size > 0), in order of start time.
fn components(p: &Problem) -> Vec<Vec<usize>> {
    let bs = &p.buffers;
    let mut ids: Vec<usize> = (0..bs.len()).filter(|&i| bs[i].size > 0).collect();
    ids.sort_by_key(|&i| (bs[i].lower, i));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut reach = 0u64;
    for i in ids {
        if out.is_empty() || bs[i].lower >= reach {
            out.push(Vec::new());
        }
        reach = reach.max(bs[i].upper);
        out.last_mut().unwrap().push(i);
    }
    out
}

/// Groups of more buffers than this are left to the greedy stage: the
/// exact search's per-group state includes the time-overlap graph (pairs of
/// buffers), and on somas_pangu_2.6B (18,692 buffers, 12M pairs) a dive
/// found nothing in 2 s while holding 0.7 GB.
pub(crate) const SEARCH_MAX: usize = 5_000;

/// Improve `incumbent` (peak `peak`): stop once the peak is <= `goal`, or the
/// space is exhausted, or at `deadline`. `lb` is a proven lower bound.
#[allow(clippy::too_many_arguments)]
pub(crate) fn improve(
    p: &Problem,
    incumbent: &[u64],
    peak: u64,
    goal: u64,
    deadline: Deadline,
    lb: u64,
    minimize: bool,
    capacity: Option<u64>,
    threads: usize,
) -> Outcome {
    let bs = &p.buffers;
    let mut offsets = incumbent.to_vec();
    let comps = components(p);
    let comp_peak = |off: &[u64], c: &[usize]| c.iter().map(|&i| off[i] + bs[i].size).max();
    let mut order: Vec<usize> = (0..comps.len()).collect();
    order.sort_by_key(|&c| std::cmp::Reverse(comp_peak(&offsets, &comps[c])));
    let mut proven = lb;
    // Target for every group: nothing below `floor` helps the overall peak.
    let mut floor = goal.max(lb);
    for &c in &order {
        let members = &comps[c];
        let cur = comp_peak(&offsets, members).unwrap_or(0);
        if cur <= floor {
            continue;
        }
        if members.len() > SEARCH_MAX {
            // Too large to search (its graph and state would not stay
            // proportional to the instance); the greedy improvement has had
            // it. Nothing below its peak helps the others.
            floor = cur;
            continue;
        }
        // Minimising tightens from the incumbent; otherwise aim at the goal.
        // With a capacity, anything above it is useless: aim there first.
        let cap = if minimize {
            capacity.map_or(cur - 1, |c| c.max(floor).min(cur - 1))
        } else {
            floor
        };
        let g = if crate::skyline::applies(p, members) {
            {
                // Minimising under a capacity the incumbent exceeds: fit first.
                let fit_first = minimize && capacity.is_some_and(|c| cur > c);
                run_skyline(
                    p,
                    members,
                    deadline.clone(),
                    (cap, fit_first),
                    floor,
                    threads,
                )
            }
        } else {
            run_general(p, members, deadline.clone(), cap, floor)
        };
        let newpeak = match &g.best {
            Some((pk, loc)) => {
                for (k, &gi) in g.gid.iter().enumerate() {
                    offsets[gi] = loc[k];
                }
                *pk
            }
            None => cur,
        };
        if g.exhausted {
            // No placement of this group with peak <= g.cap exists.
            proven = proven.max(g.cap.saturating_add(1).min(newpeak));
        }
        // Probes proved no placement of this group below `g.proof`.
        proven = proven.max(g.proof.min(newpeak));
        floor = floor.max(newpeak);
        if g.timed_out {
            break;
        }
    }
    let _ = peak;
    let newpeak = crate::check::peak_of(p, &offsets);
    Outcome {
        offsets,
        peak: newpeak,
        proven_lb: proven,
    }
}

/// What the search of one group found.
struct GroupResult {
    gid: Vec<usize>,
    best: Option<(u64, Vec<u64>)>,
    /// The space below `cap + 1` was exhausted without reaching `goal`.
    exhausted: bool,
    /// Proven by probes that exhausted their space: no placement of the
    /// group has a peak below this (0: nothing proven).
    proof: u64,
    cap: u64,
    timed_out: bool,
}

impl GroupResult {
    /// A search that ends before its runs at the cap: `d`'s placement (at
    /// the goal, or none), with what the probes proved; `halt` stops the
    /// other threads of the portfolio.
    fn early(
        d: &crate::skyline::Sky,
        sh: Option<&Shared>,
        proof: u64,
        goal: u64,
        halt: bool,
    ) -> Self {
        if let (Some(s), true) = (sh, halt) {
            s.halt.store(true, Ordering::Relaxed);
        }
        GroupResult {
            gid: d.gid.clone(),
            best: d.best.clone(),
            exhausted: false,
            proof,
            cap: goal,
            timed_out: d.timed_out,
        }
    }
}

/// Experiment knob from the environment (restart base, first order
/// variant, branching mode); the default when unset.
fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `MEMPLAN_DEBUG` asks for the solver's progress on stderr.
pub(crate) fn debug() -> bool {
    std::env::var_os("MEMPLAN_DEBUG").is_some()
}

/// What the threads of a parallel skyline portfolio share.
struct Shared {
    /// Set by the first thread that reaches the goal or exhausts its space.
    halt: Arc<AtomicBool>,
    /// The lowest cap any thread has reached (its best peak minus one).
    cap: AtomicU64,
}

/// Skyline portfolio on `threads` threads (see `run_skyline_one`; thread
/// `k` runs variant `k`). With one thread this is variant 0 alone and
/// deterministic. With more, the first thread to reach the goal or to
/// exhaust its space stops the others; the result is the best placement
/// over all threads (ties to the lowest thread), so it may differ between
/// runs, but it is a valid placement all the same and any proof of
/// optimality holds.
fn run_skyline(
    p: &Problem,
    members: &[usize],
    deadline: Deadline,
    (cap, fit_first): (u64, bool),
    goal: u64,
    threads: usize,
) -> GroupResult {
    let threads = knob("MEMPLAN_THREADS", threads as u64) as usize;
    if threads <= 1 {
        let v = knob("MEMPLAN_VARIANT", 0) as u32;
        return run_skyline_one(p, members, deadline, (cap, fit_first), goal, v, None);
    }
    let sh = Shared {
        halt: Arc::new(AtomicBool::new(false)),
        cap: AtomicU64::new(cap),
    };
    let rs: Vec<GroupResult> = std::thread::scope(|sc| {
        let hs: Vec<_> = (1..threads as u32)
            .map(|k| {
                let sh = &sh;
                let deadline = deadline.clone();
                // The search recurses once per node of its path.
                std::thread::Builder::new()
                    .stack_size(crate::SEARCH_STACK)
                    .spawn_scoped(sc, move || {
                        run_skyline_one(p, members, deadline, (cap, fit_first), goal, k, Some(sh))
                    })
                    .expect("spawn portfolio thread")
            })
            .collect();
        let mut rs = vec![run_skyline_one(
            p,
            members,
            deadline,
            (cap, fit_first),
            goal,
            0,
            Some(&sh),
        )];
        rs.extend(hs.into_iter().map(|h| h.join().expect("portfolio thread")));
        rs
    });
    let mut best: Option<(u64, Vec<u64>)> = None;
    for r in &rs {
        if let Some(b) = &r.best {
            if best.as_ref().is_none_or(|c| b.0 < c.0) {
                best = Some(b.clone());
            }
        }
    }
    let reached = best.as_ref().is_some_and(|b| b.0 <= goal);
    let proof = rs.iter().filter(|r| r.exhausted).map(|r| r.cap).max();
    GroupResult {
        gid: rs[0].gid.clone(),
        best,
        exhausted: proof.is_some(),
        proof: rs.iter().map(|r| r.proof).max().unwrap_or(0),
        cap: proof.unwrap_or(rs[0].cap),
        timed_out: !reached && proof.is_none(),
    }
}

/// What one group's runs share, fixed before the first: the gcd of the
/// sizes, the restart base, the first order variant, whether the modes
/// are flipped (variant 0) and whether the level bound pays off.
struct RunKnobs {
    unit: u64,
    base: u64,
    v0: u32,
    flip: bool,
    tight: bool,
}

/// Minimising without a capacity to meet first, and the goal missed:
/// before the runs at the cap, fit at rungs 1%, 2%, ... `RUNGS`% above
/// the goal, lowest first, each with the four runs a fit would start
/// with (both directions, both branching modes, twice the base budget);
/// the first rung that fits becomes the cap, and a rung whose space is
/// exhausted proves its target as a probe does (the goal rises). A
/// fit's first runs often succeed where the descent from the greedy
/// peak stalls above: J fits at 1,039,360 in 7,443 nodes (0.01 s),
/// where minimising ended at 1,042,432-1,050,624 (1,025 KiB mostly) in
/// 2 s on two threads, and at 1,139,712 within 100k nodes on one; with
/// the rungs, 1,037,312 on every 2 s run and 1,039,360 within 100k
/// nodes (tests/shared.rs). Where no rung fits (D) they cost 128k
/// nodes: on one thread D then ends higher within 100k and 300k nodes
/// (1,291,264 and 1,132,544 against 1,156,096 and 1,107,968), about
/// the same within 1M (1,040,384 against 1,038,336), and at 1,028,096
/// in 2 s as before. The tight instances (their rungs fit, at 2-7%)
/// reach their bound 0.05-0.1 s later: B, E, F, I in 0.24-0.42 s
/// against 0.15-0.29 s, five runs each beside a concurrent C build.
fn climb_rungs(
    k: &RunKnobs,
    fwd: &mut crate::skyline::Sky,
    bwd: &mut crate::skyline::Sky,
    gen: &mut Dfs,
    goal: &mut u64,
    proof: &mut u64,
    sh: Option<&Shared>,
) {
    'rungs: for step in 1..=RUNGS {
        let target = (*goal + (*goal / 100).max(1) * step).next_multiple_of(k.unit);
        if target >= fwd.cap.min(bwd.cap) {
            break;
        }
        for r in 0..4u32 {
            let d = if r < 2 { &mut *fwd } else { &mut *bwd };
            let kept = d.cap;
            d.cap = target;
            d.set_order(k.v0, false);
            d.mode = (r % 2) ^ k.flip as u32;
            d.level = d.mode == 1 && k.tight;
            d.begin_run(2 * k.base);
            let found = d.run();
            if debug() {
                eprintln!("rung {step} at {target}: run {r}, found {found}");
            }
            if !found {
                d.cap = kept;
            }
            if !found && !d.aborted && !d.timed_out && !d.halted {
                // Exhausted: nothing fits at the rung, a proof as a
                // probe's; the next rung up is the next to try.
                *proof = (target + 1).next_multiple_of(k.unit);
                *goal = *proof;
                fwd.goal = *goal;
                bwd.goal = *goal;
                gen.goal = *goal;
                if *goal > fwd.cap.min(bwd.cap) {
                    break 'rungs;
                }
                continue 'rungs;
            }
            if found || d.timed_out || d.halted {
                if let (Some(s), true) = (sh, found) {
                    s.cap.fetch_min(d.cap, Ordering::Relaxed);
                }
                break 'rungs;
            }
        }
    }
}

/// After the rungs: the direction whose placement is at the goal, or the
/// first when the goal is proven above the cap (the incumbent is at the
/// bound); the search ends with it. `None`: the runs at the cap go on.
/// The main loop carries the cap and the best placement over from one
/// direction to the other.
fn settled<'a>(
    fwd: &'a crate::skyline::Sky,
    bwd: &'a crate::skyline::Sky,
    goal: u64,
) -> Option<&'a crate::skyline::Sky> {
    [fwd, bwd]
        .into_iter()
        .find(|d| d.best.as_ref().is_some_and(|b| b.0 <= goal) || goal > fwd.cap.min(bwd.cap))
}

/// Skyline search with restarts: runs with growing node budgets (Luby
/// sequence) and varied tie-breaks; the cap found so far carries over, and
/// the budget grows without bound, so a run eventually completes unless time
/// runs out first. `variant` 0 is the sequential portfolio; variant 1 (for a
/// second thread) swaps the two directions and the two branching modes
/// (`flip` below), so that the threads start complementary searches
/// (fail-first wins some instances, lowest-first others). `sh`: shared with
/// other threads.
fn run_skyline_one(
    p: &Problem,
    members: &[usize],
    deadline: Deadline,
    (cap, fit_first): (u64, bool),
    mut goal: u64,
    variant: u32,
    sh: Option<&Shared>,
) -> GroupResult {
    // Every peak the skyline builds is a multiple of the gcd of the sizes
    // (offsets are tops of other buffers, alignments divide it), and any
    // placement drops to one as low: a space exhausted at `c` proves the
    // next multiple above `c` a lower bound (`proof`), and the goal rises
    // to it.
    let unit = members
        .iter()
        .map(|&i| p.buffers[i].size)
        .fold(0, crate::skyline::gcd)
        .max(1);
    let mut proof = 0u64;
    // Variant 0 (the sequential default) runs the reversed direction first
    // and with the modes flipped; measured alone (release, 2 cores under
    // load) it fits I in ~1.4 s (unflipped ~2.4 s), J in ~0.8 s (~1.1 s),
    // E in ~0.35 s (~0.7 s), F in ~0.4 s (same).
    let flip = variant.is_multiple_of(2);
    let base = knob("MEMPLAN_BASE", RESTART_BASE);
    let mid_start = knob("MEMPLAN_MIDSTART", 64) as u32;
    let mid_nodes = knob("MEMPLAN_MIDNODES", 1_000_000);
    let mut mid_on = false;
    let mid_budget = knob("MEMPLAN_MID", 8);
    let v0 = knob("MEMPLAN_V0", 0) as u32;
    let mode = knob("MEMPLAN_MODE", 2) as u32;
    let mut fwd = crate::skyline::Sky::new(p, members, deadline.clone(), flip);
    // The level bound only checks sections without slack; unless many
    // sections have none at the goal (K: 45%; E, F, I: under 15%) it
    // rarely prunes and only costs.
    let perfect = fwd.tight_sections(goal) > 0;
    let tight = fwd.tight_sections(goal) * 5 >= fwd.sections();
    let mut bwd = crate::skyline::Sky::new(p, members, deadline.clone(), !flip);
    for d in [&mut fwd, &mut bwd] {
        d.cap = cap;
        d.goal = goal;
        d.halt = sh.map(|s| s.halt.clone());
    }
    // The general search joins the portfolio every sixth run: with plenty
    // of slack (D) its offset-ordered dives succeed where the skyline's
    // bottom-up filling thrashes. Its runs prove nothing here.
    let mut gen = Dfs::new(p, members, deadline);
    gen.goal = goal;
    gen.halt = sh.map(|s| s.halt.clone());
    let mut grun = 0u32;
    // Minimising on two or more threads, the first (variant 0) starts as a
    // fit at the goal: every run a probe there, in the order a fit makes
    // its runs, without the dive, the rungs, the runs at the cap or the
    // halfway probes, which the other threads make; once the goal has
    // resisted it for `mid_nodes` nodes, it joins them. A goal that a fit
    // reaches is so reached about as fast as the fit's variant 0 would
    // (issue 12 item 3). Before, each thread gave the goal every other
    // run, and once the goal had resisted every fourth, in half of the
    // (direction, mode) pairs: J up to its 54th event time (176 buffers)
    // fits at its bound within 2M nodes, where minimising ended 0.9 %
    // above it with 16M; now it reaches it within 7M (tests/shared.rs).
    // memplan-bench --minimize --no-capacity, five runs: E 0.24-0.30 ->
    // 0.14-0.23 s, F 0.26-0.33 -> 0.06-0.15 s, I 0.31-0.35 -> 0.10-0.24
    // s, B about the same (0.2-0.3 s; its fit is found by the other
    // variant); fits at the capacity take B 0.06-0.10, E 0.31-0.34, F
    // 0.21-0.25 and I 0.31-0.34 s. Where the goal is out of reach, the
    // thread's share of the descent matters: kept at the goal throughout,
    // on 24 windows of D and J (a third to four fifths of their event
    // times) at 2 s the summed excess over the bound was 3,531 (1e-4)
    // against 2,529 and 2,519 before; with the limit 2,536 (2M nodes:
    // 2,636), and the 14 windows at their bound there in 0.048 s on
    // average, against 0.086-0.103 s. D and J themselves: within noise
    // (3M nodes, two threads, six order variants, mean 1032.5 and 1026.2
    // units, against 1034.7-1036.3 and 1025.2-1025.3).
    // The other threads, and a lone one, start the same way for
    // `GOAL_NODES` nodes only, and then climb the rungs they put off. B's
    // fit is found by variant 1 at its fifth run (10k nodes), which
    // minimising reached only after the rungs and with every other run at
    // the cap: 0.19-0.23 s against the fit's 0.05-0.07 s, now 0.06-0.09 s
    // (E, F, I within noise). On the 24 windows of D and J above, the
    // summed excess was 2,547-2,558 at 20k nodes (2,515 at 32k, 2,755 at
    // 64k) against 2,442-2,547 without; climbing no rungs after the phase
    // cost 150 (2,697 at 16k). D and J at 2 s are unchanged. On one thread
    // the phase and the rungs compete: B reaches its bound within 20k
    // nodes (160k before; its fit needs 20k), which takes a phase over
    // 12k, while J's fit at 1,039,360 (a rung) within 100k nodes takes one
    // under 28k (tests/shared.rs); F (640k, fit 320k) would gain from a
    // phase of 32k, E and I (1.28M and 640k; fits 640k and 320k) from none
    // that short. D and J at 3M nodes over six order variants end at the
    // same peaks, and strata's plans (one thread) are byte for byte the
    // same. MEMPLAN_GOAL_THREAD=0 turns all of this off, for such
    // comparisons; MEMPLAN_GOAL1 and MEMPLAN_GOAL_ONE set the phase of the
    // other threads and of a lone one.
    let first_of_many = variant == 0 && sh.is_some();
    let goal_nodes = if first_of_many {
        mid_nodes
    } else if sh.is_some() {
        knob("MEMPLAN_GOAL1", GOAL_NODES)
    } else {
        knob("MEMPLAN_GOAL_ONE", GOAL_NODES)
    };
    let mut goal_only =
        goal_nodes > 0 && cap > goal && !fit_first && knob("MEMPLAN_GOAL_THREAD", 1) == 1;
    // First aim straight at the goal (usually the lower bound) with a small
    // budget (about one dive, `PRE_PER_BUFFER`): the cap then prunes
    // hardest, and a hit is optimal at once. A thread that starts with a
    // goal phase (above) aims there with a fit's runs instead, so this
    // dive is for minimising under a capacity to meet first.
    if cap > goal && !goal_only {
        let mut hit = None;
        'pre: for k in 0..2 {
            let d = if k == 0 { &mut fwd } else { &mut bwd };
            d.cap = goal;
            for m in 0..2 {
                d.mode = m ^ flip as u32;
                d.level = d.mode == 1 && tight;
                let n0 = d.nodes;
                d.begin_run(base.max(PRE_PER_BUFFER * members.len() as u64));
                let ok = d.run();
                if debug() {
                    eprintln!("pre {k} mode {} nodes {} found {ok}", d.mode, d.nodes - n0);
                }
                if ok || d.timed_out || d.halted {
                    hit = Some(k);
                    break 'pre;
                }
                if !d.aborted {
                    // Exhausted: nothing fits at the goal.
                    proof = (goal + 1).next_multiple_of(unit);
                    d.cap = cap;
                    break 'pre;
                }
            }
            d.cap = cap;
        }
        if let Some(k) = hit {
            let d = if k == 0 { &fwd } else { &bwd };
            return GroupResult::early(d, sh, proof, goal, d.best.is_some());
        }
        if proof > 0 {
            goal = proof;
            for d in [&mut fwd, &mut bwd] {
                d.goal = goal;
            }
            gen.goal = goal;
            if goal > cap {
                // The incumbent (above `cap`) is at the proven bound.
                return GroupResult {
                    gid: fwd.gid.clone(),
                    best: None,
                    exhausted: false,
                    proof,
                    cap,
                    timed_out: false,
                };
            }
        }
    }
    let knobs = RunKnobs {
        unit,
        base,
        v0,
        flip,
        tight,
    };
    // Minimising without a capacity to meet first: the rungs (see
    // `climb_rungs`), unless this thread starts at the goal; the first
    // thread then skips them, the others climb them when their goal phase
    // ends.
    if cap > goal && !fit_first && !goal_only {
        climb_rungs(
            &knobs, &mut fwd, &mut bwd, &mut gen, &mut goal, &mut proof, sh,
        );
        if let Some(d) = settled(&fwd, &bwd, goal) {
            return GroupResult::early(d, sh, proof, goal, true);
        }
    }
    let mut run = 0u32;
    // Minimising (the cap starts above the goal): every other run is a
    // probe at the goal itself, the run a fit at that capacity would make
    // (its own run count and Luby budget), so minimising reaches a
    // feasible goal about as fast as fitting there (B: the bound after
    // ~9 s before, where a fit takes 0.06 s). The probes share the dead
    // -state memo, valid at every cap at or below the one it was found at.
    let mut prun = 0u32;
    // The probes at the goal count their own runs: they make a fit's runs
    // 0, 1, 2, ... in turn (every direction and branching mode, each order
    // variant, the fit's Luby budgets) however the halfway probes
    // interleave with them; numbered by all probes, they had only the
    // even numbers once the halfway probes began, and so one branching
    // mode per direction. The halfway probes keep the probes' numbers (odd
    // ones): numbered apart, D and J at 3M nodes, one thread, six order
    // variants, went 1029.7 -> 1034.8 and 1027.5 -> 1020.5 units, noise
    // either way. Odd numbers give every halfway probe of a thread the same
    // branching mode; numbered apart they cycle through both, as a fit's
    // runs do, and on 64 windows of D, I and J (`cli::windows_of`; one
    // thread, 2M nodes, order variants 0-2) the summed excess over the
    // bounds went 28,826 -> 31,341 (1e-4; measured before the wider
    // restarts of `Sky::set_order`, which brought it to 23,801).
    let mut goal_run = 0u32;
    // The halfway probes' lower end: the goal, or the last target that a
    // halfway probe failed to reach within its budget (see `target`).
    let bisect = knob("MEMPLAN_SOFT", 1) == 1;
    let mut soft = 0u64;
    let probing = cap > goal;
    let mut probe_turn = false;
    // Runs cycle through (direction, branching mode); the order variant
    // changes every cycle. Cap and node count carry over between them.
    let d = loop {
        // Under a capacity not yet met, probe only once something fits.
        if goal_only && fwd.nodes.max(bwd.nodes) >= goal_nodes {
            goal_only = false;
            if !first_of_many {
                climb_rungs(
                    &knobs, &mut fwd, &mut bwd, &mut gen, &mut goal, &mut proof, sh,
                );
                if let Some(d) = settled(&fwd, &bwd, goal) {
                    return GroupResult::early(d, sh, proof, goal, true);
                }
            }
        }
        if goal_only {
            probe_turn = true;
        } else if probing && (!fit_first || fwd.best.is_some() || bwd.best.is_some()) {
            probe_turn = !probe_turn;
        } else {
            probe_turn = false;
        }
        let probe = probing && probe_turn;
        if let Some(s) = sh {
            let c = s.cap.load(Ordering::Relaxed);
            fwd.cap = fwd.cap.min(c);
            bwd.cap = bwd.cap.min(c);
        }
        if !probe && run % 6 == 5 {
            gen.cap = fwd.cap.min(bwd.cap);
            gen.set_key_order(grun / 2);
            gen.node_limit = gen.nodes.saturating_add(base * luby(grun as u64 / 2 + 1));
            gen.aborted = false;
            gen.restrict = grun % 2 == 1;
            gen.stop = false;
            gen.best = None;
            gen.dfs(0, u32::MAX, 0);
            grun += 1;
            run += 1;
            if let Some((pk, off)) = gen.best.take() {
                for d in [&mut fwd, &mut bwd] {
                    if pk <= d.cap {
                        d.cap = pk.saturating_sub(1);
                        d.best = Some((pk, off.clone()));
                    }
                }
                if pk <= goal {
                    break &mut fwd;
                }
            }
            if gen.timed_out {
                fwd.timed_out = true;
                break &mut fwd;
            }
            if gen.halted {
                fwd.halted = true;
                break &mut fwd;
            }
            continue;
        }
        // Whether this probe aims halfway between the goal and the cap (see
        // its target below); a run carries the larger node count over.
        mid_on = mid_on || prun >= mid_start || fwd.nodes.max(bwd.nodes) >= mid_nodes;
        let halfway = probe && mid_on && !goal_only && prun % 2 == 1;
        let r = match (probe, halfway) {
            (false, _) => run,
            (true, true) => prun,
            (true, false) => goal_run,
        };
        let (d, o) = if r & 2 == 0 {
            (&mut fwd, &mut bwd)
        } else {
            (&mut bwd, &mut fwd)
        };
        // Carry over what the other direction found.
        d.cap = d.cap.min(o.cap);
        d.nodes = d.nodes.max(o.nodes);
        if o.best
            .as_ref()
            .is_some_and(|b| d.best.as_ref().is_none_or(|c| b.0 < c.0))
        {
            d.best = o.best.clone();
        }
        // Alternate the branching strategies (one is lucky where the other
        // is not; see `Sky::pick_well`).
        // When the goal is a perfect packing (some section has no slack at
        // all), one mode gets three runs in four (fail-first flipped, i.e.
        // in variant 0; lowest-first unflipped). Measured in nodes to fit
        // (1 thread) against the old two in three the other way round:
        // I 413k -> 165k, K 9.5k -> 5.5k, A 2.2k -> 0.2k, G 8.8k -> 4.8k,
        // the rest equal or a little lower; variant 1 equal or lower too.
        d.mode = match mode {
            2 if perfect => r.is_multiple_of(4) as u32,
            2 => r % 2,
            m => m,
        } ^ flip as u32;
        // The level bound pays off with fail-first branching (K), not
        // with lowest-first (its cost per node dominates on E, F, J).
        d.level = d.mode == 1 && tight;
        let kept = d.cap;
        // Once the goal has resisted `mid_start` probes or `mid_nodes`
        // nodes, every other probe aims halfway between the goal and the
        // cap instead, with `mid_budget` times the budget: where the goal
        // is out of reach (D, J: the load bound is not tight) those probes
        // bisect the gap the way fits at falling capacities would, each
        // one that fits halving it. Measured with memplan-bench --minimize
        // --no-capacity --time-limit 2: D 1.080 -> 1.043 of its bound; J
        // 1.054 -> 1.058 (noise of the parallel portfolio is about as
        // large); the tight instances reach the goal first (I, E, F as
        // fast as before: I within 0.3M nodes; from the first probe on, I
        // took 1.7 s). The node count (D: about 0.6 s) is there because 64
        // probes took D 1.4 s on one machine and over 2 s on another, where
        // no halfway probe ran and D stayed at 1.085. Counted in nodes, not
        // seconds, so a node-limited solve stays the same everywhere.
        // These probes take the large steps. On J (one thread, MEMPLAN_V0=2,
        // 60M nodes) the runs at the cap lower the peak by one unit (1 KiB)
        // per placement found, 1190 -> 1072 units, and then two halfway
        // probes found 987 and then 977 units: 1.0114 of the bound, the
        // lowest placement of J known (250M nodes found none lower).
        // Other targets, in units over ten order variants at 5M nodes
        // (mean, D / J), against halfway's 1020 / 1017:
        //   - halfway above the highest target that failed: 1022 / 1012;
        //   - one step below the cap, doubled per hit and halved per
        //     miss: 1030 (every variant stuck there) / 1014;
        //   - rungs 1/128 to 1/8 above the goal in turn: 1037 / 1024;
        //   - every run a probe once mid_on: 1025 / 1015;
        //   - the goal only every fourth probe: 1021 / 1019.
        // None is better on both, and the spread between variants (D 1012
        // to 1040, J 987 to 1034) is larger than any of the differences.
        // Windows of D, I and J (`cli::window`, cut at both ends, whose
        // bound is not tight either) settled it for the first: a halfway
        // probe cut short by its budget is no proof, but aiming at the
        // same target again and again wasted them (fits at capacities a
        // little apart took 15k nodes, 130k and over 5M on I[78,174)). So
        // the next one aims halfway above it (`soft`), until the targets
        // reach the cap and start from the goal again. One thread, 4M
        // nodes, summed excess over the bounds (1e-4) of 40 windows of D,
        // I and J (`windows_of`, 8 each and 8 more of I and J), order
        // variants 0-2: 6,239 / 6,139 / 6,520 -> 5,110 / 5,476 / 5,315
        // (one window fewer at its bound in two); 24 other windows of D
        // and J, variants 0-1: 2,509 / 2,534 -> 2,608 / 2,258. D and J at
        // 3M nodes, six variants, mean: 1029.7 -> 1034.5 and 1027.5 ->
        // 1021.8 units. MEMPLAN_SOFT=0 turns it off.
        let target = if halfway {
            let c = d.cap.min(o.cap);
            let lo = if soft > goal && soft < c { soft } else { goal };
            (lo + c.saturating_sub(lo) / 2)
                .next_multiple_of(unit)
                .min(c)
        } else {
            goal
        };
        if probe {
            d.cap = target;
        }
        // The order variant, perturbed more widely where the run's cap
        // leaves slack in every section (see `Sky::set_order`).
        d.set_order(r / 4 + v0, d.tight_sections(d.cap) == 0);
        let budget = base.saturating_mul(luby(r as u64 + 1));
        d.begin_run(if probe && target > goal {
            budget.saturating_mul(mid_budget)
        } else {
            budget
        });
        let n0 = d.nodes;
        let found = d.run();
        if probe && !found {
            d.cap = kept;
        }
        if debug() {
            eprintln!(
                "run {run} probe {probe} mode {} level {} nodes {} found {found} aborted {}",
                d.mode,
                d.level,
                d.nodes - n0,
                d.aborted
            );
        }
        if let (Some(s), true) = (sh, found) {
            s.cap.fetch_min(d.cap, Ordering::Relaxed);
        }
        if d.halted {
            break d;
        }
        if found {
            if d.best.as_ref().is_some_and(|b| b.0 <= d.goal) {
                break d;
            }
            // A placement below the old cap: continue with the new one.
            continue;
        }
        if d.timed_out {
            break d;
        }
        if probe {
            prun += 1;
            goal_run += !halfway as u32;
            if halfway && d.aborted && bisect {
                // Cut short: the next aims above it, until the targets
                // reach the cap; then they start from the goal again.
                soft = if target >= d.cap.min(o.cap) || target <= soft {
                    goal
                } else {
                    target
                };
            }
            if !d.aborted {
                // A probe that ran out of space proves its target
                // infeasible: record it, and probe the next capacity up.
                proof = (target + 1).next_multiple_of(unit);
                goal = proof;
                d.goal = goal;
                o.goal = goal;
                gen.goal = goal;
                if debug() {
                    eprintln!("probe exhausted: proven lower bound {proof}");
                }
                if goal > d.cap.min(o.cap) {
                    // The best placement (or the incumbent) is at the bound.
                    break d;
                }
            }
            continue;
        }
        if !d.aborted {
            break d;
        }
        run += 1;
    };
    if debug() {
        eprintln!(
            "skyline group {} buffers, {} nodes, {} runs, timed_out {}, best {:?}",
            d.gid.len(),
            d.nodes,
            run + 1,
            d.timed_out,
            d.best.as_ref().map(|b| b.0)
        );
    }
    let exhausted =
        !d.timed_out && !d.aborted && !d.halted && d.best.as_ref().is_none_or(|b| b.0 > d.goal);
    if let Some(s) = sh {
        if exhausted || d.best.as_ref().is_some_and(|b| b.0 <= d.goal) {
            s.halt.store(true, Ordering::Relaxed);
        }
    }
    GroupResult {
        gid: d.gid.clone(),
        best: d.best.clone(),
        exhausted,
        proof,
        cap: d.cap,
        timed_out: d.timed_out,
    }
}

/// The general search (fixed buffers, alignments) with restarts as above;
/// odd runs are heuristic (only the lowest buffers are branched on).
fn run_general(
    p: &Problem,
    members: &[usize],
    deadline: Deadline,
    cap: u64,
    goal: u64,
) -> GroupResult {
    let mut d = Dfs::new(p, members, deadline);
    d.cap = cap;
    d.goal = goal;
    let mut run = 0u32;
    loop {
        d.set_key_order(run / 2);
        d.node_limit = d
            .nodes
            .saturating_add(RESTART_BASE * luby(run as u64 / 2 + 1));
        d.aborted = false;
        d.restrict = run % 2 == 1;
        d.stop = false;
        d.dfs(0, u32::MAX, 0);
        let complete = !d.aborted && !d.restrict;
        if complete || d.timed_out || d.best.as_ref().is_some_and(|b| b.0 <= d.goal) {
            break;
        }
        run += 1;
    }
    if debug() {
        eprintln!(
            "group {} movable, {} nodes, {} runs, timed_out {}, best {:?}",
            d.size.len(),
            d.nodes,
            run + 1,
            d.timed_out,
            d.best.as_ref().map(|b| b.0)
        );
    }
    let exhausted =
        !d.timed_out && !d.aborted && !d.restrict && d.best.as_ref().is_none_or(|b| b.0 > d.goal);
    GroupResult {
        gid: d.gid,
        best: d.best,
        exhausted,
        proof: 0,
        cap: d.cap,
        timed_out: d.timed_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Buffer, Problem};

    /// Nine buffers whose load is 6 units at every time but that need 7:
    /// the smallest such instance a search over random tight instances
    /// turned up (the solver proves 7 optimal).
    fn gadget(unit: u64) -> Problem {
        let spans = [
            (0, 1, 3),
            (0, 2, 3),
            (1, 3, 1),
            (2, 3, 1),
            (1, 4, 2),
            (2, 4, 1),
            (2, 5, 1),
            (3, 5, 2),
            (4, 5, 3),
        ];
        Problem {
            buffers: spans
                .iter()
                .enumerate()
                .map(|(i, &(l, u, s))| Buffer::new(i.to_string(), l, u, s * unit))
                .collect(),
            capacity: None,
        }
    }

    #[test]
    fn an_exhausted_probe_proves_the_next_multiple_of_the_gcd() {
        let unit = 1024;
        let p = gadget(unit);
        assert_eq!(crate::lower_bound(&p), 6 * unit);
        let members: Vec<usize> = (0..p.buffers.len()).collect();
        assert!(crate::skyline::applies(&p, &members));
        // Minimising from an incumbent of 9 units with the load bound as
        // the goal: the probe at 6 units runs out of space, which proves
        // 7 units (6 units + 1 byte, rounded up to the gcd of the sizes),
        // and the search then stops at a placement of 7.
        let deadline = Deadline::new(
            std::time::Instant::now() + std::time::Duration::from_secs(60),
            None,
        );
        let g = run_skyline_one(
            &p,
            &members,
            deadline,
            (9 * unit - 1, false),
            6 * unit,
            0,
            None,
        );
        assert_eq!(g.proof, 7 * unit);
        assert_eq!(g.best.as_ref().map(|b| b.0), Some(7 * unit));
        // Through `solve`: the bound reported is 7 units, and optimal.
        let s = crate::solve(&p, &crate::Options::default()).unwrap();
        assert_eq!(
            (s.peak, s.lower_bound, s.optimal),
            (7 * unit, 7 * unit, true)
        );
        // One byte more on one buffer breaks the gcd: each exhausted probe
        // proves one byte more, and the probes and rungs climb from the goal.
        let mut q = gadget(unit);
        q.buffers[0].size += 1;
        let deadline = Deadline::new(
            std::time::Instant::now() + std::time::Duration::from_secs(60),
            None,
        );
        let lb = crate::lower_bound(&q);
        let g = run_skyline_one(&q, &members, deadline, (9 * unit, false), lb, 0, None);
        let best = g.best.as_ref().map_or(9 * unit, |b| b.0);
        assert!(g.proof > lb && g.proof <= best, "{} {lb} {best}", g.proof);
        // The rungs above the goal that run out of space prove their own
        // targets: more than the first rung (1% above the bound), where
        // the probes alone climbed a byte at a time (the optimum is 7
        // units, and rungs up to 7,119 bytes are exhausted).
        assert!(g.proof > lb + lb / 100, "{} {lb}", g.proof);
    }
}
