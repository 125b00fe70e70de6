//! Benchmark over `../shared/benchmarks/memplan` plus synthetic rows.
//!
//! `cargo run --release -p memplan --bin memplan-bench [-- --minimize] [--time-limit S] [--only NAME-PREFIX]`

use memplan::{check, cli, csv, greedy, lower_bound, solve, Options, Problem};
use std::time::{Duration, Instant};

const MINIMALLOC_TOTAL_S: f64 = 29.0;

fn main() {
    let mut minimize = false;
    let mut limit = Duration::from_secs(1);
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--minimize" => minimize = true,
            "--time-limit" => {
                let s: f64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--time-limit needs seconds");
                limit = Duration::from_secs_f64(s);
            }
            "--only" => only = args.next(),
            _ => {
                eprintln!(
                    "usage: memplan-bench [--minimize] [--time-limit S] [--only NAME-PREFIX]"
                );
                std::process::exit(2);
            }
        }
    }
    println!(
        "mode: {}, time limit {:.1} s per instance",
        if minimize { "minimize" } else { "fit capacity" },
        limit.as_secs_f64()
    );
    println!(
        "{:<22} {:>7} {:>14} {:>14} {:>8} {:>8} {:>8} {:>5}",
        "instance", "buffers", "lower bound", "peak", "peak/LB", "seconds", "optimal", "fits"
    );
    match cli::shared_dir() {
        None => println!("skipped: ../shared not found (set STRATA_SHARED)"),
        Some(dir) => {
            let root = dir.join("benchmarks/memplan");
            let mut total = 0.0;
            for sub in ["minimalloc", "real"] {
                let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
                    println!("skipped: {} not found", root.join(sub).display());
                    continue;
                };
                let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
                files.sort();
                let mut sub_total = 0.0;
                for f in files
                    .iter()
                    .filter(|f| f.extension().is_some_and(|e| e == "csv"))
                {
                    let name = f.file_name().unwrap().to_string_lossy().to_string();
                    if only.as_ref().is_some_and(|o| !name.starts_with(o.as_str())) {
                        continue;
                    }
                    let text = std::fs::read_to_string(f).expect("read");
                    let mut p = csv::read(&text).expect("parse");
                    // "A.1048576.csv": the middle part is the capacity.
                    p.capacity = name.split('.').nth(1).and_then(|c| c.parse().ok());
                    sub_total += row(
                        &name,
                        &p,
                        &Options {
                            time_limit: limit,
                            minimize,
                            ..Default::default()
                        },
                    );
                }
                println!("{sub}: total {sub_total:.3} s");
                total += sub_total;
            }
            println!(
                "all shared: total {total:.3} s (bounds: < 1 s each, minimalloc/ < 3 s; MiniMalloc peer: ~{MINIMALLOC_TOTAL_S} s for A..K)"
            );
        }
    }
    let skip = |name: &str| only.as_ref().is_some_and(|o| !name.starts_with(o.as_str()));
    if !skip("random-100k") {
        synthetic_random();
    }
    if !skip("training-like") {
        synthetic_training();
    }
}

/// Synthetic: 100,000 random buffers through the greedy portfolio.
fn synthetic_random() {
    let p = cli::random_instance(100_000, 1);
    let t = Instant::now();
    let off = greedy::portfolio(&p);
    let s = t.elapsed().as_secs_f64();
    let pk = check(&p, &off).expect("greedy placement must be valid");
    let lb = lower_bound(&p);
    println!(
        "{:<22} {:>7} {:>14} {:>14} {:>8.4} {:>8.3} {:>8} {:>5}   greedy, bound < 1 s",
        "random-100k",
        100_000,
        lb,
        pk,
        pk as f64 / lb as f64,
        s,
        pk == lb,
        "-"
    );
}

/// Synthetic: training-like workload, greedy ratio vs the 1% bound.
fn synthetic_training() {
    let p = cli::training_like(30_000, 7);
    let t = Instant::now();
    let off = greedy::portfolio(&p);
    let s = t.elapsed().as_secs_f64();
    let pk = check(&p, &off).expect("greedy placement must be valid");
    let lb = lower_bound(&p);
    println!(
        "{:<22} {:>7} {:>14} {:>14} {:>8.4} {:>8.3} {:>8} {:>5}   greedy, bound ratio < 1.01",
        "training-like",
        p.buffers.len(),
        lb,
        pk,
        pk as f64 / lb as f64,
        s,
        pk == lb,
        "-"
    );
}

fn row(name: &str, p: &Problem, opts: &Options) -> f64 {
    let t = Instant::now();
    let r = solve(p, opts);
    let s = t.elapsed().as_secs_f64();
    let lb = lower_bound(p);
    match r {
        Ok(sol) => {
            let pk = check(p, &sol.offsets).expect("solution must pass the checker");
            assert_eq!(pk, sol.peak);
            let gap = if sol.optimal {
                String::new()
            } else {
                format!(
                    "   proven LB {} (gap {})",
                    sol.lower_bound,
                    sol.peak - sol.lower_bound
                )
            };
            println!(
                "{:<22} {:>7} {:>14} {:>14} {:>8.4} {:>8.3} {:>8} {:>5}{}",
                name,
                p.buffers.len(),
                lb,
                sol.peak,
                sol.peak as f64 / lb.max(1) as f64,
                s,
                sol.optimal,
                p.capacity
                    .map_or("-", |c| if sol.peak <= c { "yes" } else { "no" }),
                gap
            );
        }
        Err(e) => println!(
            "{name:<22} {:>7} {lb:>14}  error: {e} ({s:.3} s)",
            p.buffers.len()
        ),
    }
    s
}
