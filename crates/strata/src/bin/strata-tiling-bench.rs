//! Tiling benchmark. First table: per training program and L1 budget (L2
//! home), the arenas with their lower bounds, simulated cycles single- and
//! double-buffered and their ratio, cycles over max(compute bound, transfer
//! bound) and over the sequential bound (per node the larger of its compute
//! and its transfers, summed: nodes run one after another), DMA commands per step, and the compile (import, schedule, plan,
//! lower, check, emit C) in seconds and peak memory, against the 1 s / 200
//! MB bound for ResNet8.
//!
//! Second table (the memory hierarchy): per program, at L1 128,000 and L2
//! 2,000,000, with tensors at home in L2 (L3 only for what does not fit) and
//! all in L3: the untiled baseline, tiled single- and double-buffered (all
//! in L3 also at L1 64,000: `single64`, `double64`), each
//! with cycles per training and per optimizer step and the L1 / L2 / L3
//! arenas; and the compile at default level L3, double-buffered, against
//! 1 s / 200 MB (ResNet8) and 5 s / 200 MB (MobileNetV1-sized programs).
//!
//! Each cell runs in a child process (this binary with `--cell`) so that its
//! peak memory (VmHWM) is its own.
//!
//! Run: `cargo run --release -p strata --bin strata-tiling-bench`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use memplan::outln;
use strata::driver::{self, Engine, Target};
use strata::lir::{Buffering, Level};
use strata::ops::Registry;

const COMPILE_BOUND_S: f64 = 1.0;
const MEMORY_BOUND_MB: f64 = 200.0;
const RUNS: usize = 5;

/// Peak resident memory of this process in MB (Linux), if known.
fn peak_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds (user + system) this process has used (Linux), if known.
fn cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// A cell's target from its arguments: L1 budget (0: untiled), buffering,
/// default level, L2 budget.
fn target(args: &[String]) -> Target {
    let l1: u64 = args[0].parse().unwrap();
    let mut t = Target::with_l2(args[3].parse().unwrap());
    t.l1 = (l1 > 0).then_some(l1);
    t.buffering = if args[1] == "single" {
        Buffering::Single
    } else {
        Buffering::Double
    };
    t.default_level = if args[2] == "L3" {
        Level::L3
    } else {
        Level::L2
    };
    t
}

/// One cell, in this process: prints a tab-separated result line.
fn cell(dir: &Path, t: &Target) -> Result<(), String> {
    let reg = Registry::standard();
    // Compile: import, plan, lower, check the lowered program, emit the C.
    let mut times = Vec::new();
    let mut out = None;
    let cpu0 = cpu_s().unwrap_or(f64::NAN);
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let mut loaded = driver::load_program(dir, None, &reg).map_err(|e| e.to_string())?;
        let (plan, lir) =
            driver::plan_and_lower(loaded.program_mut(), t).map_err(|e| e.to_string())?;
        let p = loaded.program();
        let (h, c) = strata::codegen::emit_model(p, &plan, &lir).map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64());
        out = Some((lir, h.len() + c.len()));
    }
    let compile_cpu = (cpu_s().unwrap_or(f64::NAN) - cpu0) / RUNS as f64;
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let compile_s = times[times.len() / 2];
    let mem = peak_mb().unwrap_or(f64::NAN);
    let (lir, c_bytes) = out.unwrap();
    let r = driver::check_for(dir, Engine::Sim, t, None, &reg).map_err(|e| e.to_string())?;
    let sim = r.sim.as_ref().unwrap();
    let per = |total: u64, steps: u64| total as f64 / steps.max(1) as f64;
    outln!(
        "CELL\t{}\t{}\t{}\t{}\t{}\t{:.0}\t{:.0}\t{}\t{}\t{}\t{}\t{:.4}\t{:.1}\t{}\t{}\t{:.4}\t{}\t{}\t{}",
        lir.arena(Level::L1),
        lir.lower_bounds.get(&Level::L1).copied().unwrap_or(0),
        lir.arena(Level::L2),
        lir.lower_bounds.get(&Level::L2).copied().unwrap_or(0),
        r.cycles.as_ref().unwrap().total,
        per(r.cycles.as_ref().unwrap().train, sim.train_steps),
        per(r.cycles.as_ref().unwrap().optimizer, sim.optimizer_steps),
        r.bounds.as_ref().unwrap().compute,
        r.bounds.as_ref().unwrap().transfer,
        sim.dma_commands["train"],
        sim.dma_commands["optimizer"],
        compile_s,
        mem,
        c_bytes,
        r.ok,
        compile_cpu,
        lir.arena(Level::L3),
        lir.lower_bounds.get(&Level::L3).copied().unwrap_or(0),
        r.bounds.as_ref().unwrap().sequential,
    );
    Ok(())
}

