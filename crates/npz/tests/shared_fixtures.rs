//! Reads the real Deeploy fixtures from `../shared` (beside the workspace) or
//! `$STRATA_SHARED`; skips, saying so, when neither is present.

use std::path::PathBuf;

fn shared_dir() -> Option<PathBuf> {
    let candidate = match std::env::var_os("STRATA_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    candidate.is_dir().then_some(candidate)
}

#[test]
fn reads_simplemlp_inputs() {
    let Some(shared) = shared_dir() else {
        eprintln!("skipped: ../shared not found");
        return;
    };
    let path = shared.join("fixtures/deeploy/Training/SimpleMLP/simplemlp_train/inputs.npz");
    if !path.is_file() {
        eprintln!("skipped: {} not found", path.display());
        return;
    }
    let arrays = npz::read_npz_file(&path).unwrap_or_else(|e| panic!("{e}"));

    let labels = &arrays["arr_0001"];
    assert_eq!(labels.dtype_name(), "int64");
    assert_eq!(labels.shape(), &[1]);

    let n_batches = &arrays["meta_n_batches"];
    assert_eq!(n_batches.dtype_name(), "int32");
    assert_eq!(n_batches.shape(), &[1]);

    let input = &arrays["arr_0000"];
    assert_eq!(input.dtype_name(), "float32");
    assert_eq!(input.shape(), &[1, 64]);
    assert_eq!(arrays["arr_0004"].dtype_name(), "bool");
}
