//! The MLP op set: each reference kernel against hand-checked values, and
//! each C kernel against its reference kernel (interpreter vs compiled C).

use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::{attr_f, attr_i, attr_ints, attr_s, run_both, single_node, In, Rng};

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), v.to_vec())
}

/// Evaluate one node with the reference kernel on constant inputs.
fn eval(
    domain: &str,
    op: &str,
    attrs: &[strata::ops::Attribute],
    inputs: Vec<Option<Tensor>>,
    n_out: usize,
) -> Vec<Tensor> {
    let reg = strata::ops::Registry::standard();
    let o = reg.get(domain, op).unwrap()(&strata::ops::Attrs::new(attrs)).unwrap();
    let ins: Vec<_> = inputs
        .iter()
        .map(|t| {
            t.as_ref().map(|t| strata::ops::OpInput {
                ty: Box::leak(Box::new(t.ty())),
                value: Some(t),
            })
        })
        .collect();
    let types = o.infer(&ins, n_out).unwrap();
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_ref()).collect();
    let outs: Vec<Option<&TensorType>> = types.iter().map(Some).collect();
    o.eval(&refs, &outs).unwrap()
}

fn close(a: &Tensor, b: &[f32], tol: f32) {
    let d = max_abs_diff(a.as_f32(), b);
    assert!(
        d <= tol && a.numel() == b.len(),
        "got {:?}, want {b:?}",
        a.as_f32()
    );
}

#[test]
fn gemm_hand_checked() {
    let a = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = f(&[3, 2], &[1., 0., 0., 1., 1., 1.]);
    // A·B = [[4, 5], [10, 11]]
    let y = eval("", "Gemm", &[], vec![Some(a.clone()), Some(b.clone())], 1);
    close(&y[0], &[4., 5., 10., 11.], 0.0);
    // alpha 2, beta 0.5, bias [2] broadcast over rows
    let y = eval(
        "",
        "Gemm",
        &[attr_f("alpha", 2.0), attr_f("beta", 0.5)],
        vec![Some(a.clone()), Some(b.clone()), Some(f(&[2], &[2., 4.]))],
        1,
    );
    close(&y[0], &[9., 12., 21., 24.], 0.0);
    // bias [2, 1] broadcast over columns; transA with A^T given
    let at = f(&[3, 2], &[1., 4., 2., 5., 3., 6.]);
    let y = eval(
        "",
        "Gemm",
        &[attr_i("transA", 1)],
        vec![Some(at), Some(b.clone()), Some(f(&[2, 1], &[1., -1.]))],
        1,
    );
    close(&y[0], &[5., 6., 9., 10.], 0.0);
    // transB: B given as [2, 3]
    let bt = f(&[2, 3], &[1., 0., 1., 0., 1., 1.]);
    let y = eval(
        "",
        "Gemm",
        &[attr_i("transB", 1)],
        vec![Some(a), Some(bt), Some(f(&[], &[1.]))],
        1,
    );
    close(&y[0], &[5., 6., 11., 12.], 0.0);
}

#[test]
fn relu_and_grad_hand_checked() {
    let x = f(&[4], &[-1., 0., 2., -3.]);
    close(
        &eval("", "Relu", &[], vec![Some(x.clone())], 1)[0],
        &[0., 0., 2., 0.],
        0.0,
    );
    let dy = f(&[4], &[10., 20., 30., 40.]);
    close(
        &eval("com.microsoft", "ReluGrad", &[], vec![Some(dy), Some(x)], 1)[0],
        &[0., 0., 30., 0.],
        0.0,
    );
}

