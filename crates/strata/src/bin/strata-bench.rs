//! Compile-time benchmark: for the project's example and the Deeploy training
//! fixtures, the median wall time of `strata compile` (import, program, plan,
//! check, emit) over several runs, printed against the 1 s bound as a ratio.
//! Run: `cargo run --release -p strata --bin strata-bench`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use strata::driver;
use strata::ops::Registry;

const BOUND_S: f64 = 1.0;
const RUNS: usize = 7;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("STRATA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    let mut cases = vec![("example/mlp".to_string(), root.join("examples/mlp"))];
    let training = shared.join("fixtures/deeploy/Training");
    for m in ["SimpleMLP", "Autoencoder", "DSCNN", "ResNet8"] {
        if training.join(m).is_dir() {
            cases.push((m.to_string(), training.join(m)));
        } else {
            println!("skipped {m}: {} not found", training.join(m).display());
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
    println!(
        "{:<14} {:>7} {:>12} {:>12} {:>11} {:>9}",
        "program", "nodes", "L2 bytes", "lower bound", "compile s", "s / 1 s"
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
                    println!("{name:<14} error: {e}");
                    break;
                }
            }
            times.push(t.elapsed().as_secs_f64());
        }
        let Some((loaded, plan)) = last else { continue };
        let p = loaded.program();
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = times[times.len() / 2];
        worst = worst.max(median);
        println!(
            "{name:<14} {:>7} {:>12} {:>12} {:>11.4} {:>9.4}",
            p.nodes_total(),
            plan.arena_bytes,
            plan.lower_bound,
            median,
            median / BOUND_S
        );
    }
    if let Err(e) = scratch.close() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    println!(
        "worst median compile time {worst:.4} s = {:.4} of the {BOUND_S} s bound",
        worst / BOUND_S
    );
}
