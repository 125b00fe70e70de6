//! Data-movement ops: Transpose, Slice, Concat, Split, Gather, Pad — C
//! kernels vs reference kernels on random problems (exact: pure copies),
//! references vs independent index arithmetic, hand-checked cases, errors,
//! and the Transpose/Pad/Reshape/Squeeze suites through both engines.

use strata::ops::Attribute;
use strata::ops::{Attrs, OpInput, Registry};
use strata::tensor::{Tensor, TensorType};
use strata::testing::{attr_f, attr_i, attr_ints, attr_s, run_both, single_node, In, Rng};

fn eval(
    op: &str,
    attrs: &[Attribute],
    inputs: Vec<Tensor>,
    n_out: usize,
) -> Result<Vec<Tensor>, String> {
    let reg = Registry::standard();
    let o = reg.get("", op).unwrap()(&Attrs::new(attrs)).map_err(|e| e.0)?;
    let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let ins: Vec<_> = inputs
        .iter()
        .zip(&tys)
        .map(|(t, ty)| Some(OpInput { ty, value: Some(t) }))
        .collect();
    let types = o.infer(&ins, n_out).map_err(|e| e.0)?;
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let outs: Vec<Option<&TensorType>> = types.iter().map(Some).collect();
    o.eval(&refs, &outs).map_err(|e| e.0)
}

/// Data inputs first, then constants; both engines; outputs must be identical.
fn both(
    op: &str,
    attrs: &[Attribute],
    data: Vec<Tensor>,
    consts: Vec<Option<Tensor>>,
    n_out: usize,
) -> Vec<Tensor> {
    let mut ins: Vec<In> = data.iter().map(|t| In::Data(t.ty())).collect();
    ins.extend(consts.into_iter().map(|c| c.map_or(In::Absent, In::Const)));
    let g = single_node("", op, attrs, ins, &vec![true; n_out]).unwrap();
    let (i, c) = run_both(g, data).unwrap();
    assert_eq!(i, c, "{op}: engines differ");
    i
}

fn i64s(v: &[i64]) -> Option<Tensor> {
    Some(Tensor::i64(vec![v.len()], v.to_vec()))
}

/// Row-major coordinates of flat index `o` in `shape`.
fn coords(mut o: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        c[k] = o % shape[k];
        o /= shape[k];
    }
    c
}
fn flat(c: &[usize], shape: &[usize]) -> usize {
    c.iter().zip(shape).fold(0, |a, (&i, &d)| a * d + i)
}

fn shuffle(r: &mut Rng, n: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, r.below(i + 1));
    }
    p
}

#[test]
fn transpose_random() {
    let mut r = Rng(0x7a5);
    for _ in 0..5 {
        let rank = 1 + r.below(5);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + r.below(4)).collect();
        let perm = shuffle(&mut r, rank);
        let x = r.tensor(&shape);
        let y = both(
            "Transpose",
            &[attr_ints(
                "perm",
                &perm.iter().map(|&p| p as i64).collect::<Vec<_>>(),
            )],
            vec![x.clone()],
            vec![],
            1,
        );
        let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        assert_eq!(y[0].shape, out);
        for o in 0..y[0].numel() {
            let c = coords(o, &out);
            let mut src = vec![0; rank];
            for (k, &p) in perm.iter().enumerate() {
                src[p] = c[k];
            }
            assert_eq!(y[0].as_f32()[o], x.as_f32()[flat(&src, &shape)]);
        }
    }
    // Default perm reverses.
    let x = Tensor::f32(vec![2, 3], (0..6).map(|v| v as f32).collect());
    let y = eval("Transpose", &[], vec![x], 1).unwrap();
    assert_eq!(y[0].shape, vec![3, 2]);
    assert_eq!(y[0].as_f32(), &[0., 3., 1., 4., 2., 5.]);
    let e = eval(
        "Transpose",
        &[attr_ints("perm", &[0, 0])],
        vec![Tensor::f32(vec![1, 1], vec![0.])],
        1,
    )
    .unwrap_err();
    assert!(e.contains("repeats"), "{e}");
}

