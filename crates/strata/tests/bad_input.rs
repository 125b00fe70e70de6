//! Bad input gets a clear error naming what is wrong, a non-zero exit from
//! the CLI, no panic, and no partial output left looking complete.

use std::path::{Path, PathBuf};
use std::process::Command;

use strata::testing::attr_i;
use strata::testing::onnx_build::{f32_init, model, node, value};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed (by tempfile) when dropped.
fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("strata-bad-{name}-"))
        .tempdir()
        .unwrap()
}

/// Run the CLI; return (exit code, stderr). Asserts it did not panic.
fn strata(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "strata panicked: {err}");
    (out.status.code().expect("exited normally"), err)
}

/// Compile `onnx` bytes in a scratch directory: (that directory, the output
/// directory asked for, exit code, stderr).
fn compile_onnx(name: &str, onnx: &[u8]) -> (tempfile::TempDir, PathBuf, i32, String) {
    let d = tmp(name);
    let f = d.path().join("model.onnx");
    std::fs::write(&f, onnx).unwrap();
    let out = d.path().join("out");
    let (code, err) = strata(&[
        "compile",
        f.to_str().unwrap(),
        "--target",
        "host",
        "-o",
        out.to_str().unwrap(),
    ]);
    (d, out, code, err)
}

/// Compile `onnx` bytes and expect a failure whose message contains every `needle`.
fn compile_fails(name: &str, onnx: &[u8], needles: &[&str]) {
    let (_d, out, code, err) = compile_onnx(name, onnx);
    assert_ne!(code, 0, "{name}: expected failure");
    for n in needles {
        assert!(
            err.contains(n),
            "{name}: error {err:?} does not mention {n:?}"
        );
    }
    assert!(
        !out.exists(),
        "{name}: a failed compile left {}",
        out.display()
    );
}

/// One default-domain node `op` from `x` (float, shape `xs`, and the
/// initializers) to `y` (float, shape `ys`).
fn one_node(
    op: &str,
    inputs: &[&str],
    attrs: Vec<strata::ops::Attribute>,
    (xs, ys): (&[i64], &[i64]),
    inits: Vec<strata::onnx::proto::TensorProto>,
) -> Vec<u8> {
    model(
        vec![node(op, "", inputs, &["y"], attrs)],
        vec![value("x", 1, xs)],
        vec![value("y", 1, ys)],
        inits,
    )
}

/// [`compile_fails`] for each (name, model, needles).
fn all_fail(cases: Vec<(&str, Vec<u8>, &[&str])>) {
    for (name, m, needles) in cases {
        compile_fails(name, &m, needles);
    }
}

/// An AveragePoolGrad (com.microsoft) from `dy` to `dx` under a square
/// window of (size, stride).
fn avg_pool_grad((k, stride): (i64, i64), dy: &[i64], dx: &[i64]) -> Vec<u8> {
    use strata::testing::attr_ints;
    model(
        vec![node(
            "AveragePoolGrad",
            "com.microsoft",
            &["dy"],
            &["dx"],
            vec![
                attr_ints("kernel_shape", &[k, k]),
                attr_ints("strides", &[stride, stride]),
            ],
        )],
        vec![value("dy", 1, dy)],
        vec![value("dx", 1, dx)],
        vec![],
    )
}

fn example_onnx() -> Vec<u8> {
    std::fs::read(workspace().join("examples/mlp/mlp_train/network.onnx")).unwrap()
}

#[test]
fn truncated_onnx() {
    let bytes = example_onnx();
    compile_fails(
        "truncated",
        &bytes[..bytes.len() / 2],
        &["model.onnx", "not a valid ONNX model"],
    );
}

#[test]
fn not_onnx_at_all() {
    compile_fails(
        "text",
        b"this is a README, not a model\n",
        &["not a valid ONNX model"],
    );
    compile_fails("empty", b"", &["not a valid ONNX model"]);
}

