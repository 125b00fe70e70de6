//! Solves every shared benchmark instance (when ../shared is present) and
//! checks each placement. No timing assertions: timings are benchmark figures.

use memplan::{check, cli, csv, solve, Error, Options};
use std::time::Duration;

#[test]
fn shared_instances_solve_and_check() {
    let Some(dir) = cli::shared_dir() else {
        println!("skipped: ../shared not found");
        return;
    };
    let root = dir.join("benchmarks/memplan");
    let mut seen = 0;
    for sub in ["minimalloc", "real"] {
        let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
            println!("skipped: {sub} not found");
            continue;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "csv"))
        {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let mut p = csv::read(&std::fs::read_to_string(f).unwrap()).unwrap();
            let lb = memplan::lower_bound(&p);
            // Unconstrained minimisation always yields a placement to check.
            let s = solve(
                &p,
                &Options {
                    time_limit: Duration::from_millis(150),
                    minimize: true,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(check(&p, &s.offsets).unwrap(), s.peak, "{name}");
            assert!(s.lower_bound >= lb && s.peak >= s.lower_bound, "{name}");
            // With the capacity from the file name: a fitting placement must
            // check; otherwise the error must report a best peak above it.
            p.capacity = name.split('.').nth(1).and_then(|c| c.parse().ok());
            match solve(
                &p,
                &Options {
                    time_limit: Duration::from_millis(150),
                    minimize: false,
                    ..Default::default()
                },
            ) {
                Ok(s) => {
                    check(&p, &s.offsets).unwrap();
                }
                Err(Error::DoesNotFit {
                    capacity,
                    best_peak,
                    ..
                }) => {
                    assert!(best_peak > capacity, "{name}")
                }
                Err(e) => panic!("{name}: {e}"),
            }
            println!(
                "{name}: peak {} lb {} optimal {}",
                s.peak, s.lower_bound, s.optimal
            );
            seen += 1;
        }
    }
    // A..K, iopddl_G_1, somas_resnet50 and (since issue 12) somas_pangu_2.6B.
    assert!(
        seen >= 14,
        "expected at least the 14 shared instances, saw {seen}"
    );
}

/// Issue 12, item 3: minimising is never slower than fitting. On J, a fit
/// at 1,039,360 bytes finds a placement within 100,000 nodes of the exact
/// search (one thread, so the same on every machine); minimising with the
/// same budget must end there or lower. Before it fitted at rungs above
/// the bound first, minimising ended at 1,139,712 with that budget.
#[test]
fn minimising_j_is_not_slower_than_fitting() {
    let Some(mut p) = shared_j() else { return };
    let opts = |minimize| Options {
        time_limit: Duration::from_secs(600),
        node_limit: Some(100_000),
        threads: 1,
        minimize,
    };
    let cap = 1_039_360;
    p.capacity = Some(cap);
    let fit = solve(&p, &opts(false)).expect("the fit at 1,039,360 finds a placement");
    assert_eq!(check(&p, &fit.offsets).unwrap(), fit.peak);
    p.capacity = None;
    let min = solve(&p, &opts(true)).unwrap();
    assert_eq!(check(&p, &min.offsets).unwrap(), min.peak);
    assert!(
        min.peak <= cap,
        "minimising ended at {} with the budget a fit at {cap} needs",
        min.peak
    );
}

/// Issue 12, item 3, where the bound is feasible but hard to hit: J up to
/// its 54th distinct start or end time (every buffer live before it, its
/// life cut there: 176 buffers) fits at its load bound within 2M nodes of
/// the exact search. With two threads, minimising now starts one of them
/// with a fit's runs at the goal alone and reaches the bound within 7M
/// nodes in every run measured; before, the probes at the goal shared
/// each thread with the descent (and, once the goal had resisted, with
/// probes halfway), and minimising ended 0.9 % above the bound with 16M.
/// Two threads share the budget, so where their work interleaves differs
/// from run to run; 14M nodes leave a margin of two.
#[test]
fn minimising_reaches_a_bound_that_a_fit_reaches() {
    let Some(j) = shared_j() else { return };
    let mut p = cli::window(&j, 0, 53);
    assert_eq!(p.buffers.len(), 176);
    minimising_reaches_the_bound_a_fit_reaches(&mut p, 2, 14_000_000);
}

