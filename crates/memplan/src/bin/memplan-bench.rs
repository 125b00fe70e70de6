//! Benchmark over `../shared/benchmarks/memplan` plus synthetic rows.
//!
//! `cargo run --release -p memplan --bin memplan-bench [-- --minimize] [--no-capacity] [--fit-at R] [--time-limit S] [--only NAME-PREFIX] [--dir PATH]... [--seeds K] [--windows K] [--threads N] [--node-limit N]`
//!
//! `--fit-at R` gives every row without a capacity (the generated and real
//! ones, or all with `--no-capacity`) a capacity of R × its lower bound
//! (rounded up): without `--minimize` the row then times a fit there, as
//! a user with a memory budget would run it; the fits column says whether
//! the placement is within it.
//!
//! `--seeds K` runs every generated row on K seeds (its own and the K - 1
//! after it) and ends with the worst peak / lower bound of each, so a
//! generator's figure is not one seed's.
//!
//! `--dir PATH` adds a row for every `.csv` file in `PATH` (instances of
//! your own, or real ones the tests do not see), after the shared ones,
//! and a summary: how many are at their bound and within 1.01 of it, the
//! summed excess over the bounds (in 1e-4) and the worst.
//!
//! `--threads N` and `--node-limit N` are `Options::threads` and
//! `Options::node_limit`: with `--threads 1 --node-limit N` every row is
//! the same on every run and machine, so two builds compare exactly
//! (`--time-limit` then only backs the budget up).
//!
//! `--windows K` adds, after the shared rows, K windows of every shared
//! instance (`cli::window`: the buffers live between two of its event
//! times, cut to them; a third to four fifths of its event times, chosen
//! by a generator seeded with the instance's position, so the same every
//! run), each without a capacity, and ends with each instance's count at
//! the bound, count within 1.01 of it, and worst peak / lower bound:
//! instances of the same shapes that the tests do not see.
//!
//! Every instance is solved in a child process of its own (this binary with
//! `--child`), so its peak memory (VmHWM from /proc/self/status, resident
//! high-water mark, including reading the instance) is its own. Columns:
//! peak / lower bound, seconds of `solve`, seconds / time limit, MB.

use memplan::{check, cli, csv, lower_bound, outln, solve, Options, Problem};
use std::time::{Duration, Instant};

const MINIMALLOC_TOTAL_S: f64 = 29.0;

fn main() {
    cli::run_to_closed_stdout(run)
}

