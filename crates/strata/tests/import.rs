//! Graphs as the peer's tooling writes them (`../shared/docs/TRAINING_GRAPHS.md`
//! section 4), one test per item. The cases under `examples/import` are the
//! project's own, written by `examples/gen_import.py` with numpy float64
//! references; each runs through the interpreter and the compiled C, within
//! the kernel suite's tolerance of the reference (1e-4 absolute or 1e-5
//! relative) and within 1e-6 of each other. Errors (a cycle, a conflicting
//! declared type) are built here with prost.

use std::path::{Path, PathBuf};

use strata::driver::{self, Engine};
use strata::ops::Registry;
use strata::tensor::{max_abs_diff, DType};
use strata::testing::onnx_build::{f32_init, i64_init, model, node, value};

/// Interpreter and C run the same kernels in the same order.
const ENGINES_AGREE: f32 = 1e-6;

fn case_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/import")
        .join(name)
}

/// Run one generated case through both engines against its reference.
fn check_case(name: &str) {
    let d = case_dir(name);
    assert!(
        d.join("network.onnx").is_file(),
        "{}: missing; run examples/gen_import.py",
        d.display()
    );
    let reg = Registry::standard();
    let run = |e| {
        driver::check(&d, e, u64::MAX / 4, None, &reg)
            .unwrap_or_else(|err| panic!("{name} ({e:?}): {err}"))
    };
    let (i, c) = (run(Engine::Interp), run(Engine::C));
    assert!(
        i.ok && c.ok,
        "{name}: interp ok={} c ok={}; off: {:?} / {:?}",
        i.ok,
        c.ok,
        i.failures,
        c.failures
    );
    let (ri, rc) = (i.results.unwrap(), c.results.unwrap());
    assert!(!ri.tensors.is_empty(), "{name}: no outputs compared");
    for (a, b) in ri.tensors.iter().zip(&rc.tensors) {
        if a.dtype() == DType::F32 {
            let d = max_abs_diff(a.as_f32(), b.as_f32());
            assert!(d <= ENGINES_AGREE, "{name}: engines differ by {d}");
        }
    }
}

