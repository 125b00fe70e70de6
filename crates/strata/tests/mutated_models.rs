//! Structure-aware fuzzing of the importer and the compiler: the project's
//! own example models (`examples/import`, `examples/mlp`), decoded and
//! changed field by field (op types, inputs and outputs, attributes, declared
//! shapes and element types, initializers, node order, opset versions),
//! compile to a lowered program or fail with an error, and never panic
//! (an extra or missing input, an opset outside the ones strata
//! implements: an error naming the node or the model). The tests build
//! with overflow checks, so an unchecked size product is a panic here (it
//! found two: a `GlobalAveragePoolGrad` kernel_shape whose
//! plane overflowed, and an axis of a scalar indexing an empty array). A
//! byte-level fuzz of the decoder is `bad_input.rs`'s
//! `corrupted_models_never_panic`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use prost::Message;
use strata::onnx::proto::{
    self, tensor_shape_proto::dimension::Value as Dim, type_proto, ModelProto,
};

/// The example models (file, decoded), and every op type they use.
type Corpus = (Vec<(PathBuf, ModelProto)>, Vec<String>);

/// The [`Corpus`], read once for all cases.
fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

fn read_corpus() -> Corpus {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files = Vec::new();
    for d in ["import", "mlp"] {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let f = e.unwrap().path().join("network.onnx");
            if f.exists() {
                files.push(f);
            }
        }
    }
    files.sort();
    assert!(files.len() > 20, "the example models are there");
    let mut ops: Vec<String> = Vec::new();
    let models = files
        .into_iter()
        .map(|f| {
            let m = ModelProto::decode(&*std::fs::read(&f).unwrap()).unwrap();
            for n in &m.graph.as_ref().unwrap().node {
                if !ops.contains(&n.op_type) {
                    ops.push(n.op_type.clone());
                }
            }
            (f, m)
        })
        .collect();
    (models, ops)
}

/// Integers at the edges: zero, negative, and past any real size.
fn edge(r: &mut strata::testing::Rng) -> i64 {
    const E: [i64; 12] = [
        0,
        1,
        -1,
        2,
        3,
        7,
        1 << 20,
        1 << 40,
        i64::MAX,
        i64::MIN,
        -5,
        1000,
    ];
    E[r.below(E.len())]
}