fn run() {
    let mut minimize = false;
    let mut limit = Duration::from_secs(1);
    let mut only: Option<String> = None;
    let mut no_capacity = false;
    let mut seeds = 1u64;
    let mut windows = 0u64;
    let mut fit_at: Option<f64> = None;
    let mut child: Option<String> = None;
    let mut threads: Option<usize> = None;
    let mut node_limit: Option<u64> = None;
    // Each --dir with its instances, listed before anything runs.
    let mut dirs: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--minimize" => minimize = true,
            "--time-limit" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<f64>() {
                    Ok(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => {
                        limit = Duration::from_secs_f64(s)
                    }
                    _ => {
                        eprintln!("error: --time-limit takes seconds from 0 to 86400, found `{v}`");
                        std::process::exit(2);
                    }
                }
            }
            "--only" => only = args.next(),
            "--no-capacity" => no_capacity = true,
            "--seeds" => seeds = count(&a, args.next(), 1, 1000),
            "--windows" => windows = count(&a, args.next(), 0, 1000),
            "--fit-at" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<f64>() {
                    Ok(r) if r.is_finite() && (1.0..=1000.0).contains(&r) => fit_at = Some(r),
                    _ => {
                        eprintln!("error: --fit-at takes a ratio from 1 to 1000, found `{v}`");
                        std::process::exit(2);
                    }
                }
            }
            "--threads" => threads = Some(count(&a, args.next(), 1, 64) as usize),
            "--node-limit" => node_limit = Some(count(&a, args.next(), 1, u64::MAX)),
            "--child" => child = args.next(),
            "--dir" => {
                let Some(d) = args.next().map(std::path::PathBuf::from) else {
                    eprintln!("error: --dir takes a directory of .csv instances");
                    std::process::exit(2);
                };
                match csv_files(&d) {
                    Ok(files) => dirs.push((d, files)),
                    Err(e) => {
                        eprintln!("error: --dir {}: {e}", d.display());
                        std::process::exit(2);
                    }
                }
            }
            _ => {
                eprintln!(
                    "usage: memplan-bench [--minimize] [--no-capacity] [--fit-at R] [--time-limit S] [--only NAME-PREFIX] [--dir PATH]... [--seeds K] [--windows K] [--threads N] [--node-limit N]"
                );
                std::process::exit(2);
            }
        }
    }
    let mut opts = Options {
        time_limit: limit,
        minimize,
        node_limit,
        ..Default::default()
    };
    if let Some(k) = threads {
        opts.threads = k;
    }
    if let Some(spec) = child {
        child_row(&spec, &opts, no_capacity, fit_at);
        return;
    }
    // Runs one instance in a child; its row's peak / lower bound (none if
    // the child failed or found nothing) and solve seconds.
    let spawn = |spec: &str| -> (Option<f64>, f64) {
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("own path"));
        cmd.args([
            "--child",
            spec,
            "--time-limit",
            &limit.as_secs_f64().to_string(),
        ]);
        if minimize {
            cmd.arg("--minimize");
        }
        if no_capacity {
            cmd.arg("--no-capacity");
        }
        if let Some(r) = fit_at {
            cmd.args(["--fit-at", &r.to_string()]);
        }
        if let Some(k) = threads {
            cmd.args(["--threads", &k.to_string()]);
        }
        if let Some(n) = node_limit {
            cmd.args(["--node-limit", &n.to_string()]);
        }
        let out = cmd.output().expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout);
        cli::out(format_args!("{text}"));
        if !out.status.success() {
            outln!(
                "{spec}: child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The child's last line ends with its solve seconds; a solved row
        // has peak / lower bound in its fifth column.
        let last = text.lines().last().unwrap_or("");
        let secs = last
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let solved = out.status.success() && !last.contains("error:");
        let ratio = solved
            .then(|| last.split_whitespace().nth(4).and_then(|v| v.parse().ok()))
            .flatten();
        (ratio, secs)
    };
    outln!(
        "mode: {}{}{}, time limit {:.1} s per instance{}, {} thread(s); one process per instance",
        if minimize { "minimize" } else { "fit capacity" },
        if no_capacity { " (no capacity)" } else { "" },
        fit_at.map_or(String::new(), |r| format!(
            " (rows without one: {r} x the lower bound)"
        )),
        limit.as_secs_f64(),
        node_limit.map_or(String::new(), |n| format!(", node limit {n}")),
        opts.threads
    );
    outln!(
        "{:<22} {:>7} {:>14} {:>14} {:>8} {:>8} {:>8} {:>6} {:>8} {:>5}",
        "instance",
        "buffers",
        "lower bound",
        "peak",
        "peak/LB",
        "seconds",
        "s/limit",
        "MB",
        "optimal",
        "fits"
    );
    match cli::shared_dir() {
        None => outln!("skipped: ../shared not found (set STRATA_SHARED)"),
        Some(dir) => {
            let root = dir.join("benchmarks/memplan");
            let mut total = 0.0;
            // The shared instances run, for --windows.
            let mut ran = Vec::new();
            for sub in ["minimalloc", "real"] {
                let Ok(files) = csv_files(&root.join(sub)) else {
                    outln!("skipped: {} not found", root.join(sub).display());
                    continue;
                };
                let mut sub_total = 0.0;
                for f in &files {
                    let name = f.file_name().unwrap().to_string_lossy().to_string();
                    if only.as_ref().is_some_and(|o| !name.starts_with(o.as_str())) {
                        continue;
                    }
                    sub_total += spawn(&f.to_string_lossy()).1;
                    ran.push((name, f.clone()));
                }
                outln!("{sub}: total {sub_total:.3} s");
                total += sub_total;
            }
            outln!(
                "all shared: total {total:.3} s (bounds: < 1 s each, minimalloc/ < 3 s; MiniMalloc peer: ~{MINIMALLOC_TOTAL_S} s for A..K)"
            );
            if windows > 0 {
                let mut sums = Vec::new();
                for (k, (name, f)) in ran.iter().enumerate() {
                    let p = csv::read(&std::fs::read_to_string(f).expect("read")).expect("parse");
                    let mut t = Tally::default();
                    for (from, to) in cli::windows_of(&p, windows as usize, k as u64 + 1) {
                        let spec = format!("win:{from}:{to}:{}", f.to_string_lossy());
                        t.add(spawn(&spec).0);
                    }
                    sums.push((name.clone(), t));
                }
                for (name, t) in sums {
                    outln!(
                        "{name} windows: {} of {windows} at the bound, {} within 1.01, worst peak/LB {:.4}",
                        t.at,
                        t.close,
                        t.worst
                    );
                }
            }
        }
    }
    for (dir, files) in &dirs {
        let (mut total, mut t) = (0.0, Tally::default());
        for f in files {
            let (r, secs) = spawn(&f.to_string_lossy());
            total += secs;
            t.add(r);
        }
        outln!(
            "{}: {} instances, {} at the bound, {} within 1.01, summed excess {:.0} (1e-4), worst peak/LB {:.4}, total {total:.3} s",
            dir.display(),
            files.len(),
            t.at,
            t.close,
            t.excess,
            t.worst
        );
    }
    let mut worst = Vec::new();
    for (name, kind, n, seed) in [
        ("somas-like-20k", "somas", 20_000, 1),
        ("somas-like-50k", "somas", 50_000, 2),
        ("somas-like-100k", "somas", 100_000, 3),
        ("training-like-30k", "training", 30_000, 7),
        ("training-like-100k", "training", 100_000, 1),
        ("random-like-100k", "random", 100_000, 1),
        ("chain-like-100k", "chain", 100_000, 1),
        ("chain4-like-100k", "chain4", 100_000, 1),
        ("chain11-like-20k", "chain11", 20_000, 1),
        ("chain20-like-20k", "chain20", 20_000, 1),
        ("aligned4-like-100k", "aligned4", 100_000, 1),
    ] {
        if only.as_ref().is_some_and(|o| !name.starts_with(o.as_str())) {
            continue;
        }
        // The worst ratio over the seeds; a seed that failed counts as
        // worst of all (infinite).
        let mut w = 0f64;
        for s in seed..seed + seeds {
            let (r, _) = spawn(&format!("gen:{kind}:{n}:{s}"));
            w = w.max(r.unwrap_or(f64::INFINITY));
        }
        worst.push((name, w));
    }
    if seeds > 1 {
        for (name, w) in worst {
            outln!("{name}: worst peak/LB over {seeds} seeds {w:.4}");
        }
    }
}

