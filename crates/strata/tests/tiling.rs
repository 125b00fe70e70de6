//! The lowered program: training programs tiled into L1, single- and
//! double-buffered, through the simulator and the compiled C, held to the
//! external references (ONNX Runtime's for the Deeploy fixtures and the ORT
//! artifacts, numpy float64's for examples/mlp) and to each other; the LIR
//! checker on every lowered program and on corrupted ones.

use std::path::{Path, PathBuf};

use strata::driver::{self, Engine, Target};
use strata::lir::{self, Buffering, Level, Step};
use strata::ops::Registry;
use strata::testing::shared_dir as shared;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target(l1: u64, buffering: Buffering) -> Target {
    let mut t = Target::with_l2(driver::DEFAULT_L2);
    t.l1 = Some(l1);
    t.buffering = buffering;
    t
}

/// Sim and C at one (L1, buffering) cell (see `testing::check_cell`);
/// returns the simulated total cycles.
fn cell(dir: &Path, l1: u64, b: Buffering, with_c: bool) -> u64 {
    strata::testing::check_cell(dir, &target(l1, b), with_c)
        .cycles
        .unwrap()
        .total
}

/// Every cell of a program; double buffering is never slower than single.
fn matrix(dir: &Path, l1s: &[u64], with_c: bool) {
    for &l1 in l1s {
        let single = cell(dir, l1, Buffering::Single, with_c);
        let double = cell(dir, l1, Buffering::Double, with_c);
        assert!(
            double <= single,
            "{} at L1 {l1}: double-buffered {double} cycles > single {single}",
            dir.display()
        );
    }
}

#[test]
fn project_examples_train_tiled() {
    let ex = workspace().join("examples");
    matrix(&ex.join("mlp"), &[64_000, 128_000], true);
    for m in strata::testing::ORT_EXAMPLES {
        matrix(
            &ex.join("ort").join(m),
            &[64_000, 128_000],
            matches!(m, "cnn" | "mlp_adamw" | "cnn_deep"),
        );
    }
}

#[test]
fn deeploy_training_programs_train_tiled() {
    let Some(s) = shared() else {
        eprintln!("skipped: ../shared not found");
        return;
    };
    let t = s.join("fixtures/deeploy/Training");
    for m in ["SimpleMLP", "Autoencoder", "DSCNN"] {
        matrix(&t.join(m), &[64_000, 128_000], true);
    }
    // ResNet8's 64 KiB activations: the simulator across the matrix, the C once.
    matrix(&t.join("ResNet8"), &[128_000], false);
    cell(&t.join("ResNet8"), 128_000, Buffering::Double, true);
}

/// A node whose smallest tile does not fit names itself, the level and the bytes.
#[test]
fn a_tile_that_does_not_fit_is_a_clear_error() {
    let reg = Registry::standard();
    let dir = workspace().join("examples/ort/cnn");
    let e = driver::check_for(
        &dir,
        Engine::Sim,
        &target(256, Buffering::Double),
        None,
        &reg,
    )
    .expect_err("256 bytes of L1 cannot hold a tile");
    let m = e.to_string();
    assert!(
        m.contains("L1") && m.contains("node `") && m.contains("256"),
        "{m}"
    );
    assert!(m.contains("short"), "{m}");
}

fn lowered(dir: &Path, l1: u64, b: Buffering) -> (strata::program::Program, lir::Lir) {
    let reg = Registry::standard();
    let f = strata::fixture::load(dir, &reg).unwrap();
    let plan = driver::plan_program(&f.program, driver::DEFAULT_L2).unwrap();
    let l = driver::lower_program(&f.program, &plan, &target(l1, b)).unwrap();
    (f.program, l)
}

fn checks(p: &strata::program::Program, l: &lir::Lir) -> Result<(), String> {
    lir::check(l, &strata::tile::const_sizes(p)).map_err(|e| e.to_string())
}

