//! ONNX Runtime training artifacts (`examples/ort/<m>`, written by
//! `examples/gen_ort.py` with onnxruntime-training 1.19.2): each model trains
//! in both engines within 1e-4 of ONNX Runtime's own training run, the
//! engines agree within 1e-6, the plan sits at its lower bound; the sequence
//! optimizers (SGD, and AdamW in `mlp_adamw`) are lowered to one in-place
//! update per parameter, AdamW's step and moments to persistent state; the
//! AdamW kernel against an f64 transcription of ONNX Runtime's; bad optimizer
//! graphs and data are rejected clearly. Also the ops of `ops/ort.rs`
//! (Expand, Scale, Size, Sum, FusedMatMul): C kernel vs reference kernel on
//! random problems (<= 1e-6), reference kernels vs independent f64
//! implementations (<= 1e-5 abs + 1e-5 rel), hand-checked cases, bad attributes.

use std::path::{Path, PathBuf};

use prost::Message;
use strata::driver::{self, Engine};
use strata::ops::{AliasKind, Attrs, Registry, MS};
use strata::program::{Program, Role};
use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::{attr_f, attr_i, run_both, single_node, In, Rng};

/// The examples trained with ONNX Runtime's SGD.
const MODELS: [&str; 3] = ["mlp", "cnn", "vit"];
/// Every example (see [`strata::testing::ORT_EXAMPLES`]).
const ALL_MODELS: [&str; 9] = strata::testing::ORT_EXAMPLES;
/// Interpreter vs compiled C.
const ENGINES_AGREE: f32 = 1e-6;

fn example(m: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ort")
        .join(m)
}

/// A scratch directory, removed (by tempfile) when dropped.
fn tmpdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("strata-ort-{tag}-"))
        .tempdir()
        .unwrap()
}

// ---------------------------------------------------------------- the examples

#[test]
fn ort_examples_train_like_onnx_runtime_in_both_engines() {
    let reg = Registry::standard();
    for m in ALL_MODELS {
        let dir = example(m);
        let i = driver::check(&dir, Engine::Interp, u64::MAX / 4, None, &reg).unwrap();
        let c = driver::check(&dir, Engine::C, u64::MAX / 4, None, &reg).unwrap();
        for r in [&i, &c] {
            assert!(r.ok, "{m} {:?}: {:?}\n{}", r.engine, r.failures, r.c_output);
            assert!(r.max_abs_loss_error.unwrap() <= 1e-4, "{m}");
            assert!(r.max_abs_weight_error.unwrap() <= 1e-4, "{m}");
            assert_eq!(
                r.arena_bytes, r.lower_bound_bytes,
                "{m}: plan above its lower bound"
            );
            assert_eq!(r.losses.len(), 6, "{m}");
        }
        let (ri, rc) = (i.results.unwrap(), c.results.unwrap());
        assert!(
            max_abs_diff(&ri.losses, &rc.losses) <= ENGINES_AGREE,
            "{m} losses"
        );
        assert_eq!(ri.tensors.len(), rc.tensors.len());
        for (a, b) in ri.tensors.iter().zip(&rc.tensors) {
            assert!(
                max_abs_diff(a.as_f32(), b.as_f32()) <= ENGINES_AGREE,
                "{m} tensors"
            );
        }
        // Every parameter is compared, the frozen running statistics included.
        let f = strata::fixture::load(&dir, &reg).unwrap();
        let p = &f.program;
        for w in &p.weights {
            assert!(
                f.ref_tensors.iter().any(|(_, t, _)| t == w),
                "{m}: {}",
                p.graph.name(*w)
            );
        }
        if m == "cnn" {
            for s in ["bn1.running_mean", "bn1.running_var"] {
                let t = p.graph.find(s).unwrap();
                assert_eq!(p.role(t), Role::State, "{s}");
                assert!(
                    f.ref_tensors.iter().any(|(_, r, _)| *r == t),
                    "{s} compared"
                );
            }
        }
        println!(
            "{m}: loss error interp {:.3e} C {:.3e}; weight error interp {:.3e} C {:.3e}",
            i.max_abs_loss_error.unwrap(),
            c.max_abs_loss_error.unwrap(),
            i.max_abs_weight_error.unwrap(),
            c.max_abs_weight_error.unwrap()
        );
    }
}