macro_rules! cases {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        $( $(#[doc = $doc])* #[test] fn $name() { check_case(stringify!($name)); } )*
    };
}

cases!(
    /// Nodes out of topological order (a fused Gemm and the Reshapes around a
    /// Softmax appended at the end), opset_import listing the default domain
    /// three times (21, 21, 17), UNDEFINED element types and an empty-named
    /// value_info, an unused initializer, Squeeze axes as one INT.
    unsorted,
    /// Squeeze/Unsqueeze axes as a single INT at opset 21; ReduceSum axes an
    /// unsorted attribute at opset 21; ReduceMean axes an unsorted input.
    int_axes,
    /// Plain 2-D Gemm with transB, alpha, beta and an [M, O] bias.
    gemm_2d_bias_mn,
    /// Gemm without C and beta = 1.0: there is nothing to scale.
    gemm_no_c_beta1,
    /// Batched Gemm (3-D, 2-D): a 2-D B shared across the batch, bias [O].
    gemm_3d_2d,
    /// Batched Gemm (3-D, 3-D) with transA and transB on the last two dims, bias [M, O].
    gemm_3d_3d_trans,
    /// Batched Gemm (4-D, 4-D), each side's batch 1 where the other's is not.
    gemm_4d_4d_broadcast,
    /// MaxPoolGrad(dY, X) (com.microsoft), 3x3 windows, stride 1, pad 1:
    /// overlapping windows add, ties go to the first strict maximum.
    maxpool_grad_x_overlap,
    /// MaxPoolGrad(dY, X) (default domain), 2x2 stride 2, batch 2.
    maxpool_grad_x_s2,
    /// LayerNormalizationGrad (com.microsoft) → (dX, dscale, dbias).
    layernorm_grad_ms,
    /// LayerNormalizationGrad in the default domain.
    layernorm_grad_default,
    /// GeluGrad(dY, X) and the exact (erf) Gelu in the default domain.
    gelu_grad_default,
    /// GeluGrad(dY, X) and Gelu in com.microsoft.
    gelu_grad_ms,
    /// MSELoss / MSELossGrad(pred, target) in the default domain: 2(p − t)/numel.
    mse_default,
    /// MSELoss / MSELossGrad in com.microsoft.
    mse_ms,
    /// GlobalAveragePoolGrad with kernel_shape, default domain.
    gap_grad_default,
    /// GlobalAveragePoolGrad with kernel_shape, com.microsoft.
    gap_grad_ms,
    /// ConvGrad (com.microsoft) with dX the empty name: dW only.
    conv_grad_ms_no_dx,
    /// ConvGrad in the default domain → (dX, dW), dilations given explicitly.
    conv_grad_default,
    /// Depthwise ConvGrad (group = channels).
    conv_grad_depthwise,
    /// ConvGradX, dY 3x3, stride 2, pad 1, kernel 3, declared dX 6x6.
    conv_grad_x_s2_6x6,
    /// The same dY and window with declared dX 5x5: only the declaration says which.
    conv_grad_x_s2_5x5,
    /// SoftmaxGrad along axis 1 of a [1, 64, 1] tensor.
    softmax_grad_axis1,
    /// Add and Mul with the lower-rank operand first.
    broadcast_low_rank_first,
    /// Pow with a scalar, a [1] and a full-shape exponent.
    pow_exponents,
    /// Outputs without a consumer (a MaxPool mask declared UNDEFINED,
    /// LayerNormalization's statistics) and optional outputs left out as
    /// the empty name (BatchNormInternal's statistics).
    unused_outputs,
);

fn import_bytes(bytes: &[u8]) -> strata::error::Result<strata::ir::Graph> {
    let m = strata::onnx::decode(bytes, Path::new("test.onnx"))?;
    strata::onnx::import(&m, &Registry::standard())
}

#[test]
fn sorted_graphs_keep_their_order_and_unsorted_ones_sort_stably() {
    // b reads a, which the last node defines; c and d are ready from the
    // start and keep their file order around it.
    let nodes = vec![
        node("Relu", "", &["a"], &["b"], vec![]),
        node("Relu", "", &["x"], &["c"], vec![]),
        node("Relu", "", &["x"], &["d"], vec![]),
        node("Relu", "", &["x"], &["a"], vec![]),
    ];
    let outs = ["b", "c", "d"].map(|o| value(o, 1, &[3])).to_vec();
    let g = import_bytes(&model(nodes, vec![value("x", 1, &[3])], outs, vec![])).unwrap();
    let order: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(order, ["Relu_c", "Relu_d", "Relu_a", "Relu_b"]);

    let nodes = vec![
        node("Relu", "", &["x"], &["a"], vec![]),
        node("Relu", "", &["x"], &["c"], vec![]),
        node("Relu", "", &["a"], &["b"], vec![]),
    ];
    let outs = ["b", "c"].map(|o| value(o, 1, &[3])).to_vec();
    let g = import_bytes(&model(nodes, vec![value("x", 1, &[3])], outs, vec![])).unwrap();
    let order: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(order, ["Relu_a", "Relu_c", "Relu_b"]);
}

#[test]
fn a_cycle_is_an_error_naming_its_nodes_and_tensors() {
    // x -> p; p, q -> s (Add); s -> r (Relu); r -> q (Relu): s, r, q form a cycle.
    let nodes = vec![
        node("Relu", "", &["x"], &["p"], vec![]),
        node("Add", "", &["p", "q"], &["s"], vec![]),
        node("Relu", "", &["s"], &["r"], vec![]),
        node("Relu", "", &["r"], &["q"], vec![]),
        node("Relu", "", &["s"], &["y"], vec![]),
    ];
    let err = import_bytes(&model(
        nodes,
        vec![value("x", 1, &[3])],
        vec![value("y", 1, &[3])],
        vec![],
    ))
    .unwrap_err()
    .to_string();
    for needle in [
        "cycle",
        "`Add_s` --s--> `Relu_r` --r--> `Relu_q` --q--> `Add_s`",
        "4 nodes cannot be ordered",
    ] {
        assert!(err.contains(needle), "{err:?} does not mention {needle:?}");
    }
    assert!(
        !err.contains("Relu_p"),
        "{err:?} names a node off the cycle"
    );
}

#[test]
fn a_node_reading_itself_is_a_cycle() {
    let nodes = vec![node("Add", "", &["x", "s"], &["s"], vec![])];
    let err = import_bytes(&model(
        nodes,
        vec![value("x", 1, &[3])],
        vec![value("s", 1, &[3])],
        vec![],
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("`Add_s` --s--> `Add_s`"), "{err}");
}

#[test]
fn undefined_types_are_tolerated_but_a_conflicting_defined_type_is_not() {
    // The output's declared type is the graph output's value info.
    let build = |elem: i32, shape: &[i64]| {
        model(
            vec![node("Relu", "", &["x"], &["y"], vec![])],
            vec![value("x", 1, &[2, 3])],
            vec![value("y", elem, shape)],
            vec![],
        )
    };
    // UNDEFINED element type, right shape: fine.
    let g = import_bytes(&build(0, &[2, 3])).unwrap();
    assert_eq!(g.ty(g.outputs[0]).dtype, DType::F32);
    // UNDEFINED element type, wrong shape: the shape is still a declaration.
    let err = import_bytes(&build(0, &[3, 2])).unwrap_err().to_string();
    assert!(
        err.contains("`y`") && err.contains("[3, 2]") && err.contains("undefined"),
        "{err}"
    );
    // A defined element type that disagrees.
    let err = import_bytes(&build(7, &[2, 3])).unwrap_err().to_string();
    assert!(
        err.contains("Relu_y") && err.contains("int64[2, 3]") && err.contains("float32[2, 3]"),
        "{err}"
    );
}

#[test]
fn ops_are_found_in_the_other_domain_but_not_in_a_foreign_one() {
    let reg = Registry::standard();
    // Registered in com.microsoft only; the peer's default-domain spelling finds it.
    assert!(reg.get("", "SoftmaxGrad_13").is_none());
    assert!(reg.lookup("", "SoftmaxGrad_13").is_some());
    assert!(reg.lookup("com.microsoft", "Relu").is_some());
    assert!(reg.lookup("com.example", "Relu").is_none());
    let nodes = vec![node("Relu", "com.example", &["x"], &["y"], vec![])];
    let err = import_bytes(&model(
        nodes,
        vec![value("x", 1, &[3])],
        vec![value("y", 1, &[3])],
        vec![],
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("com.example") && err.contains("Relu"), "{err}");
}

#[test]
fn bad_batched_gemm_and_maxpool_grad_inputs_are_clear_errors() {
    // Batch dims 2 and 3 do not broadcast.
    let nodes = vec![node("Gemm", "", &["a", "b"], &["y"], vec![])];
    let err = import_bytes(&model(
        nodes,
        vec![value("a", 1, &[2, 4, 3]), value("b", 1, &[3, 3, 5])],
        vec![value("y", 1, &[2, 4, 5])],
        vec![],
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("Gemm_y") && err.contains("batch"), "{err}");
    // A bias that does not broadcast over [batch, M, N].
    let nodes = vec![node("Gemm", "", &["a", "b", "c"], &["y"], vec![])];
    let err = import_bytes(&model(
        nodes,
        vec![value("a", 1, &[2, 4, 3]), value("b", 1, &[3, 5])],
        vec![value("y", 1, &[2, 4, 5])],
        vec![f32_init("c", &[3], &[0.0; 3])],
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("Gemm_y") && err.contains("bias C [3]") && err.contains("[2, 4, 5]"),
        "{err}"
    );
    // MaxPoolGrad whose X does not pool to dY.
    let attrs = vec![strata::testing::attr_ints("kernel_shape", &[2, 2])];
    let nodes = vec![node(
        "MaxPoolGrad",
        "com.microsoft",
        &["dy", "x"],
        &["dx"],
        attrs,
    )];
    let err = import_bytes(&model(
        nodes,
        vec![value("dy", 1, &[1, 1, 2, 2]), value("x", 1, &[1, 1, 6, 6])],
        vec![value("dx", 1, &[1, 1, 6, 6])],
        vec![],
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("MaxPoolGrad_dx") && err.contains("[1, 1, 5, 5]"),
        "{err}"
    );
    // A declared ConvGradX dX that the window cannot give dY from.
    let attrs = vec![
        strata::testing::attr_ints("kernel_shape", &[3, 3]),
        strata::testing::attr_ints("strides", &[2, 2]),
        strata::testing::attr_ints("pads", &[1, 1, 1, 1]),
    ];
    let nodes = vec![node("ConvGradX", "", &["dy", "w"], &["dx"], attrs)];
    let err = import_bytes(&model(
        nodes,
        vec![value("dy", 1, &[1, 3, 3, 3]), value("w", 1, &[3, 2, 3, 3])],
        vec![value("dx", 1, &[1, 2, 8, 8])],
        vec![i64_init("unused", &[1], &[0])],
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("ConvGradX_dx") && err.contains("declared dX [1, 2, 8, 8]"),
        "{err}"
    );
}
