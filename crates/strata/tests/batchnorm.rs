//! BatchNormInternal and BatchNormalizationGrad: the forward pass against an
//! independent f64 batch norm (statistics, output, running-stat update), the
//! gradient against central finite differences of that f64 forward, C
//! kernels against the reference kernels (with outputs left out and the
//! running statistics updated in place), attribute errors, and the Deeploy
//! kernel tests and CNN training fixtures (when ../shared is present).

use strata::ops::Attribute;
use strata::ops::{Attrs, OpInput, Registry, MS};
use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::{attr_f, attr_i, run_both, single_node, In, Rng};

/// Interpreter vs compiled C: same loops, same f32 arithmetic (sqrtf is exact).
const ENGINES_AGREE: f32 = 1e-6;
const EPS: f32 = 1e-5;
const MOM: f32 = 0.9;

fn attrs() -> Vec<Attribute> {
    vec![attr_f("epsilon", EPS), attr_f("momentum", MOM)]
}

fn eval(op: &str, attrs: &[Attribute], inputs: Vec<Option<Tensor>>, want: &[bool]) -> Vec<Tensor> {
    strata::testing::eval_node(MS, op, attrs, inputs, want).unwrap()
}

fn to64(t: &Tensor) -> Vec<f64> {
    t.as_f32().iter().map(|&v| v as f64).collect()
}

/// (n, c, sp) of a shape.
fn dims(s: &[usize]) -> (usize, usize, usize) {
    (s[0], s[1], s[2..].iter().product())
}

/// Independent f64 training-mode batch norm: (y, mean, biased var).
fn bn64(s: &[usize], x: &[f64], scale: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (n, c, sp) = dims(s);
    let at = |k: usize, ch: usize, i: usize| (k * c + ch) * sp + i;
    let m = (n * sp) as f64;
    let mut y = vec![0.0; x.len()];
    let (mut means, mut vars) = (vec![], vec![]);
    for ch in 0..c {
        let vals: Vec<f64> = (0..n)
            .flat_map(|k| (0..sp).map(move |i| (k, i)))
            .map(|(k, i)| x[at(k, ch, i)])
            .collect();
        let mean = vals.iter().sum::<f64>() / m;
        let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m;
        for k in 0..n {
            for i in 0..sp {
                y[at(k, ch, i)] =
                    (x[at(k, ch, i)] - mean) / (var + EPS as f64).sqrt() * scale[ch] + b[ch];
            }
        }
        means.push(mean);
        vars.push(var);
    }
    (y, means, vars)
}

fn close64(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{k}]: got {g}, want {w}"
        );
    }
}

const SHAPES: [&[usize]; 5] = [
    &[2, 3, 4, 5],
    &[4, 2],
    &[1, 4, 3, 3],
    &[3, 2, 7],
    &[2, 5, 1, 1],
];

#[test]
fn batchnorm_forward_hand_checked() {
    // One channel [1, 3]: mean 2, biased var 2/3.
    let x = Tensor::f32(vec![1, 1, 3], vec![1., 2., 3.]);
    let one = |v: f32| Tensor::f32(vec![1], vec![v]);
    let o = eval(
        "BatchNormInternal",
        &[attr_f("epsilon", 0.0), attr_f("momentum", 0.5)],
        vec![
            Some(x),
            Some(one(2.0)),
            Some(one(1.0)),
            Some(one(4.0)),
            Some(one(1.0)),
        ],
        &[true; 5],
    );
    let inv = 1.0 / (2.0f32 / 3.0).sqrt();
    close64(
        o[0].as_f32(),
        &[(1.0 - 2.0 * inv) as f64, 1.0, (1.0 + 2.0 * inv) as f64],
        1e-6,
        "y",
    );
    close64(o[1].as_f32(), &[3.0], 1e-7, "running mean 0.5*4 + 0.5*2");
    close64(
        o[2].as_f32(),
        &[0.5 + 1.0 / 3.0],
        1e-7,
        "running var 0.5*1 + 0.5*2/3 (biased)",
    );
    close64(o[3].as_f32(), &[2.0], 0.0, "saved mean");
    close64(o[4].as_f32(), &[inv as f64], 1e-7, "saved inv std");
}