/// Rows' peak / lower bound summed up: how many are at the bound, how many
/// within 1.01 of it, the summed excess over it (1e-4) and the worst.
#[derive(Default)]
struct Tally {
    at: u32,
    close: u32,
    excess: f64,
    worst: f64,
}

impl Tally {
    /// One row's ratio; a row that failed or found nothing counts as
    /// worst of all (infinite).
    fn add(&mut self, r: Option<f64>) {
        let r = r.unwrap_or(f64::INFINITY);
        self.at += (r <= 1.0) as u32;
        self.close += (r <= 1.01) as u32;
        self.excess += (r - 1.0) * 1e4;
        self.worst = self.worst.max(r);
    }
}

/// The count that follows `flag`, from `lo` to `hi`; otherwise the process
/// ends with a message naming the flag, the range and what was found.
fn count(flag: &str, v: Option<String>, lo: u64, hi: u64) -> u64 {
    let v = v.unwrap_or_default();
    match v.parse::<u64>() {
        Ok(k) if (lo..=hi).contains(&k) => k,
        _ => {
            let range = if hi == u64::MAX {
                format!("of at least {lo}")
            } else {
                format!("from {lo} to {hi}")
            };
            eprintln!("error: {flag} takes a count {range}, found `{v}`");
            std::process::exit(2);
        }
    }
}