#[test]
fn slice_random_positive_and_negative_steps() {
    let mut r = Rng(0x511ce);
    for case in 0..8 {
        let shape = [2 + r.below(5), 2 + r.below(5), 1 + r.below(3)];
        let x = r.tensor(&shape);
        let (mut st, mut en, mut ax, mut sp) = (vec![], vec![], vec![], vec![]);
        for a in [0usize, 1] {
            let d = shape[a] as i64;
            let step = [1i64, 2, -1, -2][r.below(4)];
            let s = r.below(d as usize + 2) as i64 - 1;
            let e = if step > 0 { d + 5 } else { -d - 5 }; // beyond the end: clamped
            st.push(if case % 2 == 0 { s } else { s - d }); // negative starts count from the end
            en.push(e);
            ax.push(a as i64 - 3 * (case as i64 % 2)); // negative axes too
            sp.push(step);
        }
        let y = both(
            "Slice",
            &[],
            vec![x.clone()],
            vec![i64s(&st), i64s(&en), i64s(&ax), i64s(&sp)],
            1,
        );
        // Independent: python-style range per axis.
        let idx = |a: usize| -> Vec<usize> {
            let d = shape[a] as i64;
            let k = (0..2).find(|&k| (ax[k] + 3) % 3 == a as i64);
            let Some(k) = k else {
                return (0..shape[a]).collect();
            };
            let mut s = if st[k] < 0 { st[k] + d } else { st[k] };
            let mut v = vec![];
            if sp[k] > 0 {
                s = s.clamp(0, d);
                while s < d {
                    v.push(s as usize);
                    s += sp[k];
                }
            } else {
                s = s.clamp(0, d - 1);
                while s >= 0 {
                    v.push(s as usize);
                    s += sp[k];
                }
            }
            v
        };
        let (i0, i1, i2) = (idx(0), idx(1), idx(2));
        assert_eq!(
            y[0].shape,
            vec![i0.len(), i1.len(), i2.len()],
            "case {case}: {st:?} {en:?} {ax:?} {sp:?}"
        );
        let mut want = vec![];
        for &a in &i0 {
            for &b in &i1 {
                for &c in &i2 {
                    want.push(x.as_f32()[flat(&[a, b, c], &shape)]);
                }
            }
        }
        assert_eq!(y[0].as_f32(), &want[..], "case {case}");
    }
    let e = eval(
        "Slice",
        &[],
        vec![
            Tensor::f32(vec![3], vec![0.; 3]),
            Tensor::i64(vec![1], vec![0]),
            Tensor::i64(vec![1], vec![3]),
            Tensor::i64(vec![1], vec![0]),
            Tensor::i64(vec![1], vec![0]),
        ],
        1,
    )
    .unwrap_err();
    assert!(e.contains("step 0"), "{e}");
}

#[test]
fn concat_split_random() {
    let mut r = Rng(0xc0c);
    for _ in 0..4 {
        let rank = 1 + r.below(3);
        let base: Vec<usize> = (0..rank).map(|_| 1 + r.below(4)).collect();
        let axis = r.below(rank);
        let parts: Vec<Tensor> = (0..1 + r.below(3))
            .map(|_| {
                let mut s = base.clone();
                s[axis] = 1 + r.below(3);
                r.tensor(&s)
            })
            .collect();
        let y = both(
            "Concat",
            &[attr_i("axis", axis as i64)],
            parts.clone(),
            vec![],
            1,
        );
        // Split it back: sizes as a constant input, then as an attribute.
        let sizes: Vec<i64> = parts.iter().map(|p| p.shape[axis] as i64).collect();
        let back = both(
            "Split",
            &[attr_i("axis", axis as i64)],
            vec![y[0].clone()],
            vec![i64s(&sizes)],
            parts.len(),
        );
        assert_eq!(back, parts);
        let back = both(
            "Split",
            &[attr_i("axis", axis as i64), attr_ints("split", &sizes)],
            vec![y[0].clone()],
            vec![],
            parts.len(),
        );
        assert_eq!(back, parts);
    }
    // Hand-checked: concat on axis 1, uneven num_outputs split (ceil-sized parts).
    let a = Tensor::f32(vec![2, 1], vec![1., 2.]);
    let b = Tensor::f32(vec![2, 2], vec![3., 4., 5., 6.]);
    let y = eval("Concat", &[attr_i("axis", -1)], vec![a, b], 1).unwrap();
    assert_eq!(y[0].as_f32(), &[1., 3., 4., 2., 5., 6.]);
    let x = Tensor::f32(vec![5], vec![0., 1., 2., 3., 4.]);
    let s = eval("Split", &[attr_i("num_outputs", 2)], vec![x.clone()], 2).unwrap();
    assert_eq!(
        (s[0].as_f32(), s[1].as_f32()),
        (&[0f32, 1., 2.][..], &[3f32, 4.][..])
    );
    let e = eval("Split", &[attr_ints("split", &[2, 2])], vec![x], 2).unwrap_err();
    assert!(e.contains("do not sum"), "{e}");
    // Int64 concat folds shape arithmetic.
    let c = eval(
        "Concat",
        &[attr_i("axis", 0)],
        vec![
            Tensor::i64(vec![1], vec![-1]),
            Tensor::i64(vec![2], vec![4, 4]),
        ],
        1,
    )
    .unwrap();
    assert_eq!(c[0].to_i64(), vec![-1, 4, 4]);
}