/// Issue 12, item 3, where the fit is quick: B fits at its bound within
/// 20k nodes, on one thread (variant 0's seventh run, 12.5k nodes) and on
/// two (the second thread's fifth run, 10.5k). Minimising now starts every
/// search thread with a fit's runs at the goal (the first of several for
/// up to 1M nodes, the others and a lone thread for 20k, before the
/// rungs); before, only the first of several did. Within 40k nodes, a
/// margin of two, B then stayed at its greedy peak (1.3467 of the bound)
/// on either count of threads; one thread reached the bound within 160k.
#[test]
fn minimising_is_as_quick_as_a_quick_fit() {
    let Some(mut p) = shared_minimalloc("B") else {
        return;
    };
    for threads in [1, 2] {
        minimising_reaches_the_bound_a_fit_reaches(&mut p, threads, 40_000);
    }
}

/// Issue 12, items 2 and 3, on windows cut at both ends, whose bound is
/// not tight: once the bound resists, the probes halfway between a lower
/// end and the best peak bisect from the last target they failed to reach
/// within their budget, not from the bound each time. I up to its event
/// times 78..174 (229 buffers; a fit at 1,048,576, I's own bound, finds
/// 1,046,528, 1.0039) ended at 1.0246 of its bound within 2M nodes on one
/// thread and now at 1.0157; J between 37 and 200 (348 buffers) at
/// 1.1047 within 4M nodes, now at 1.0726. Deterministic (one thread, a
/// node budget); the limits leave room for small changes elsewhere.
#[test]
fn halfway_probes_bisect_windows_whose_bound_resists() {
    for (name, (from, to), nodes, limit) in [
        ("I", (78, 174), 2_000_000, 1.02),
        ("J", (37, 200), 4_000_000, 1.09),
    ] {
        let Some(p) = shared_minimalloc(name) else {
            return;
        };
        let w = cli::window(&p, from, to);
        let lb = memplan::lower_bound(&w);
        let opts = Options {
            time_limit: Duration::from_secs(600),
            node_limit: Some(nodes),
            threads: 1,
            minimize: true,
        };
        let s = solve(&w, &opts).unwrap();
        assert_eq!(check(&w, &s.offsets).unwrap(), s.peak);
        let r = s.peak as f64 / lb as f64;
        assert!(
            r <= limit,
            "{name}[{from},{to}) ({} buffers) ended at {r:.4} of its bound within {nodes} nodes, above {limit}",
            w.buffers.len()
        );
    }
}

/// Where a run's cap leaves slack in every section, its restarts perturb
/// the order variants widely (`Sky::set_order`): MiniMalloc's D, minimised
/// on one thread within 3M nodes, ended at 1,060,864 (1.0758 of its bound)
/// when restarts only swapped neighbours, and now at 1,041,408 (1.0561).
/// Deterministic (one thread, a node budget); the limit leaves room for
/// small changes elsewhere.
#[test]
fn restarts_with_room_reorder_widely() {
    let Some(p) = shared_minimalloc("D") else {
        return;
    };
    let opts = Options {
        time_limit: Duration::from_secs(600),
        node_limit: Some(3_000_000),
        threads: 1,
        minimize: true,
    };
    let s = solve(&p, &opts).unwrap();
    assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
    assert!(
        s.peak <= 1_045_504,
        "D ended at {} within 3M nodes on one thread, above 1,045,504",
        s.peak
    );
}