/// One change to `m`, chosen by `r`; a description of it.
fn mutate(m: &mut ModelProto, r: &mut strata::testing::Rng, ops: &[String]) -> String {
    let g = m.graph.as_mut().unwrap();
    let nodes = g.node.len();
    let pick = |r: &mut strata::testing::Rng, n: usize| r.below(n.max(1));
    match r.below(10) {
        0 if nodes > 0 => {
            let (i, op) = (pick(r, nodes), ops[pick(r, ops.len())].clone());
            g.node[i].op_type = op.clone();
            format!("node {i} becomes {op}")
        }
        1 if nodes > 0 => {
            let i = pick(r, nodes);
            let names: Vec<String> = g.node.iter().flat_map(|n| n.output.clone()).collect();
            if !g.node[i].input.is_empty() && r.below(2) == 0 {
                let k = pick(r, g.node[i].input.len());
                g.node[i].input.remove(k);
                format!("node {i} loses input {k}")
            } else if !names.is_empty() {
                let name = names[pick(r, names.len())].clone();
                g.node[i].input.push(name.clone());
                format!("node {i} also reads {name}")
            } else {
                "nothing".into()
            }
        }
        2 if nodes > 0 => {
            let i = pick(r, nodes);
            let n = &mut g.node[i];
            if n.attribute.is_empty() {
                return "nothing".into();
            }
            let a = pick(r, n.attribute.len());
            let a = &mut n.attribute[a];
            match r.below(4) {
                0 => a.i = edge(r),
                1 if !a.ints.is_empty() => {
                    let k = pick(r, a.ints.len());
                    a.ints[k] = edge(r);
                }
                1 => a.ints.push(edge(r)),
                2 => a.ints.clear(),
                _ => a.f = [0.0, -1.0, f32::NAN, f32::INFINITY, 1e30][r.below(5)],
            }
            format!("node {i} attribute {}", a.name)
        }
        3 | 4 => {
            let mut infos: Vec<&mut proto::ValueInfoProto> = g
                .input
                .iter_mut()
                .chain(g.output.iter_mut())
                .chain(g.value_info.iter_mut())
                .collect();
            if infos.is_empty() {
                return "nothing".into();
            }
            let k = pick(r, infos.len());
            let v = &mut infos[k];
            let Some(proto::TypeProto {
                value: Some(type_proto::Value::TensorType(t)),
                ..
            }) = &mut v.r#type
            else {
                return "nothing".into();
            };
            if r.below(5) == 0 {
                t.elem_type = [0, 1, 6, 7, 10, 11, 99][r.below(7)];
            } else if let Some(s) = &mut t.shape {
                let d = s.dim.len();
                match r.below(3) {
                    0 if d > 0 => s.dim[pick(r, d)].value = Some(Dim::DimValue(edge(r))),
                    1 if d > 0 => {
                        s.dim.pop();
                    }
                    _ => s.dim.push(proto::tensor_shape_proto::Dimension {
                        denotation: String::new(),
                        value: Some(Dim::DimValue(edge(r))),
                    }),
                }
            }
            format!("declared type of {}", v.name)
        }
        5 if !g.initializer.is_empty() => {
            let k = pick(r, g.initializer.len());
            let t = &mut g.initializer[k];
            match r.below(4) {
                0 if !t.dims.is_empty() => {
                    let d = pick(r, t.dims.len());
                    t.dims[d] = edge(r);
                }
                1 => t.dims.push(edge(r)),
                2 => t.data_type = [0, 1, 6, 7, 10, 11][r.below(6)],
                _ => {
                    let n = r.below(t.raw_data.len() + 1);
                    t.raw_data.truncate(n);
                }
            }
            format!("initializer {}", t.name)
        }
        6 if nodes > 0 => {
            let i = pick(r, nodes);
            if !g.node[i].output.is_empty() && r.below(2) == 0 {
                g.node[i].output.pop();
                format!("node {i} loses its last output")
            } else {
                g.node[i].output.push(format!("extra{}", r.below(100)));
                format!("node {i} gains an output")
            }
        }
        7 if nodes > 1 => {
            let (i, j) = (pick(r, nodes), pick(r, nodes));
            g.node.swap(i, j);
            format!("nodes {i} and {j} swap")
        }
        8 if nodes > 0 => {
            let i = pick(r, nodes);
            g.node.remove(i);
            format!("node {i} removed")
        }
        _ => {
            // Mostly within the opsets strata implements (7 to 28, both
            // forms of the opset-dependent ops), some outside (refused).
            let v = [1, 7, 10, 12, 13, 17, 21, 28, 100, -1][r.below(10)];
            if let Some(o) = m.opset_import.first_mut() {
                o.version = v;
            }
            format!("opset {v}")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A changed model loads, plans and lowers, or fails with an error
    /// that says something; it never panics.
    #[test]
    fn changed_models_compile_or_fail_cleanly(which in any::<usize>(), seeds in prop::collection::vec(any::<u64>(), 1..6)) {
        let (models, ops) = corpus();
        let (file, base) = &models[which % models.len()];
        let mut m = base.clone();
        let what: Vec<String> = seeds
            .iter()
            .map(|&s| mutate(&mut m, &mut strata::testing::Rng(s | 1), ops))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("network.onnx");
        std::fs::write(&f, m.encode_to_vec()).unwrap();
        let reg = strata::ops::Registry::standard();
        let target = strata::driver::Target::with_l2(1 << 21);
        let r = strata::driver::load_program(&f, None, &reg).and_then(|mut l| {
            strata::driver::plan_and_lower(l.program_mut(), &target).map(|_| ())
        });
        if let Err(e) = r {
            prop_assert!(!e.to_string().trim().is_empty(), "{} {what:?}: an empty error", file.display());
        }
    }
}
