//! Building blocks for tests: single-node graphs built in memory and a
//! runner that executes a graph through both engines (reference interpreter
//! and compiled C), so each op family can compare its C kernel against its
//! reference kernel on random problems.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::fixture::{self, Fixture, Kind, Tolerance};
use crate::ir::{Graph, Node, TensorKind};
use crate::ops::{Attr, Attribute, Attrs, OpInput, Registry};
use crate::program::Program;
use crate::tensor::{Tensor, TensorType};

pub fn attr_i(name: &str, v: i64) -> Attribute {
    Attribute::new(name, Attr::Int(v))
}
pub fn attr_f(name: &str, v: f32) -> Attribute {
    Attribute::new(name, Attr::Float(v))
}
pub fn attr_ints(name: &str, v: &[i64]) -> Attribute {
    Attribute::new(name, Attr::Ints(v.to_vec()))
}
pub fn attr_s(name: &str, v: &str) -> Attribute {
    Attribute::new(name, Attr::String(v.to_string()))
}

/// An input of a test graph: a runtime input of the given type, or a constant.
pub enum In {
    Data(TensorType),
    Const(Tensor),
    Absent,
}

/// A graph of one node `domain::op_type` with the given inputs and `n_outputs`
/// outputs (`None` in `outputs` leaves that output position unrequested).
pub fn single_node(
    domain: &str,
    op_type: &str,
    attrs: &[Attribute],
    inputs: Vec<In>,
    outputs: &[bool],
) -> Result<Graph, String> {
    let reg = Registry::standard();
    let parse = reg
        .get(domain, op_type)
        .ok_or_else(|| format!("no op {domain}::{op_type}"))?;
    let op = parse(&Attrs::new(attrs)).map_err(|e| e.0)?;
    let mut g = Graph::default();
    let mut ins = Vec::new();
    for (i, inp) in inputs.into_iter().enumerate() {
        ins.push(match inp {
            In::Data(ty) => {
                let id = g.add_tensor(format!("in{i}"), ty, TensorKind::Input);
                g.inputs.push(id);
                Some(id)
            }
            In::Const(v) => {
                let id = g.add_tensor(format!("c{i}"), v.ty(), TensorKind::Constant);
                g.constants.insert(id, v);
                Some(id)
            }
            In::Absent => None,
        });
    }
    let infer_in = g.op_inputs(&ins);
    let types = op.infer(&infer_in, outputs.len()).map_err(|e| e.0)?;
    let node_id = crate::ir::NodeId(0);
    let mut outs = Vec::new();
    for (k, &want) in outputs.iter().enumerate() {
        if !want {
            outs.push(None);
            continue;
        }
        let id = g.add_tensor(format!("out{k}"), types[k].clone(), TensorKind::Value);
        g.tensors[id.idx()].producer = Some(node_id);
        g.outputs.push(id);
        outs.push(Some(id));
    }
    g.nodes.push(Node {
        name: format!("{op_type}_0"),
        domain: domain.into(),
        op_type: op_type.into(),
        op: op.into(),
        inputs: ins,
        outputs: outs,
    });
    crate::verify::verify(&g).map_err(|e| e.to_string())?;
    Ok(g)
}

/// Run a graph once through the interpreter and through compiled C with
/// `inputs` (one per graph input, in order). Returns the outputs of both.
pub fn run_both(graph: Graph, inputs: Vec<Tensor>) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let f = one_step(graph, inputs)?;
    let interp = fixture::run_interp(&f)?;
    Ok((interp.tensors, run_fixture_c(&f)?))
}

/// Run a graph once through compiled C alone (for run-time faults the
/// interpreter reports before C would run).
pub fn run_c(graph: Graph, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    run_fixture_c(&one_step(graph, inputs)?)
}

/// A graph run once by the interpreter and, tiled into L1, by the simulator
/// and the compiled C.
pub struct TiledRun {
    pub interp: Vec<Tensor>,
    pub sim: Vec<Tensor>,
    pub c: Vec<Tensor>,
    /// How each node was tiled.
    pub tilings: Vec<crate::lir::NodeTiling>,
}

