//! A check that compares nothing cannot fail: every reference a fixture
//! should hold is required, and every count must line up (issue 9, item 2).
//! Each case edits a copy of a shipped example in a scratch directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use strata::driver::{self, Engine};
use strata::ops::Registry;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Copy `examples/<rel>` (recursively) into a fresh scratch directory;
/// returns the scratch directory and the copy.
fn copy_example(rel: &str) -> (tempfile::TempDir, PathBuf) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let scratch = tempfile::Builder::new()
        .prefix("strata-nothing-")
        .tempdir()
        .unwrap();
    let dst = scratch.path().join(Path::new(rel).file_name().unwrap());
    copy(&workspace().join("examples").join(rel), &dst);
    (scratch, dst)
}

/// Rewrite the arrays of an `.npz` in place.
fn edit_npz(path: &Path, edit: impl FnOnce(&mut std::collections::BTreeMap<String, npz::Array>)) {
    let mut arrays = npz::read_npz_file(path).unwrap();
    edit(&mut arrays);
    std::fs::write(path, npz::write_npz(&arrays).unwrap()).unwrap();
}

/// `strata check` in both engines fails with an error (exit 1, not a
/// FAILED comparison) whose message holds every needle.
fn check_fails(dir: &Path, needles: &[&str]) {
    for engine in ["interp", "c"] {
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["check", dir.to_str().unwrap(), "--engine", engine])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(out.status.code(), Some(1), "{engine}: {err}");
        for n in needles {
            assert!(err.contains(n), "{engine}: {err:?} does not mention {n:?}");
        }
    }
}