#[test]
fn unknown_op_names_node() {
    let m = model(
        vec![node("FancyOp", "", &["x"], &["y"], vec![])],
        vec![value("x", 1, &[2, 2])],
        vec![value("y", 1, &[2, 2])],
        vec![],
    );
    compile_fails(
        "unknown",
        &m,
        &["FancyOp_y", "unknown op `FancyOp`", "ai.onnx"],
    );
}

#[test]
fn missing_graph_input() {
    let m = model(
        vec![node("Relu", "", &["ghost"], &["y"], vec![])],
        vec![value("x", 1, &[2, 2])],
        vec![value("y", 1, &[2, 2])],
        vec![],
    );
    compile_fails("missing", &m, &["Relu_y", "`ghost`"]);
}

#[test]
fn mismatched_shapes_name_node_and_shapes() {
    let m = model(
        vec![node(
            "Gemm",
            "",
            &["x", "w"],
            &["y"],
            vec![attr_i("transB", 1)],
        )],
        vec![value("x", 1, &[2, 3])],
        vec![value("y", 1, &[2, 4])],
        vec![f32_init("w", &[4, 5], &[0.0; 20])],
    );
    compile_fails(
        "shapes",
        &m,
        &["Gemm_y", "inner dimensions", "[2, 3]", "[4, 5]"],
    );
}

#[test]
fn unsupported_attribute_is_an_error() {
    let m = model(
        vec![node(
            "Reshape",
            "",
            &["x", "s"],
            &["y"],
            vec![attr_i("allowzero", 1)],
        )],
        vec![value("x", 1, &[2, 2])],
        vec![value("y", 1, &[4])],
        vec![],
    );
    compile_fails("attr", &m, &["Reshape_y", "allowzero"]);
}

