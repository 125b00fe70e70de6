//! Element-wise ops: broadcasting binary ops, the unary float ops and the
//! activation gradients — C kernel vs reference kernel on random problems,
//! the reference against an independent f64 computation, hand-checked cases
//! and errors. (The Deeploy kernel suites run in `kernels.rs`.)

use strata::ops::{Attrs, OpInput, Registry};
use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::{attr_f, run_both, single_node, In, Rng};

/// Interpreter vs compiled C: the same f32 operation per element, so equal.
const ENGINES_AGREE: f32 = 1e-6;

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), v.to_vec())
}

fn eval(op: &str, inputs: Vec<Tensor>) -> Result<Tensor, String> {
    let reg = Registry::standard();
    let o = reg.get("", op).unwrap()(&Attrs::new(&[])).map_err(|e| e.0)?;
    let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let ins: Vec<_> = inputs
        .iter()
        .zip(&tys)
        .map(|(t, ty)| Some(OpInput { ty, value: Some(t) }))
        .collect();
    let types = o.infer(&ins, 1).map_err(|e| e.0)?;
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    Ok(o.eval(&refs, &[Some(&types[0])])
        .map_err(|e| e.0)?
        .remove(0))
}

/// A random output shape and two operand shapes that broadcast to it.
fn broadcast_problem(r: &mut Rng) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let rank = 1 + r.below(4);
    let out: Vec<usize> = (0..rank).map(|_| 1 + r.below(5)).collect();
    let operand = |r: &mut Rng| {
        let drop = r.below(rank + 1).min(rank - 1);
        out[drop..]
            .iter()
            .map(|&d| if r.below(3) == 0 { 1 } else { d })
            .collect::<Vec<usize>>()
    };
    let a = operand(r);
    let b = operand(r);
    let out = strata::ops::util::broadcast_shape(&a, &b).unwrap();
    (out, a, b)
}

/// Independent f64 broadcast: index each operand by the trailing output coordinates.
fn naive(op: &str, a: &Tensor, b: &Tensor, out: &[usize]) -> Vec<f64> {
    let n: usize = out.iter().product();
    let at = |t: &Tensor, coord: &[usize]| -> f64 {
        let off = coord.len() - t.shape.len();
        let mut idx = 0;
        for (k, &d) in t.shape.iter().enumerate() {
            idx = idx * d + if d == 1 { 0 } else { coord[off + k] };
        }
        t.as_f32()[idx] as f64
    };
    (0..n)
        .map(|o| {
            let mut coord = vec![0; out.len()];
            let mut rem = o;
            for k in (0..out.len()).rev() {
                coord[k] = rem % out[k];
                rem /= out[k];
            }
            let (x, y) = (at(a, &coord), at(b, &coord));
            match op {
                "Add" => x + y,
                "Sub" => x - y,
                "Mul" => x * y,
                "Div" => x / y,
                "Pow" => x.powf(y),
                _ => unreachable!(),
            }
        })
        .collect()
}