#[test]
fn sequence_optimizer_becomes_one_in_place_update_per_parameter() {
    let reg = Registry::standard();
    for m in MODELS {
        let dir = example(m);
        let p = artifact_program(&dir, &reg);
        let g = &p.graph;
        let lr = p.learning_rate.expect("learning rate input");
        assert_eq!(g.name(lr), "learning_rate");
        assert_eq!(p.role(lr), Role::Hyper);
        assert!(!p.data.contains(&lr));
        let opt: Vec<_> = g.nodes[p.train_end..].iter().collect();
        assert_eq!(opt.len(), p.weights.len(), "{m}: one update per parameter");
        assert!(!p.weights.is_empty());
        let plan = driver::plan_program(&p, u64::MAX / 4).unwrap();
        for (n, w) in opt.iter().zip(&p.weights) {
            assert_eq!(
                (n.domain.as_str(), n.op_type.as_str()),
                (MS, "SGDOptimizerV2")
            );
            let (pw, acc, l) = (
                n.inputs[0].unwrap(),
                n.inputs[1].unwrap(),
                n.inputs[2].unwrap(),
            );
            assert_eq!(pw, *w, "{m}: parameters in graph-input order");
            assert_eq!(p.role(pw), Role::Weight);
            assert_eq!(p.role(acc), Role::Accumulator);
            assert_eq!(
                g.name(acc),
                format!("{}_grad.accumulation.buffer", g.name(pw)),
                "{m}: paired by name"
            );
            assert_eq!(l, lr);
            let aliases = n.op.aliases();
            assert!(aliases
                .iter()
                .any(|a| a.kind == AliasKind::InPlace && a.input == 0 && a.output == 0));
            let out = n.outputs[0].unwrap();
            assert_eq!(
                plan.group_of[out.idx()],
                plan.group_of[pw.idx()],
                "{m}: the update shares the parameter's storage"
            );
            assert_eq!(plan.offset(out), plan.offset(pw));
        }
    }
}

#[test]
fn learning_rate_is_read_at_run_time() {
    // Doubling the learning rate in data.npz must change the trained weights
    // (it is not baked into the program) and then no longer match ORT.
    let reg = Registry::standard();
    let d = tmpdir("lr");
    let src = example("mlp");
    for f in [
        "training_model.onnx",
        "optimizer_model.onnx",
        "reference.npz",
    ] {
        std::fs::copy(src.join(f), d.path().join(f)).unwrap();
    }
    let mut arrays = npz::read_npz_file(&src.join("data.npz")).unwrap();
    for (k, a) in arrays.iter_mut() {
        if k == "learning_rate" {
            *a = npz::Array::F32 {
                shape: vec![1],
                data: vec![0.1],
            };
        }
    }
    std::fs::write(d.path().join("data.npz"), npz::write_npz(&arrays).unwrap()).unwrap();
    for e in [Engine::Interp, Engine::C] {
        let r = driver::check(d.path(), e, u64::MAX / 4, None, &reg).unwrap();
        assert!(!r.ok, "{e:?}: lr 0.1 still matched ORT's lr 0.05 run");
        // The first optimizer step comes after two mini-batches.
        let refl = r.reference_losses.as_ref().unwrap();
        assert!(max_abs_diff(&r.losses[..2], &refl[..2]) <= 1e-4);
        assert!(max_abs_diff(&r.losses[2..], &refl[2..]) > 1e-3);
    }
}

// ---------------------------------------------------------------- bad input

fn with_optimizer(
    tag: &str,
    edit: impl FnOnce(&mut strata::onnx::proto::ModelProto),
) -> tempfile::TempDir {
    with_optimizer_of("mlp", tag, edit)
}

/// A copy of example `m` with its optimizer graph edited.
fn with_optimizer_of(
    m: &str,
    tag: &str,
    edit: impl FnOnce(&mut strata::onnx::proto::ModelProto),
) -> tempfile::TempDir {
    let src = example(m);
    let d = tmpdir(tag);
    for f in ["training_model.onnx", "data.npz", "reference.npz"] {
        std::fs::copy(src.join(f), d.path().join(f)).unwrap();
    }
    let mut m = strata::onnx::load(&src.join("optimizer_model.onnx"))
        .unwrap()
        .proto;
    edit(&mut m);
    std::fs::write(d.path().join("optimizer_model.onnx"), m.encode_to_vec()).unwrap();
    d
}

