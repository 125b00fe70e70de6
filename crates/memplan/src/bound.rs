//! Lower bounds on the peak of any valid placement.
//!
//! What is proven here (each is a valid bound on its own, the result is the
//! maximum):
//!
//! 1. *Clique (sweep) bound*: at any time `t`, every buffer live at `t`
//!    occupies its own disjoint byte range, so the peak is at least the total
//!    size live at `t`. The maximum over `t` is found with one sweep over
//!    sorted start/end events (interval graphs are perfect, so this is the
//!    largest weighted clique).
//! 2. *Fixed-offset bound*: a buffer fixed at offset `o` ends at `o + size`.
//! 3. *Aligned top bound*: at a time `t` with live set `L` (total size `S`),
//!    the buffer `b` that is highest in a placement sits above all the others,
//!    so its offset is at least `S - size_b` rounded up to `alignment_b`; the
//!    peak is therefore at least `min over b in L of align_up(S - size_b,
//!    alignment_b) + size_b`. This only adds over (1) when alignments exceed 1.
//!
//! The exact search (see `search.rs`) proves further bounds when it exhausts
//! the space below the best peak, and when a probe at the goal (a fit at
//! the bound, run between the minimising runs) exhausts its space: no
//! placement reaches the goal, so the bound is the next multiple of the
//! gcd of the sizes above it, and the probes go on one step higher;
//! `Solution::lower_bound` reports those too.

use crate::{align_up, Problem};

/// Largest total size live at one time, the tops of fixed buffers, and the
/// alignment-aware section bound; see the module documentation.
pub fn lower_bound(p: &Problem) -> u64 {
    let bs = &p.buffers;
    let mut ev: Vec<(u64, bool, usize)> = Vec::with_capacity(bs.len() * 2);
    for (i, b) in bs.iter().enumerate() {
        if b.size > 0 && b.upper > b.lower {
            ev.push((b.lower, true, i));
            ev.push((b.upper, false, i));
        }
    }
    // Ends (false) sort before starts (true) at equal times: half-open intervals.
    ev.sort_unstable();
    let mut live: u128 = 0;
    let mut best: u128 = 0;
    for &(_, start, i) in &ev {
        if start {
            live += bs[i].size as u128;
            best = best.max(live);
        } else {
            live -= bs[i].size as u128;
        }
    }
    let mut lb = best.min(u64::MAX as u128) as u64;
    for b in bs {
        if let Some(o) = b.offset {
            lb = lb.max(o.saturating_add(b.size));
        }
    }
    lb.max(section_align_bound(p, &ev))
}

/// Bound (3) of the module documentation, maximised over event times.
fn section_align_bound(p: &Problem, ev: &[(u64, bool, usize)]) -> u64 {
    let bs = &p.buffers;
    if bs.iter().all(|b| b.alignment <= 1) || bs.len() > 20_000 {
        return 0;
    }
    let mut live: Vec<usize> = Vec::new();
    let mut best = 0u64;
    let mut k = 0;
    while k < ev.len() {
        let t = ev[k].0;
        while k < ev.len() && ev[k].0 == t {
            let (_, start, i) = ev[k];
            if start {
                live.push(i);
            } else if let Some(pos) = live.iter().position(|&j| j == i) {
                live.swap_remove(pos);
            }
            k += 1;
        }
        if live.is_empty() {
            continue;
        }
        let total: u64 = live
            .iter()
            .fold(0u64, |acc, &j| acc.saturating_add(bs[j].size));
        let top = live
            .iter()
            .map(|&j| align_up(total - bs[j].size, bs[j].alignment).saturating_add(bs[j].size))
            .min()
            .unwrap_or(0);
        best = best.max(top);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Buffer;

    #[test]
    fn sweep_hand_cases() {
        let p = |bs: Vec<Buffer>| Problem {
            buffers: bs,
            capacity: None,
        };
        assert_eq!(lower_bound(&p(vec![])), 0);
        assert_eq!(
            lower_bound(&p(vec![
                Buffer::new("a", 0, 2, 5),
                Buffer::new("b", 2, 4, 7)
            ])),
            7,
            "touching intervals do not overlap"
        );
        assert_eq!(
            lower_bound(&p(vec![
                Buffer::new("a", 0, 3, 5),
                Buffer::new("b", 2, 4, 7),
                Buffer::new("c", 1, 5, 1),
                Buffer::new("z", 0, 5, 0),
            ])),
            13
        );
        let fixed = Buffer {
            offset: Some(100),
            ..Buffer::new("f", 0, 1, 4)
        };
        assert_eq!(lower_bound(&p(vec![fixed])), 104);
        // Aligned top bound: two 3-byte buffers aligned to 8: the upper one
        // starts at >= align_up(3, 8) = 8, so the peak is >= 11 (sweep: 6).
        let a = |id: &str, s| Buffer {
            alignment: 8,
            ..Buffer::new(id, 0, 1, s)
        };
        assert_eq!(lower_bound(&p(vec![a("x", 3), a("y", 3)])), 11);
    }
}