#[test]
fn batchnorm_forward_matches_f64_and_c() {
    let mut r = Rng(0xb_a7c4);
    for (case, s) in SHAPES.iter().enumerate() {
        let c = s[1];
        let x = r.tensor(s);
        let scale = r.tensor(&[c]);
        let b = r.tensor(&[c]);
        let rm = r.tensor(&[c]);
        let rv = Tensor::f32(vec![c], (0..c).map(|_| 1.0 + r.uniform().abs()).collect());
        let o = eval(
            "BatchNormInternal",
            &attrs(),
            vec![
                Some(x.clone()),
                Some(scale.clone()),
                Some(b.clone()),
                Some(rm.clone()),
                Some(rv.clone()),
            ],
            &[true; 5],
        );
        let (y, mean, var) = bn64(s, &to64(&x), &to64(&scale), &to64(&b));
        close64(o[0].as_f32(), &y, 1e-5, "y");
        close64(o[3].as_f32(), &mean, 1e-6, "saved mean");
        let inv: Vec<f64> = var.iter().map(|v| 1.0 / (v + EPS as f64).sqrt()).collect();
        close64(o[4].as_f32(), &inv, 1e-5, "saved inv std");
        let m = MOM as f64;
        let rm2: Vec<f64> = to64(&rm)
            .iter()
            .zip(&mean)
            .map(|(r, b)| m * r + (1.0 - m) * b)
            .collect();
        let rv2: Vec<f64> = to64(&rv)
            .iter()
            .zip(&var)
            .map(|(r, b)| m * r + (1.0 - m) * b)
            .collect();
        close64(o[1].as_f32(), &rm2, 1e-6, "running mean");
        close64(o[2].as_f32(), &rv2, 1e-6, "running var");

        // C vs reference. Odd cases: running stats are constants (the
        // program turns them into state updated in place) and some outputs
        // are left out; even cases: all runtime inputs, all outputs.
        let want: Vec<bool> = if case % 2 == 1 {
            vec![true, true, true, false, case == 3]
        } else {
            vec![true; 5]
        };
        let (ins, vals) = if case % 2 == 1 {
            (
                vec![
                    In::Data(x.ty()),
                    In::Data(scale.ty()),
                    In::Data(b.ty()),
                    In::Const(rm.clone()),
                    In::Const(rv.clone()),
                ],
                vec![x.clone(), scale.clone(), b.clone()],
            )
        } else {
            (
                vec![
                    In::Data(x.ty()),
                    In::Data(scale.ty()),
                    In::Data(b.ty()),
                    In::Data(rm.ty()),
                    In::Data(rv.ty()),
                ],
                vec![x.clone(), scale.clone(), b.clone(), rm.clone(), rv.clone()],
            )
        };
        let g = single_node(MS, "BatchNormInternal", &attrs(), ins, &want).unwrap();
        let (i, cc) = run_both(g, vals).unwrap();
        let expect: Vec<&Tensor> = o
            .iter()
            .zip(&want)
            .filter(|(_, &w)| w)
            .map(|(t, _)| t)
            .collect();
        assert_eq!(i.len(), expect.len());
        for (k, ((a, b), e)) in i.iter().zip(&cc).zip(expect).enumerate() {
            assert_eq!(
                a.as_f32(),
                e.as_f32(),
                "case {case} output {k}: interpreter vs direct eval"
            );
            let d = max_abs_diff(a.as_f32(), b.as_f32());
            assert!(
                d <= ENGINES_AGREE,
                "case {case} output {k}: C vs reference {d}"
            );
        }
    }
}