/// The program of an ORT artifact directory: training plus optimizer model.
fn artifact_program(dir: &Path, reg: &Registry) -> Program {
    Program::training(
        &dir.join("training_model.onnx"),
        Some(&dir.join("optimizer_model.onnx")),
        reg,
    )
    .unwrap()
}

fn load_err(d: impl AsRef<Path>) -> String {
    let d = d.as_ref();
    match strata::fixture::load(d, &Registry::standard()) {
        Ok(_) => panic!("{} loaded", d.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn optimizer_that_does_not_match_the_training_model_is_rejected() {
    let reg = Registry::standard();
    let src = example("mlp");
    // A training model without trainable parameters (ORT's eval model).
    let e = Program::training(
        &src.join("eval_model.onnx"),
        Some(&src.join("optimizer_model.onnx")),
        &reg,
    )
    .err()
    .expect("eval model with an optimizer")
    .to_string();
    assert!(e.contains("no trainable parameter"), "{e}");

    // `params` declared a tensor, not a sequence of the parameters.
    let d = with_optimizer("tensor-params", |m| {
        let g = m.graph.as_mut().unwrap();
        let lr_ty = g.input[0].r#type.clone();
        let p = g.input.iter_mut().find(|i| i.name == "params").unwrap();
        p.r#type = lr_ty;
    });
    let e = load_err(&d);
    assert!(e.contains("`params` (params) must be a sequence"), "{e}");

    // A sequence of int64 tensors cannot hold the float parameters.
    let d2 = with_optimizer("int-grads", |m| {
        use strata::onnx::proto::type_proto::Value as TV;
        let g = m.graph.as_mut().unwrap();
        let p = g.input.iter_mut().find(|i| i.name == "gradients").unwrap();
        if let Some(TV::SequenceType(s)) = p.r#type.as_mut().unwrap().value.as_mut() {
            if let Some(TV::TensorType(t)) = s.elem_type.as_mut().unwrap().value.as_mut() {
                t.elem_type = 7;
            }
        }
    });
    let e = load_err(&d2);
    assert!(e.contains("not a sequence of float32 tensors"), "{e}");

    // An update signal: the lowered updates always run, so it is refused,
    // naming the node.
    let d3 = with_optimizer("signal", |m| {
        m.graph.as_mut().unwrap().node[0].input.push("step".into());
    });
    let e = load_err(&d3);
    assert!(e.contains("update_signal is not supported"), "{e}");
    assert!(e.contains("SGDOptimizerV2::"), "names the node: {e}");

    // The learning rate must be one float.
    let d4 = with_optimizer("lr-shape", |m| {
        let g = m.graph.as_mut().unwrap();
        g.node[0].input[0] = "step".into();
    });
    let e = load_err(&d4);
    assert!(e.contains("learning rate `step` is int64"), "{e}");

    // data.npz naming a parameter the training model does not have.
    let d5 = with_optimizer("extra-param", |_| {});
    let mut arrays = npz::read_npz_file(&d5.path().join("data.npz")).unwrap();
    arrays.insert(
        "fc3.weight".into(),
        npz::Array::F32 {
            shape: vec![1],
            data: vec![0.0],
        },
    );
    std::fs::write(d5.path().join("data.npz"), npz::write_npz(&arrays).unwrap()).unwrap();
    let e = load_err(&d5);
    assert!(
        e.contains("`fc3.weight` names no input of the training model"),
        "{e}"
    );
}

// ---------------------------------------------------------------- ops/ort.rs

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), v.to_vec())
}

fn agree(i: &[Tensor], c: &[Tensor], what: &str) {
    for (a, b) in i.iter().zip(c) {
        assert_eq!(a.shape, b.shape, "{what}");
        let d = max_abs_diff(a.as_f32(), b.as_f32());
        assert!(d <= ENGINES_AGREE, "{what}: interp vs C {d}");
    }
}

fn close64(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let d = (*g as f64 - w).abs();
        assert!(d <= 1e-5 + 1e-5 * w.abs(), "{what}[{k}]: {g} vs {w}");
    }
}

