//! The f64 oracle (`strata check --engine oracle`, and the `oracle` field
//! of every check report).
//!
//! - On the project's generated cases (`examples/import`, numpy float64
//!   references rounded once to float32) the oracle agrees with numpy to
//!   within that one rounding, element by element: every kernel it runs is
//!   the f64 one.
//! - On the training fixtures (`../shared`) and ONNX Runtime artifacts
//!   (`examples/ort`) `check` reports the distance from the oracle of
//!   strata's result and of the reference; both are within float32 noise of
//!   it, and the oracle itself passes the fixture's tolerance.

use std::path::{Path, PathBuf};

use strata::driver::{self, Engine};
use strata::fixture;
use strata::ops::Registry;
use strata::tensor::DType;
use strata::testing::shared_dir;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn import_cases() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(workspace().join("examples/import"))
        .expect("examples/import (run examples/gen_import.py)")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("network.onnx").is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn the_oracle_is_numpy_float64_to_within_one_float32_rounding() {
    let reg = Registry::standard();
    let cases = import_cases();
    assert!(cases.len() >= 20, "found {} cases", cases.len());
    for d in cases {
        let f = fixture::load(&d, &reg).unwrap();
        let o = strata::oracle::run(&f).unwrap();
        for ((name, _, want), got) in f.ref_tensors.iter().zip(&o.tensors) {
            if want.dtype() != DType::F32 {
                continue;
            }
            assert!(
                got.is_wide(),
                "{}: `{name}` was not computed in f64",
                d.display()
            );
            for (k, (&r, &x)) in want.to_f64().iter().zip(&got.to_f64()).enumerate() {
                // numpy's f64 result rounded to f32 is within half an ulp of it.
                let bound = x.abs() * f64::powi(2.0, -24) * (1.0 + 1e-6) + 1e-300;
                assert!(
                    (r - x).abs() <= bound,
                    "{}: `{name}`[{k}]: reference {r:e}, oracle {x:e}",
                    d.display()
                );
            }
        }
    }
}

#[test]
fn f32_engines_are_not_the_oracle() {
    // The interpreter computes in f32: on a long reduction it differs from
    // the oracle by rounding (this is what the oracle is there to measure).
    let reg = Registry::standard();
    let d = workspace().join("examples/import/conv_grad_default");
    let f = fixture::load(&d, &reg).unwrap();
    let o = strata::oracle::run(&f).unwrap();
    let r = fixture::run_interp(&f).unwrap();
    let rep = strata::oracle::report(&f, &o, &r);
    let e = rep.engine.max_abs_tensor.unwrap();
    assert!(e > 0.0 && e < 1e-5, "interp vs oracle {e:e}");
    assert!(r.tensors.iter().all(|t| !t.is_wide()));
}

/// Every training program: the oracle passes, and the report has both distances.
#[test]
fn check_reports_oracle_distances_for_training_programs() {
    let reg = Registry::standard();
    let mut dirs = vec![workspace().join("examples/mlp")];
    for m in ["mlp", "cnn", "vit", "mlp_adamw", "cnn_deep"] {
        dirs.push(workspace().join("examples/ort").join(m));
    }
    if let Some(s) = shared_dir() {
        for m in ["SimpleMLP", "Autoencoder", "DSCNN", "ResNet8"] {
            dirs.push(s.join("fixtures/deeploy/Training").join(m));
        }
    }
    for d in dirs {
        let o = driver::check(&d, Engine::Oracle, u64::MAX / 4, None, &reg).unwrap();
        assert!(o.ok, "{}: the oracle is off: {:?}", d.display(), o.failures);
        let i = driver::check(&d, Engine::Interp, u64::MAX / 4, None, &reg).unwrap();
        let rep = i.oracle.expect("oracle report");
        for (who, dist) in [("strata", &rep.engine), ("reference", &rep.reference)] {
            let (l, t) = (dist.max_abs_loss.unwrap(), dist.max_abs_tensor.unwrap());
            assert!(
                l < 1e-5 && t < 1e-5,
                "{}: {who} is {l:e} (loss) / {t:e} (tensors) from the oracle",
                d.display()
            );
        }
        eprintln!(
            "{:<60} strata vs oracle: loss {:.2e} weights {:.2e} | reference vs oracle: loss {:.2e} weights {:.2e}",
            d.display().to_string(),
            rep.engine.max_abs_loss.unwrap(),
            rep.engine.max_abs_tensor.unwrap(),
            rep.reference.max_abs_loss.unwrap(),
            rep.reference.max_abs_tensor.unwrap()
        );
    }
}

#[test]
fn check_json_has_the_oracle_fields() {
    let reg = Registry::standard();
    let d = workspace().join("examples/import/gemm_3d_2d");
    let r = driver::check(&d, Engine::Interp, u64::MAX / 4, None, &reg).unwrap();
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    let o = &v["oracle"];
    assert!(o["engine"]["max_abs_tensor"].is_number(), "{v}");
    assert!(o["reference"]["max_abs_tensor"].is_number(), "{v}");
    assert!(
        o["engine"]["max_abs_loss"].is_null(),
        "a kernel test has no loss: {v}"
    );
}