#[test]
fn softmax_cross_entropy_hand_checked() {
    // Row 0: logits [0, ln 3] → p = [1/4, 3/4]; label 1 → -ln(3/4).
    // Row 1: logits [0, 0] → p = [1/2, 1/2]; label 0 → ln 2.
    let s = f(&[2, 2], &[0.0, 3f32.ln(), 0.0, 0.0]);
    let l = Tensor::i64(vec![2], vec![1, 0]);
    let out = eval(
        "",
        "SoftmaxCrossEntropyLoss",
        &[attr_s("reduction", "mean")],
        vec![Some(s.clone()), Some(l.clone())],
        2,
    );
    let want = (-(0.75f32).ln() + 2f32.ln()) / 2.0;
    close(&out[0], &[want], 1e-6);
    close(
        &out[1],
        &[0.25f32.ln(), 0.75f32.ln(), 0.5f32.ln(), 0.5f32.ln()],
        1e-6,
    );
    // Gradient, Onnx4Deeploy spelling (log_prob, label): (p - onehot) / B.
    let g = eval(
        "com.microsoft",
        "SoftmaxCrossEntropyLossGrad",
        &[attr_s("reduction", "mean")],
        vec![Some(out[1].clone()), Some(l.clone())],
        1,
    );
    close(&g[0], &[0.125, -0.125, -0.25, 0.25], 1e-6);
    // ORT spelling (dY, log_prob, label) with dY = 2 doubles it.
    let g2 = eval(
        "com.microsoft",
        "SoftmaxCrossEntropyLossGrad",
        &[attr_s("reduction", "mean")],
        vec![Some(f(&[], &[2.0])), Some(out[1].clone()), Some(l.clone())],
        1,
    );
    close(&g2[0], &[0.25, -0.25, -0.5, 0.5], 1e-6);
    // sum reduction and ignore_index
    let out = eval(
        "",
        "SoftmaxCrossEntropyLoss",
        &[attr_s("reduction", "sum"), attr_i("ignore_index", 0)],
        vec![Some(s), Some(l)],
        2,
    );
    close(&out[0], &[-(0.75f32).ln()], 1e-6);
}

#[test]
fn mse_hand_checked() {
    let p = f(&[2, 2], &[1., 2., 3., 4.]);
    let t = f(&[2, 2], &[1., 0., 3., 6.]);
    close(
        &eval(
            "",
            "MSELoss",
            &[],
            vec![Some(p.clone()), Some(t.clone())],
            1,
        )[0],
        &[2.0],
        0.0,
    );
    close(
        &eval(
            "com.microsoft",
            "MSELossGrad",
            &[],
            vec![Some(p), Some(t)],
            1,
        )[0],
        &[0., 1., 0., -1.],
        0.0,
    );
}

#[test]
fn reduce_sum_both_opset_forms() {
    let x = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    close(
        &eval(
            "",
            "ReduceSum",
            &[attr_ints("axes", &[0]), attr_i("keepdims", 0)],
            vec![Some(x.clone())],
            1,
        )[0],
        &[5., 7., 9.],
        0.0,
    );
    let axes = Tensor::i64(vec![1], vec![-1]);
    let y = eval("", "ReduceSum", &[], vec![Some(x.clone()), Some(axes)], 1);
    assert_eq!(y[0].shape, vec![2, 1]);
    close(&y[0], &[6., 15.], 0.0);
    close(
        &eval(
            "",
            "ReduceSum",
            &[attr_i("keepdims", 0)],
            vec![Some(x.clone())],
            1,
        )[0],
        &[21.],
        0.0,
    );
    close(
        &eval(
            "",
            "ReduceMean",
            &[attr_ints("axes", &[1]), attr_i("keepdims", 0)],
            vec![Some(x)],
            1,
        )[0],
        &[2., 5.],
        0.0,
    );
}

