//! The time limit is a promise on large instances: the deadline mechanism is
//! checked deterministically (a deadline already passed runs the first
//! greedy pass and nothing else; a node budget ends the large-instance
//! improvement at the same point every run), and wall-clock checks of
//! short limits with a margin wide enough for a loaded 2-core machine. Speed figures are the
//! benchmark's (memplan-bench), not these tests'.

use memplan::{check, cli, greedy, lower_bound, solve, Options};
use std::time::{Duration, Instant};

#[test]
fn passed_deadline_returns_the_first_greedy_pass() {
    for n in [20_000, 100_000] {
        let p = cli::somas_like(n, 3);
        let s = solve(
            &p,
            &Options {
                time_limit: Duration::ZERO,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        // Exactly the first pass of the portfolio: no later pass, no
        // improvement, no search ran.
        let first = greedy::portfolio_until(&p, &mut || true);
        assert_eq!(s.offsets, first, "{n} buffers");
        // Too many overlapping pairs for the graph: the first pass is the
        // start-time sweep.
        assert_eq!(first, greedy::sweep_place(&p), "{n} buffers");
        assert!(s.lower_bound >= lower_bound(&p));
    }
}

#[test]
fn node_budget_ends_large_improvement_at_the_same_point() {
    let p = cli::somas_like(20_000, 5);
    let run = |nodes| {
        solve(
            &p,
            &Options {
                time_limit: Duration::from_secs(600),
                node_limit: Some(nodes),
                threads: 1,
                ..Default::default()
            },
        )
        .unwrap()
    };
    // Three passes' worth of buffers: the improvement stops after them.
    let a = run(3 * p.buffers.len() as u64);
    let b = run(3 * p.buffers.len() as u64);
    assert_eq!(a.offsets, b.offsets);
    assert_eq!(check(&p, &a.offsets).unwrap(), a.peak);
    // Never worse than the greedy portfolio it starts from.
    let g = check(&p, &greedy::portfolio(&p)).unwrap();
    assert!(a.peak <= g, "{} > greedy {g}", a.peak);
}

#[test]
fn short_limits_are_honoured_on_100k_buffers() {
    // Dense (somas-like: 363M overlapping pairs, 4,762 live at once),
    // random-like and long-lived (45,000 live at once) instances; the
    // first greedy pass is cut short too, so
    // what always runs is the bound and the start-time sweep (O(n log n)),
    // measured here just before the solves.
    for p in [
        cli::somas_like(100_000, 7),
        cli::random_instance(100_000, 2),
        cli::long_lived(100_000, 1),
    ] {
        let t = Instant::now();
        lower_bound(&p);
        let sweep = greedy::sweep_place(&p);
        let uncut = t.elapsed();
        // 1 s: on two threads the second slices the first one's passes
        // where the first pass takes more than an eighth of the time
        // (random-like 100k: about 0.35 s in a release build).
        for s in solves_within(&p, &[0, 1, 50, 300, 1000], uncut) {
            assert!(s.peak <= check(&p, &sweep).unwrap());
        }
    }
}

/// Solves `p` with each limit (ms) on the default options, and asserts
/// that every placement is valid and that each solve returned within its
/// limit plus three times `uncut`, the part that always runs, plus 0.25 s.
/// Stated (the crate doc): within the limit plus 0.1-0.35 s at 100,000
/// buffers, by machine and instance (release build, 2-core machine); the
/// margins are for other builds on the machine and for debug builds.
fn solves_within(p: &memplan::Problem, limits: &[u64], uncut: Duration) -> Vec<memplan::Solution> {
    let mut out = Vec::new();
    for &ms in limits {
        let limit = Duration::from_millis(ms);
        let t = Instant::now();
        let s = solve(
            p,
            &Options {
                time_limit: limit,
                ..Default::default()
            },
        )
        .unwrap();
        let took = t.elapsed();
        println!("limit {limit:?}: took {took:?} (uncut part {uncut:?})");
        assert_eq!(check(p, &s.offsets).unwrap(), s.peak);
        assert!(
            took < limit + uncut * 3 + Duration::from_millis(250),
            "took {took:?} for a {limit:?} limit (uncut part {uncut:?})"
        );
        out.push(s);
    }
    out
}

/// Fixed buffers keep the promise too. Every hundredth buffer of a
/// long-lived instance fixed where the first fit put it: each free buffer
/// live when a fixed one starts is fitted round the fixed ones that start
/// in its lifetime, so the sweeps take longer, and past the deadline the
/// start is the first fit above the fixed buffers. When the sweeps
/// scanned the live buffers instead and did not watch the time, the solve
/// with a limit of 0 took 11.5 s. The margin is the one above, from the
/// same instance without fixed buffers.
#[test]
fn short_limits_are_honoured_with_fixed_buffers() {
    let free = cli::long_lived(30_000, 2);
    let t = Instant::now();
    lower_bound(&free);
    let first = greedy::sweep_place(&free);
    let uncut = t.elapsed();
    let mut p = free.clone();
    for (i, b) in p.buffers.iter_mut().enumerate() {
        if i % 100 == 0 {
            b.offset = Some(first[i]);
        }
    }
    for s in solves_within(&p, &[0, 50, 300, 1000], uncut) {
        for (i, b) in p.buffers.iter().enumerate() {
            if let Some(o) = b.offset {
                assert_eq!(s.offsets[i], o, "buffer {i} is fixed");
            }
        }
    }
}

#[test]
fn random_like_100k_is_within_one_percent_after_two_improvement_passes() {
    // The bench's random-like row. A node budget of two passes (each is
    // charged one node per buffer) ends the improvement at the same point
    // everywhere: the first LoadDesc pass (1.0299 x the bound) and one
    // squeaky-wheel pass (1.0076). Speed is the bench's: about 0.5 s of
    // CPU in all, release build.
    let p = cli::random_instance(100_000, 1);
    let lb = lower_bound(&p);
    let s = solve(
        &p,
        &Options {
            time_limit: Duration::from_secs(600),
            node_limit: Some(2 * p.buffers.len() as u64),
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
    assert!(
        s.peak as f64 <= 1.01 * lb as f64,
        "{} / {lb} = {:.4}",
        s.peak,
        s.peak as f64 / lb as f64
    );
}
