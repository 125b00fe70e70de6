//! The peer's kernel suite: every test under
//! `../shared/fixtures/deeploy/Kernels/FP32` through the interpreter, the
//! simulator and the C (tiled into 64,000 bytes of L1), each output within
//! 1e-4 absolute or 1e-5 relative of ONNX Runtime's reference (whichever is
//! larger), and simulator and C within 1e-6 of each other.
//! A fixture whose own reference is off is listed below with its reason and
//! checked for exactly that deviation, never skipped silently.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use strata::driver::{self, Engine};
use strata::ops::Registry;
use strata::tensor::{max_abs_diff, DType};
use strata::testing::shared_dir as shared;

/// Fixtures whose reference deviates from the op's definition, with the reason.
const DEVIATIONS: &[(&str, &str)] = &[(
    "Softmax/CrossEntropyGrad",
    "its generator fed dY = 1/B (the extra `loss_grad` array, which the 2-input graph has no \
     slot for) to a mean-reduced gradient, so the reference is (softmax - onehot)/B^2 (B = 4) \
     where the op gives /B; tests/transformer.rs::\
     deeploy_cross_entropy_grad_reference_is_off_by_one_over_b checks ours/B equals it to 1e-6",
)];

/// Simulator and C run the same tiles of the same lowered program in the
/// same order (the interpreter sums a reduction split across tiles in one
/// pass, so it is held to ONNX Runtime's reference only).
const ENGINES_AGREE: f32 = 1e-6;
/// The L1 budget the C runs tiled into.
const L1: u64 = 64_000;

fn kernel_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if root.join("network.onnx").is_file() {
        out.push(root.to_path_buf());
        return;
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    subs.sort();
    for s in subs {
        kernel_dirs(&s, out);
    }
}

/// Ok(whether some node ran as several tiles) when the kernel test passes
/// (or deviates exactly as listed), else why not.
fn check_one(root: &Path, d: &Path, reg: &Registry) -> Result<bool, String> {
    let rel = d.strip_prefix(root).unwrap().to_string_lossy().into_owned();
    // The C runs tiled into 64,000 bytes of L1, double-buffered.
    let mut tiled = driver::Target::with_l2(u64::MAX / 4);
    tiled.l1 = Some(L1);
    let run = |e| driver::check_for(d, e, &tiled, None, reg);
    let (i, s, c) = (run(Engine::Interp), run(Engine::Sim), run(Engine::C));
    if let Some((_, why)) = DEVIATIONS.iter().find(|(n, _)| *n == rel) {
        // The loader refuses the unexplained extra array; the numbers are checked where the reason says.
        let passes = matches!((&i, &s, &c), (Ok(a), Ok(b), Ok(c)) if a.ok && b.ok && c.ok);
        return if passes {
            Err(format!(
                "{rel} is listed as deviating ({why}) but passes: remove it from DEVIATIONS"
            ))
        } else {
            Ok(false)
        };
    }
    let (i, s, c) = match (i, s, c) {
        (Ok(i), Ok(s), Ok(c)) => (i, s, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Err(format!("{rel}: {e}")),
    };
    let (rs, rc) = (s.results.as_ref().unwrap(), c.results.as_ref().unwrap());
    assert_eq!(rs.tensors.len(), rc.tensors.len(), "{rel}");
    let agree = !rs.tensors.is_empty()
        && rs.tensors.iter().zip(&rc.tensors).all(|(a, b)| {
            a.dtype() != DType::F32 || max_abs_diff(a.as_f32(), b.as_f32()) <= ENGINES_AGREE
        });
    if i.ok && s.ok && c.ok && agree {
        Ok(c.tilings.iter().any(|t| t.tiles > 1))
    } else {
        Err(format!(
            "{rel}: interp ok={} sim ok={} c ok={} sim and C agree={agree}; off: {:?} / {:?} / {:?}",
            i.ok, s.ok, c.ok, i.failures, s.failures, c.failures
        ))
    }
}

#[test]
fn every_kernel_test_passes_in_every_engine() {
    let Some(s) = shared() else { return };
    let root = s.join("fixtures/deeploy/Kernels/FP32");
    let mut dirs = Vec::new();
    kernel_dirs(&root, &mut dirs);
    assert!(
        dirs.len() >= 70,
        "found only {} kernel tests under {}",
        dirs.len(),
        root.display()
    );
    let reg = Registry::standard();
    let failures = Mutex::new(Vec::new());
    let split = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let k = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(d) = dirs.get(k) else { break };
                match check_one(&root, d, &reg) {
                    Err(e) => failures.lock().unwrap().push(e),
                    Ok(true) => split
                        .lock()
                        .unwrap()
                        .push(d.strip_prefix(&root).unwrap().display().to_string()),
                    Ok(false) => {}
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} kernel tests fail:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
    // The large convolution gradients do not fit L1 whole: they must split.
    let split = split.into_inner().unwrap();
    let conv_grads = split.iter().filter(|n| n.starts_with("ConvGrad")).count();
    assert!(
        conv_grads >= 4,
        "only {conv_grads} ConvGrad kernel tests ran as several tiles at L1 {L1}: {split:?}"
    );
    eprintln!(
        "{} kernel tests pass in every engine ({} listed deviation); tiled at L1 {L1}, {} of them split: {}",
        dirs.len() - DEVIATIONS.len(),
        DEVIATIONS.len(),
        split.len(),
        split.join(", ")
    );
}
