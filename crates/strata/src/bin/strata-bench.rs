//! Compile-time and memory benchmark: for the project's examples and the
//! Deeploy training fixtures, the median wall time of `strata compile`
//! (import, schedule, program, plan, check, emit) over several runs, printed
//! against the 1 s bound as a ratio, and the memory the schedule saves: the
//! planner's lower bound (peak live bytes) in the ONNX order and in the
//! chosen order, the arena, the L2 footprint (arena plus read-only
//! constants) and, where the peer published one, its figure and the ratio.
//! Run: `cargo run --release -p strata --bin strata-bench`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use memplan::outln;
use strata::driver;
use strata::ops::Registry;
use strata::testing::PEER_TRAINING_L2 as PEER;

const BOUND_S: f64 = 1.0;
const RUNS: usize = 7;

fn main() {
    memplan::cli::run_to_closed_stdout(run)
}

fn run() {
    strata::testing::bench_takes_no_arguments("Compile-time and memory benchmark: per example and Deeploy training fixture, the median wall time of `strata compile` against the 1 s bound and the memory the schedule saves.\nUsage: strata-bench (no arguments; STRATA_SHARED names ../shared)");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("STRATA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    let mut cases = vec![("example/mlp".to_string(), root.join("examples/mlp"))];
    let mut ort: Vec<PathBuf> = std::fs::read_dir(root.join("examples/ort"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    ort.sort();
    for d in ort {
        let name = format!("ort/{}", d.file_name().unwrap().to_string_lossy());
        cases.push((name, d));
    }
    let training = shared.join("fixtures/deeploy/Training");
    for (m, _, _) in PEER {
        if training.join(m).is_dir() {
            cases.push((m.to_string(), training.join(m)));
        } else {
            outln!("skipped {m}: {} not found", training.join(m).display());
        }
    }
    let reg = Registry::standard();
    let scratch = match strata::outdir::Scratch::new("strata-bench-") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    // Each run replaces the previous run's output (a strata output).
    let out = scratch.path().join("out");
    outln!(
        "{:<16} {:>5} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>6} {:>9} {:>7}",
        "program",
        "nodes",
        "peak ONNX",
        "peak ours",
        "saved",
        "arena",
        "footprint",
        "peer",
        "peer peak",
        "ratio",
        "compile s",
        "s / 1 s"
    );
    let mut worst: f64 = 0.0;
    for (name, dir) in cases {
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..RUNS {
            let t = Instant::now();
            match driver::compile(&dir, None, driver::DEFAULT_L2, &out, &reg) {
                Ok(r) => last = Some(r),
                Err(e) => {
                    outln!("{name:<16} error: {e}");
                    break;
                }
            }
            times.push(t.elapsed().as_secs_f64());
        }
        let Some((loaded, plan)) = last else { continue };
        let p = loaded.program();
        let s = p.schedule.as_ref().expect("compile schedules the program");
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = times[times.len() / 2];
        worst = worst.max(median);
        let footprint = plan.arena_bytes + plan.constant_bytes;
        let peer = PEER.iter().find(|(m, _, _)| *m == name);
        let fmt_opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        outln!(
            "{name:<16} {:>5} {:>10} {:>10} {:>5.1}% {:>10} {:>10} {:>10} {:>10} {:>6} {:>9.4} {:>7.4}",
            p.nodes_total(),
            s.onnx_peak,
            s.chosen_peak,
            100.0 * (1.0 - s.chosen_peak as f64 / s.onnx_peak.max(1) as f64),
            plan.arena_bytes,
            footprint,
            fmt_opt(peer.map(|x| x.1)),
            fmt_opt(peer.and_then(|x| x.2)),
            peer.map_or("-".to_string(), |x| format!("{:.3}", footprint as f64 / x.1 as f64)),
            median,
            median / BOUND_S
        );
    }
    if let Err(e) = scratch.close() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    outln!("peak: the planner's lower bound (most bytes live at once) in the ONNX order and in the chosen one;");
    outln!("footprint: arena + read-only constants; ratio: footprint / the peer's figure");
    outln!(
        "worst median compile time {worst:.4} s = {:.4} of the {BOUND_S} s bound",
        worst / BOUND_S
    );
}