struct Row {
    l1: u64,
    l1_lb: u64,
    l2: u64,
    l2_lb: u64,
    total: u64,
    train: f64,
    opt: f64,
    compute: u64,
    transfer: u64,
    dma_train: u64,
    dma_opt: u64,
    compile_s: f64,
    mem_mb: f64,
    c_bytes: u64,
    ok: bool,
    compile_cpu: f64,
    l3: u64,
    l3_lb: u64,
    sequential: u64,
}

/// Run one cell in a child process: L1 budget (`None`: untiled), buffering,
/// default level, L2 budget.
fn run_cell(
    dir: &Path,
    l1: Option<u64>,
    b: Buffering,
    level: Level,
    l2: u64,
) -> Result<Row, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("--cell")
        .arg(dir)
        .arg(l1.unwrap_or(0).to_string())
        .arg(match b {
            Buffering::Single => "single",
            Buffering::Double => "double",
        })
        .arg(level.to_string())
        .arg(l2.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find(|l| l.starts_with("CELL\t")) else {
        return Err(format!(
            "{}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    let f: Vec<&str> = line.split('\t').skip(1).collect();
    let u = |i: usize| f[i].parse::<u64>().unwrap_or(0);
    let x = |i: usize| f[i].parse::<f64>().unwrap_or(f64::NAN);
    Ok(Row {
        l1: u(0),
        l1_lb: u(1),
        l2: u(2),
        l2_lb: u(3),
        total: u(4),
        train: x(5),
        opt: x(6),
        compute: u(7),
        transfer: u(8),
        dma_train: u(9),
        dma_opt: u(10),
        compile_s: x(11),
        mem_mb: x(12),
        c_bytes: u(13),
        ok: f[14] == "true",
        compile_cpu: x(15),
        l3: u(16),
        l3_lb: u(17),
        sequential: u(18),
    })
}

fn main() {
    memplan::cli::run_to_closed_stdout(run)
}

fn run() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--cell") {
        if let Err(e) = cell(Path::new(&args[2]), &target(&args[3..])) {
            outln!("error: {e}");
        }
        return;
    }
    strata::testing::bench_takes_no_arguments(
        "Tiling benchmark: per training program and L1 budget, the arenas against their lower bounds, simulated cycles single- and double-buffered against the compute, transfer and sequential bounds, DMA commands and the compile; then the memory hierarchy (L2 or L3 homes; untiled, single, double).\nUsage: strata-tiling-bench (no arguments; STRATA_SHARED names ../shared)",
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("STRATA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    let mut cases: Vec<(String, PathBuf)> = vec![("mlp".into(), root.join("examples/mlp"))];
    for m in ["cnn", "vit", "mlp_adamw"] {
        cases.push((format!("ort/{m}"), root.join("examples/ort").join(m)));
    }
    let training = shared.join("fixtures/deeploy/Training");
    for m in ["SimpleMLP", "Autoencoder", "DSCNN", "ResNet8"] {
        if training.join(m).is_dir() {
            cases.push((m.to_string(), training.join(m)));
        } else {
            outln!("skipped {m}: {} not found", training.join(m).display());
        }
    }
    outln!(
        "{:<12} {:>7} {:>15} {:>17} {:>12} {:>12} {:>6} {:>10} {:>10} {:>7} {:>7} {:>9} {:>8} {:>8} {:>5}",
        "program", "L1", "L1 arena/bound", "L2 arena/bound", "cycles SB", "cycles DB", "DB/SB", "train/step", "opt/step", "/bound", "/seq", "DMA/step", "compile", "peak MB", "ok"
    );
    let mut worst_ratio: f64 = 0.0;
    let mut worst_seq: f64 = 0.0;
    let mut db_slower = 0;
    for (name, dir) in &cases {
        for l1 in [64_000u64, 128_000] {
            let at = |b| run_cell(dir, Some(l1), b, Level::L2, driver::DEFAULT_L2);
            let (sb, db) = (at(Buffering::Single), at(Buffering::Double));
            let (sb, db) = match (sb, db) {
                (Ok(s), Ok(d)) => (s, d),
                (Err(e), _) | (_, Err(e)) => {
                    outln!("{name:<12} {l1:>7} error: {e}");
                    continue;
                }
            };
            let bound = db.compute.max(db.transfer).max(1) as f64;
            let ratio = db.total as f64 / bound;
            worst_ratio = worst_ratio.max(ratio);
            let seq = db.total as f64 / db.sequential.max(1) as f64;
            worst_seq = worst_seq.max(seq);
            if db.total > sb.total {
                db_slower += 1;
            }
            outln!(
                "{name:<12} {l1:>7} {:>15} {:>17} {:>12} {:>12} {:>6.3} {:>10.0} {:>10.0} {:>7.3} {:>7.3} {:>9} {:>7.3}s {:>8.1} {:>5}",
                format!("{}/{}", db.l1, db.l1_lb),
                format!("{}/{}", db.l2, db.l2_lb),
                sb.total,
                db.total,
                db.total as f64 / sb.total.max(1) as f64,
                db.train,
                db.opt,
                ratio,
                seq,
                format!("{}+{}", db.dma_train, db.dma_opt),
                db.compile_s,
                db.mem_mb,
                sb.ok && db.ok,
            );
            if name == "ResNet8" {
                outln!(
                    "{:<12} {l1:>7} compile {:.3} s wall = {:.3} of the {COMPILE_BOUND_S} s bound ({:.3} s CPU); peak {:.1} MB = {:.3} of {MEMORY_BOUND_MB} MB; emitted C {} bytes",
                    "",
                    db.compile_s,
                    db.compile_s / COMPILE_BOUND_S,
                    db.compile_cpu,
                    db.mem_mb,
                    db.mem_mb / MEMORY_BOUND_MB,
                    db.c_bytes
                );
            }
            let _ = (sb.l1, sb.train, sb.opt);
        }
    }
    outln!("worst simulated cycles / max(compute bound, transfer bound), double-buffered: {worst_ratio:.3}");
    outln!("worst simulated cycles / sequential bound (Σ per node of max(its compute, its transfers)): {worst_seq:.3}");
    outln!("cells where double buffering is slower than single: {db_slower}");
    for m in ["cnn_big", "vit_big", "mobilenet"] {
        let d = root.join("examples/ort").join(m);
        if d.is_dir() {
            cases.push((format!("ort/{m}"), d));
        }
    }
    levels(&cases);
}

/// The second table: untiled / single / double at each default level.
fn levels(cases: &[(String, PathBuf)]) {
    const L1: u64 = 128_000;
    const L2: u64 = 2_000_000;
    outln!(
        "\nmemory hierarchy: L1 {L1}, L2 {L2}; cycles per training step / per optimizer step; arenas in bytes (L3: - when none)"
    );
    outln!(
        "{:<14} {:>5} {:<8} {:>12} {:>10} {:>8} {:>9} {:>9}  {:>8} {:>8}  {:>5}",
        "program",
        "home",
        "run",
        "train/step",
        "opt/step",
        "L1",
        "L2",
        "L3",
        "compile",
        "peak MB",
        "ok"
    );
    let mut l3_db_slower = 0;
    let mut bounds = Vec::new();
    for (name, dir) in cases {
        for level in [Level::L2, Level::L3] {
            let mut cyc = Vec::new();
            let mut runs = vec![
                ("untiled", None, Buffering::Single),
                ("single", Some(L1), Buffering::Single),
                ("double", Some(L1), Buffering::Double),
            ];
            if level == Level::L3 {
                // The smaller of the two budgets the issues name.
                runs.push(("single64", Some(64_000), Buffering::Single));
                runs.push(("double64", Some(64_000), Buffering::Double));
            }
            for (run, l1, b) in runs {
                match run_cell(dir, l1, b, level, L2) {
                    Ok(r) => {
                        outln!(
                            "{name:<14} {level:>5} {run:<8} {:>12.0} {:>10.0} {:>8} {:>9} {:>9}  {:>7.3}s {:>8.1}  {:>5}",
                            r.train,
                            r.opt,
                            r.l1,
                            r.l2,
                            if r.l3 > 0 { r.l3.to_string() } else { "-".into() },
                            r.compile_s,
                            r.mem_mb,
                            r.ok,
                        );
                        let _ = (r.l1_lb, r.l2_lb, r.l3_lb);
                        if level == Level::L3 && run == "double" {
                            let bound = match name.as_str() {
                                "ResNet8" => Some(1.0),
                                "ort/mobilenet" => Some(5.0),
                                _ => None,
                            };
                            if let Some(bs) = bound {
                                bounds.push((
                                    name.clone(),
                                    r.compile_s,
                                    r.compile_cpu,
                                    bs,
                                    r.mem_mb,
                                ));
                            }
                        }
                        cyc.push(Some(r.total));
                    }
                    Err(e) => {
                        outln!("{name:<14} {level:>5} {run:<8} error: {e}");
                        cyc.push(None);
                    }
                }
            }
            if level == Level::L3 {
                for (s, d) in [(cyc[1], cyc[2]), (cyc[3], cyc[4])] {
                    if let (Some(s), Some(d)) = (s, d) {
                        if d > s {
                            l3_db_slower += 1;
                        }
                    }
                }
            }
        }
    }
    for (name, s, cpu, bound, mb) in bounds {
        outln!(
            "compile {name} (default level L3, double-buffered): {s:.3} s wall = {:.3} of the {bound} s bound ({cpu:.3} s CPU); peak {mb:.1} MB = {:.3} of {MEMORY_BOUND_MB} MB",
            s / bound,
            mb / MEMORY_BOUND_MB
        );
    }
    outln!(
        "(program, L1) cells where double buffering at L3 is slower than single: {l3_db_slower}"
    );
}