#[test]
fn views_hand_checked() {
    let x = f(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
    let shape = Tensor::i64(vec![2], vec![3, -1]);
    assert_eq!(
        eval("", "Reshape", &[], vec![Some(x.clone()), Some(shape)], 1)[0].shape,
        vec![3, 2]
    );
    assert_eq!(
        eval(
            "",
            "Flatten",
            &[attr_i("axis", 2)],
            vec![Some(x.clone())],
            1
        )[0]
        .shape,
        vec![2, 3]
    );
    assert_eq!(
        eval(
            "",
            "Squeeze",
            &[],
            vec![Some(x.clone()), Some(Tensor::i64(vec![1], vec![1]))],
            1
        )[0]
        .shape,
        vec![2, 3]
    );
    assert_eq!(
        eval(
            "",
            "Unsqueeze",
            &[],
            vec![Some(x.clone()), Some(Tensor::i64(vec![1], vec![0]))],
            1
        )[0]
        .shape,
        vec![1, 2, 1, 3]
    );
    assert_eq!(eval("", "Identity", &[], vec![Some(x.clone())], 1)[0], x);
}

#[test]
fn accumulator_and_sgd_hand_checked() {
    let buf = f(&[3], &[1., 1., 1.]);
    let g = f(&[3], &[0.5, -1., 2.]);
    let yes = Tensor::bool(vec![1], vec![true]);
    let no = Tensor::bool(vec![1], vec![false]);
    close(
        &eval(
            "com.microsoft",
            "InPlaceAccumulatorV2",
            &[],
            vec![Some(buf.clone()), Some(g.clone()), Some(yes)],
            1,
        )[0],
        &[0.5, -1., 2.],
        0.0,
    );
    close(
        &eval(
            "com.microsoft",
            "InPlaceAccumulatorV2",
            &[],
            vec![Some(buf.clone()), Some(g.clone()), Some(no)],
            1,
        )[0],
        &[1.5, 0., 3.],
        0.0,
    );
    close(
        &eval("", "SGD", &[attr_f("lr", 0.5)], vec![Some(buf), Some(g)], 1)[0],
        &[0.75, 1.5, 0.0],
        0.0,
    );
}

/// Interpreter and compiled C on random problems of every op here.
#[test]
fn c_kernels_match_reference_kernels() {
    let mut rng = Rng(0x5eed);
    const TOL: f32 = 1e-6;
    for trial in 0..4 {
        let (m, n, k) = (1 + rng.below(6), 1 + rng.below(7), 1 + rng.below(9));
        let ta = trial % 2;
        let tb = trial / 2;
        let a_shape = if ta == 1 { vec![k, m] } else { vec![m, k] };
        let b_shape = if tb == 1 { vec![n, k] } else { vec![k, n] };
        let bias_shapes = [vec![n], vec![m, n], vec![m, 1], vec![]];
        let c_shape = bias_shapes[trial % 4].clone();
        let attrs = [
            attr_i("transA", ta as i64),
            attr_i("transB", tb as i64),
            attr_f("alpha", 0.7),
            attr_f("beta", 1.3),
        ];
        let g = single_node(
            "",
            "Gemm",
            &attrs,
            vec![
                In::Data(TensorType::f32(a_shape.clone())),
                In::Data(TensorType::f32(b_shape.clone())),
                In::Data(TensorType::f32(c_shape.clone())),
            ],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(
            g,
            vec![
                rng.tensor(&a_shape),
                rng.tensor(&b_shape),
                rng.tensor(&c_shape),
            ],
        )
        .unwrap();
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= TOL);
    }
    let shape = [3usize, 5];
    let t = || TensorType::f32(shape.to_vec());
    for (dom, op, n_in) in [
        ("", "Relu", 1),
        ("com.microsoft", "ReluGrad", 2),
        ("", "MSELoss", 2),
        ("com.microsoft", "MSELossGrad", 2),
    ] {
        let g = single_node(
            dom,
            op,
            &[],
            (0..n_in).map(|_| In::Data(t())).collect(),
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, (0..n_in).map(|_| rng.tensor(&shape)).collect()).unwrap();
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= TOL, "{op}");
    }
    for (axes, keep) in [
        (vec![0i64], 0i64),
        (vec![1], 1),
        (vec![0, 2], 0),
        (vec![], 1),
    ] {
        let sh = [2usize, 3, 4];
        let mut attrs = vec![attr_i("keepdims", keep)];
        if !axes.is_empty() {
            attrs.push(attr_ints("axes", &axes));
        }
        let g = single_node(
            "",
            "ReduceSum",
            &attrs,
            vec![In::Data(TensorType::f32(sh.to_vec()))],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![rng.tensor(&sh)]).unwrap();
        assert!(
            max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= TOL,
            "ReduceSum {axes:?}"
        );
    }
    // Softmax cross-entropy, both outputs, and its gradient in both spellings, B = 5.
    let (b, cl) = (5usize, 7usize);
    let labels = Tensor::i64(vec![b], (0..b).map(|_| rng.below(cl) as i64).collect());
    let g = single_node(
        "",
        "SoftmaxCrossEntropyLoss",
        &[],
        vec![
            In::Data(TensorType::f32(vec![b, cl])),
            In::Const(labels.clone()),
        ],
        &[true, true],
    )
    .unwrap();
    let (i, c) = run_both(g, vec![rng.tensor(&[b, cl])]).unwrap();
    for k in 0..2 {
        assert!(max_abs_diff(i[k].as_f32(), c[k].as_f32()) <= TOL);
    }
    let logp = i[1].clone();
    let g = single_node(
        "com.microsoft",
        "SoftmaxCrossEntropyLossGrad",
        &[],
        vec![In::Data(logp.ty()), In::Const(labels.clone())],
        &[true],
    )
    .unwrap();
    let (i2, c2) = run_both(g, vec![logp.clone()]).unwrap();
    assert!(max_abs_diff(i2[0].as_f32(), c2[0].as_f32()) <= TOL);
    let g = single_node(
        "com.microsoft",
        "SoftmaxCrossEntropyLossGrad",
        &[],
        vec![
            In::Data(TensorType::f32(vec![])),
            In::Data(logp.ty()),
            In::Const(labels),
        ],
        &[true],
    )
    .unwrap();
    let (i3, c3) = run_both(g, vec![f(&[], &[0.3]), logp]).unwrap();
    assert!(max_abs_diff(i3[0].as_f32(), c3[0].as_f32()) <= TOL);
    // The gradient's rows sum to zero and scale with 1/B.
    for r in 0..b {
        let s: f32 = i2[0].as_f32()[r * cl..(r + 1) * cl].iter().sum();
        assert!(s.abs() < 1e-6);
    }
    // Accumulate (overwrite and add) and SGD.
    for flag in [true, false] {
        let g = single_node(
            "com.microsoft",
            "InPlaceAccumulatorV2",
            &[],
            vec![
                In::Data(t()),
                In::Data(t()),
                In::Const(Tensor::bool(vec![1], vec![flag])),
            ],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![rng.tensor(&shape), rng.tensor(&shape)]).unwrap();
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= TOL);
    }
    let g = single_node(
        "",
        "SGD",
        &[attr_f("lr", 0.01)],
        vec![In::Data(t()), In::Data(t())],
        &[true],
    )
    .unwrap();
    let (i, c) = run_both(g, vec![rng.tensor(&shape), rng.tensor(&shape)]).unwrap();
    assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= TOL);
}