#[test]
fn binary_random_broadcasts_c_vs_reference_vs_f64() {
    let mut r = Rng(0x5eed_e1e7);
    for case in 0..25 {
        let op = ["Add", "Sub", "Mul", "Div", "Pow"][case % 5];
        let (out, sa, sb) = broadcast_problem(&mut r);
        let mut a = r.tensor(&sa);
        let mut b = r.tensor(&sb);
        if op == "Pow" {
            // Positive bases keep powf real.
            a.as_f32_mut().iter_mut().for_each(|v| *v = v.abs() + 0.1);
            b.as_f32_mut().iter_mut().for_each(|v| *v *= 3.0);
        }
        if op == "Div" {
            b.as_f32_mut()
                .iter_mut()
                .for_each(|v| *v = v.signum() * (v.abs() + 0.25));
        }
        let g = single_node(
            "",
            op,
            &[],
            vec![In::Data(a.ty()), In::Data(b.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(i[0].shape, out, "{op} {sa:?} {sb:?}");
        let d = max_abs_diff(i[0].as_f32(), c[0].as_f32());
        assert!(
            d <= ENGINES_AGREE,
            "{op} {sa:?} {sb:?}: engines differ by {d}"
        );
        let want = naive(op, &a, &b, &out);
        for (k, (&got, &w)) in i[0].as_f32().iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{op} {sa:?} {sb:?} element {k}: {got} vs f64 {w}"
            );
        }
    }
}

#[test]
fn hand_checked() {
    let a = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let row = f(&[3], &[10., 20., 30.]);
    let col = f(&[2, 1], &[1., 2.]);
    assert_eq!(
        eval("Add", vec![a.clone(), row.clone()]).unwrap().as_f32(),
        &[11., 22., 33., 14., 25., 36.]
    );
    assert_eq!(
        eval("Sub", vec![a.clone(), col.clone()]).unwrap().as_f32(),
        &[0., 1., 2., 2., 3., 4.]
    );
    let m = eval("Mul", vec![col.clone(), row.clone()]).unwrap();
    assert_eq!(m.shape, vec![2, 3]);
    assert_eq!(m.as_f32(), &[10., 20., 30., 20., 40., 60.]);
    assert_eq!(
        eval("Div", vec![row, col]).unwrap().as_f32(),
        &[10., 20., 30., 5., 10., 15.]
    );
    // Pow with a scalar exponent 2 is exactly x*x (the Pow/Scalar and RMSNorm suites).
    let x = f(&[4], &[-1.5, 0.3, 2.0, 7.1]);
    let p = eval("Pow", vec![x.clone(), f(&[], &[2.0])]).unwrap();
    let sq: Vec<f32> = x.as_f32().iter().map(|v| v * v).collect();
    assert_eq!(p.as_f32(), &sq[..]);
    assert_eq!(
        eval("Sqrt", vec![f(&[3], &[4., 2.25, 0.])])
            .unwrap()
            .as_f32(),
        &[2., 1.5, 0.]
    );
    // Int64 shape arithmetic folds at import through the reference kernel.
    let s = eval(
        "Mul",
        vec![
            Tensor::i64(vec![2], vec![3, -4]),
            Tensor::i64(vec![], vec![2]),
        ],
    )
    .unwrap();
    assert_eq!(s.to_i64(), vec![6, -8]);
}

#[test]
fn errors_are_clear() {
    let e = eval("Add", vec![f(&[2, 3], &[0.; 6]), f(&[2], &[0.; 2])]).unwrap_err();
    assert!(e.contains("Add") && e.contains("broadcast"), "{e}");
    let e = eval("Mul", vec![f(&[1], &[0.]), Tensor::i64(vec![1], vec![1])]).unwrap_err();
    assert!(e.contains("element type"), "{e}");
    let e = eval(
        "Div",
        vec![Tensor::i64(vec![1], vec![1]), Tensor::i64(vec![1], vec![0])],
    )
    .unwrap_err();
    assert!(e.contains("division by zero"), "{e}");
    let big = vec![1usize; 9];
    let e = eval(
        "Add",
        vec![
            Tensor::f32(big.clone(), vec![0.]),
            Tensor::f32(big, vec![0.]),
        ],
    )
    .unwrap_err();
    assert!(e.contains("rank 9 exceeds 8"), "{e}");
}

/// The unary float ops (what ONNX Runtime's L1 and BCE-with-logits losses
/// and their gradients are built from) and SigmoidGrad / TanhGrad: the
/// reference kernels against f64 formulas, hand-checked values, and every C
/// kernel against its reference kernel on random inputs.
#[test]
fn unary_and_activation_grads_match_f64_and_c() {
    use strata::ops::MS;
    let x = f(&[5], &[-2.0, -0.5, 0.0, 0.5, 3.0]);
    let hand: [(&str, [f32; 5]); 4] = [
        ("Abs", [2.0, 0.5, 0.0, 0.5, 3.0]),
        ("Neg", [2.0, 0.5, -0.0, -0.5, -3.0]),
        ("Sign", [-1.0, -1.0, 0.0, 1.0, 1.0]),
        (
            "Sigmoid",
            [0.11920292, 0.37754068, 0.5, 0.62245935, 0.95257413],
        ),
    ];
    for (op, want) in hand {
        let y = eval(op, vec![x.clone()]).unwrap();
        assert!(
            max_abs_diff(y.as_f32(), &want) <= 1e-7,
            "{op}: {:?}",
            y.as_f32()
        );
    }
    type Unary64 = (&'static str, fn(f64) -> f64);
    let f64s: [Unary64; 8] = [
        ("Sqrt", f64::sqrt),
        ("Abs", f64::abs),
        ("Neg", |v| -v),
        ("Sign", f64::signum),
        ("Exp", f64::exp),
        ("Log", f64::ln),
        ("Sigmoid", |v| 1.0 / (1.0 + (-v).exp())),
        ("Tanh", f64::tanh),
    ];
    let mut r = Rng(0x51_9e);
    for (op, want) in f64s {
        let n = 1 + r.below(50);
        // Sqrt and Log need positive inputs; zero has its own sign rule.
        let positive = matches!(op, "Sqrt" | "Log");
        let v: Vec<f32> = r
            .tensor(&[n])
            .as_f32()
            .iter()
            .map(|v| {
                if positive {
                    v.abs() + 0.01
                } else {
                    4.0 * v + 0.001
                }
            })
            .collect();
        let x = f(&[n], &v);
        let y = eval(op, vec![x.clone()]).unwrap();
        for (k, (&g, &xv)) in y.as_f32().iter().zip(&v).enumerate() {
            let w = want(xv as f64);
            assert!(
                (g as f64 - w).abs() <= 1e-6 * (1.0 + w.abs()),
                "{op}[{k}]({xv}) = {g}, f64 {w}"
            );
        }
        let g = single_node("", op, &[], vec![In::Data(x.ty())], &[true]).unwrap();
        let (i, c) = run_both(g, vec![x]).unwrap();
        assert!(
            max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE,
            "{op}: interp vs C"
        );
    }
    // LeakyRelu: the slope attribute, ONNX's default 0.01, and C.
    let x = f(&[4], &[-2.0, -0.5, 0.0, 3.0]);
    let g = single_node(
        "",
        "LeakyRelu",
        &[attr_f("alpha", 0.25)],
        vec![In::Data(x.ty())],
        &[true],
    )
    .unwrap();
    let (i, c) = run_both(g, vec![x.clone()]).unwrap();
    assert_eq!(i[0].as_f32(), &[-0.5, -0.125, 0.0, 3.0]);
    assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
    assert_eq!(
        eval("LeakyRelu", vec![x]).unwrap().as_f32(),
        &[-0.02, -0.005, 0.0, 3.0]
    );
    // SigmoidGrad / TanhGrad / LeakyReluGrad from the forward output y.
    type Grad64 = (&'static str, &'static str, fn(f64, f64) -> f64);
    let grads: [Grad64; 3] = [
        ("SigmoidGrad", "Sigmoid", |d, y| d * y * (1.0 - y)),
        ("TanhGrad", "Tanh", |d, y| d * (1.0 - y * y)),
        ("LeakyReluGrad", "LeakyRelu", |d, y| {
            if y > 0.0 {
                d
            } else {
                0.25 * d
            }
        }),
    ];
    for (op, fwd, want) in grads {
        let n = 1 + r.below(50);
        let attrs = if op == "LeakyReluGrad" {
            vec![attr_f("alpha", 0.25)]
        } else {
            vec![]
        };
        let y = if op == "LeakyReluGrad" {
            // LeakyRelu's output at alpha 0.25, by hand.
            let x = r.tensor(&[n]);
            f(
                &[n],
                &x.as_f32()
                    .iter()
                    .map(|&v| if v < 0.0 { 0.25 * v } else { v })
                    .collect::<Vec<_>>(),
            )
        } else {
            eval(fwd, vec![r.tensor(&[n])]).unwrap()
        };
        let dy = r.tensor(&[n]);
        let g = single_node(
            MS,
            op,
            &attrs,
            vec![In::Data(dy.ty()), In::Data(y.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy.clone(), y.clone()]).unwrap();
        assert!(
            max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE,
            "{op}"
        );
        for k in 0..n {
            let w = want(dy.as_f32()[k] as f64, y.as_f32()[k] as f64);
            assert!((i[0].as_f32()[k] as f64 - w).abs() <= 1e-6, "{op}[{k}]");
        }
    }
}
