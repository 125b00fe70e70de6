//! Property tests: validity, exact >= greedy, exact == brute force on tiny
//! instances. Bounded case counts keep `cargo test` fast.

use memplan::{check, greedy, solve, Buffer, Options, Problem};
use proptest::prelude::*;
use std::time::Duration;

fn instance(max_n: usize) -> impl Strategy<Value = Problem> {
    let buf = (0u64..8, 1u64..5, 0u64..10, 0usize..3);
    (
        prop::collection::vec(buf, 1..=max_n),
        any::<bool>(),
        0u64..6,
    )
        .prop_map(|(v, with_fixed, fixed_at)| {
            let mut buffers: Vec<Buffer> = v
                .into_iter()
                .enumerate()
                .map(|(i, (l, d, s, a))| Buffer {
                    alignment: [1, 2, 4][a],
                    ..Buffer::new(format!("b{i}"), l, l + d, s)
                })
                .collect();
            if with_fixed {
                let a = buffers[0].alignment;
                buffers[0].offset = Some(fixed_at * a);
            }
            Problem {
                buffers,
                capacity: None,
            }
        })
}

/// Plain instances (no fixed buffer, no alignment): the skyline search.
fn plain(max_n: usize) -> impl Strategy<Value = Problem> {
    let buf = (0u64..6, 1u64..5, 1u64..6);
    prop::collection::vec(buf, 1..=max_n).prop_map(unaligned)
}

/// An instance of buffers given as (start, lifetime, size), without
/// alignment, fixed offsets or a capacity.
fn unaligned(v: Vec<(u64, u64, u64)>) -> Problem {
    Problem {
        buffers: v
            .into_iter()
            .enumerate()
            .map(|(i, (l, d, s))| Buffer::new(format!("b{i}"), l, l + d, s))
            .collect(),
        capacity: None,
    }
}

/// Minimum over all orders of "place at the lowest aligned gap among the
/// already placed buffers that overlap in time" (fixed buffers pre-placed).
/// Some order (sorting an optimal placement by offset) reaches the optimum.
fn brute_force(p: &Problem) -> u64 {
    let n = p.buffers.len();
    let free: Vec<usize> = (0..n).filter(|&i| p.buffers[i].offset.is_none()).collect();
    let mut best = u64::MAX;
    let mut perm = free.clone();
    permute(&mut perm, 0, &mut |order| {
        let mut off: Vec<Option<u64>> = p.buffers.iter().map(|b| b.offset).collect();
        for &i in order {
            let b = &p.buffers[i];
            let mut o = 0u64;
            'search: loop {
                o = o.div_ceil(b.alignment) * b.alignment;
                for (j, oj) in off.iter().enumerate() {
                    let (Some(oj), c) = (*oj, &p.buffers[j]) else {
                        continue;
                    };
                    let time = b.lower < c.upper && c.lower < b.upper;
                    if time && b.size > 0 && c.size > 0 && o < oj + c.size && oj < o + b.size {
                        o = oj + c.size;
                        continue 'search;
                    }
                }
                break;
            }
            off[i] = Some(o);
        }
        let offs: Vec<u64> = off.into_iter().map(|o| o.unwrap()).collect();
        let pk = check(p, &offs).expect("brute force placement valid");
        best = best.min(pk);
    });
    best
}