#[test]
fn gather_random_runtime_and_constant_indices() {
    let mut r = Rng(0x6a7);
    for case in 0..4 {
        let shape = [1 + r.below(4), 2 + r.below(4), 1 + r.below(3)];
        let axis = case % 3;
        let d = shape[axis] as i64;
        let idx: Vec<i64> = (0..1 + r.below(5))
            .map(|_| r.below(2 * d as usize) as i64 - d)
            .collect();
        let it = Tensor::i64(vec![idx.len()], idx.clone());
        let x = r.tensor(&shape);
        let attrs = [attr_i("axis", axis as i64)];
        let y_rt = both("Gather", &attrs, vec![x.clone(), it.clone()], vec![], 1);
        let y_c = both("Gather", &attrs, vec![x.clone()], vec![Some(it)], 1);
        assert_eq!(y_rt, y_c);
        let mut out = shape.to_vec();
        out[axis] = idx.len();
        assert_eq!(y_rt[0].shape, out);
        for o in 0..y_rt[0].numel() {
            let mut c = coords(o, &out);
            let v = idx[c[axis]];
            c[axis] = (if v < 0 { v + d } else { v }) as usize;
            assert_eq!(y_rt[0].as_f32()[o], x.as_f32()[flat(&c, &shape)]);
        }
    }
    // Scalar index drops the axis; out of range is an error in the reference.
    let x = Tensor::f32(vec![3, 2], vec![0., 1., 2., 3., 4., 5.]);
    let y = eval(
        "Gather",
        &[],
        vec![x.clone(), Tensor::i64(vec![], vec![-1])],
        1,
    )
    .unwrap();
    assert_eq!(
        (y[0].shape.clone(), y[0].as_f32().to_vec()),
        (vec![2], vec![4., 5.])
    );
    let e = eval("Gather", &[], vec![x, Tensor::i64(vec![1], vec![3])], 1).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn pad_random_modes() {
    let mut r = Rng(0x9ad);
    for case in 0..6 {
        let shape = [1 + r.below(3), 2 + r.below(4), 2 + r.below(4)];
        let mode = ["constant", "reflect", "edge"][case % 3];
        let mut pads: Vec<i64> = (0..6).map(|_| r.below(3) as i64).collect();
        if mode == "constant" && case == 3 {
            pads[4] = -1; // a negative pad crops
        }
        let x = r.tensor(&shape);
        let y = both(
            "Pad",
            &[attr_s("mode", mode)],
            vec![x.clone()],
            vec![i64s(&pads), Some(Tensor::f32(vec![], vec![0.5]))],
            1,
        );
        let out: Vec<usize> = (0..3)
            .map(|k| (shape[k] as i64 + pads[k] + pads[k + 3]) as usize)
            .collect();
        assert_eq!(y[0].shape, out);
        for o in 0..y[0].numel() {
            let c = coords(o, &out);
            let mut src = vec![0; 3];
            let mut inside = true;
            for k in 0..3 {
                let n = shape[k] as i64;
                let mut v = c[k] as i64 - pads[k];
                match mode {
                    "edge" => v = v.clamp(0, n - 1),
                    "reflect" => {
                        while v < 0 || v >= n {
                            v = if v < 0 { -v } else { 2 * (n - 1) - v };
                        }
                    }
                    _ => inside &= (0..n).contains(&v),
                }
                src[k] = v.max(0) as usize;
            }
            let want = if inside {
                x.as_f32()[flat(&src, &shape)]
            } else {
                0.5
            };
            assert_eq!(y[0].as_f32()[o], want, "{mode} {pads:?} at {c:?}");
        }
    }
    // Opset < 11: pads and value as attributes; axes input for opset 18.
    let x = Tensor::f32(vec![1, 2], vec![1., 2.]);
    let y = eval(
        "Pad",
        &[attr_ints("pads", &[0, 1, 0, 0]), attr_f("value", -1.0)],
        vec![x.clone()],
        1,
    )
    .unwrap();
    assert_eq!(y[0].as_f32(), &[-1., 1., 2.]);
    let y = eval(
        "Pad",
        &[],
        vec![
            x.clone(),
            Tensor::i64(vec![2], vec![0, 2]),
            Tensor::f32(vec![], vec![9.]),
            Tensor::i64(vec![1], vec![-1]),
        ],
        1,
    )
    .unwrap();
    assert_eq!(y[0].as_f32(), &[1., 2., 9., 9.]);
    let e = eval("Pad", &[attr_s("mode", "wrap")], vec![x], 1).unwrap_err();
    assert!(e.contains("unsupported") && e.contains("wrap"), "{e}");
}

/// A run-time index out of range: the reference kernel reports it, and the
/// compiled C reads nothing out of bounds, raises `st_fault_code` and the
/// harness stops with an error naming the fault and the step.
#[test]
fn gather_runtime_index_out_of_range_faults_in_c() {
    use strata::testing::run_c;
    let g = || {
        single_node(
            "",
            "Gather",
            &[],
            vec![
                In::Data(TensorType::f32(vec![3, 2])),
                In::Data(TensorType::new(strata::tensor::DType::I64, vec![2])),
            ],
            &[true],
        )
        .unwrap()
    };
    let x = Tensor::f32(vec![3, 2], vec![0., 1., 2., 3., 4., 5.]);
    let bad = Tensor::i64(vec![2], vec![1, 3]);
    let e = run_both(g(), vec![x.clone(), bad.clone()]).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = run_c(g(), vec![x.clone(), bad]).unwrap_err().to_string();
    assert!(
        e.contains("faulted") && e.contains("index out of range (Gather") && e.contains("step 0"),
        "{e}"
    );
    // In range (a negative index counts from the end): no fault.
    let y = run_c(g(), vec![x, Tensor::i64(vec![2], vec![2, -3])]).unwrap();
    assert_eq!(y[0].as_f32(), &[4., 5., 0., 1.]);
}