/// Fits `p` at its load bound, then minimises it without a capacity, both
/// on `threads` threads within `nodes` nodes: the fit must find a
/// placement, and minimising must end at the bound, proven; both
/// placements must pass the checker.
fn minimising_reaches_the_bound_a_fit_reaches(
    p: &mut memplan::Problem,
    threads: usize,
    nodes: u64,
) {
    let lb = memplan::lower_bound(p);
    let opts = |minimize| Options {
        time_limit: Duration::from_secs(600),
        node_limit: Some(nodes),
        threads,
        minimize,
    };
    p.capacity = Some(lb);
    let fit = solve(p, &opts(false)).expect("a fit at the bound finds a placement");
    assert_eq!(check(p, &fit.offsets).unwrap(), fit.peak);
    p.capacity = None;
    let min = solve(p, &opts(true)).unwrap();
    assert_eq!(check(p, &min.offsets).unwrap(), min.peak);
    assert!(
        min.peak == lb && min.optimal,
        "{threads} thread(s): minimising ended at {} ({:.4} of the bound {lb}) within the {nodes} nodes in which a fit reached it",
        min.peak,
        min.peak as f64 / lb as f64
    );
}

/// MiniMalloc's J from ../shared, or `None` (having said it skipped).
fn shared_j() -> Option<memplan::Problem> {
    shared_minimalloc("J")
}

/// MiniMalloc's instance `name` from ../shared, or `None` (having said it
/// skipped).
fn shared_minimalloc(name: &str) -> Option<memplan::Problem> {
    let Some(dir) = cli::shared_dir() else {
        println!("skipped: ../shared not found");
        return None;
    };
    let f = dir.join(format!("benchmarks/memplan/minimalloc/{name}.1048576.csv"));
    let Ok(text) = std::fs::read_to_string(&f) else {
        println!("skipped: {} not found", f.display());
        return None;
    };
    Some(csv::read(&text).unwrap())
}

/// Issue 12: instances of the shared ones' shapes that the tests do not
/// otherwise see, four windows of each (`cli::windows_of`, as
/// `memplan-bench --windows 4`), reach their bound where the bench shows
/// them there in 2 s: every window of A-H and K. Not D and J (their own
/// bound is not reached) nor I, whose windows cut at both ends of its
/// time are beyond the search (the README's planner section). One thread
/// and a node budget, so the same on every machine: 500k nodes each
/// suffice, 200k do not (E[7,83)).
#[test]
fn windows_of_the_tight_instances_reach_their_bound() {
    const NODES: u64 = 2_000_000;
    let Some(dir) = cli::shared_dir() else {
        println!("skipped: ../shared not found");
        return;
    };
    let root = dir.join("benchmarks/memplan/minimalloc");
    let mut seen = 0;
    // Their positions among the shared instances (A..K, then real/), the
    // seeds memplan-bench gives them.
    for (k, name) in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"]
        .iter()
        .enumerate()
    {
        if matches!(*name, "D" | "I" | "J") {
            continue;
        }
        let f = root.join(format!("{name}.1048576.csv"));
        let Ok(text) = std::fs::read_to_string(&f) else {
            println!("skipped: {} not found", f.display());
            continue;
        };
        let p = csv::read(&text).unwrap();
        for (from, to) in cli::windows_of(&p, 4, k as u64 + 1) {
            let w = cli::window(&p, from, to);
            let lb = memplan::lower_bound(&w);
            let s = solve(
                &w,
                &Options {
                    time_limit: Duration::from_secs(600),
                    node_limit: Some(NODES),
                    threads: 1,
                    minimize: true,
                },
            )
            .unwrap();
            assert_eq!(check(&w, &s.offsets).unwrap(), s.peak);
            assert_eq!(
                s.peak,
                lb,
                "{name}[{from},{to}): {:.4} of the bound",
                s.peak as f64 / lb as f64
            );
            seen += 1;
        }
    }
    assert!(seen == 0 || seen == 32, "{seen} windows");
}