/// The `.csv` files in `dir`, sorted.
fn csv_files(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().is_some_and(|e| e == "csv"))
        .collect();
    files.sort();
    Ok(files)
}

/// Solve one instance (a CSV path, `gen:KIND:N:SEED` for a generated
/// one, KIND somas, training, random, long, stream, chain, chainK or
/// alignedK (K steps), see `memplan::cli`, or
/// `win:FROM:TO:PATH` for a window of a CSV's instance) and print its
/// row; the last field is the solve seconds.
fn child_row(spec: &str, opts: &Options, no_capacity: bool, fit_at: Option<f64>) {
    let read = |path: &std::path::Path| {
        csv::read(&std::fs::read_to_string(path).expect("read")).expect("parse")
    };
    let (name, mut p) = if let Some(w) = spec.strip_prefix("win:") {
        // win:FROM:TO:PATH, see --windows; no capacity.
        let f: Vec<&str> = w.splitn(3, ':').collect();
        let (from, to): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let path = std::path::Path::new(f[2]);
        // "A.1048576.csv" -> "A", "somas_pangu_2.6B.csv" -> "somas_pangu_2.6B".
        let file = path.file_name().unwrap().to_string_lossy();
        let stem = file.strip_suffix(".csv").unwrap_or(&file);
        let stem = match stem.rsplit_once('.') {
            Some((s, cap)) if cap.bytes().all(|c| c.is_ascii_digit()) => s,
            _ => stem,
        };
        (
            format!("{stem}[{from},{to})"),
            cli::window(&read(path), from, to),
        )
    } else if let Some(g) = spec.strip_prefix("gen:") {
        let f: Vec<&str> = g.split(':').collect();
        let (n, seed): (usize, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let p = match f[0] {
            "somas" => cli::somas_like(n, seed),
            "training" => cli::training_like(n, seed),
            "random" => cli::random_instance(n, seed),
            "long" => cli::long_lived(n, seed),
            "stream" => cli::stream_like(n, seed),
            "chain" => cli::chain_like(n, seed),
            k => match (
                k.strip_prefix("chain").and_then(|s| s.parse().ok()),
                k.strip_prefix("aligned").and_then(|s| s.parse().ok()),
            ) {
                (Some(steps), _) => cli::staggered_chain(n, steps, seed),
                (_, Some(steps)) => cli::aligned_chain(n, steps, seed),
                _ => panic!(
                    "no generator {k:?}: somas, training, random, long, stream, chain, chainK or alignedK"
                ),
            },
        };
        (format!("{}-like-{}k-s{seed}", f[0], n / 1000), p)
    } else {
        let path = std::path::Path::new(spec);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let mut p = read(path);
        // "A.1048576.csv": the middle part is the capacity.
        if !no_capacity {
            p.capacity = name.split('.').nth(1).and_then(|c| c.parse().ok());
        }
        (name, p)
    };
    if let (Some(r), None) = (fit_at, p.capacity) {
        p.capacity = Some((lower_bound(&p) as f64 * r).ceil() as u64);
    }
    row(&name, &p, opts);
}

/// Resident high-water mark of this process in MB (0 where /proc is absent).
fn vm_hwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
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
            outln!(
                "{:<22} {:>7} {:>14} {:>14} {:>8.4} {:>8.3} {:>8.3} {:>6.0} {:>8} {:>5}{}   {s:.3}",
                name,
                p.buffers.len(),
                lb,
                sol.peak,
                sol.peak as f64 / lb.max(1) as f64,
                s,
                s / opts.time_limit.as_secs_f64().max(1e-9),
                vm_hwm_mb(),
                sol.optimal,
                p.capacity
                    .map_or("-", |c| if sol.peak <= c { "yes" } else { "no" }),
                gap
            );
        }
        Err(e) => outln!(
            "{name:<22} {:>7} {lb:>14}  error: {e} ({:.0} MB)   {s:.3}",
            p.buffers.len(),
            vm_hwm_mb()
        ),
    }
    s
}