#[test]
fn symbolic_dimension_is_an_error() {
    use strata::onnx::proto::tensor_shape_proto::dimension::Value;
    let mut x = value("x", 1, &[2, 2]);
    if let Some(strata::onnx::proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().unwrap().value.as_mut()
    {
        t.shape.as_mut().unwrap().dim[0].value = Some(Value::DimParam("batch".into()));
    }
    let m = model(
        vec![node("Relu", "", &["x"], &["y"], vec![])],
        vec![x],
        vec![value("y", 1, &[2, 2])],
        vec![],
    );
    compile_fails("symbolic", &m, &["`batch`", "static shapes"]);
}

/// Copy the example training program to a scratch directory.
fn example_copy(name: &str) -> tempfile::TempDir {
    let d = tmp(name);
    for sub in ["mlp_train", "mlp_optimizer"] {
        std::fs::create_dir_all(d.path().join(sub)).unwrap();
        for e in std::fs::read_dir(workspace().join("examples/mlp").join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    d
}

#[test]
fn inputs_npz_that_does_not_match_the_graph() {
    let d = example_copy("npz");
    let path = d.path().join("mlp_train/inputs.npz");
    let mut arrays = npz::read_npz_file(&path).unwrap();
    // Wrong shape for the first weight.
    arrays.insert(
        "arr_0002".into(),
        npz::Array::F32 {
            shape: vec![3, 3],
            data: vec![0.0; 9],
        },
    );
    std::fs::write(&path, npz::write_npz(&arrays).unwrap()).unwrap();
    let (code, err) = strata(&["check", d.path().to_str().unwrap(), "--engine", "interp"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("inputs.npz")
            && err.contains("arr_0002")
            && err.contains("fc1_weight")
            && err.contains("[3, 3]"),
        "{err}"
    );
    // A missing array.
    arrays.remove("arr_0002");
    std::fs::write(&path, npz::write_npz(&arrays).unwrap()).unwrap();
    let (code, err) = strata(&["check", d.path().to_str().unwrap(), "--engine", "interp"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("inputs.npz") && err.contains("arrays"),
        "{err}"
    );
    // Not an npz at all: the file, named once, and what is wrong with it.
    std::fs::write(&path, b"garbage").unwrap();
    let (code, err) = strata(&["check", d.path().to_str().unwrap(), "--engine", "c"]);
    assert_ne!(code, 0);
    assert!(
        err.matches("inputs.npz").count() == 1 && err.contains("not a readable zip archive"),
        "{err}"
    );
}

#[test]
fn program_larger_than_its_levels_names_level_and_missing_bytes() {
    let d = tmp("l2");
    let out = d.path().join("out");
    let ex = workspace().join("examples/mlp");
    // Everything in L3, and L3 too small: the figure is the whole program's.
    let (code, err) = strata(&[
        "compile",
        ex.to_str().unwrap(),
        "--target",
        "host",
        "--default-level",
        "l3",
        "--l3",
        "4096",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("memory level L3") && err.contains("4096") && err.contains("bytes short"),
        "{err}"
    );
    // The figure is exact: the lower bound (of the program in the order
    // compile chose) minus the capacity.
    let reg = strata::ops::Registry::standard();
    let mut loaded = strata::driver::load_program(&ex, None, &reg).unwrap();
    strata::schedule::apply(loaded.program_mut(), strata::schedule::Schedule::Memory).unwrap();
    let lb = strata::driver::plan_program(loaded.program(), u64::MAX / 4)
        .unwrap()
        .lower_bound;
    assert!(
        err.contains("needs at least") && err.contains(&format!("{} bytes short", lb - 4096)),
        "{err} (lower bound {lb})"
    );
    assert!(!out.exists());
    // L2 smaller than the staging one node needs even with its smallest
    // tiles: the node, the level, the L1 the tiles were chosen for and the
    // bytes. (At 1,000 bytes it trains: smaller tiles, tests/levels.rs.)
    let (code, err) = strata(&[
        "compile",
        ex.to_str().unwrap(),
        "--l2",
        "100",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("memory level L2 (node `")
            && err.contains("staging")
            && err.contains("bytes of L1")
            && err.contains("holds 100")
            && err.contains("bytes short"),
        "{err}"
    );
    assert!(!out.exists());
    // A program larger than L2 but within L3 trains through L3 (the plan
    // and C are checked in tests/tiling.rs); here: it compiles, with an L3 arena.
    let (code, err) = strata(&[
        "compile",
        ex.to_str().unwrap(),
        "--l2",
        "12000",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let h = std::fs::read_to_string(out.join("model.h")).unwrap();
    assert!(h.contains("#define ST_L3_BYTES"), "{h}");
}

#[test]
fn missing_fixture_dir_and_unknown_target() {
    let (code, err) = strata(&["check", "/nonexistent/dir"]);
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/dir"), "{err}");
    let ex = workspace().join("examples/mlp");
    let (code, err) = strata(&[
        "compile",
        ex.to_str().unwrap(),
        "--target",
        "gpu",
        "-o",
        "/tmp/strata-never",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("invalid value 'gpu' for '--target") && err.contains("host, pulp"),
        "{err}"
    );
}

/// Corrupted models (bytes flipped, cut, duplicated) give errors or valid
/// programs, never a panic: the importer's fuzz test under a fixed budget.
#[test]
fn corrupted_models_never_panic() {
    let base = example_onnx();
    let reg = strata::ops::Registry::standard();
    let mut rng = strata::testing::Rng(0xfeed);
    let mut errors = 0;
    for i in 0..400 {
        let mut b = base.clone();
        match i % 3 {
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let k = rng.below(b.len());
                    b[k] = rng.next_u64() as u8;
                }
            }
            1 => b.truncate(rng.below(b.len())),
            _ => {
                let (s, n) = (rng.below(b.len()), rng.below(64));
                let chunk: Vec<u8> = b[s..(s + n).min(b.len())].to_vec();
                let at = rng.below(b.len());
                b.splice(at..at, chunk);
            }
        }
        let r = std::panic::catch_unwind(|| {
            let m = strata::onnx::decode(&b, Path::new("fuzz.onnx"))?;
            let g = strata::onnx::import(&m, &reg)?;
            let p = strata::program::Program::single(g)?;
            strata::driver::plan_program(&p, 1 << 24).map(|_| ())
        });
        match r {
            Ok(Ok(())) => {}
            Ok(Err(_)) => errors += 1,
            Err(_) => panic!("mutation {i} made strata panic"),
        }
    }
    assert!(
        errors > 100,
        "the mutations should mostly be rejected ({errors})"
    );
}

/// An attribute value an op does not implement is an error naming the node,
/// never a wrong answer.
#[test]
fn unsupported_conv_attributes_name_the_node() {
    use strata::testing::attr_ints;
    let w = f32_init("w", &[4, 2, 3, 3], &[0.1; 72]);
    let conv = |attrs| {
        model(
            vec![node("Conv", "", &["x", "w"], &["y"], attrs)],
            vec![value("x", 1, &[1, 2, 8, 8])],
            vec![value("y", 1, &[1, 4, 4, 4])],
            vec![w.clone()],
        )
    };
    compile_fails(
        "dilation",
        &conv(vec![attr_ints("dilations", &[2, 2])]),
        &["Conv_y", "dilation"],
    );
    compile_fails(
        "autopad",
        &conv(vec![strata::testing::attr_s("auto_pad", "SAME_UPPER")]),
        &["Conv_y", "auto_pad"],
    );
    let pool = model(
        vec![node(
            "MaxPool",
            "",
            &["x"],
            &["y"],
            vec![attr_ints("kernel_shape", &[2, 2]), attr_i("ceil_mode", 1)],
        )],
        vec![value("x", 1, &[1, 2, 8, 8])],
        vec![value("y", 1, &[1, 2, 4, 4])],
        vec![],
    );
    compile_fails("ceil", &pool, &["MaxPool_y", "ceil_mode"]);
}

/// A node output whose complete declaration (value_info or graph output)
/// disagrees with what strata infers is an error naming the node and both
/// types, not a program run at the wrong shape. The case that needs it: a
/// strided pooling gradient sees only dY, and inputs of 9 and 10 both pool
/// to 4 with a 3-wide window at stride 2.
#[test]
fn declared_output_shape_that_disagrees_is_an_error() {
    let grad = |dx: &[i64]| avg_pool_grad((3, 2), &[1, 1, 4, 4], dx);
    compile_fails(
        "declared",
        &grad(&[1, 1, 10, 10]),
        &[
            "AveragePoolGrad_dx",
            "`dx`",
            "float32[1, 1, 10, 10]",
            "float32[1, 1, 9, 9]",
        ],
    );
    // The size strata recovers, declared, compiles.
    let (_d, out, code, err) = compile_onnx("declared-ok", &grad(&[1, 1, 9, 9]));
    assert_eq!(code, 0, "{err}");
    assert!(out.join("model.c").exists(), "{}", out.display());
}

/// Sizes past what a device holds are errors naming the node, also where
/// an op's output is (a gradient whose size comes from an attribute);
/// found by `mutated_models.rs`: in a debug build the plane's size
/// overflowed, in a release build it wrapped.
#[test]
fn outputs_too_large_name_the_node() {
    use strata::testing::attr_ints;
    let gap_grad = |dy: &[i64], k: &[i64]| {
        model(
            vec![node(
                "GlobalAveragePoolGrad",
                "com.microsoft",
                &["dy"],
                &["dx"],
                vec![attr_ints("kernel_shape", k)],
            )],
            vec![value("dy", 1, dy)],
            vec![value("dx", 1, &[dy[0], dy[1], k[0], k[1]])],
            vec![],
        )
    };
    let huge = 1i64 << 40;
    compile_fails(
        "plane",
        &gap_grad(&[1, 1, 1, 1], &[huge, huge]),
        &[
            "GlobalAveragePoolGrad_dx",
            "kernel_shape [1099511627776, 1099511627776] gives a plane of more than 2^40 elements",
        ],
    );
    compile_fails(
        "output",
        &gap_grad(&[4, 1, 1, 1], &[1 << 20, 1 << 20]),
        &[
            "GlobalAveragePoolGrad_dx",
            "`dx` with shape [4, 1, 1048576, 1048576] is larger than 1099511627776 bytes",
        ],
    );
}

/// An empty tensor whose other dimensions span more than a device holds
/// is refused where it is declared: the ops multiply those dimensions
/// (Gemm's rows by its inner dimension overflowed in a debug build; found
/// by `mutated_models.rs`).
#[test]
fn empty_tensors_with_huge_dimensions_are_errors() {
    let huge = 1i64 << 33;
    let m = model(
        vec![node("MatMul", "", &["a", "b"], &["y"], vec![])],
        vec![value("a", 1, &[0, huge, huge]), value("b", 1, &[huge, 2])],
        vec![value("y", 1, &[0, huge, 2])],
        vec![],
    );
    compile_fails(
        "empty-huge",
        &m,
        &[
            "`a` with shape [0, 8589934592, 8589934592]",
            "its dimensions other than 0 span more than 1099511627776 bytes",
        ],
    );
}

/// A scalar has no axis: reducing one over axis 0 is an error naming the
/// node (it used to pass the axis check and index an empty array; found by
/// `mutated_models.rs`).
#[test]
fn an_axis_of_a_scalar_is_an_error() {
    use strata::testing::attr_ints;
    let m = strata::testing::onnx_build::model_with_opset(
        13,
        vec![node(
            "ReduceMean",
            "",
            &["x"],
            &["y"],
            vec![attr_ints("axes", &[0])],
        )],
        vec![value("x", 1, &[])],
        vec![value("y", 1, &[])],
        vec![],
    );
    compile_fails(
        "scalar-axis",
        &m,
        &["ReduceMean_y", "axis 0 out of range for rank 0"],
    );
}

/// A node with more inputs than its op reads is an error naming the node,
/// how many inputs it has and how many the op takes (a `Pow` with three,
/// a `Relu` with two used to import and run, the extra ignored); a
/// required input given as an empty name is missing.
#[test]
fn more_inputs_than_the_op_reads_is_an_error() {
    let one =
        |op: &str, inputs: &[&str], inits| one_node(op, inputs, vec![], (&[2, 2], &[2, 2]), inits);
    // The constant `c` from a Constant node that is given an input.
    let constant = node(
        "Constant",
        "",
        &["x"],
        &["c"],
        vec![strata::ops::Attribute::new(
            "value_float",
            strata::ops::Attr::Float(1.0),
        )],
    );
    let with_constant = model(
        vec![constant, node("Add", "", &["x", "c"], &["y"], vec![])],
        vec![value("x", 1, &[2, 2])],
        vec![value("y", 1, &[2, 2])],
        vec![],
    );
    all_fail(vec![
        (
            "pow3",
            one("Pow", &["x", "e", "x"], vec![f32_init("e", &[], &[2.0])]),
            &["node `Pow_y` (Pow)", "has 3 inputs; Pow takes 2"],
        ),
        (
            "relu2",
            one("Relu", &["x", "x"], vec![]),
            &["node `Relu_y` (Relu)", "has 2 inputs; Relu takes 1"],
        ),
        // Gemm takes A, B and an optional C.
        (
            "gemm4",
            one(
                "Gemm",
                &["x", "w", "b", "b"],
                vec![
                    f32_init("w", &[2, 2], &[0.5; 4]),
                    f32_init("b", &[2], &[0.0; 2]),
                ],
            ),
            &["node `Gemm_y` (Gemm)", "has 4 inputs; Gemm takes 2 to 3"],
        ),
        (
            "const1",
            with_constant,
            &["(Constant)", "has 1 input; Constant takes 0"],
        ),
        // A required input given as an empty name is absent.
        (
            "add-empty",
            one("Add", &["", "x"], vec![]),
            &[
                "node `Add_y` (Add)",
                "missing required input 0; Add takes 2",
            ],
        ),
    ]);
}

/// Empty names after a node's last input are absent inputs: they do not
/// count against the op's inputs, and the node compiles (a `Sum` with a
/// trailing empty name used to fail on a missing input).
#[test]
fn trailing_empty_inputs_are_absent() {
    let m = model(
        vec![
            node("Relu", "", &["x", "", ""], &["r"], vec![]),
            node("Gemm", "", &["r", "w", "", ""], &["g"], vec![]),
            node("Sum", "", &["g", "g", ""], &["y"], vec![]),
        ],
        vec![value("x", 1, &[2, 3])],
        vec![value("y", 1, &[2, 4])],
        vec![f32_init("w", &[3, 4], &[0.5; 12])],
    );
    let (_d, out, code, err) = compile_onnx("trailing", &m);
    assert_eq!(code, 0, "{err}");
    assert!(out.exists());
    let m = strata::onnx::decode(&m, Path::new("trailing.onnx")).unwrap();
    let g = strata::onnx::import(&m, &strata::ops::Registry::standard()).unwrap();
    let inputs: Vec<usize> = g.nodes.iter().map(|n| n.inputs.len()).collect();
    assert_eq!(inputs, [1, 2, 2], "the absent inputs are dropped");
}

/// ORT's SoftmaxCrossEntropyLossGrad is (dY, log_prob, label, weight?),
/// Onnx4Deeploy's (log_prob, label): in the second form a fourth input
/// would be ignored, so it is an error.
#[test]
fn cross_entropy_grad_without_dy_takes_three_inputs() {
    use strata::testing::onnx_build::i64_init;
    let m = |inputs: &[&str]| {
        model(
            vec![node(
                "SoftmaxCrossEntropyLossGrad",
                "com.microsoft",
                inputs,
                &["dx"],
                vec![],
            )],
            vec![value("logp", 1, &[2, 3])],
            vec![value("dx", 1, &[2, 3])],
            vec![
                i64_init("label", &[2], &[0, 2]),
                f32_init("w", &[3], &[1.0; 3]),
            ],
        )
    };
    let ok = strata::onnx::decode(&m(&["logp", "label", "w"]), Path::new("sce.onnx")).unwrap();
    strata::onnx::import(&ok, &strata::ops::Registry::standard()).unwrap();
    compile_fails(
        "sce-grad-4",
        &m(&["logp", "label", "w", "logp"]),
        &[
            "SoftmaxCrossEntropyLossGrad_dx",
            "(log_prob, label[, weight])",
            "input 3",
        ],
    );
}

/// An input that an attribute takes the place of (the form of older
/// opsets: Squeeze's `axes`, Slice's `starts` and `ends`, ...) would be
/// ignored: a node that gives both is an error naming the input and the
/// attribute (it used to import, the input ignored).
#[test]
fn an_input_and_the_attribute_in_its_place_is_an_error() {
    use strata::testing::attr_ints;
    use strata::testing::onnx_build::i64_init;
    all_fail(vec![
        (
            "squeeze",
            one_node(
                "Squeeze",
                &["x", "axes"],
                vec![attr_ints("axes", &[0])],
                (&[1, 2], &[2]),
                vec![i64_init("axes", &[1], &[0])],
            ),
            &[
                "node `Squeeze_y` (Squeeze)",
                "input 1 is given as well as the `axes` attribute",
            ],
        ),
        (
            "slice",
            one_node(
                "Slice",
                &["x", "", "", "", "steps"],
                vec![attr_ints("starts", &[0]), attr_ints("ends", &[1])],
                (&[4], &[1]),
                vec![i64_init("steps", &[1], &[2])],
            ),
            &[
                "node `Slice_y` (Slice)",
                "input 4 is given as well as the `starts` attribute",
            ],
        ),
    ]);
}

/// A model stamped with an ai.onnx opset strata does not implement is
/// refused, naming the domain, the version and the range strata implements
/// (`strata::onnx::AI_ONNX_OPSETS`); its ends are accepted.
#[test]
fn unimplemented_opsets_are_refused() {
    use strata::testing::onnx_build::model_with_opset;
    let m = |opset: i64| {
        model_with_opset(
            opset,
            vec![node("Relu", "", &["x"], &["y"], vec![])],
            vec![value("x", 1, &[2, 2])],
            vec![value("y", 1, &[2, 2])],
            vec![],
        )
    };
    let range = strata::onnx::AI_ONNX_OPSETS;
    let (lo, hi) = (*range.start(), *range.end());
    assert_eq!((lo, hi), (7, 28));
    compile_fails(
        "opset-new",
        &m(hi + 1),
        &[
            "model.onnx",
            "ai.onnx opset 29",
            "newer",
            "ai.onnx opsets 7 to 28",
        ],
    );
    compile_fails(
        "opset-old",
        &m(lo - 1),
        &[
            "model.onnx",
            "ai.onnx opset 6",
            "older",
            "ai.onnx opsets 7 to 28",
        ],
    );
    compile_fails("opset-neg", &m(-1), &["ai.onnx opset -1", "7 to 28"]);
    for v in [lo, hi] {
        let d = strata::onnx::decode(&m(v), Path::new("edge.onnx")).unwrap();
        strata::onnx::import(&d, &strata::ops::Registry::standard()).unwrap();
    }
}

/// Window attributes near 2^63 are errors naming the node: the input
/// extent a pool or conv gradient recovers from its window, and an input
/// padded past 2^64, overflowed (a panic in debug builds; found by
/// `mutated_models.rs`).
#[test]
fn windows_past_any_size_are_errors() {
    use strata::testing::attr_ints;
    let pool_grad = |stride: i64| avg_pool_grad((1, stride), &[1, 1, 4, 4], &[1, 1, 4, 4]);
    compile_fails(
        "stride-max",
        &pool_grad(i64::MAX),
        &[
            "AveragePoolGrad_dx",
            "cannot recover the input size: output 4, kernel 1, stride 9223372036854775807",
        ],
    );
    compile_fails(
        "stride-2^62",
        &pool_grad(1 << 62),
        &[
            "AveragePoolGrad_dx",
            "`dx` with shape [1, 1, 13835058055282163713, 13835058055282163713] is larger",
        ],
    );
    let m = model(
        vec![node(
            "MaxPool",
            "",
            &["x"],
            &["y"],
            vec![
                attr_ints("kernel_shape", &[1, 1]),
                attr_ints("pads", &[i64::MAX, 0, i64::MAX, 0]),
            ],
        )],
        vec![value("x", 1, &[1, 1, 4, 4])],
        vec![value("y", 1, &[1, 1, 4, 4])],
        vec![],
    );
    compile_fails(
        "pads",
        &m,
        &[
            "MaxPool_y",
            "an input of 4 padded by 9223372036854775807+9223372036854775807 overflows",
        ],
    );
}

/// Pads near i64::MAX whose sum with the axis overflows are an error
/// naming the node (a debug-build panic in Pad's shape rule before; found
/// by `mutated_models.rs` on the generated Pad cases).
#[test]
fn pads_past_any_size_are_errors() {
    use strata::testing::{attr_ints, attr_s};
    for (name, pads) in [
        ("pad-max", [0, 0, 1, 0, 0, 0, i64::MAX, 0]),
        ("pad-both-ends", [0, 0, i64::MAX, 0, 0, 0, i64::MAX, 0]),
        ("pad-min", [0, 0, i64::MIN, 0, 0, 0, -5, 0]),
    ] {
        let m = strata::testing::onnx_build::model_with_opset(
            10,
            vec![node(
                "Pad",
                "",
                &["x"],
                &["y"],
                vec![attr_s("mode", "constant"), attr_ints("pads", &pads)],
            )],
            vec![value("x", 1, &[1, 1, 4, 4])],
            vec![value("y", 1, &[1, 1, 4, 4])],
            vec![],
        );
        compile_fails(name, &m, &["Pad_y", "axis 2 of 4 padded by", "overflows"]);
    }
}
