//! Transformer ops: MatMul, Softmax/SoftmaxGrad, Gelu/GeluGrad,
//! LayerNormalization/LayerNormalizationGrad. C kernels against reference
//! kernels on random problems; forward references against independent f64
//! implementations; gradient kernels against central finite differences of
//! those f64 forwards; hand-checked cases, bad attributes, and the Deeploy
//! suites (with the known CrossEntropyGrad deviation asserted explicitly).

use strata::ops::Attribute;
use strata::ops::{Attrs, OpInput, Registry, MS};
use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::shared_dir as shared;
use strata::testing::{attr_f, attr_i, attr_s, run_both, single_node, In, Rng};

/// Interpreter vs compiled C: same loops and accumulation order.
const ENGINES_AGREE: f32 = 1e-6;
/// f32 kernels vs f64 references and finite differences: |d| <= ABS + REL·|want|.
const FD_REL: f64 = 1e-3;
const FD_ABS: f64 = 1e-4;

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), v.to_vec())
}

fn eval(
    dom: &str,
    op: &str,
    attrs: &[Attribute],
    inputs: Vec<Tensor>,
    n_out: usize,
) -> Result<Vec<Tensor>, String> {
    let reg = Registry::standard();
    let o = reg.get(dom, op).unwrap()(&Attrs::new(attrs)).map_err(|e| e.0)?;
    let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let ins: Vec<_> = inputs
        .iter()
        .zip(&tys)
        .map(|(t, ty)| Some(OpInput { ty, value: Some(t) }))
        .collect();
    let types = o.infer(&ins, n_out).map_err(|e| e.0)?;
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let outs: Vec<Option<&TensorType>> = types.iter().take(n_out).map(Some).collect();
    o.eval(&refs, &outs).map_err(|e| e.0)
}

/// Run a node through both engines; assert they agree; return the interpreter's outputs.
fn both(
    dom: &str,
    op: &str,
    attrs: &[Attribute],
    inputs: Vec<Tensor>,
    outs: &[bool],
) -> Vec<Tensor> {
    let g = single_node(
        dom,
        op,
        attrs,
        inputs.iter().map(|t| In::Data(t.ty())).collect(),
        outs,
    )
    .unwrap();
    let (i, c) = run_both(g, inputs).unwrap();
    for (a, b) in i.iter().zip(&c) {
        let d = max_abs_diff(a.as_f32(), b.as_f32());
        assert!(d <= ENGINES_AGREE, "{op}: engines differ by {d}");
    }
    i
}

fn close64(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= FD_ABS + FD_REL * w.abs(),
            "{what} element {k}: {g} vs {w}"
        );
    }
}

/// Central differences of `fwd` at `x` (step 1e-5 in f64).
fn fd(x: &[f64], fwd: &dyn Fn(&[f64]) -> f64) -> Vec<f64> {
    let h = 1e-5;
    (0..x.len())
        .map(|i| {
            let mut p = x.to_vec();
            p[i] += h;
            let fp = fwd(&p);
            p[i] -= 2.0 * h;
            (fp - fwd(&p)) / (2.0 * h)
        })
        .collect()
}

fn to64(t: &Tensor) -> Vec<f64> {
    t.as_f32().iter().map(|&v| v as f64).collect()
}

// ---------------------------------------------------------------- MatMul

