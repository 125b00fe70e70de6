//! Reads the project's own example program (`examples/mlp`, written by
//! `examples/gen_mlp.py` with NumPy's `np.savez`), so the reader is tested on
//! NumPy output with batch size > 1 and every parameter trainable.

use npz::{read_npz, read_npz_file, write_npz, Array};
use std::path::PathBuf;

fn train_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp/mlp_train")
}

const PARAMS: [(&str, &[usize]); 6] = [
    ("fc1_weight", &[32, 16]),
    ("fc1_bias", &[32]),
    ("fc2_weight", &[24, 32]),
    ("fc2_bias", &[24]),
    ("fc3_weight", &[10, 24]),
    ("fc3_bias", &[10]),
];

#[test]
fn example_inputs_follow_the_layout() {
    let inputs = read_npz_file(&train_dir().join("inputs.npz")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inputs["arr_0000"].shape(), &[4, 16]);
    assert_eq!(inputs["arr_0000"].dtype_name(), "float32");
    assert_eq!(inputs["arr_0001"].shape(), &[4]);
    assert_eq!(inputs["arr_0001"].dtype_name(), "int64");
    for (i, (_, shape)) in PARAMS.iter().enumerate() {
        assert_eq!(inputs[&format!("arr_{:04}", i + 2)].shape(), *shape);
    }
    assert_eq!(
        inputs["arr_0008"],
        Array::Bool {
            shape: vec![1],
            data: vec![true]
        }
    );
    for k in 1..6 {
        assert_eq!(inputs[&format!("mb{k}_arr_0000")].shape(), &[4, 16]);
        assert_eq!(inputs[&format!("mb{k}_arr_0001")].dtype_name(), "int64");
    }
    let meta = |key: &str| match &inputs[key] {
        Array::I32 { shape, data } if shape == &[1] => data[0],
        other => panic!("{key}: {other:?}"),
    };
    assert_eq!(meta("meta_n_batches"), 6);
    assert_eq!(meta("meta_data_size"), 24);
    assert_eq!(meta("meta_n_accum"), 2);
    assert_eq!(inputs.len(), 9 + 2 * 5 + 3);
}

#[test]
fn example_outputs_round_trip() {
    let outputs = read_npz_file(&train_dir().join("outputs.npz")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(outputs["loss"].shape(), &[6]);
    for (name, shape) in PARAMS {
        assert_eq!(outputs[name].shape(), shape, "{name}");
        assert_eq!(outputs[name].dtype_name(), "float32");
    }
    assert_eq!(read_npz(&write_npz(&outputs).unwrap()).unwrap(), outputs);
}
