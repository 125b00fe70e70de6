//! End-to-end training programs through both engines, against external
//! references: the project's own example (numpy float64 reference, see
//! examples/gen_mlp.py) always, and the Deeploy fixtures (ONNX Runtime's
//! reference) when ../shared is present.

use std::path::{Path, PathBuf};

use strata::driver::{self, Engine};
use strata::ops::Registry;
use strata::tensor::max_abs_diff;
use strata::testing::shared_dir as shared;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Tolerance of interpreter vs compiled C: same kernels, same accumulation order.
const ENGINES_AGREE: f32 = 1e-6;

/// Run both engines; require each within the fixture's tolerance of the
/// reference, the two within ENGINES_AGREE of each other, and the plan at
/// its lower bound.
fn check_both(dir: &Path) {
    let reg = Registry::standard();
    let i = driver::check(dir, Engine::Interp, driver::DEFAULT_L2, None, &reg)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let c = driver::check(dir, Engine::C, driver::DEFAULT_L2, None, &reg)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for r in [&i, &c] {
        assert!(
            r.ok,
            "{} engine {:?}: failures {:?} (loss err {:?}, weight err {:?})",
            dir.display(),
            r.engine,
            r.failures,
            r.max_abs_loss_error,
            r.max_abs_weight_error
        );
        assert!(
            r.max_abs_loss_error.unwrap() <= 1e-4,
            "loss error {:?}",
            r.max_abs_loss_error
        );
        assert!(
            r.max_abs_weight_error.unwrap() <= 1e-4,
            "weight error {:?}",
            r.max_abs_weight_error
        );
        assert_eq!(
            r.arena_bytes["L2"],
            r.lower_bound_bytes["L2"],
            "{}: plan peak above its lower bound",
            dir.display()
        );
    }
    let (ri, rc) = (i.results.unwrap(), c.results.unwrap());
    assert_eq!(ri.losses.len(), rc.losses.len());
    let dl = max_abs_diff(&ri.losses, &rc.losses);
    assert!(
        dl <= ENGINES_AGREE,
        "{}: interpreter and C losses differ by {dl}",
        dir.display()
    );
    for (a, b) in ri.tensors.iter().zip(&rc.tensors) {
        let d = max_abs_diff(a.as_f32(), b.as_f32());
        assert!(
            d <= ENGINES_AGREE,
            "{}: interpreter and C weights differ by {d}",
            dir.display()
        );
    }
}

#[test]
fn example_mlp_trains_like_numpy() {
    check_both(&workspace().join("examples/mlp"));
}

#[test]
fn simple_mlp_matches_onnx_runtime() {
    if let Some(s) = shared() {
        check_both(&s.join("fixtures/deeploy/Training/SimpleMLP"));
    }
}

#[test]
fn autoencoder_matches_onnx_runtime() {
    if let Some(s) = shared() {
        check_both(&s.join("fixtures/deeploy/Training/Autoencoder"));
    }
}

/// The CNN training programs (issue: CNN ops): every loss, weight and
/// BatchNorm running statistic within 1e-4 of ONNX Runtime, untiled in one
/// level; the plan's bytes and lower bound are printed.
#[test]
fn cnn_training_programs_match_onnx_runtime() {
    let Some(s) = shared() else { return };
    for m in ["DSCNN", "ResNet8"] {
        let dir = s.join("fixtures/deeploy/Training").join(m);
        check_both(&dir);
        let r = driver::check(
            &dir,
            Engine::Interp,
            driver::DEFAULT_L2,
            None,
            &Registry::standard(),
        )
        .unwrap();
        eprintln!(
            "{m}: L2 arena {} bytes, lower bound {} bytes",
            r.arena_bytes["L2"], r.lower_bound_bytes["L2"]
        );
    }
}

/// The same inputs give byte-identical C and plans.
#[test]
fn compile_is_deterministic() {
    let reg = Registry::standard();
    let scratch = tempfile::tempdir().unwrap();
    let tmp = scratch.path();
    let mut dirs = vec![workspace().join("examples/mlp")];
    if let Some(s) = shared() {
        dirs.push(s.join("fixtures/deeploy/Training/Autoencoder"));
    }
    for d in dirs {
        let (a, b) = (tmp.join("a"), tmp.join("b"));
        driver::compile(&d, None, driver::DEFAULT_L2, &a, &reg).unwrap();
        driver::compile(&d, None, driver::DEFAULT_L2, &b, &reg).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(&a)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert!(names.iter().any(|n| n == "model.c") && names.iter().any(|n| n == "plan.json"));
        for n in names {
            let (x, y) = (
                std::fs::read(a.join(&n)).unwrap(),
                std::fs::read(b.join(&n)).unwrap(),
            );
            assert!(
                x == y,
                "{}: {:?} differs between two compiles",
                d.display(),
                n
            );
        }
    }
}

/// The emitted project builds on its own with its Makefile's flags and runs.
#[test]
fn emitted_project_builds_with_make_flags() {
    let reg = Registry::standard();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    driver::compile(
        &workspace().join("examples/mlp"),
        None,
        driver::DEFAULT_L2,
        &out,
        &reg,
    )
    .unwrap();
    let mk = std::fs::read_to_string(out.join("Makefile")).unwrap();
    assert!(mk.contains("-std=c99 -O2 -Wall -Wextra -Werror"), "{mk}");
    let status = std::process::Command::new("make")
        .arg("-s")
        .current_dir(&out)
        .status();
    match status {
        Ok(s) => {
            assert!(s.success(), "make failed in {}", out.display());
            let run = std::process::Command::new(out.join("train"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&run.stdout);
            assert!(run.status.success(), "{text}");
            assert_eq!(
                text.lines().filter(|l| l.starts_with("step ")).count(),
                6,
                "{text}"
            );
        }
        Err(e) => eprintln!("skipped the make half: make not available ({e})"),
    }
}