fn matmul64(a: &Tensor, b: &Tensor) -> (Vec<usize>, Vec<f64>) {
    // Independent: promote, broadcast batch by coordinates, triple loop.
    let (a1, b1) = (a.shape.len() == 1, b.shape.len() == 1);
    let sa = if a1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let sb = if b1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = strata::ops::util::broadcast_shape(ba, bb).unwrap();
    let nb: usize = batch.iter().product();
    let index = |bs: &[usize], coord: &[usize]| {
        let off = coord.len() - bs.len();
        bs.iter().enumerate().fold(0, |acc, (i, &d)| {
            acc * d + if d == 1 { 0 } else { coord[off + i] }
        })
    };
    let mut y = Vec::new();
    for bi in 0..nb {
        let mut coord = vec![0; batch.len()];
        let mut rem = bi;
        for d in (0..batch.len()).rev() {
            coord[d] = rem % batch[d];
            rem /= batch[d];
        }
        let (oa, ob) = (index(ba, &coord) * m * k, index(bb, &coord) * k * n);
        for i in 0..m {
            for j in 0..n {
                y.push(
                    (0..k)
                        .map(|p| {
                            a.as_f32()[oa + i * k + p] as f64 * b.as_f32()[ob + p * n + j] as f64
                        })
                        .sum(),
                );
            }
        }
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    if !b1 {
        shape.push(n);
    }
    (shape, y)
}

#[test]
fn matmul_random_c_vs_reference_vs_f64() {
    let mut r = Rng(0x3a7_3a7);
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![3, 4], vec![4, 5]),
        (vec![2, 3, 4], vec![4, 2]),
        (vec![4], vec![2, 4, 3]),
        (vec![2, 1, 3, 4], vec![5, 4, 2]),
        (vec![3, 4], vec![4]),
        (vec![6], vec![6]),
    ];
    let mut cases = cases;
    for _ in 0..4 {
        let (m, k, n) = (1 + r.below(6), 1 + r.below(9), 1 + r.below(6));
        let b0 = 1 + r.below(3);
        cases.push((
            vec![b0, m, k],
            vec![if r.below(2) == 0 { 1 } else { b0 }, k, n],
        ));
    }
    for (sa, sb) in cases {
        let (a, b) = (r.tensor(&sa), r.tensor(&sb));
        let y = both("", "MatMul", &[], vec![a.clone(), b.clone()], &[true]);
        let (shape, want) = matmul64(&a, &b);
        assert_eq!(y[0].shape, shape, "{sa:?} x {sb:?}");
        close64(y[0].as_f32(), &want, &format!("MatMul {sa:?} x {sb:?}"));
    }
    let e = eval(
        "",
        "MatMul",
        &[],
        vec![r.tensor(&[2, 3]), r.tensor(&[4, 2])],
        1,
    )
    .unwrap_err();
    assert!(e.contains("inner dimensions"), "{e}");
}

// ---------------------------------------------------------------- Softmax

/// Softmax rows as (start, stride, len) over a shape, single-axis or coerced.
fn rows(shape: &[usize], axis: usize, coerce: bool) -> Vec<(usize, usize, usize)> {
    let outer: usize = shape[..axis].iter().product();
    let (n, inner) = if coerce {
        (shape[axis..].iter().product(), 1)
    } else {
        (shape[axis], shape[axis + 1..].iter().product())
    };
    (0..outer * inner)
        .map(|r| ((r / inner) * n * inner + r % inner, inner, n))
        .collect()
}

fn softmax64(x: &[f64], rs: &[(usize, usize, usize)]) -> Vec<f64> {
    let mut y = x.to_vec();
    for &(b, s, n) in rs {
        let m = (0..n).map(|j| x[b + j * s]).fold(f64::MIN, f64::max);
        let z: f64 = (0..n).map(|j| (x[b + j * s] - m).exp()).sum();
        for j in 0..n {
            y[b + j * s] = (x[b + j * s] - m).exp() / z;
        }
    }
    y
}

#[test]
fn softmax_and_grad_random() {
    let mut r = Rng(0x50f7);
    for case in 0..6 {
        let rank = 1 + r.below(4);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + r.below(5)).collect();
        let axis = r.below(rank);
        let x = r.tensor(&shape);
        let mut x3 = x.clone();
        x3.as_f32_mut().iter_mut().for_each(|v| *v *= 3.0);
        let y = both(
            "",
            "Softmax",
            &[attr_i("axis", axis as i64 - rank as i64)],
            vec![x3.clone()],
            &[true],
        );
        let rs = rows(&shape, axis, false);
        close64(y[0].as_f32(), &softmax64(&to64(&x3), &rs), "Softmax");
        // Gradients: SoftmaxGrad_13 (single axis) and SoftmaxGrad (2-D coercion).
        let w = r.tensor(&shape);
        for (op, coerce) in [("SoftmaxGrad_13", false), ("SoftmaxGrad", true)] {
            let rs = rows(&shape, axis, coerce);
            let y64 = softmax64(&to64(&x3), &rs);
            let yf = Tensor::f32(shape.clone(), y64.iter().map(|&v| v as f32).collect());
            let dx = both(
                MS,
                op,
                &[attr_i("axis", axis as i64)],
                vec![w.clone(), yf],
                &[true],
            );
            let w64 = to64(&w);
            let want = fd(&to64(&x3), &|xs| {
                softmax64(xs, &rs)
                    .iter()
                    .zip(&w64)
                    .map(|(a, b)| a * b)
                    .sum()
            });
            close64(
                dx[0].as_f32(),
                &want,
                &format!("{op} case {case} {shape:?} axis {axis}"),
            );
        }
    }
}