/// The project's deep CNN (11 Conv-BN-Relu layers, batch-1 BatchNorm,
/// trained by ONNX Runtime in `examples/ort/cnn_deep`): strata's trained
/// weights, in both engines, are no further from the f64 oracle than ONNX
/// Runtime's.
#[test]
fn deep_cnn_weights_are_no_further_from_the_oracle_than_onnx_runtime() {
    let reg = Registry::standard();
    let d = workspace().join("examples/ort/cnn_deep");
    for e in [Engine::Interp, Engine::C] {
        let r = driver::check(&d, e, u64::MAX / 4, None, &reg).unwrap();
        assert!(r.ok, "{e:?}: {:?}", r.failures);
        let o = r.oracle.unwrap();
        let (s, ort) = (
            o.engine.max_abs_tensor.unwrap(),
            o.reference.max_abs_tensor.unwrap(),
        );
        eprintln!("cnn_deep {e:?}: strata {s:.3e}, ONNX Runtime {ort:.3e} from the oracle");
        assert!(s <= ort, "{e:?}: strata {s:e} vs ONNX Runtime {ort:e}");
    }
}

/// Pairwise summation (ops::util::Psum, st_psum in the C): on a long sum
/// its error stays near one rounding where a running f32 sum drifts.
#[test]
fn pairwise_summation_stays_accurate_where_a_running_sum_drifts() {
    use strata::ops::util::{psum, Psum};
    let n = 1 << 20;
    let exact = (0.1f32 as f64) * n as f64;
    let pair = psum(std::iter::repeat_n(0.1f32, n)) as f64;
    let mut run = 0f32;
    for _ in 0..n {
        run += 0.1;
    }
    let (ep, er) = (
        (pair - exact).abs() / exact,
        (run as f64 - exact).abs() / exact,
    );
    assert!(ep < 1e-7, "pairwise relative error {ep:e}");
    assert!(er > 1e-3, "running sum relative error {er:e}");
    // For 2^k terms it is exactly the recursive halving.
    fn halve(v: &[f32]) -> f32 {
        if v.len() == 1 {
            v[0]
        } else {
            let h = v.len() / 2;
            halve(&v[..h]) + halve(&v[h..])
        }
    }
    let v: Vec<f32> = (0..256)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let mut p = Psum::new();
    v.iter().for_each(|&x| p.add(x));
    assert_eq!(p.total().to_bits(), halve(&v).to_bits());
}

/// BatchNorm statistics over one long plane (2^16 values near 0.1, where a
/// running f32 sum's mean is off by ~1.7e-6 relative): with pairwise sums
/// the reference kernel's mean stays within a few roundings of the oracle's.
#[test]
fn batchnorm_statistics_of_a_long_plane_are_near_the_oracle() {
    use strata::ops::norm::bn_train;
    let n = 1 << 16;
    let x: Vec<f32> = (0..n)
        .map(|i| 0.1 + ((i * 7919) % 1000) as f32 * 1e-5)
        .collect();
    let (one, zero) = ([1f32], [0f32]);
    let f = bn_train(&x, &one, &zero, &zero, &one, (1, 1, n), 1e-5f32, 0.9f32);
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let (one, zero) = ([1f64], [0f64]);
    let o = bn_train(
        &x64,
        &one,
        &zero,
        &zero,
        &one,
        (1, 1, n),
        1e-5f32 as f64,
        0.9f32 as f64,
    );
    let rel = |a: f32, b: f64| (a as f64 - b).abs() / b.abs();
    assert!(
        rel(f.mean[0], o.mean[0]) < 2e-7,
        "mean {} vs {}",
        f.mean[0],
        o.mean[0]
    );
    assert!(
        rel(f.inv_std[0], o.inv_std[0]) < 1e-6,
        "inv_std {} vs {}",
        f.inv_std[0],
        o.inv_std[0]
    );
}

/// The reductions that feed gradients are at least as accurate as ONNX
/// Runtime's: on the Deeploy kernel tests of weight gradients and
/// BatchNorm (ONNX Runtime's references), strata's outputs are no further
/// from the oracle than ONNX Runtime's.
#[test]
fn gradient_reductions_are_no_further_from_the_oracle_than_onnx_runtime() {
    let Some(s) = shared_dir() else { return };
    let root = s.join("fixtures/deeploy/Kernels/FP32");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("ConvGradW") || n.starts_with("BatchNormalizationGrad")
        })
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 9, "found {} tests", dirs.len());
    let reg = Registry::standard();
    for d in dirs {
        let r = driver::check(&d, Engine::Interp, u64::MAX / 4, None, &reg).unwrap();
        let o = r.oracle.unwrap();
        let (st, ort) = (
            o.engine.max_abs_tensor.unwrap(),
            o.reference.max_abs_tensor.unwrap(),
        );
        eprintln!(
            "{:<40} strata {st:.2e}  ONNX Runtime {ort:.2e}",
            d.file_name().unwrap().to_string_lossy()
        );
        assert!(
            st <= ort,
            "{}: strata {st:e}, ONNX Runtime {ort:e}",
            d.display()
        );
    }
}