fn load_err(dir: &Path) -> String {
    match strata::fixture::load(dir, &Registry::standard()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_unedited_examples_pass() {
    // The guard for every case below: the same copies, unedited, check OK.
    let (_s, d) = copy_example("mlp");
    let r = driver::check(
        &d,
        Engine::Interp,
        driver::DEFAULT_L2,
        None,
        &Registry::standard(),
    )
    .unwrap();
    assert!(r.ok);
    let (_s, d) = copy_example("ort/cnn");
    let r = driver::check(
        &d,
        Engine::Interp,
        u64::MAX / 4,
        None,
        &Registry::standard(),
    )
    .unwrap();
    assert!(r.ok);
}

#[test]
fn a_trained_weight_missing_from_outputs_npz_is_named() {
    let (_s, d) = copy_example("mlp");
    edit_npz(&d.join("mlp_train/outputs.npz"), |a| {
        a.remove("fc2_bias").unwrap();
    });
    check_fails(
        &d,
        &["outputs.npz", "trained weight `fc2_bias`", "uncompared"],
    );
}

#[test]
fn a_running_statistic_missing_from_the_reference_is_named() {
    let (_s, d) = copy_example("ort/cnn");
    edit_npz(&d.join("reference.npz"), |a| {
        a.remove("bn1.running_var").unwrap();
        a.remove("dw.weight").unwrap();
    });
    let e = load_err(&d);
    assert!(
        e.contains("reference.npz")
            && e.contains("running statistic `bn1.running_var`")
            && e.contains("trained weight `dw.weight`")
            && e.contains("2 missing"),
        "{e}"
    );
}

#[test]
fn a_missing_loss_and_a_loss_count_that_does_not_match_are_errors() {
    let (_s, d) = copy_example("mlp");
    let out = d.join("mlp_train/outputs.npz");
    let full = std::fs::read(&out).unwrap();
    edit_npz(&out, |a| {
        a.remove("loss").unwrap();
    });
    check_fails(&d, &["outputs.npz", "no `loss`"]);
    // Five losses for six mini-batches.
    std::fs::write(&out, &full).unwrap();
    edit_npz(&out, |a| {
        let Some(npz::Array::F32 { shape, data }) = a.get_mut("loss") else {
            panic!("loss is float32")
        };
        data.pop();
        *shape = vec![data.len()];
    });
    check_fails(
        &d,
        &["outputs.npz", "`loss` holds 5 values for 6 mini-batches"],
    );
}

/// An engine's results with a different number of losses or tensors than
/// the reference are an error, not a comparison of the part that lines up.
#[test]
fn results_that_do_not_line_up_with_the_reference_are_errors() {
    let reg = Registry::standard();
    let f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    let r = strata::fixture::run_interp(&f).unwrap();
    assert!(strata::fixture::compare(&f, &r).unwrap().ok);
    let mut short = r.clone();
    short.losses.pop();
    let e = strata::fixture::compare(&f, &short)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("produced 5 losses but the reference holds 6"),
        "{e}"
    );
    let mut short = r.clone();
    short.tensors.pop();
    let e = strata::fixture::compare(&f, &short)
        .unwrap_err()
        .to_string();
    assert!(e.contains("produced 5 tensors for 6 references"), "{e}");
}

#[test]
fn a_missing_mini_batch_array_is_named_at_load() {
    let (_s, d) = copy_example("mlp");
    let inputs = d.join("mlp_train/inputs.npz");
    let full = std::fs::read(&inputs).unwrap();
    edit_npz(&inputs, |a| {
        a.remove("mb3_arr_0001").unwrap();
    });
    let e = load_err(&d);
    assert!(
        e.contains("inputs.npz") && e.contains("missing `mb3_arr_0001`") && e.contains("6"),
        "{e}"
    );
    check_fails(&d, &["missing `mb3_arr_0001`"]);
    // A mini-batch beyond meta_n_batches reads nothing: an error too.
    std::fs::write(&inputs, &full).unwrap();
    edit_npz(&inputs, |a| {
        let v = a["mb1_arr_0000"].clone();
        a.insert("mb6_arr_0000".into(), v);
    });
    let e = load_err(&d);
    assert!(e.contains("`mb6_arr_0000` is no mini-batch input"), "{e}");
    // Without `meta_n_batches` there is one mini-batch: the error says the
    // count is absent, not only "1 <= k < 1".
    std::fs::write(&inputs, &full).unwrap();
    edit_npz(&inputs, |a| {
        a.remove("meta_n_batches").unwrap();
        a.remove("meta_n_accum").unwrap();
    });
    let e = load_err(&d);
    assert!(
        e.contains("`mb1_arr_0000` is no mini-batch input")
            && e.contains("no `meta_n_batches`: one mini-batch"),
        "{e}"
    );
}

/// ONNX Runtime artifacts likewise: without `meta_n_batches` there is one
/// mini-batch (`mb0_*`), and an `mb1_*` array says the count is absent
/// rather than that it lies outside `meta_n_batches`.
#[test]
fn an_ort_mini_batch_array_without_a_count_says_the_count_is_absent() {
    let (_s, d) = copy_example("ort/mlp");
    edit_npz(&d.join("data.npz"), |a| {
        a.remove("meta_n_batches").unwrap();
        a.remove("meta_n_accum").unwrap();
    });
    let e = load_err(&d);
    assert!(
        e.contains("data.npz")
            && e.contains("`mb1_input` is no mini-batch input")
            && e.contains(
                "no `meta_n_batches`: one mini-batch, whose inputs are the `mb0_<input>`"
            )
            && !e.contains("within meta_n_batches"),
        "{e}"
    );
}

#[test]
fn meta_counts_must_be_positive_and_divide() {
    let (_s, d) = copy_example("mlp");
    let inputs = d.join("mlp_train/inputs.npz");
    let full = std::fs::read(&inputs).unwrap();
    let set = |key: &str, v: i32| {
        std::fs::write(&inputs, &full).unwrap();
        edit_npz(&inputs, |a| {
            a.insert(
                key.into(),
                npz::Array::I32 {
                    shape: vec![1],
                    data: vec![v],
                },
            );
        });
    };
    for v in [0, -2] {
        set("meta_n_accum", v);
        let e = load_err(&d);
        assert!(
            e.contains("`meta_n_accum` is") && e.contains("expected a positive count"),
            "{v}: {e}"
        );
    }
    set("meta_n_batches", 0);
    assert!(load_err(&d).contains("`meta_n_batches` is 0"));
    // Six mini-batches, four per optimizer step: the last two never applied.
    set("meta_n_accum", 4);
    let e = load_err(&d);
    assert!(
        e.contains("`meta_n_accum` is 4, which does not divide `meta_n_batches` (6)"),
        "{e}"
    );
    check_fails(&d, &["does not divide"]);
    // Three divides six: loads.
    set("meta_n_accum", 3);
    strata::fixture::load(&d, &Registry::standard()).unwrap();
    // ONNX Runtime artifacts read the same counts.
    let (_s2, o) = copy_example("ort/mlp");
    edit_npz(&o.join("data.npz"), |a| {
        a.insert(
            "meta_n_accum".into(),
            npz::Array::I64 {
                shape: vec![],
                data: vec![0],
            },
        );
    });
    assert!(load_err(&o).contains("`meta_n_accum` is 0"));
}

#[test]
fn a_fixture_without_references_compares_nothing_and_fails() {
    let (_s, d) = copy_example("ort/mlp");
    std::fs::rename(d.join("reference.npz"), d.join("reference.npz.away")).unwrap();
    // It still compiles (a reference is for checking) ...
    let out = d.parent().unwrap().join("out");
    driver::compile(&d, None, driver::DEFAULT_L2, &out, &Registry::standard()).unwrap();
    // ... but a check has nothing to compare.
    check_fails(&d, &["nothing to compare"]);
}

#[test]
fn an_input_without_a_declared_shape_is_an_error() {
    use strata::testing::onnx_build::{model, node, value};
    let mut x = value("x", 1, &[2, 2]);
    if let Some(strata::onnx::proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().unwrap().value.as_mut()
    {
        t.shape = None;
    }
    let m = model(
        vec![node("Relu", "", &["x"], &["y"], vec![])],
        vec![x],
        vec![value("y", 1, &[2, 2])],
        vec![],
    );
    let e = strata::onnx::decode(&m, Path::new("noshape.onnx"))
        .and_then(|m| strata::onnx::import(&m, &Registry::standard()))
        .expect_err("an input without a shape imported")
        .to_string();
    assert!(e.contains("`x` declares no shape"), "{e}");
    // A scalar (an empty shape) is fine.
    let m = model(
        vec![node("Relu", "", &["x"], &["y"], vec![])],
        vec![value("x", 1, &[])],
        vec![value("y", 1, &[])],
        vec![],
    );
    let m = strata::onnx::decode(&m, Path::new("scalar.onnx")).unwrap();
    strata::onnx::import(&m, &Registry::standard()).unwrap();
}

/// A NaN in a reference can never be met (a NaN equals nothing): the loader
/// refuses it, naming the array and where, instead of every check failing
/// with an infinite error. An infinity is a value like any other.
#[test]
fn a_nan_in_a_reference_is_an_error_at_load() {
    fn set(a: &mut std::collections::BTreeMap<String, npz::Array>, key: &str, at: usize, v: f32) {
        let Some(npz::Array::F32 { data, .. }) = a.get_mut(key) else {
            panic!("{key} is float32")
        };
        data[at] = v;
    }
    let (_s, d) = copy_example("mlp");
    let out = d.join("mlp_train/outputs.npz");
    let full = std::fs::read(&out).unwrap();
    let weight = {
        let a = npz::read_npz_file(&out).unwrap();
        a.keys().find(|k| *k != "loss").unwrap().clone()
    };
    for (key, at) in [("loss", 2), (weight.as_str(), 1)] {
        std::fs::write(&out, &full).unwrap();
        edit_npz(&out, |a| set(a, key, at, f32::NAN));
        check_fails(
            &d,
            &[
                "outputs.npz",
                &format!("reference `{key}` holds NaN at flat index {at} (1 of its"),
            ],
        );
    }
    // A kernel test: its output's references the same way.
    let (_s, k) = copy_example("import/broadcast_low_rank_first");
    let out = k.join("outputs.npz");
    let key = npz::read_npz_file(&out)
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let full = std::fs::read(&out).unwrap();
    edit_npz(&out, |a| set(a, &key, 0, f32::NAN));
    let e = load_err(&k);
    assert!(
        e.contains(&format!("reference `{key}` holds NaN at flat index 0")),
        "{e}"
    );
    // An infinity loads (and, unmet, fails the comparison, not the load).
    std::fs::write(&out, &full).unwrap();
    edit_npz(&out, |a| set(a, &key, 0, f32::INFINITY));
    strata::fixture::load(&k, &Registry::standard()).expect("an infinite reference loads");
}