fn permute(v: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, f);
        v.swap(k, i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn exact_matches_brute_force(p in instance(7)) {
        let opt = brute_force(&p);
        let s = solve(&p, &Options { time_limit: Duration::from_secs(20), minimize: true, threads: 1, node_limit: None }).unwrap();
        prop_assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        prop_assert_eq!(s.peak, opt);
        prop_assert!(s.optimal);
        prop_assert!(s.lower_bound <= opt);
        prop_assert!(memplan::lower_bound(&p) <= opt);
    }

    #[test]
    fn exact_matches_brute_force_plain(p in plain(7)) {
        let opt = brute_force(&p);
        let s = solve(&p, &Options { time_limit: Duration::from_secs(20), minimize: true, threads: 1, node_limit: None }).unwrap();
        prop_assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        prop_assert_eq!(s.peak, opt);
        prop_assert!(s.optimal);
        // Fit mode at the optimum must fit, one below must not.
        let mut q = p.clone();
        q.capacity = Some(opt);
        let f = solve(&q, &Options { time_limit: Duration::from_secs(20), minimize: false, threads: 1, node_limit: None }).unwrap();
        prop_assert!(check(&q, &f.offsets).is_ok());
        q.capacity = Some(opt - 1);
        let below = solve(&q, &Options { time_limit: Duration::from_secs(20), minimize: false, threads: 1, node_limit: None });
        prop_assert!(below.is_err());
    }

    /// The start-time sweeps (first fit, snug fit) and the anchored sweep
    /// place every buffer validly: with a fixed buffer by a scan of the
    /// live ones, without (the strategy leaves most instances free of
    /// one) over their gaps, the anchored one from its stack both ways.
    #[test]
    fn start_time_sweeps_are_valid(p in instance(40)) {
        check(&p, &greedy::sweep_place(&p)).unwrap();
        check(&p, &greedy::sweep_place_snug(&p)).unwrap();
        check(&p, &greedy::sweep_place_anchored(&p)).unwrap();
    }

    #[test]
    fn solutions_valid_and_never_worse_than_greedy(p in instance(40)) {
        let g = greedy::portfolio(&p);
        let gp = check(&p, &g).unwrap();
        let s = solve(&p, &Options { time_limit: Duration::from_millis(50), minimize: true, threads: 1, node_limit: None }).unwrap();
        prop_assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        prop_assert!(s.peak <= gp);
        prop_assert!(s.lower_bound <= s.peak);
        // Fit mode with the found peak as capacity must fit too.
        let mut q = p.clone();
        q.capacity = Some(s.peak);
        // (The time limit may cut the search short; then the error must
        // still be consistent.)
        match solve(&q, &Options { time_limit: Duration::from_secs(2), minimize: false, threads: 1, node_limit: None }) {
            Ok(f) => prop_assert!(check(&q, &f.offsets).is_ok()),
            Err(memplan::Error::DoesNotFit { capacity, best_peak, lower_bound, .. }) => {
                prop_assert!(best_peak > capacity && lower_bound <= capacity)
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    /// The two-thread portfolio returns checked placements with the same
    /// proven optimum as the deterministic single-thread search, and in fit
    /// mode fits exactly down to it.
    #[test]
    fn threaded_portfolio_is_checked(p in plain(12)) {
        let one = solve(&p, &Options { time_limit: Duration::from_secs(20), minimize: true, threads: 1, node_limit: None }).unwrap();
        let two = solve(&p, &Options { time_limit: Duration::from_secs(20), minimize: true, threads: 2, node_limit: None }).unwrap();
        prop_assert_eq!(check(&p, &two.offsets).unwrap(), two.peak);
        prop_assert!(one.optimal && two.optimal);
        prop_assert_eq!(one.peak, two.peak);
        let mut q = p.clone();
        q.capacity = Some(one.peak);
        let f = solve(&q, &Options { time_limit: Duration::from_secs(20), minimize: false, threads: 2, node_limit: None }).unwrap();
        prop_assert!(check(&q, &f.offsets).unwrap() <= one.peak);
        q.capacity = Some(one.peak - 1);
        let below = solve(&q, &Options { time_limit: Duration::from_secs(20), minimize: false, threads: 2, node_limit: None });
        prop_assert!(below.is_err());
    }

    /// A node budget ends the search at the same point every time: with one
    /// thread and a time limit never reached, two solves agree exactly,
    /// whatever the budget cuts short; the result is still checked and
    /// never worse than the greedy.
    #[test]
    fn node_budget_is_deterministic(p in plain(40), budget in 1u64..3000) {
        let gp = check(&p, &greedy::portfolio(&p)).unwrap();
        let o = Options { time_limit: Duration::from_secs(60), minimize: true, threads: 1, node_limit: Some(budget) };
        let a = solve(&p, &o).unwrap();
        let b = solve(&p, &o).unwrap();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(check(&p, &a.offsets).unwrap(), a.peak);
        prop_assert!(a.peak <= gp && a.lower_bound <= a.peak);
    }

    /// Larger random instances under a short limit: whatever the threads
    /// return passes the checker and never exceeds the greedy peak.
    #[test]
    fn threaded_portfolio_valid_on_larger(p in plain(40)) {
        let gp = check(&p, &greedy::portfolio(&p)).unwrap();
        let s = solve(&p, &Options { time_limit: Duration::from_millis(30), minimize: true, threads: 2, node_limit: None }).unwrap();
        prop_assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        prop_assert!(s.peak <= gp && s.lower_bound <= s.peak);
    }
}

/// Instances near the planner's size limit: sizes, alignments and fixed
/// offsets up to `MAX_TOTAL`, times up to `u64::MAX`.
fn near_the_limit() -> impl Strategy<Value = Problem> {
    let size = prop_oneof![
        0u64..4,
        (50u32..=59).prop_map(|k| 1u64 << k),
        0u64..=memplan::MAX_TOTAL / 8
    ];
    let align = prop_oneof![Just(1u64), Just(8), (40u32..=61).prop_map(|k| 1u64 << k)];
    let time = prop_oneof![0u64..4, Just(u64::MAX - 3), Just(1u64 << 63)];
    let buf = (
        time,
        1u64..4,
        size,
        align,
        prop::option::weighted(0.2, 0u64..=memplan::MAX_TOTAL),
    );
    prop::collection::vec(buf, 1..=8).prop_map(|v| Problem {
        buffers: v
            .into_iter()
            .enumerate()
            .map(|(i, (l, d, s, a, o))| Buffer {
                alignment: a,
                offset: o.map(|o| o / a * a),
                ..Buffer::new(
                    format!("b{i}"),
                    l.min(u64::MAX - d),
                    l.min(u64::MAX - d) + d,
                    s,
                )
            })
            .collect(),
        capacity: None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Near the size limit the solve never overflows (the tests build with
    /// overflow checks): it returns a checked placement, or refuses the
    /// instance as too large exactly when its total is above the limit, or
    /// reports fixed buffers that collide.
    #[test]
    fn instances_near_the_limit_plan_or_are_refused(p in near_the_limit()) {
        let fixed_end = p.buffers.iter().filter_map(|b| b.offset.map(|o| o as u128 + b.size as u128)).max();
        let total: u128 = p.buffers.iter().filter(|b| b.offset.is_none()).map(|b| b.size as u128 + b.alignment as u128 - 1).sum::<u128>() + fixed_end.unwrap_or(0);
        let o = Options { time_limit: Duration::from_millis(50), minimize: true, threads: 1, node_limit: Some(20_000) };
        match solve(&p, &o) {
            Ok(s) => {
                prop_assert!(total <= memplan::MAX_TOTAL as u128);
                prop_assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
                prop_assert!(s.lower_bound <= s.peak);
            }
            Err(memplan::Error::TooLarge { total: t }) => {
                prop_assert_eq!(t, total);
                prop_assert!(t > memplan::MAX_TOTAL as u128);
            }
            Err(memplan::Error::FixedOverlap { .. }) => prop_assert!(p.buffers.iter().filter(|b| b.offset.is_some()).count() >= 2),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// Instances over a wider span of time than `instance`'s, with zero sizes
/// and shared start and end times (starts on multiples of 7): up to about
/// 160 distinct times, so a lifetime covers up to that many sections
/// (levels 0-7 of `greedy::max_load`'s range maxima).
fn wide(max_n: usize) -> impl Strategy<Value = Problem> {
    let buf = ((0u64..43).prop_map(|l| 7 * l), 1u64..300, 0u64..50);
    prop::collection::vec(buf, 1..=max_n).prop_map(unaligned)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every buffer's `max_load` is the largest load at any time of its
    /// lifetime, counted time by time.
    #[test]
    fn max_load_is_the_largest_load_in_each_lifetime(p in wide(120)) {
        let bs = &p.buffers;
        let end = bs.iter().map(|b| b.upper).max().unwrap_or(0);
        let load: Vec<u64> = (0..end)
            .map(|t| bs.iter().filter(|b| b.lower <= t && t < b.upper).map(|b| b.size).sum())
            .collect();
        let m = greedy::max_load(&p);
        for (i, b) in bs.iter().enumerate() {
            let want = (b.lower..b.upper).map(|t| load[t as usize]).max().unwrap();
            prop_assert_eq!(m[i], want, "buffer {} [{}, {})", i, b.lower, b.upper);
        }
    }
}