/// Each kind of corruption of a lowered program is caught by the checker.
#[test]
fn checker_catches_corrupted_lirs() {
    let dir = workspace().join("examples/mlp");
    let (p, good) = lowered(&dir, 2048, Buffering::Double);
    checks(&p, &good).unwrap();
    assert!(
        good.tilings.iter().any(|t| t.tiles > 1),
        "the budget splits some node"
    );

    // A missing wait: drop the first wait that a kernel depends on.
    let mut l = good.clone();
    let w = l
        .steps
        .iter()
        .position(|s| matches!(s, Step::Wait(_)))
        .unwrap();
    l.steps.remove(w);
    let e = checks(&p, &l).unwrap_err();
    assert!(
        e.contains("waited") || e.contains("in flight") || e.contains("missing wait"),
        "{e}"
    );

    // Two live slots overlapping: point a kernel's second L1 input at its first.
    let mut l = good.clone();
    let k = l
        .steps
        .iter()
        .position(|s| match s {
            Step::Kernel(k) => {
                k.inputs
                    .iter()
                    .flatten()
                    .filter(|o| o.loc.level() == Level::L1)
                    .count()
                    >= 2
            }
            _ => false,
        })
        .unwrap();
    if let Step::Kernel(k) = &mut l.steps[k] {
        let first = k
            .inputs
            .iter()
            .flatten()
            .find(|o| o.loc.level() == Level::L1)
            .unwrap()
            .loc;
        let second = k
            .inputs
            .iter_mut()
            .flatten()
            .filter(|o| o.loc.level() == Level::L1)
            .nth(1)
            .unwrap();
        second.loc = first;
    }
    let e = checks(&p, &l).unwrap_err();
    assert!(e.contains("other data") || e.contains("overwritten"), "{e}");

    // A DMA past the arena.
    let mut l = good.clone();
    let d = l
        .steps
        .iter()
        .position(|s| matches!(s, Step::Dma(_)))
        .unwrap();
    if let Step::Dma(d) = &mut l.steps[d] {
        d.dst.offset += good.arena(Level::L1) + 16;
    }
    let e = checks(&p, &l).unwrap_err();
    assert!(e.contains("arena"), "{e}");

    // A DMA id reused while in flight.
    let mut l = good.clone();
    let ids: Vec<usize> = l
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Dma(_)))
        .map(|(i, _)| i)
        .collect();
    let first_id = match &l.steps[ids[0]] {
        Step::Dma(d) => d.id,
        _ => unreachable!(),
    };
    if let Step::Dma(d) = &mut l.steps[ids[1]] {
        d.id = first_id;
    }
    assert!(checks(&p, &l).is_err());

    // A command over the DMA limit.
    let mut l = good.clone();
    if let Step::Dma(d) = &mut l.steps[ids[0]] {
        d.shape.bytes = 1 << 17;
    }
    let e = checks(&p, &l).unwrap_err();
    assert!(e.contains("131071"), "{e}");

    // A store of a tile that was made for another home.
    let mut l = good.clone();
    let out = l
        .steps
        .iter()
        .rposition(|s| matches!(s, Step::Dma(d) if d.src.level() == Level::L1))
        .unwrap();
    if let Step::Dma(d) = &mut l.steps[out] {
        d.dst.offset += 16;
    }
    assert!(checks(&p, &l).is_err());
}

/// Lowering is deterministic, and tiles and single/double buffering change
/// the steps but never the arena of L2.
#[test]
fn lowering_is_deterministic() {
    let dir = workspace().join("examples/ort/cnn");
    let (_, a) = lowered(&dir, 4096, Buffering::Double);
    let (_, b) = lowered(&dir, 4096, Buffering::Double);
    assert_eq!(format!("{:?}", a.steps), format!("{:?}", b.steps));
    let (_, s) = lowered(&dir, 4096, Buffering::Single);
    assert_eq!(a.arena(Level::L2), s.arena(Level::L2));
}

/// Tight budgets force many small tiles: the simulator still matches the
/// reference and the checker passes, across many budgets.
#[test]
fn many_budgets_split_and_still_agree() {
    let dir = workspace().join("examples/mlp");
    let reg = Registry::standard();
    for l1 in [512u64, 1024, 1536, 3000, 7777] {
        for b in [Buffering::Single, Buffering::Double] {
            let r = driver::check_for(&dir, Engine::Sim, &target(l1, b), None, &reg);
            match r {
                Ok(r) => assert!(r.ok, "L1 {l1} {b:?}: {:?}", r.failures),
                Err(e) => assert!(e.to_string().contains("L1"), "L1 {l1} {b:?}: {e}"),
            }
        }
    }
}