/// Softmax before opset 13 normalises over every dim from `axis` (default 1)
/// on; from 13 on, along the one axis (default -1). The importer passes the
/// model's opset to the op.
#[test]
fn softmax_semantics_follow_the_opset() {
    use strata::testing::onnx_build::{model_with_opset, node, value};
    let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    let run = |opset: i64| {
        let m = model_with_opset(
            opset,
            vec![node("Softmax", "", &["x"], &["y"], vec![])],
            vec![value("x", 1, &[2, 3, 4])],
            vec![value("y", 1, &[2, 3, 4])],
            vec![],
        );
        let m = strata::onnx::decode(&m, std::path::Path::new("softmax.onnx")).unwrap();
        let g = strata::onnx::import(&m, &strata::ops::Registry::standard()).unwrap();
        run_both(g, vec![f(&[2, 3, 4], &x)]).unwrap()
    };
    let softmax = |v: &[f32]| {
        let m = v.iter().fold(f32::MIN, |a, &b| a.max(b));
        let e: Vec<f32> = v.iter().map(|a| (a - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.into_iter().map(|a| a / s).collect::<Vec<f32>>()
    };
    let (old_i, old_c) = run(11);
    let want_old: Vec<f32> = x.chunks(12).flat_map(softmax).collect();
    let (new_i, new_c) = run(13);
    let want_new: Vec<f32> = x.chunks(4).flat_map(softmax).collect();
    for (got, want) in [
        (&old_i[0], &want_old),
        (&old_c[0], &want_old),
        (&new_i[0], &want_new),
        (&new_c[0], &want_new),
    ] {
        assert!(
            max_abs_diff(got.as_f32(), want) <= 1e-6,
            "{:?} vs {want:?}",
            got.as_f32()
        );
    }
}

/// A label outside `[0, classes)` that is not `ignore_index`: the
/// reference kernels report it; the compiled C reads no weight or
/// log-probability out of bounds, raises `st_fault_code` and the harness
/// stops with an error naming the fault.
#[test]
fn cross_entropy_label_out_of_range_faults_in_c() {
    use strata::testing::run_c;
    let g = || {
        single_node(
            "",
            "SoftmaxCrossEntropyLoss",
            &[],
            vec![
                In::Data(TensorType::f32(vec![2, 3])),
                In::Data(TensorType::new(strata::tensor::DType::I64, vec![2])),
            ],
            &[true, true],
        )
        .unwrap()
    };
    let x = Tensor::f32(vec![2, 3], vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
    for bad in [vec![0, 3], vec![-1, 0]] {
        let l = Tensor::i64(vec![2], bad.clone());
        let e = run_both(g(), vec![x.clone(), l.clone()]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{bad:?}: {e}");
        let e = run_c(g(), vec![x.clone(), l]).unwrap_err().to_string();
        assert!(
            e.contains("faulted") && e.contains("loss label out of range"),
            "{bad:?}: {e}"
        );
    }
    let (i, c) = run_both(g(), vec![x, Tensor::i64(vec![2], vec![2, 0])]).unwrap();
    assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= 1e-6);
}
