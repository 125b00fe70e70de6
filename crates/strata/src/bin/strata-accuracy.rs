//! Accuracy against the f64 oracle, per model and per op family.
//!
//! ```sh
//! cargo run --release -p strata --bin strata-accuracy
//! ```
//!
//! For every training program (the project's `examples/mlp` and
//! `examples/ort/*`, and the Deeploy training fixtures in `../shared`) it
//! prints the largest distance from the f64 oracle of the trained tensors
//! and of the losses, for strata's interpreter, strata's compiled C and the
//! fixture's reference (ONNX Runtime's run, or numpy's float64 for
//! `examples/mlp`). Per op family it does the same for the Deeploy kernel
//! tests (ONNX Runtime's references; strata's interpreter, which the
//! compiled C matches within 1e-6) and for the project's own cases in
//! `examples/import` (numpy float64 references rounded once to float32).
//! Columns: max abs tensor distance / relative to the largest oracle value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memplan::outln;
use strata::driver::{self, Engine};
use strata::ops::Registry;
use strata::oracle::Distance;

fn fmt(d: &Distance) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2e}"));
    format!("{} / {}", f(d.max_abs_tensor), f(d.max_rel_tensor))
}

fn loss(d: &Distance) -> String {
    d.max_abs_loss
        .map_or("-".to_string(), |v| format!("{v:.2e}"))
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn kernel_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if root.join("network.onnx").is_file() {
        out.push(root.to_path_buf());
        return;
    }
    for s in subdirs(root) {
        kernel_dirs(&s, out);
    }
}

/// Fold b into a (the larger distance per field).
fn worst(a: &mut Distance, b: &Distance) {
    let m = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    };
    a.max_abs_loss = m(a.max_abs_loss, b.max_abs_loss);
    a.max_abs_tensor = m(a.max_abs_tensor, b.max_abs_tensor);
    a.max_rel_tensor = m(a.max_rel_tensor, b.max_rel_tensor);
}

fn main() {
    memplan::cli::run_to_closed_stdout(run)
}

fn run() {
    strata::testing::bench_takes_no_arguments("Accuracy against the f64 oracle, per training program and per op family: strata's interpreter, its compiled C and the fixture's reference.\nUsage: strata-accuracy (no arguments; STRATA_SHARED names ../shared)");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = strata::testing::shared_dir();
    let reg = Registry::standard();
    let l2 = u64::MAX / 4;

    let mut models = vec![root.join("examples/mlp")];
    models.extend(subdirs(&root.join("examples/ort")));
    if let Some(s) = &shared {
        models.extend(subdirs(&s.join("fixtures/deeploy/Training")));
    }
    outln!("## Training programs: distance from the f64 oracle (trained tensors: max abs / relative; losses: max abs)\n");
    outln!("| model | strata interp | strata C | reference | loss: strata | loss: reference |");
    outln!("|---|---|---|---|---|---|");
    for m in &models {
        let name = m
            .strip_prefix(&root)
            .or_else(|_| m.strip_prefix(shared.as_deref().unwrap_or(Path::new("/"))))
            .unwrap_or(m)
            .display()
            .to_string();
        let run = |e| driver::check(m, e, l2, None, &reg);
        match (run(Engine::Interp), run(Engine::C)) {
            (Ok(i), Ok(c)) => match (i.oracle, c.oracle) {
                (Some(oi), Some(oc)) => outln!(
                    "| {name} | {} | {} | {} | {} | {} |",
                    fmt(&oi.engine),
                    fmt(&oc.engine),
                    fmt(&oi.reference),
                    loss(&oi.engine),
                    loss(&oi.reference)
                ),
                _ => outln!("| {name} | oracle failed: {:?} | | | | |", i.oracle_error),
            },
            (Err(e), _) | (_, Err(e)) => outln!("| {name} | error: {e} | | | | |"),
        }
    }

    let mut families: BTreeMap<String, (Distance, Distance, usize)> = BTreeMap::new();
    let mut add = |family: String, d: &Path| match driver::check(d, Engine::Interp, l2, None, &reg)
    {
        Ok(r) => {
            if let Some(o) = r.oracle {
                let e = families.entry(family).or_default();
                worst(&mut e.0, &o.engine);
                worst(&mut e.1, &o.reference);
                e.2 += 1;
            }
        }
        Err(e) => eprintln!("{}: {e}", d.display()),
    };
    if let Some(s) = &shared {
        let kroot = s.join("fixtures/deeploy/Kernels/FP32");
        let mut dirs = Vec::new();
        kernel_dirs(&kroot, &mut dirs);
        for d in dirs {
            let rel = d.strip_prefix(&kroot).unwrap();
            let fam = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            add(format!("Deeploy {fam}"), &d);
        }
    }
    for d in subdirs(&root.join("examples/import")) {
        let n = d.file_name().unwrap().to_string_lossy().into_owned();
        let fam = n.split('_').next().unwrap_or(&n).to_string();
        add(format!("import {fam}"), &d);
    }
    outln!("\n## Op families: distance from the f64 oracle (outputs: max abs / relative, worst case of the family)\n");
    outln!("| family | tests | strata | reference |");
    outln!("|---|---|---|---|");
    for (fam, (s, r, n)) in &families {
        outln!("| {fam} | {n} | {} | {} |", fmt(s), fmt(r));
    }
}