#[test]
fn batchnorm_grad_matches_finite_differences_and_c() {
    let mut r = Rng(0xb_9ad);
    for (case, s) in SHAPES.iter().enumerate() {
        let c = s[1];
        let x = r.tensor(s);
        let scale = r.tensor(&[c]);
        let b = r.tensor(&[c]);
        let dy = r.tensor(s);
        let one = |v: f32| Tensor::f32(vec![c], vec![v; c]);
        let fwd = eval(
            "BatchNormInternal",
            &attrs(),
            vec![
                Some(x.clone()),
                Some(scale.clone()),
                Some(b.clone()),
                Some(one(0.0)),
                Some(one(1.0)),
            ],
            &[true, false, false, true, true],
        );
        let (mean, inv) = (fwd[3].clone(), fwd[4].clone());
        let grad_in = vec![
            Some(dy.clone()),
            Some(x.clone()),
            Some(scale.clone()),
            Some(mean.clone()),
            Some(inv.clone()),
        ];
        let o = eval(
            "BatchNormalizationGrad",
            &[attr_f("epsilon", EPS)],
            grad_in,
            &[true; 3],
        );
        // Central differences of L = sum(dY ⊙ bn64(X, scale, B)).
        let (x64, s64, b64, dy64) = (to64(&x), to64(&scale), to64(&b), to64(&dy));
        let loss = |x: &[f64], sc: &[f64], bb: &[f64]| -> f64 {
            bn64(s, x, sc, bb)
                .0
                .iter()
                .zip(&dy64)
                .map(|(u, v)| u * v)
                .sum()
        };
        let h = 1e-4;
        let fd = |v: &[f64], f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> {
            (0..v.len())
                .map(|i| {
                    let mut a = v.to_vec();
                    a[i] += h;
                    let up = f(&a);
                    a[i] -= 2.0 * h;
                    (up - f(&a)) / (2.0 * h)
                })
                .collect()
        };
        // With a single element per channel the normalized output is
        // constant and dX is ill-conditioned (var + eps ~ eps): skip dX there.
        if s[0] * dims(s).2 > 1 {
            close64(
                o[0].as_f32(),
                &fd(&x64, &|v| loss(v, &s64, &b64)),
                2e-3,
                &format!("case {case} dX"),
            );
        }
        close64(
            o[1].as_f32(),
            &fd(&s64, &|v| loss(&x64, v, &b64)),
            1e-3,
            &format!("case {case} dScale"),
        );
        close64(
            o[2].as_f32(),
            &fd(&b64, &|v| loss(&x64, &s64, v)),
            1e-3,
            &format!("case {case} dBias"),
        );

        // C vs reference, with a subset of outputs on odd cases.
        let want = if case % 2 == 1 {
            vec![true, false, true]
        } else {
            vec![true; 3]
        };
        let ins = [&dy, &x, &scale, &mean, &inv]
            .iter()
            .map(|t| In::Data(t.ty()))
            .collect();
        let g = single_node(
            MS,
            "BatchNormalizationGrad",
            &[attr_f("epsilon", EPS)],
            ins,
            &want,
        )
        .unwrap();
        let (i, cc) = run_both(g, vec![dy, x, scale, mean, inv]).unwrap();
        let expect: Vec<&Tensor> = o
            .iter()
            .zip(&want)
            .filter(|(_, &w)| w)
            .map(|(t, _)| t)
            .collect();
        for (k, ((a, b), e)) in i.iter().zip(&cc).zip(expect).enumerate() {
            assert_eq!(
                a.as_f32(),
                e.as_f32(),
                "case {case} output {k}: interpreter vs direct eval"
            );
            let d = max_abs_diff(a.as_f32(), b.as_f32());
            assert!(
                d <= ENGINES_AGREE,
                "case {case} output {k}: C vs reference {d}"
            );
        }
    }
}

#[test]
fn unsupported_attributes_and_shapes_are_rejected() {
    let reg = Registry::standard();
    let e = reg.get(MS, "BatchNormInternal").unwrap()(&Attrs::new(&[attr_i("training_mode", 0)]))
        .unwrap_err()
        .0;
    assert!(e.contains("training_mode"), "{e}");
    let op = reg.get(MS, "BatchNormInternal").unwrap()(&Attrs::new(&[])).unwrap();
    let x = TensorType::f32(vec![2, 3, 4]);
    let c = TensorType::f32(vec![3]);
    let bad = TensorType::f32(vec![4]);
    let inp = |t| Some(OpInput { ty: t, value: None });
    let e = op
        .infer(&[inp(&x), inp(&c), inp(&bad), inp(&c), inp(&c)], 5)
        .unwrap_err()
        .0;
    assert!(e.contains("B must be [3]"), "{e}");
    // The running statistics are updated in place.
    let al = op.aliases();
    assert!(al.iter().any(|a| a.output == 1 && a.input == 3));
    assert!(al.iter().any(|a| a.output == 2 && a.input == 4));
}
