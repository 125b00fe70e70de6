//! Narrow instances fitted window by window.
//!
//! Where few buffers are live at once, the exact search places a few
//! thousand of them at their bound in milliseconds, but a whole instance
//! of tens of thousands is one time-connected group, too large for it
//! (`search::SEARCH_MAX`), and the greedy improvement can leave it far
//! above its bound: chains whose buffers each live exactly two steps
//! (`cli::chain_like`), whose optimum is their bound (each buffer
//! alternately at the bottom and at the top), ended at 1.26-1.37 of it
//! with 100,000 buffers in 2 s (seeds 1-3; seed 1 at 1.22 after 8 s),
//! and one of three with 20,000 at 1.084. Cut into windows, they reach
//! it in 0.41-0.43 s and 0.07-0.09 s.
//!
//! Here the timeline is cut at times where the buffers that cross the cut
//! can be stacked from offset 0 up, the one that starts first and ends
//! last lowest (their lifetimes nest), and where those of one cut that do
//! not cross the next end before the next one's own start (those that
//! cross both, such as weights live throughout, lie lowest in both, at
//! the same offsets). With the crossing buffers fixed there,
//! the windows between the cuts are independent: each holds the buffers
//! that live inside it and, fixed, those of its two cuts, which are a
//! floor under the others (`skyline::fixed_floor`), so the exact search
//! takes each window as it is. Every window is fitted at the goal (the
//! bound when minimising), the one with the largest load first; one that
//! does not fit ends the attempt, and the solve goes on to its other
//! stages. The stacks are a restriction (a placement at the goal may need
//! a crossing buffer higher up), so a failure proves nothing.

use crate::{Buffer, Deadline, Options, Problem};
use std::time::Instant;

/// At most this many buffers live at once make an instance narrow enough
/// to be cut into windows.
pub(crate) const NARROW: usize = 64;

/// Free buffers per window (at least; a window ends at the first cut
/// after them): within [`crate::LARGE`] with its two stacks, so that each
/// window goes to the greedy portfolio and the exact search.
const WINDOW: usize = 480;

/// A cut: its time, the buffers that cross it from the bottom up at their
/// offsets, and the load of the window that ends there.
type Cut = (u64, Vec<(usize, u64)>, u64);

/// One window: its problem (the fixed buffers of its two cuts first, at
/// their stack offsets, then the free ones, each cut to the window's
/// time), the free buffers' indices in the whole problem, and its load
/// (the largest total size live at once).
pub(crate) struct Window {
    pub(crate) problem: Problem,
    pub(crate) free: Vec<usize>,
    pub(crate) load: u64,
}