/// A graph tiled into L1 as a compile would tile it.
struct Tiled {
    f: Fixture,
    /// The interpreter's outputs on the graph as given.
    interp: Vec<Tensor>,
    plan: crate::plan::MemoryPlan,
    lir: crate::lir::Lir,
    target: crate::driver::Target,
    /// The simulator's outputs on the lowered program.
    sim: Vec<Tensor>,
}

/// The interpreter on the graph as given; then the program split where it
/// does not fit L1 (`split`, as a compile does), planned, lowered into `l1`
/// bytes of L1 (`driver::lower_program` runs the LIR checker) and run by
/// the simulator.
fn tiled(
    graph: Graph,
    inputs: Vec<Tensor>,
    l1: u64,
    buffering: crate::lir::Buffering,
) -> Result<Tiled> {
    let mut f = one_step(graph, inputs)?;
    let interp = fixture::run_interp(&f)?.tensors;
    crate::split::apply(&mut f.program, l1)?;
    let plan = crate::driver::plan_program(&f.program, u64::MAX / 4)?;
    let mut target = crate::driver::Target::with_l2(u64::MAX / 4);
    target.l1 = Some(l1);
    target.buffering = buffering;
    let lir = crate::driver::lower_program(&f.program, &plan, &target)?;
    let (sim, _) = crate::sim::run_fixture(&f, &plan, &lir, &target.platform)?;
    Ok(Tiled {
        f,
        interp,
        plan,
        lir,
        target,
        sim: sim.tensors,
    })
}

/// Run a graph once through the interpreter, and tiled into `l1` bytes of
/// L1 (`buffering`) through the simulator and the compiled C (`tiled`).
pub fn run_tiled(
    graph: Graph,
    inputs: Vec<Tensor>,
    l1: u64,
    buffering: crate::lir::Buffering,
) -> Result<TiledRun> {
    let t = tiled(graph, inputs, l1, buffering)?;
    let scratch = crate::outdir::Scratch::new("strata-test-")?;
    let r = crate::codegen::harness::run(&t.f, &t.plan, &t.lir, scratch.path(), t.target.c_target);
    let closed = scratch.close();
    let r = r?;
    closed?;
    Ok(TiledRun {
        interp: t.interp,
        sim: t.sim,
        c: r.0.tensors,
        tilings: t.lir.tilings,
    })
}

/// A graph run once by the interpreter and, tiled into L1, by the
/// simulator, with the program and its (checked) lowering.
pub struct SimRun {
    pub interp: Vec<Tensor>,
    pub sim: Vec<Tensor>,
    pub program: Program,
    pub lir: crate::lir::Lir,
}

/// [`run_tiled`] without the C.
pub fn run_tiled_sim(
    graph: Graph,
    inputs: Vec<Tensor>,
    l1: u64,
    buffering: crate::lir::Buffering,
) -> Result<SimRun> {
    let t = tiled(graph, inputs, l1, buffering)?;
    Ok(SimRun {
        interp: t.interp,
        sim: t.sim,
        program: t.f.program,
        lir: t.lir,
    })
}

fn run_fixture_c(f: &Fixture) -> Result<Vec<Tensor>> {
    let plan = crate::driver::plan_program(&f.program, u64::MAX / 4)?;
    let mut target = crate::driver::Target::with_l2(u64::MAX / 4);
    target.l1 = None;
    let lir = crate::driver::lower_program(&f.program, &plan, &target)?;
    let scratch = crate::outdir::Scratch::new("strata-test-")?;
    let r = crate::codegen::harness::run(f, &plan, &lir, scratch.path(), target.c_target);
    let closed = scratch.close();
    let r = r?;
    closed?;
    Ok(r.0.tensors)
}