#[test]
fn softmax_hand_checked() {
    // Row [0, ln 3] → [1/4, 3/4]; along axis 0 of [[0],[ln 3]] the same.
    let y = eval("", "Softmax", &[], vec![f(&[1, 2], &[0.0, 3f32.ln()])], 1).unwrap();
    assert!(max_abs_diff(y[0].as_f32(), &[0.25, 0.75]) < 1e-7);
    let y = eval(
        "",
        "Softmax",
        &[attr_i("axis", 0)],
        vec![f(&[2, 1], &[0.0, 3f32.ln()])],
        1,
    )
    .unwrap();
    assert!(max_abs_diff(y[0].as_f32(), &[0.25, 0.75]) < 1e-7);
    // dX = Y ⊙ (dY − Σ dY⊙Y): Y = [.25, .75], dY = [1, 0] → Σ = .25 → [.1875, −.1875].
    let dx = eval(
        MS,
        "SoftmaxGrad_13",
        &[],
        vec![f(&[2], &[1., 0.]), f(&[2], &[0.25, 0.75])],
        1,
    )
    .unwrap();
    assert!(max_abs_diff(dx[0].as_f32(), &[0.1875, -0.1875]) < 1e-7);
    let e = eval(
        "",
        "Softmax",
        &[attr_i("axis", 2)],
        vec![f(&[2, 1], &[0., 0.])],
        1,
    )
    .unwrap_err();
    assert!(e.contains("axis 2 out of range"), "{e}");
}

// ---------------------------------------------------------------- GELU