/// The windows of `p` at `goal`, and the offsets of the buffers that cross
/// the cuts (0 for the others); `None` where `p` has fixed buffers, is
/// not narrow (more than [`NARROW`] live at once), cannot be cut into
/// windows of at most [`crate::LARGE`] buffers, or a stack does not fit
/// under `goal`.
pub(crate) fn windows(p: &Problem, goal: u64) -> Option<(Vec<Window>, Vec<u64>)> {
    let bs = &p.buffers;
    if bs.iter().any(|b| b.offset.is_some()) {
        return None;
    }
    // Not narrow on average already: say so without sorting (random-,
    // somas- and stream-like instances have hundreds to thousands live).
    let sized = || bs.iter().filter(|b| b.size > 0);
    let first = sized().map(|b| b.lower).min()?;
    let span = sized().map(|b| b.upper).max()? - first;
    let mass: u128 = sized().map(|b| (b.upper - b.lower) as u128).sum();
    if mass > NARROW as u128 * span as u128 {
        return None;
    }
    let mut keyed: Vec<(u64, usize)> = (0..bs.len())
        .filter(|&i| bs[i].size > 0)
        .map(|i| (bs[i].lower, i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    let mut cuts: Vec<Cut> = Vec::new();
    let mut live: Vec<usize> = Vec::new();
    let (mut load, mut peak) = (0u64, 0u64); // live now, most since the cut
    let mut since = 0usize; // buffers started since the last cut
    let mut k = 0;
    while k < order.len() {
        let t = bs[order[k]].lower;
        live.retain(|&i| {
            let keep = bs[i].upper > t;
            if !keep {
                load -= bs[i].size;
            }
            keep
        });
        // A cut at `t`, before the buffers that start at `t`.
        if since >= WINDOW {
            let mut c = live.clone();
            c.sort_unstable_by_key(|&i| (bs[i].lower, std::cmp::Reverse(bs[i].upper), i));
            if let Some(stack) = stack_after(p, &c, cuts.last().map(|c| &c.1[..])) {
                if stack.last().is_some_and(|&(i, o)| o + bs[i].size > goal) {
                    return None;
                }
                cuts.push((t, stack, peak));
                since = 0;
                peak = load;
            }
        }
        while k < order.len() && bs[order[k]].lower == t {
            live.push(order[k]);
            load += bs[order[k]].size;
            since += 1;
            k += 1;
        }
        peak = peak.max(load);
        if live.len() > NARROW {
            return None;
        }
    }
    if cuts.is_empty() {
        return None;
    }
    let mut off = vec![0u64; bs.len()];
    let mut crossing = vec![false; bs.len()];
    for (_, stack, _) in &cuts {
        for &(i, o) in stack {
            off[i] = o;
            crossing[i] = true;
        }
    }
    // Window `w` runs from cut `w - 1` (or the start) to cut `w` (or the
    // end); the last window's load is what is left of `peak`.
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut next = 0; // index in `order` of the first buffer not yet taken
    for w in 0..=cuts.len() {
        let from = if w == 0 { 0 } else { cuts[w - 1].0 };
        let to = cuts.get(w).map_or(u64::MAX, |c| c.0);
        let cut_to = |b: &Buffer, offset| Buffer {
            id: String::new(),
            lower: b.lower.max(from),
            upper: b.upper.min(to),
            size: b.size,
            alignment: b.alignment,
            offset,
        };
        let mut buffers = Vec::new();
        let left = w.checked_sub(1).map_or(&[][..], |v| &cuts[v].1[..]);
        let right = cuts.get(w).map_or(&[][..], |c| &c.1[..]);
        // A buffer that crosses both cuts is fixed once.
        let both = |i: usize| left.iter().any(|&(j, _)| j == i);
        for &(i, o) in left.iter().chain(right.iter().filter(|&&(i, _)| !both(i))) {
            buffers.push(cut_to(&bs[i], Some(o)));
        }
        let mut free = Vec::new();
        while next < order.len() && bs[order[next]].lower < to {
            let i = order[next];
            if !crossing[i] {
                buffers.push(cut_to(&bs[i], None));
                free.push(i);
            }
            next += 1;
        }
        if free.is_empty() {
            continue;
        }
        if buffers.len() > crate::LARGE {
            // No cut for too long: the window would not go to the exact
            // search.
            return None;
        }
        out.push(Window {
            problem: Problem {
                buffers,
                capacity: Some(goal),
            },
            free,
            load: cuts.get(w).map_or(peak, |c| c.2),
        });
    }
    Some((out, off))
}

/// The stack of the buffers `c` that cross a cut (sorted by start, then
/// latest end first), from offset 0 up in that order, if it can be one:
/// their lifetimes nest (each ends no earlier than the one above it), and
/// against the previous cut's stack `prev`, those that cross both lie at
/// the same offsets in both (they cross every time between, so they are
/// the lowest of both: only buffers as long-lived lie under them), and
/// the others of `prev` end before the others of `c` start. Then the two
/// stacks are a floor over the window between the cuts.
fn stack_after(
    p: &Problem,
    c: &[usize],
    prev: Option<&[(usize, u64)]>,
) -> Option<Vec<(usize, u64)>> {
    let bs = &p.buffers;
    if !c.windows(2).all(|w| bs[w[0]].upper >= bs[w[1]].upper) {
        return None;
    }
    let mut top = 0;
    let stack: Vec<(usize, u64)> = c
        .iter()
        .map(|&i| {
            let o = crate::align_up(top, bs[i].alignment);
            top = o + bs[i].size;
            (i, o)
        })
        .collect();
    let prev = prev.unwrap_or(&[]);
    let at = |s: &[(usize, u64)], i: usize| s.iter().find(|&&(j, _)| j == i).map(|&(_, o)| o);
    let mut ended = 0u64; // the last end of `prev`'s own buffers
    for &(i, o) in prev {
        match at(&stack, i) {
            Some(o2) if o2 != o => return None,
            Some(_) => {}
            None => ended = ended.max(bs[i].upper),
        }
    }
    let own_start = stack
        .iter()
        .filter(|&&(i, _)| at(prev, i).is_none())
        .map(|&(i, _)| bs[i].lower)
        .min();
    own_start.is_none_or(|l| l >= ended).then_some(stack)
}

/// A placement of `p` with its peak at most `goal`, fitted window by
/// window ([`windows`]) on one thread until `deadline`, or `None`. Each
/// window gets twice its share of the time left, so that one that does
/// not fit ends the attempt early; with a node budget the windows share
/// it instead, so that a solve ends at the same point everywhere.
pub(crate) fn fit(p: &Problem, goal: u64, deadline: &Deadline) -> Option<Vec<u64>> {
    let (mut ws, mut off) = windows(p, goal)?;
    // The most loaded first: where the goal is out of reach it is most
    // likely there, and found before the others are fitted.
    ws.sort_by_key(|w| std::cmp::Reverse(w.load));
    let n = ws.len();
    for (k, w) in ws.iter().enumerate() {
        let left = deadline.at.saturating_duration_since(Instant::now());
        let until = if deadline.has_budget() {
            deadline.clone()
        } else {
            deadline.until(Instant::now() + left.mul_f64(2.0 / (n - k) as f64))
        };
        let opts = Options {
            time_limit: until.at.saturating_duration_since(Instant::now()),
            minimize: false,
            threads: 1,
            node_limit: None,
        };
        let s = crate::solve_until(&w.problem, &opts, until).ok()?;
        let nfixed = w.problem.buffers.len() - w.free.len();
        for (j, &i) in w.free.iter().enumerate() {
            off[i] = s.offsets[nfixed + j];
        }
    }
    // The windows are independent only if the cuts are right: checked.
    let fits = crate::check(p, &off).is_ok_and(|pk| pk <= goal);
    debug_assert!(fits, "windows assembled into an invalid placement");
    fits.then_some(off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::chain_like as chain;
    use std::time::Duration;

    /// Cuts `p` at `goal` into at least 20 windows, each of which the
    /// skyline search takes (its stacks are a floor) and the greedy
    /// portfolio too (within `LARGE`); the crossing buffers' offsets.
    fn cut_for_the_skyline(p: &Problem, goal: u64) -> Vec<u64> {
        let (ws, off) = windows(p, goal).expect("narrow");
        assert!(ws.len() >= 20, "{} windows", ws.len());
        for w in &ws {
            let all: Vec<usize> = (0..w.problem.buffers.len()).collect();
            assert!(crate::skyline::applies(&w.problem, &all));
            assert!(w.problem.buffers.len() <= crate::LARGE);
        }
        off
    }

    /// A chain of 20,000 is cut into windows whose stacks are floors, so
    /// each goes to the skyline search, and is fitted at its bound (its
    /// optimum: each buffer alternately at the bottom and at the top).
    #[test]
    fn a_chain_is_fitted_at_its_bound_window_by_window() {
        let p = chain(20_000, 1);
        let lb = crate::lower_bound(&p);
        cut_for_the_skyline(&p, lb);
        let far = Deadline::new(Instant::now() + Duration::from_secs(60), None);
        let off = fit(&p, lb, &far).expect("fits at the bound");
        assert_eq!(crate::check(&p, &off).unwrap(), lb);
        // Through `solve`, on a node budget (the same placement everywhere).
        let opts = Options {
            time_limit: Duration::from_secs(60),
            threads: 1,
            node_limit: Some(2_000_000),
            ..Default::default()
        };
        let s = crate::solve(&p, &opts).unwrap();
        assert!(s.optimal && s.peak == lb, "{} against {lb}", s.peak);
        assert_eq!(crate::solve(&p, &opts).unwrap().offsets, s.offsets);
    }

    /// Buffers live throughout (a network's weights) cross every cut:
    /// they lie at the bottom of every stack, at the same offsets, and the
    /// chain is still fitted at its bound.
    #[test]
    fn buffers_live_throughout_lie_under_every_stack() {
        let mut p = chain(20_000, 4);
        for (k, size) in [700, 3000, 64, 1999].into_iter().enumerate() {
            p.buffers
                .push(Buffer::new(format!("w{k}"), 0, 20_001, size));
        }
        let lb = crate::lower_bound(&p);
        let off = cut_for_the_skyline(&p, lb);
        // The weights, in the order of their index (equal lifetimes), from 0.
        assert_eq!(off[20_000..], [0, 700, 3700, 3764]);
        let far = Deadline::new(Instant::now() + Duration::from_secs(60), None);
        let off = fit(&p, lb, &far).expect("fits at the bound");
        assert_eq!(crate::check(&p, &off).unwrap(), lb);
    }

    /// Crossing buffers that do not nest make no cut: a chain whose
    /// buffers each live three steps has two crossing every time, the
    /// older ending first.
    #[test]
    fn staggered_lifetimes_make_no_cut() {
        let p = Problem {
            buffers: (0..5_000u64)
                .map(|i| Buffer::new(i.to_string(), i, i + 3, 1 + i % 7))
                .collect(),
            capacity: None,
        };
        assert!(windows(&p, u64::MAX).is_none());
    }

    /// Not narrow, fixed buffers, or a goal below a stack: no windows.
    #[test]
    fn wide_fixed_or_low_instances_are_not_cut() {
        let wide = crate::cli::random_instance(5_000, 1);
        assert!(windows(&wide, u64::MAX).is_none());
        let mut fixed = chain(5_000, 2);
        fixed.buffers[7].offset = Some(0);
        assert!(windows(&fixed, u64::MAX).is_none());
        let p = chain(5_000, 3);
        assert!(windows(&p, u64::MAX).is_some());
        assert!(windows(&p, 0).is_none());
        // A goal below the bound: the most loaded window does not fit.
        let lb = crate::lower_bound(&p);
        let far = Deadline::new(Instant::now() + Duration::from_secs(60), None);
        assert!(fit(&p, lb - 1, &far).is_none());
    }
}