#[test]
fn expand_random_and_by_hand() {
    let mut r = Rng(11);
    for case in 0..8 {
        let rank = 1 + r.below(4);
        let out: Vec<usize> = (0..rank).map(|_| 1 + r.below(4)).collect();
        // The input: a suffix of the output's dims, some of them 1.
        let drop = r.below(rank);
        let x_shape: Vec<usize> = out[drop..]
            .iter()
            .map(|&d| if r.below(2) == 0 { 1 } else { d })
            .collect();
        let x = r.tensor(&x_shape);
        let shape = Tensor::i64(vec![rank], out.iter().map(|&d| d as i64).collect());
        let g = single_node(
            "",
            "Expand",
            &[],
            vec![In::Data(x.ty()), In::Const(shape)],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![x.clone()]).unwrap();
        agree(&i, &c, &format!("Expand case {case}"));
        // Independent: y[idx] = x[idx projected onto x's dims].
        let n: usize = out.iter().product();
        let mut want = Vec::with_capacity(n);
        for o in 0..n {
            let mut idx = vec![0; rank];
            let mut rem = o;
            for d in (0..rank).rev() {
                idx[d] = rem % out[d];
                rem /= out[d];
            }
            let mut xi = 0;
            for (k, &xd) in x_shape.iter().enumerate() {
                xi = xi * xd + if xd == 1 { 0 } else { idx[drop + k] };
            }
            want.push(x.as_f32()[xi] as f64);
        }
        close64(i[0].as_f32(), &want, "Expand");
        assert_eq!(i[0].shape, out);
    }
    // By hand: [2,1] to [2,3].
    let g = single_node(
        "",
        "Expand",
        &[],
        vec![
            In::Data(TensorType::f32(vec![2, 1])),
            In::Const(Tensor::i64(vec![2], vec![2, 3])),
        ],
        &[true],
    )
    .unwrap();
    let (i, _) = run_both(g, vec![f(&[2, 1], &[1.0, 2.0])]).unwrap();
    assert_eq!(i[0].as_f32(), &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    // A shape that does not broadcast is an error.
    let e = single_node(
        "",
        "Expand",
        &[],
        vec![
            In::Data(TensorType::f32(vec![3])),
            In::Const(Tensor::i64(vec![1], vec![2])),
        ],
        &[true],
    )
    .unwrap_err();
    assert!(e.contains("Expand"), "{e}");
}

#[test]
fn scale_sum_size_random_and_by_hand() {
    let mut r = Rng(12);
    for case in 0..6 {
        let shape = vec![1 + r.below(5), 1 + r.below(7)];
        let x = r.tensor(&shape);
        let down = case % 2;
        let s_f = 0.5 + r.uniform().abs() * 3.0;
        // A float scale fed at run time, and an int64 constant scale.
        for s in [
            In::Data(TensorType::f32(vec![1])),
            In::Const(Tensor::i64(vec![], vec![4])),
        ] {
            let konst = matches!(s, In::Const(_));
            let g = single_node(
                MS,
                "Scale",
                &[attr_i("scale_down", down)],
                vec![In::Data(x.ty()), s],
                &[true],
            )
            .unwrap();
            let mut inputs = vec![x.clone()];
            if !konst {
                inputs.push(f(&[1], &[s_f]));
            }
            let (i, c) = run_both(g, inputs).unwrap();
            agree(&i, &c, &format!("Scale case {case}"));
            let sv = if konst { 4.0 } else { s_f as f64 };
            let fac = if down == 1 { 1.0 / sv } else { sv };
            let want: Vec<f64> = x.as_f32().iter().map(|&v| v as f64 * fac).collect();
            close64(i[0].as_f32(), &want, "Scale");
        }
        // Sum of k inputs.
        let k = 1 + r.below(4);
        let xs: Vec<Tensor> = (0..k).map(|_| r.tensor(&shape)).collect();
        let g = single_node(
            "",
            "Sum",
            &[],
            xs.iter().map(|t| In::Data(t.ty())).collect(),
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, xs.clone()).unwrap();
        agree(&i, &c, "Sum");
        let want: Vec<f64> = (0..x.numel())
            .map(|e| xs.iter().map(|t| t.as_f32()[e] as f64).sum())
            .collect();
        close64(i[0].as_f32(), &want, "Sum");
    }
    // By hand.
    let g = single_node(
        MS,
        "Scale",
        &[attr_i("scale_down", 1)],
        vec![
            In::Data(TensorType::f32(vec![2])),
            In::Const(Tensor::i64(vec![], vec![4])),
        ],
        &[true],
    )
    .unwrap();
    let (i, _) = run_both(g, vec![f(&[2], &[2.0, -8.0])]).unwrap();
    assert_eq!(i[0].as_f32(), &[0.5, -2.0]);
    let g = single_node(
        "",
        "Sum",
        &[],
        (0..3).map(|_| In::Data(TensorType::f32(vec![2]))).collect(),
        &[true],
    );
    let (i, _) = run_both(
        g.unwrap(),
        vec![
            f(&[2], &[1.0, 2.0]),
            f(&[2], &[10.0, 20.0]),
            f(&[2], &[100.0, 200.0]),
        ],
    )
    .unwrap();
    assert_eq!(i[0].as_f32(), &[111.0, 222.0]);
    // Size folds to a constant at import.
    let reg = Registry::standard();
    let size = reg.get("", "Size").unwrap()(&Attrs {
        list: &[],
        opset: i64::MAX,
    })
    .unwrap();
    let ty = TensorType::f32(vec![2, 3, 4]);
    assert_eq!(
        size.static_value(&[Some(&ty)]).unwrap(),
        Tensor::i64(vec![], vec![24])
    );
    // Bad input: Sum of different shapes, Scale with scale_down 2.
    let e = single_node(
        "",
        "Sum",
        &[],
        vec![
            In::Data(TensorType::f32(vec![2])),
            In::Data(TensorType::f32(vec![3])),
        ],
        &[true],
    )
    .unwrap_err();
    assert!(e.contains("broadcasting Sum is not supported"), "{e}");
    let e = single_node(
        MS,
        "Scale",
        &[attr_i("scale_down", 2)],
        vec![
            In::Data(TensorType::f32(vec![2])),
            In::Data(TensorType::f32(vec![1])),
        ],
        &[true],
    )
    .unwrap_err();
    assert!(e.contains("unsupported"), "{e}");
}

fn fused64(a: &Tensor, b: &Tensor, ta: bool, tb: bool, alpha: f64) -> (Vec<usize>, Vec<f64>) {
    // Independent: materialise op(A), op(B) per batch (same batch shape here), then multiply.
    let ra = a.shape.len();
    let (r0, c0) = (a.shape[ra - 2], a.shape[ra - 1]);
    let (r1, c1) = (b.shape[ra - 2], b.shape[ra - 1]);
    let nb: usize = a.shape[..ra - 2].iter().product();
    let (m, k) = if ta { (c0, r0) } else { (r0, c0) };
    let n = if tb { r1 } else { c1 };
    let mut y = vec![0f64; nb * m * n];
    for bi in 0..nb {
        let at = |i: usize, q: usize| {
            let (r, c) = if ta { (q, i) } else { (i, q) };
            a.as_f32()[bi * r0 * c0 + r * c0 + c] as f64
        };
        let bt = |q: usize, j: usize| {
            let (r, c) = if tb { (j, q) } else { (q, j) };
            b.as_f32()[bi * r1 * c1 + r * c1 + c] as f64
        };
        for i in 0..m {
            for j in 0..n {
                y[(bi * m + i) * n + j] = alpha * (0..k).map(|q| at(i, q) * bt(q, j)).sum::<f64>();
            }
        }
    }
    let mut shape = a.shape[..ra - 2].to_vec();
    shape.extend([m, n]);
    (shape, y)
}

#[test]
fn fused_matmul_random_and_by_hand() {
    let mut r = Rng(13);
    for case in 0..12 {
        let (ta, tb) = (case % 2 == 1, (case / 2) % 2 == 1);
        let batch: Vec<usize> = (0..r.below(3)).map(|_| 1 + r.below(3)).collect();
        let (m, n, k) = (1 + r.below(5), 1 + r.below(5), 1 + r.below(6));
        let mut sa = batch.clone();
        sa.extend(if ta { [k, m] } else { [m, k] });
        let mut sb = batch.clone();
        sb.extend(if tb { [n, k] } else { [k, n] });
        let (a, b) = (r.tensor(&sa), r.tensor(&sb));
        let alpha = if case % 3 == 0 { 0.5 } else { 1.0 };
        let attrs = [
            attr_i("transA", ta as i64),
            attr_i("transB", tb as i64),
            attr_f("alpha", alpha),
        ];
        let g = single_node(
            MS,
            "FusedMatMul",
            &attrs,
            vec![In::Data(a.ty()), In::Data(b.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![a.clone(), b.clone()]).unwrap();
        agree(&i, &c, &format!("FusedMatMul case {case}"));
        let (shape, want) = fused64(&a, &b, ta, tb, alpha as f64);
        assert_eq!(i[0].shape, shape);
        close64(i[0].as_f32(), &want, &format!("FusedMatMul case {case}"));
    }
    // Broadcast batch: A [2,3,4] x B [4,5] (transB off).
    let (a, b) = (r.tensor(&[2, 3, 4]), r.tensor(&[4, 5]));
    let g = single_node(
        MS,
        "FusedMatMul",
        &[],
        vec![In::Data(a.ty()), In::Data(b.ty())],
        &[true],
    )
    .unwrap();
    let (i, c) = run_both(g, vec![a.clone(), b.clone()]).unwrap();
    agree(&i, &c, "FusedMatMul broadcast");
    let bb = Tensor::f32(vec![2, 4, 5], [b.as_f32(), b.as_f32()].concat());
    let (_, want) = fused64(&a, &bb, false, false, 1.0);
    close64(i[0].as_f32(), &want, "FusedMatMul broadcast");
    // By hand: A^T B with A = [[1,2],[3,4]], B = I.
    let g = single_node(
        MS,
        "FusedMatMul",
        &[attr_i("transA", 1)],
        vec![
            In::Data(TensorType::f32(vec![2, 2])),
            In::Data(TensorType::f32(vec![2, 2])),
        ],
        &[true],
    )
    .unwrap();
    let (i, _) = run_both(
        g,
        vec![
            f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            f(&[2, 2], &[1.0, 0.0, 0.0, 1.0]),
        ],
    )
    .unwrap();
    assert_eq!(i[0].as_f32(), &[1.0, 3.0, 2.0, 4.0]);
    // Bad attribute: transBatchA.
    let e = single_node(
        MS,
        "FusedMatMul",
        &[attr_i("transBatchA", 1)],
        vec![
            In::Data(TensorType::f32(vec![2, 2])),
            In::Data(TensorType::f32(vec![2, 2])),
        ],
        &[true],
    )
    .unwrap_err();
    assert!(e.contains("unsupported: FusedMatMul transBatchA"), "{e}");
}

// ---------------------------------------------------------------- AdamW

#[test]
fn adamw_optimizer_becomes_state_and_one_update_per_parameter() {
    let reg = Registry::standard();
    let dir = example("mlp_adamw");
    let p = artifact_program(&dir, &reg);
    let g = &p.graph;
    let opt: Vec<_> = g.nodes[p.train_end..].iter().collect();
    // One step count, then one AdamW per parameter.
    assert_eq!(opt.len(), 1 + p.weights.len());
    assert_eq!(opt[0].op_type, "StepCount");
    let step = opt[0].inputs[0].unwrap();
    assert_eq!(g.name(step), "step");
    assert_eq!(p.role(step), Role::State);
    assert_eq!(p.state_init[&step].to_i64(), vec![0]);
    let plan = driver::plan_program(&p, u64::MAX / 4).unwrap();
    for (n, w) in opt[1..].iter().zip(&p.weights) {
        assert_eq!(n.op_type, "AdamW");
        let ins: Vec<_> = n.inputs.iter().map(|i| i.unwrap()).collect();
        assert_eq!(ins[0], *w);
        assert_eq!(p.role(ins[1]), Role::Accumulator);
        for k in [2, 3] {
            assert_eq!(p.role(ins[k]), Role::State, "moments are state");
            assert!(p.state_init[&ins[k]].as_f32().iter().all(|&v| v == 0.0));
        }
        assert_eq!(ins[5], opt[0].outputs[0].unwrap(), "reads the counted step");
        // In place: parameter and moments keep their storage.
        for (o, i) in [(0, 0), (1, 2), (2, 3)] {
            let out = n.outputs[o].unwrap();
            assert_eq!(plan.offset(out), plan.offset(ins[i]));
        }
    }
    // Bad attributes and step inputs name the node.
    let d = with_optimizer_of("mlp_adamw", "adam-mode", |m| {
        let n = &mut m.graph.as_mut().unwrap().node[0];
        n.attribute.retain(|a| a.name != "adam_mode");
        n.attribute
            .push(strata::testing::onnx_build::attribute(&attr_i(
                "adam_mode",
                2,
            )));
    });
    let e = load_err(&d);
    assert!(
        e.contains("AdamWOptimizer") && e.contains("adam_mode 2"),
        "{e}"
    );
    let d2 = with_optimizer_of("mlp_adamw", "step-float", |m| {
        let g = m.graph.as_mut().unwrap();
        g.node[0].input[1] = "learning_rate".into();
    });
    let e = load_err(&d2);
    assert!(e.contains("expected one int64 element"), "{e}");
}

/// ONNX Runtime's CPU AdamW in f64, transcribed from its formulas (the
/// bias corrections as ORT computes them, in f32 from an f64 power).
fn adamw64(
    w: &[f32],
    g: &[f32],
    (m1, m2): (&[f32], &[f32]),
    lr: f64,
    step: i64,
    (alpha, beta, eps, wd): (f64, f64, f64, f64),
    mode: i64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let ac = (1.0 - alpha.powi(step as i32)) as f32 as f64;
    let bc = (1.0 - beta.powi(step as i32)) as f32 as f64;
    let (mut wo, mut m1o, mut m2o) = (vec![], vec![], vec![]);
    for i in 0..w.len() {
        let (mut x, d) = (w[i] as f64, g[i] as f64);
        let a = alpha * m1[i] as f64 + (1.0 - alpha) * d;
        let b = beta * m2[i] as f64 + (1.0 - beta) * d * d;
        if mode == 0 {
            x -= x * lr * wd;
            x -= lr * a / (ac * ((b / bc).sqrt() + eps));
        } else {
            x -= lr * bc.sqrt() / ac * a / (b.sqrt() + eps);
            x -= lr * wd * x;
        }
        wo.push(x);
        m1o.push(a);
        m2o.push(b);
    }
    (wo, m1o, m2o)
}

#[test]
fn adamw_kernels_match_f64_and_c_matches_reference() {
    use strata::ops::Attribute;
    use strata::ops::STRATA;
    use strata::tensor::DType;
    let mut r = Rng(0xada3);
    for case in 0..8 {
        let mode = case % 2;
        let n = 1 + r.below(40);
        let w = r.tensor(&[n]);
        let g = r.tensor(&[n]);
        let m1 = r.tensor(&[n]);
        // The second moment is a running mean of squares: non-negative.
        let m2 = Tensor::f32(
            vec![n],
            r.tensor(&[n]).as_f32().iter().map(|v| v * v).collect(),
        );
        let lr = 0.01 + 0.05 * r.uniform();
        let step = 1 + r.below(5) as i64;
        let hp = (
            0.9f32,
            0.999f32,
            1e-6f32,
            if case < 4 { 0.0f32 } else { 0.01 },
        );
        let attrs: Vec<Attribute> = vec![
            attr_f("alpha", hp.0),
            attr_f("beta", hp.1),
            attr_f("epsilon", hp.2),
            attr_f("weight_decay", hp.3),
            attr_i("adam_mode", mode as i64),
        ];
        let ty = TensorType::f32(vec![n]);
        let graph = single_node(
            STRATA,
            "AdamW",
            &attrs,
            vec![
                In::Data(ty.clone()),
                In::Data(ty.clone()),
                In::Data(ty.clone()),
                In::Data(ty.clone()),
                In::Data(TensorType::f32(vec![1])),
                In::Data(TensorType::new(DType::I64, vec![1])),
            ],
            &[true, true, true],
        )
        .unwrap();
        let inputs = vec![
            w.clone(),
            g.clone(),
            m1.clone(),
            m2.clone(),
            Tensor::f32(vec![1], vec![lr]),
            Tensor::i64(vec![1], vec![step]),
        ];
        let (i, c) = run_both(graph, inputs).unwrap();
        let want = adamw64(
            w.as_f32(),
            g.as_f32(),
            (m1.as_f32(), m2.as_f32()),
            lr as f64,
            step,
            (hp.0 as f64, hp.1 as f64, hp.2 as f64, hp.3 as f64),
            mode as i64,
        );
        for (k, wk) in [want.0, want.1, want.2].iter().enumerate() {
            agree(&i[k..k + 1], &c[k..k + 1], "AdamW");
            close64(i[k].as_f32(), wk, "AdamW vs f64");
        }
    }
}