/// A one-step kernel fixture of `graph` over `inputs`.
fn one_step(graph: Graph, inputs: Vec<Tensor>) -> Result<Fixture> {
    let program = Program::single(graph)?;
    let g = &program.graph;
    let ref_tensors = g
        .outputs
        .iter()
        .map(|&t| (g.name(t).to_string(), t, Tensor::zeros(g.ty(t))))
        .collect();
    let f = Fixture {
        dir: "test".into(),
        kind: Kind::Kernel,
        program,
        n_batches: 1,
        n_accum: 1,
        initial: BTreeMap::new(),
        batches: vec![inputs],
        ref_losses: None,
        ref_tensors,
        tolerance: Tolerance::KERNEL,
    };
    Ok(f)
}

/// A small deterministic generator (xorshift) for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn tensor(&mut self, shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::f32(shape.to_vec(), (0..n).map(|_| self.uniform()).collect())
    }
}

/// Builders for ONNX models in memory, for tests that need files.
pub mod onnx_build {
    use crate::onnx::proto::{
        attribute_proto::AttributeType,
        tensor_shape_proto::{dimension::Value as Dim, Dimension},
        type_proto::{Tensor as TT, Value as TV},
        AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
        TensorShapeProto, TypeProto, ValueInfoProto,
    };
    use prost::Message;

    /// A value info of element type `elem` (ONNX code: 1 float, 7 int64, 9 bool) and shape.
    pub fn value(name: &str, elem: i32, shape: &[i64]) -> ValueInfoProto {
        let dim = shape
            .iter()
            .map(|&d| Dimension {
                value: Some(Dim::DimValue(d)),
                denotation: String::new(),
            })
            .collect();
        ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                value: Some(TV::TensorType(TT {
                    elem_type: elem,
                    shape: Some(TensorShapeProto { dim }),
                })),
                denotation: String::new(),
            }),
            doc_string: String::new(),
        }
    }
    pub fn node(
        op: &str,
        domain: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<crate::ops::Attribute>,
    ) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: format!("{op}_{}", outputs.first().unwrap_or(&"")),
            op_type: op.into(),
            domain: domain.into(),
            attribute: attrs.iter().map(attribute).collect(),
            doc_string: String::new(),
        }
    }
    /// The ONNX form of an attribute (the kinds the tests use).
    pub fn attribute(a: &crate::ops::Attribute) -> AttributeProto {
        use crate::ops::Attr;
        let mut p = AttributeProto {
            name: a.name.clone(),
            ..Default::default()
        };
        let kind = match &a.value {
            Attr::Int(i) => {
                p.i = *i;
                AttributeType::Int
            }
            Attr::Float(f) => {
                p.f = *f;
                AttributeType::Float
            }
            Attr::String(s) => {
                p.s = s.as_bytes().to_vec();
                AttributeType::String
            }
            Attr::Ints(v) => {
                p.ints = v.clone();
                AttributeType::Ints
            }
            Attr::Floats(v) => {
                p.floats = v.clone();
                AttributeType::Floats
            }
            Attr::Strings(v) => {
                p.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect();
                AttributeType::Strings
            }
            Attr::Tensor(_) | Attr::Other => {
                panic!("attribute `{}`: no ONNX form in tests", a.name)
            }
        };
        p.r#type = kind as i32;
        p
    }
    pub fn f32_init(name: &str, shape: &[i64], v: &[f32]) -> TensorProto {
        TensorProto {
            name: name.into(),
            dims: shape.to_vec(),
            data_type: 1,
            float_data: v.to_vec(),
            ..Default::default()
        }
    }
    pub fn i64_init(name: &str, shape: &[i64], v: &[i64]) -> TensorProto {
        TensorProto {
            name: name.into(),
            dims: shape.to_vec(),
            data_type: 7,
            int64_data: v.to_vec(),
            ..Default::default()
        }
    }
    pub fn model(
        nodes: Vec<NodeProto>,
        inputs: Vec<ValueInfoProto>,
        outputs: Vec<ValueInfoProto>,
        inits: Vec<TensorProto>,
    ) -> Vec<u8> {
        model_with_opset(17, nodes, inputs, outputs, inits)
    }
    /// A model importing the default domain at `opset`.
    pub fn model_with_opset(
        opset: i64,
        nodes: Vec<NodeProto>,
        inputs: Vec<ValueInfoProto>,
        outputs: Vec<ValueInfoProto>,
        inits: Vec<TensorProto>,
    ) -> Vec<u8> {
        let m = ModelProto {
            ir_version: 8,
            opset_import: vec![
                OperatorSetIdProto {
                    domain: String::new(),
                    version: opset,
                },
                OperatorSetIdProto {
                    domain: "com.microsoft".into(),
                    version: 1,
                },
            ],
            graph: Some(GraphProto {
                node: nodes,
                name: "test".into(),
                initializer: inits,
                input: inputs,
                output: outputs,
                ..Default::default()
            }),
            ..Default::default()
        };
        m.encode_to_vec()
    }
}