/// erf by composite Simpson integration of 2/√π e^(−t²): independent of the kernels' series.
fn erf_simpson(x: f64) -> f64 {
    let n = 2000;
    let h = x / n as f64;
    let g = |t: f64| (-t * t).exp();
    let mut s = g(0.0) + g(x);
    for i in 1..n {
        s += g(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

fn gelu64(x: f64, tanh: bool) -> f64 {
    if tanh {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
    } else {
        0.5 * x * (1.0 + erf_simpson(x / 2f64.sqrt()))
    }
}

#[test]
fn erf_series_matches_integration() {
    for i in -80..=80 {
        let x = i as f64 * 0.1;
        let (a, b) = (strata::ops::transformer::erf64(x), erf_simpson(x));
        assert!((a - b).abs() < 1e-12, "erf({x}): series {a} vs Simpson {b}");
    }
}

#[test]
fn gelu_and_grad_random() {
    let mut r = Rng(0x6e1);
    for (dom, approx) in [(MS, None), ("", Some("none")), ("", Some("tanh"))] {
        let attrs: Vec<Attribute> = approx
            .map(|a| attr_s("approximate", a))
            .into_iter()
            .collect();
        let tanh = approx == Some("tanh");
        let shape = [3, 1 + r.below(7), 5];
        let mut x = r.tensor(&shape);
        x.as_f32_mut().iter_mut().for_each(|v| *v *= 5.0);
        let y = both(dom, "Gelu", &attrs, vec![x.clone()], &[true]);
        let want: Vec<f64> = to64(&x).iter().map(|&v| gelu64(v, tanh)).collect();
        close64(y[0].as_f32(), &want, &format!("Gelu {dom} {approx:?}"));
        let dy = r.tensor(&shape);
        let dx = both(
            dom,
            "GeluGrad",
            &attrs,
            vec![dy.clone(), x.clone()],
            &[true],
        );
        let dy64 = to64(&dy);
        let want = fd(&to64(&x), &|xs| {
            xs.iter()
                .zip(&dy64)
                .map(|(&v, &g)| gelu64(v, tanh) * g)
                .sum()
        });
        close64(dx[0].as_f32(), &want, &format!("GeluGrad {dom} {approx:?}"));
    }
    // Hand-checked: GELU(0) = 0, GELU(x) → x for large x, GELU'(0) = 1/2.
    let y = eval(MS, "Gelu", &[], vec![f(&[3], &[0.0, 10.0, -10.0])], 1).unwrap();
    assert_eq!(y[0].as_f32(), &[0.0, 10.0, -0.0]);
    let d = eval(
        MS,
        "GeluGrad",
        &[],
        vec![f(&[1], &[2.0]), f(&[1], &[0.0])],
        1,
    )
    .unwrap();
    assert_eq!(d[0].as_f32(), &[1.0]);
    let e = eval(
        "",
        "Gelu",
        &[attr_s("approximate", "fast")],
        vec![f(&[1], &[0.])],
        1,
    )
    .unwrap_err();
    assert!(e.contains("unsupported") && e.contains("fast"), "{e}");
}

// ---------------------------------------------------------------- LayerNorm

/// f64 layer norm over rows of d: (y, mean, inv_std).
fn ln64(x: &[f64], s: &[f64], b: &[f64], d: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; x.len()];
    let (mut ms, mut is) = (vec![], vec![]);
    for (r, row) in x.chunks(d).enumerate() {
        let m = row.iter().sum::<f64>() / d as f64;
        let v = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / d as f64;
        let inv = 1.0 / (v + eps).sqrt();
        for j in 0..d {
            y[r * d + j] = (row[j] - m) * inv * s[j] + b[j];
        }
        ms.push(m);
        is.push(inv);
    }
    (y, ms, is)
}

#[test]
fn layernorm_and_grad_random() {
    let mut r = Rng(0x1a7e);
    for case in 0..4 {
        let shape = [1 + r.below(3), 1 + r.below(4), 2 + r.below(6)];
        let axis = 1 + case % 2; // normalise the last one or two dims
        let d: usize = shape[axis..].iter().product();
        let x = r.tensor(&shape);
        let scale = r.tensor(&shape[axis..]);
        let bias = r.tensor(&shape[axis..]);
        let eps = 1e-5f32;
        let attrs = [attr_i("axis", axis as i64), attr_f("epsilon", eps)];
        let out = both(
            "",
            "LayerNormalization",
            &attrs,
            vec![x.clone(), scale.clone(), bias.clone()],
            &[true, true, true],
        );
        let (y, m, inv) = ln64(&to64(&x), &to64(&scale), &to64(&bias), d, eps as f64);
        close64(out[0].as_f32(), &y, "LayerNorm Y");
        close64(out[1].as_f32(), &m, "LayerNorm Mean");
        close64(out[2].as_f32(), &inv, "LayerNorm InvStdDev");
        let mut stat = shape[..axis].to_vec();
        stat.resize(3, 1);
        assert_eq!(out[1].shape, stat);
        // Gradient: dY = w; the loss Σ w ⊙ LN(x) differentiated numerically.
        let w = r.tensor(&shape);
        let g = both(
            MS,
            "LayerNormalizationGrad",
            &[attr_i("axis", axis as i64)],
            vec![
                w.clone(),
                x.clone(),
                scale.clone(),
                out[1].clone(),
                out[2].clone(),
            ],
            &[true, true, true],
        );
        let (x64, s64, b64, w64) = (to64(&x), to64(&scale), to64(&bias), to64(&w));
        let loss = |x: &[f64], s: &[f64], b: &[f64]| -> f64 {
            ln64(x, s, b, d, eps as f64)
                .0
                .iter()
                .zip(&w64)
                .map(|(a, b)| a * b)
                .sum()
        };
        close64(
            g[0].as_f32(),
            &fd(&x64, &|v| loss(v, &s64, &b64)),
            "LayerNormGrad dX",
        );
        close64(
            g[1].as_f32(),
            &fd(&s64, &|v| loss(&x64, v, &b64)),
            "LayerNormGrad dScale",
        );
        close64(
            g[2].as_f32(),
            &fd(&b64, &|v| loss(&x64, &s64, v)),
            "LayerNormGrad dBias",
        );
        assert_eq!(g[1].shape, shape[axis..].to_vec());
    }
}

#[test]
fn layernorm_hand_checked_and_errors() {
    // [1, 3]: mean 2, var 1 → ±1/sqrt(1+eps); scale 2, bias 1, no eps → [-1, 3].
    let y = eval(
        "",
        "LayerNormalization",
        &[attr_f("epsilon", 0.0)],
        vec![
            f(&[1, 2], &[1., 3.]),
            f(&[2], &[2., 2.]),
            f(&[2], &[1., 1.]),
        ],
        3,
    )
    .unwrap();
    assert_eq!(y[0].as_f32(), &[-1., 3.]);
    assert_eq!(y[1].as_f32(), &[2.]);
    assert_eq!(y[2].as_f32(), &[1.]);
    let e = eval(
        "",
        "LayerNormalization",
        &[attr_i("stash_type", 0)],
        vec![],
        1,
    )
    .unwrap_err();
    assert!(e.contains("stash_type"), "{e}");
    let e = eval(
        "",
        "LayerNormalization",
        &[],
        vec![f(&[2, 3], &[0.; 6]), f(&[2], &[0.; 2])],
        1,
    )
    .unwrap_err();
    assert!(e.contains("Scale") && e.contains("normalised shape"), "{e}");
}

// ---------------------------------------------------------------- suites

/// `Softmax/CrossEntropyGrad` (B = 4): the graph is Onnx4Deeploy's
/// SoftmaxCrossEntropyLossGrad without dY, so strata computes
/// (softmax − onehot)/B; the generator ran ONNX Runtime with dY = 1/B
/// (`loss_grad` in inputs.npz), so the reference is (softmax − onehot)/B².
/// The deviation is exactly the factor 1/B: ours × 1/B == reference.
#[test]
fn deeploy_cross_entropy_grad_reference_is_off_by_one_over_b() {
    let Some(s) = shared() else { return };
    let dir = s.join("fixtures/deeploy/Kernels/FP32/Softmax/CrossEntropyGrad");
    let ins = npz::read_npz_file(&dir.join("inputs.npz")).unwrap();
    let outs = npz::read_npz_file(&dir.join("outputs.npz")).unwrap();
    let (
        npz::Array::F32 { shape, data: lp },
        npz::Array::I64 { data: labels, .. },
        npz::Array::F32 { data: dy, .. },
    ) = (&ins["log_prob"], &ins["labels"], &ins["loss_grad"])
    else {
        panic!("unexpected dtypes")
    };
    let npz::Array::F32 { data: want, .. } = &outs["output_grad"] else {
        panic!()
    };
    let b = shape[0];
    assert!(
        dy.iter().all(|&v| v == 1.0 / b as f32),
        "loss_grad is 1/B: {dy:?}"
    );
    let lp = Tensor::f32(shape.clone(), lp.clone());
    let lab = Tensor::i64(vec![b], labels.clone());
    let g = single_node(
        MS,
        "SoftmaxCrossEntropyLossGrad",
        &[attr_s("reduction", "mean")],
        vec![In::Data(lp.ty()), In::Data(lab.ty())],
        &[true],
    )
    .unwrap();
    let (i, c) = run_both(g, vec![lp, lab]).unwrap();
    assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
    let scaled: Vec<f32> = i[0].as_f32().iter().map(|v| v / b as f32).collect();
    let d = max_abs_diff(&scaled, want);
    assert!(d <= 1e-6, "ours/B vs reference: {d}");
    // And unscaled it is off by far more than the kernel tolerance: the deviation is real.
    assert!(max_abs_diff(i[0].as_f32(), want) > 1e-2);
}