/// Every ONNX Runtime artifact example under `examples/ort` (from
/// `examples/gen_ort.py`): the SGD ones (`mlp`, `cnn`, `vit`), `mlp_adamw`
/// (AdamW, both moments and the step count as optimizer state), mlp under
/// ORT's MSE, L1 and BCE-with-logits losses, `mlp_acts` (Tanh, Sigmoid,
/// LeakyRelu and their ORT gradients) and `cnn_deep` (eleven
/// Conv-BatchNorm-Relu layers at batch 1).
pub const ORT_EXAMPLES: [&str; 9] = [
    "mlp",
    "cnn",
    "vit",
    "mlp_adamw",
    "mlp_mse",
    "mlp_l1",
    "mlp_bce",
    "mlp_acts",
    "cnn_deep",
];

/// For the benchmark binaries, which take no arguments: `--help` / `-h`
/// prints `about` and exits 0; any other argument is an error (exit 2),
/// so that a mistyped option does not start a full run nobody asked for.
pub fn bench_takes_no_arguments(about: &str) {
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("--help" | "-h") => {
            println!("{about}");
            std::process::exit(0)
        }
        Some(a) => {
            eprintln!("error: unexpected argument `{a}`: this benchmark takes none (see --help)");
            std::process::exit(2)
        }
    }
}

/// The shared fixtures directory (`STRATA_SHARED`, else `../shared` beside
/// the checkout), or `None` after printing that the caller is skipped.
pub fn shared_dir() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("STRATA_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
        });
    if p.join("fixtures").is_dir() {
        Some(p)
    } else {
        eprintln!("skipped: ../shared not found (set STRATA_SHARED)");
        None
    }
}

/// Evaluate one op's reference kernel on constant inputs; `want[i]` says
/// whether output `i` is requested.
pub fn eval_node(
    domain: &str,
    op: &str,
    attrs: &[Attribute],
    inputs: Vec<Option<Tensor>>,
    want: &[bool],
) -> Result<Vec<Tensor>, String> {
    let reg = Registry::standard();
    let parse = reg
        .get(domain, op)
        .ok_or_else(|| format!("no op {domain}::{op}"))?;
    let o = parse(&Attrs::new(attrs)).map_err(|e| e.0)?;
    let tys: Vec<Option<TensorType>> = inputs.iter().map(|t| t.as_ref().map(|t| t.ty())).collect();
    let ins: Vec<_> = inputs
        .iter()
        .zip(&tys)
        .map(|(t, ty)| {
            t.as_ref().map(|t| OpInput {
                ty: ty.as_ref().unwrap(),
                value: Some(t),
            })
        })
        .collect();
    let types = o.infer(&ins, want.len()).map_err(|e| e.0)?;
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_ref()).collect();
    let outs: Vec<Option<&TensorType>> = types
        .iter()
        .zip(want)
        .map(|(t, &w)| w.then_some(t))
        .collect();
    o.eval(&refs, &outs).map_err(|e| e.0)
}

/// The peer's published L2 footprint (arena plus constants) of the Deeploy
/// training programs, and its own peak live bytes where it gives one
/// (issue 13): what strata's schedule is measured against.
pub const PEER_TRAINING_L2: &[(&str, u64, Option<u64>)] = &[
    ("SimpleMLP", 7_476, None),
    ("Autoencoder", 269_320, Some(269_320)),
    ("DSCNN", 67_348, None),
    ("ResNet8", 1_591_128, Some(1_507_288)),
];

/// Simulator and compiled C run the same kernels on the same tiles: they
/// agree to this (absolute, losses and trained tensors).
pub const SIM_AGREES_WITH_C: f32 = 1e-6;
/// Against a fixture's external reference (ONNX Runtime or numpy float64),
/// tiled or not, at any level.
pub const REFERENCE: f32 = 1e-4;

/// One cell of a training program's matrix: the simulator (and, with
/// `with_c`, the compiled C) for `target`, each within [`REFERENCE`] of the
/// fixture's reference and within [`SIM_AGREES_WITH_C`] of each other; the
/// L1 arena within its budget. Returns the simulator's report.
pub fn check_cell(
    dir: &std::path::Path,
    target: &crate::driver::Target,
    with_c: bool,
) -> crate::driver::CheckReport {
    let c: &[crate::driver::CTarget] = if with_c {
        &[crate::driver::CTarget::Host]
    } else {
        &[]
    };
    check_cell_on(dir, target, c)
}

/// [`check_cell`] with the C of each of `c_targets` (host, PULP on the
/// checked host PMSIS), each held to the same figures.
pub fn check_cell_on(
    dir: &std::path::Path,
    target: &crate::driver::Target,
    c_targets: &[crate::driver::CTarget],
) -> crate::driver::CheckReport {
    use crate::driver::{check_for, Engine};
    let reg = Registry::standard();
    let what = format!(
        "{} at L1 {:?} {:?}, L2 {}, default level {}",
        dir.display(),
        target.l1,
        target.buffering,
        target.l2,
        target.default_level
    );
    let s =
        check_for(dir, Engine::Sim, target, None, &reg).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(s.ok, "{what} sim: failures {:?}", s.failures);
    assert!(s.max_abs_loss_error.unwrap_or(0.0) <= REFERENCE);
    assert!(s.max_abs_weight_error.unwrap_or(0.0) <= REFERENCE);
    if let Some(l1) = target.l1 {
        let a = s.arena_bytes.get("L1").copied().unwrap_or(0);
        assert!(a <= l1, "{what}: L1 arena {a} over the budget");
    }
    let cycles = s.cycles.as_ref().expect("the simulator counts cycles");
    assert!(cycles.total > 0 && cycles.total == cycles.train + cycles.optimizer);
    // No run beats its bounds: each node takes at least its own compute and
    // its own transfers, and nodes run one after another.
    let b = s.bounds.as_ref().expect("the simulator reports bounds");
    assert!(
        b.sequential >= b.compute.max(b.transfer) && cycles.total + 2 >= b.sequential,
        "{what}: cycles {} against bounds {b:?}",
        cycles.total
    );
    for &ct in c_targets {
        let mut target = target.clone();
        target.c_target = ct;
        let what = format!("{what}, C target {ct:?}");
        let c = check_for(dir, Engine::C, &target, None, &reg)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(c.ok, "{what} C: failures {:?}", c.failures);
        assert_eq!(
            c.arena_bytes, s.arena_bytes,
            "{what}: C and sim plans differ"
        );
        let (rs, rc) = (s.results.as_ref().unwrap(), c.results.unwrap());
        assert_eq!(rs.losses.len(), rc.losses.len());
        let d = crate::tensor::max_abs_diff(&rs.losses, &rc.losses);
        assert!(
            d <= SIM_AGREES_WITH_C,
            "{what}: sim and C losses differ by {d}"
        );
        assert_eq!(rs.tensors.len(), rc.tensors.len());
        for (a, b) in rs.tensors.iter().zip(&rc.tensors) {
            if let (crate::tensor::Data::F32(x), crate::tensor::Data::F32(y)) = (&a.data, &b.data) {
                let d = crate::tensor::max_abs_diff(x, y);
                assert!(
                    d <= SIM_AGREES_WITH_C,
                    "{what}: sim and C tensors differ by {d}"
                );
            }
        }
    }
    s
}
