//! The training program: the training step and the optimizer as one graph,
//! one schedule and (later) one memory plan. The optimizer's nodes are
//! appended after the training step's and read the very weight and
//! accumulator tensors the step uses; their in-place outputs are those
//! tensors. Nothing is copied between the two and nothing is patched later.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::ir::{Graph, TensorId, TensorKind};
use crate::onnx::{self, Inputs};
use crate::ops::{AliasKind, Registry};
use crate::tensor::Tensor;

/// The Onnx4Deeploy suffix of a gradient accumulator input.
pub const ACC_SUFFIX: &str = "_grad.accumulation.buffer";
/// The flag input that makes the first mini-batch of a group overwrite the accumulators.
pub const RESET_FLAG: &str = "lazy_reset_grad";
/// ONNX Runtime's sequence optimizers (`com.microsoft`), from `generate_artifacts`.
pub const ORT_SGD: &str = "SGDOptimizerV2";
pub const ORT_ADAMW: &str = "AdamWOptimizer";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Fed from outside before every training step (mini-batch data, labels).
    Data,
    /// The accumulator reset flag, set by the step loop.
    Flag,
    /// A trainable parameter: persistent, updated by the optimizer.
    Weight,
    /// A gradient accumulator: persistent, updated in place by the step.
    Accumulator,
    /// A constant that an op updates in place (BatchNorm running statistics): persistent.
    State,
    /// A run-time hyper-parameter the host sets before training (the
    /// learning rate input of ONNX Runtime's optimizer): persistent.
    Hyper,
    /// A read-only constant.
    Constant,
    /// Produced by a node.
    Value,
}

impl Role {
    /// Lives across steps, in the arena, from the program's start to its end.
    pub fn persistent(self) -> bool {
        matches!(
            self,
            Role::Weight | Role::Accumulator | Role::State | Role::Hyper
        )
    }
}

#[derive(Clone)]
pub struct Program {
    pub graph: Graph,
    /// `graph.nodes[..train_end]` is the training step; the rest is the optimizer.
    pub train_end: usize,
    pub roles: Vec<Role>,
    /// Data inputs in graph order.
    pub data: Vec<TensorId>,
    pub flag: Option<TensorId>,
    pub weights: Vec<TensorId>,
    pub accumulators: Vec<TensorId>,
    /// Promoted constants (running statistics) with their initial values.
    pub state_init: BTreeMap<TensorId, Tensor>,
    /// The learning-rate input of a lowered ONNX Runtime optimizer (role `Hyper`).
    pub learning_rate: Option<TensorId>,
    /// The training loss (first output of the training graph), if any.
    pub loss: Option<TensorId>,
    /// Outputs read after the step (the loss; every output for a single graph).
    pub outputs: Vec<TensorId>,
    /// Node outputs written over an input that dies at the node (see
    /// `schedule`): plan aliases on top of the ops' own.
    pub reuse: Vec<crate::schedule::Reuse>,
    /// The schedule the node order is, once `schedule::apply` chose it.
    pub schedule: Option<crate::schedule::Report>,
}

impl Program {
    pub fn role(&self, t: TensorId) -> Role {
        self.roles[t.idx()]
    }
    pub fn nodes_total(&self) -> usize {
        self.graph.nodes.len()
    }
    pub fn has_optimizer(&self) -> bool {
        self.train_end < self.graph.nodes.len()
    }

    /// A training program from a training graph and an optional optimizer graph.
    pub fn training(train: &Path, optimizer: Option<&Path>, reg: &Registry) -> Result<Program> {
        let model = onnx::load(train)?;
        let mut g = Graph::default();
        let train_outputs = onnx::import_into(&mut g, &model, reg, Inputs::Create)?;
        let train_end = g.nodes.len();
        let mut learning_rate = None;
        if let Some(opt) = optimizer {
            let m = onnx::load(opt)?;
            if is_ort_optimizer(&m) {
                learning_rate = Some(lower_ort_optimizer(&mut g, &m, opt)?);
            } else {
                onnx::import_into(&mut g, &m, reg, Inputs::BindByName)?;
            }
        }
        crate::verify::verify(&g)?;
        g.outputs = train_outputs;
        let gerr = |msg: String| Error::Graph {
            graph: train.display().to_string(),
            msg,
        };

        let mut roles: Vec<Role> = g
            .tensors
            .iter()
            .map(|t| {
                if t.kind == TensorKind::Constant {
                    Role::Constant
                } else {
                    Role::Value
                }
            })
            .collect();
        let (mut data, mut weights, mut accumulators, mut flag) = (vec![], vec![], vec![], None);
        for &i in &g.inputs {
            let name = g.name(i);
            if name == RESET_FLAG {
                flag = Some(i);
                roles[i.idx()] = Role::Flag;
            } else if let Some(param) = name.strip_suffix(ACC_SUFFIX) {
                let w = g
                    .find(param)
                    .filter(|w| g.tensor(*w).kind == TensorKind::Input)
                    .ok_or_else(|| {
                        gerr(format!(
                            "accumulator `{name}` has no parameter input `{param}`"
                        ))
                    })?;
                if g.ty(w) != g.ty(i) {
                    return Err(gerr(format!(
                        "accumulator `{name}` is {} but parameter `{param}` is {}",
                        g.ty(i),
                        g.ty(w)
                    )));
                }
                accumulators.push(i);
                weights.push(w);
                roles[i.idx()] = Role::Accumulator;
                roles[w.idx()] = Role::Weight;
            }
        }
        if let Some(lr) = learning_rate {
            roles[lr.idx()] = Role::Hyper;
        }
        for &i in &g.inputs {
            if roles[i.idx()] == Role::Value {
                roles[i.idx()] = Role::Data;
                data.push(i);
            }
        }
        // Order weights like the graph inputs, not like their accumulators.
        weights.sort_by_key(|w| g.inputs.iter().position(|i| i == w));
        let loss = train_outputs_loss(&g);
        let outputs = loss.into_iter().collect();
        let mut p = Program {
            graph: g,
            train_end,
            roles,
            data,
            flag,
            weights,
            accumulators,
            state_init: BTreeMap::new(),
            learning_rate,
            loss,
            outputs,
            reuse: Vec::new(),
            schedule: None,
        };
        p.resolve_in_place()?;
        Ok(p)
    }

    /// A single graph run once: every input is data, every output is read.
    pub fn single(graph: Graph) -> Result<Program> {
        let mut roles: Vec<Role> = graph
            .tensors
            .iter()
            .map(|t| {
                if t.kind == TensorKind::Constant {
                    Role::Constant
                } else {
                    Role::Value
                }
            })
            .collect();
        for &i in &graph.inputs {
            roles[i.idx()] = Role::Data;
        }
        let train_end = graph.nodes.len();
        let outputs = graph.outputs.clone();
        let data = graph.inputs.clone();
        let mut p = Program {
            graph,
            train_end,
            roles,
            data,
            flag: None,
            weights: vec![],
            accumulators: vec![],
            state_init: BTreeMap::new(),
            learning_rate: None,
            loss: None,
            outputs,
            reuse: Vec::new(),
            schedule: None,
        };
        p.resolve_in_place()?;
        Ok(p)
    }

    /// Promote constants that ops update in place to persistent state, and
    /// reject in-place updates that would clobber a value still to be read.
    fn resolve_in_place(&mut self) -> Result<()> {
        let g = &self.graph;
        let consumers = g.consumers();
        for id in g.node_ids() {
            let n = g.node(id);
            for a in n.op.aliases() {
                if a.kind != AliasKind::InPlace {
                    continue;
                }
                let (Some(Some(t)), Some(Some(_))) =
                    (n.inputs.get(a.input), n.outputs.get(a.output))
                else {
                    continue;
                };
                let t = *t;
                if self.roles[t.idx()] == Role::Constant {
                    self.roles[t.idx()] = Role::State;
                    self.state_init.insert(t, g.constants[&t].clone());
                }
                // Persistent state is updated in place by design: later readers
                // (the optimizer reading an accumulator) want the new value.
                if self.roles[t.idx()].persistent() {
                    continue;
                }
                if let Some(later) = consumers[t.idx()].iter().find(|c| **c > id) {
                    return Err(Error::Node {
                        node: n.name.clone(),
                        op_type: n.op_type.clone(),
                        msg: format!(
                            "updates `{}` in place, but node `{}` reads its old value afterwards",
                            g.name(t),
                            g.node(*later).name
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Make a data input persistent state whose initial value the host
    /// provides once (a frozen parameter of an ONNX Runtime training model,
    /// e.g. BatchNorm running statistics that the step updates in place).
    pub fn make_state(&mut self, t: TensorId) {
        if self.roles[t.idx()] == Role::Data {
            self.roles[t.idx()] = Role::State;
            self.data.retain(|d| *d != t);
        }
    }

    /// The running statistics: persistent state a batch normalization node
    /// (`BatchNormalization`, ONNX Runtime's `BatchNormInternal`) updates in
    /// place (its running mean and variance), in id order. With the weights,
    /// what a training reference must hold.
    pub fn running_statistics(&self) -> Vec<TensorId> {
        let g = &self.graph;
        let mut out = Vec::new();
        for n in &g.nodes {
            if !n.op_type.starts_with("BatchNorm") {
                continue;
            }
            for a in n.op.aliases() {
                if a.kind != AliasKind::InPlace {
                    continue;
                }
                if let Some(Some(t)) = n.inputs.get(a.input) {
                    if self.role(*t) == Role::State && !out.contains(t) {
                        out.push(*t);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Every persistent tensor: weights, accumulators, promoted state, in id order.
    pub fn persistent(&self) -> Vec<TensorId> {
        (0..self.roles.len() as u32)
            .map(TensorId)
            .filter(|t| self.role(*t).persistent())
            .collect()
    }
}

/// The loss: the training graph's first output when it is a float scalar.
fn train_outputs_loss(g: &Graph) -> Option<TensorId> {
    g.outputs
        .first()
        .copied()
        .filter(|&o| g.ty(o).numel() == 1 && g.ty(o).dtype == crate::tensor::DType::F32)
}

/// An optimizer graph in ONNX Runtime's form: a `com.microsoft` sequence
/// optimizer node, or sequence-typed graph inputs.
pub fn is_ort_optimizer(m: &onnx::Model) -> bool {
    use onnx::proto::type_proto::Value as TV;
    let gp = m.proto.graph.as_ref().expect("checked in decode");
    gp.node.iter().any(|n| {
        crate::ops::canonical_domain(&n.domain) == crate::ops::MS
            && (n.op_type == ORT_SGD || n.op_type == ORT_ADAMW)
    }) || gp.input.iter().any(|i| {
        matches!(
            i.r#type.as_ref().and_then(|t| t.value.as_ref()),
            Some(TV::SequenceType(_))
        )
    })
}

enum LowerErr {
    Graph(String),
    Node(String),
}

/// A constant of zeros named `name`, which an in-place op then turns into
/// persistent state (initial value zero).
fn zeros_state(
    g: &mut Graph,
    name: &str,
    ty: crate::tensor::TensorType,
) -> Result<TensorId, LowerErr> {
    if g.find(name).is_some() {
        return Err(LowerErr::Graph(format!("`{name}` is already defined")));
    }
    let id = g.add_tensor(name.to_string(), ty.clone(), TensorKind::Constant);
    g.constants.insert(id, Tensor::zeros(&ty));
    Ok(id)
}

/// Append a node of strata's own domain producing fresh values `outs`.
fn push_node(
    g: &mut Graph,
    name: String,
    op_type: &str,
    op: Box<dyn crate::ops::Op>,
    inputs: Vec<TensorId>,
    outs: &[(String, crate::tensor::TensorType)],
) -> Result<Vec<TensorId>, LowerErr> {
    let node_id = crate::ir::NodeId(g.nodes.len() as u32);
    let mut ids = Vec::new();
    for (o, ty) in outs {
        if g.find(o).is_some() {
            return Err(LowerErr::Graph(format!("`{o}` is already defined")));
        }
        let id = g.add_tensor(o.clone(), ty.clone(), TensorKind::Value);
        g.tensors[id.idx()].producer = Some(node_id);
        ids.push(id);
    }
    g.nodes.push(crate::ir::Node {
        name,
        domain: crate::ops::STRATA.to_string(),
        op_type: op_type.to_string(),
        op: op.into(),
        inputs: inputs.into_iter().map(Some).collect(),
        outputs: ids.iter().map(|&i| Some(i)).collect(),
    });
    Ok(ids)
}

/// The AdamW half of [`lower_ort_optimizer`]: ONNX Runtime feeds
/// `AdamWOptimizer` its step count plus one and keeps both moments per
/// parameter as optimizer state, zero at the start. strata makes all three
/// persistent state of the program: a step counter (int64, 0) that one
/// `StepCount` node increments in place before the updates, and per
/// parameter two zero moments that its `AdamW` node updates in place with
/// the parameter.
fn lower_adamw(
    g: &mut Graph,
    op: &crate::ops::train::AdamW,
    nname: &str,
    pairs: Vec<(TensorId, TensorId)>,
    lr: TensorId,
    step_name: Option<&String>,
    step_vi: Option<&onnx::proto::ValueInfoProto>,
) -> Result<(), LowerErr> {
    let step_name = step_name.ok_or_else(|| LowerErr::Node("has no `step` input".into()))?;
    let vi = step_vi.ok_or_else(|| {
        LowerErr::Node(format!(
            "step `{step_name}` is not a graph input of the optimizer"
        ))
    })?;
    let sty = onnx::value_type(vi).map_err(LowerErr::Node)?;
    if sty.dtype != crate::tensor::DType::I64 || sty.numel() != 1 {
        return Err(LowerErr::Node(format!(
            "step `{step_name}` is {sty}, expected one int64 element"
        )));
    }
    let step = zeros_state(g, step_name, sty.clone())?;
    let step_next = push_node(
        g,
        format!("{nname}/step"),
        "StepCount",
        Box::new(crate::ops::train::StepCount),
        vec![step],
        &[(format!("{step_name}.next"), sty)],
    )?[0];
    for (w, acc) in pairs {
        let param = g.name(w).to_string();
        let ty = g.ty(w).clone();
        let m1 = zeros_state(g, &format!("{param}.adamw.m1"), ty.clone())?;
        let m2 = zeros_state(g, &format!("{param}.adamw.m2"), ty.clone())?;
        push_node(
            g,
            format!("{nname}/{param}"),
            "AdamW",
            Box::new(op.clone()),
            vec![w, acc, m1, m2, lr, step_next],
            &[
                (format!("{param}.adamw_updated"), ty.clone()),
                (format!("{param}.adamw.m1_updated"), ty.clone()),
                (format!("{param}.adamw.m2_updated"), ty),
            ],
        )?;
    }
    Ok(())
}

/// Lower ONNX Runtime's `SGDOptimizerV2(learning_rate, params: seq<tensor>,
/// gradients: seq<tensor>)` into one in-place SGD update per trainable
/// parameter of the training graph already in `g`, and
/// `AdamWOptimizer(learning_rate, step, params, gradients, m1, m2)` into
/// one in-place AdamW per parameter (see [`lower_adamw`]).
///
/// The sequences carry no names: ORT's `Optimizer` fills `params[i]` and
/// `gradients[i]` from the same checkpoint parameter (its own map order), so
/// the pairing is by name: parameter `p` with its accumulator
/// `p_grad.accumulation.buffer`, never by position. The learning rate stays a
/// run-time input (role `Hyper`); it is added to `g.inputs` and returned.
/// `update_completed` (ORT bumps its step counter with it) is dropped: the
/// lowered updates always complete.
fn lower_ort_optimizer(g: &mut Graph, m: &onnx::Model, path: &Path) -> Result<TensorId> {
    use crate::ir::{Node, NodeId};
    use onnx::proto::type_proto::Value as TV;
    let gp = m.proto.graph.as_ref().expect("checked in decode");
    let gerr = |msg: String| Error::Graph {
        graph: path.display().to_string(),
        msg,
    };
    let input = |name: &str| gp.input.iter().find(|i| i.name == name);
    let ms = crate::ops::MS;
    let opt_nodes: Vec<_> = gp
        .node
        .iter()
        .filter(|n| crate::ops::canonical_domain(&n.domain) == ms)
        .filter(|n| n.op_type == ORT_SGD || n.op_type == ORT_ADAMW)
        .collect();
    let [n] = opt_nodes.as_slice() else {
        return Err(gerr(format!(
            "an ONNX Runtime optimizer graph must hold exactly one {ORT_SGD} or {ORT_ADAMW} node, found {} optimizer nodes",
            opt_nodes.len()
        )));
    };
    let nname = if n.name.is_empty() {
        n.op_type.clone()
    } else {
        n.name.clone()
    };
    let nerr = |msg: String| Error::Node {
        node: nname.clone(),
        op_type: n.op_type.clone(),
        msg,
    };
    if let Some(other) = gp.node.iter().find(|o| !std::ptr::eq(*o, *n)) {
        return Err(gerr(format!(
            "node `{}` ({}) beside the optimizer: strata lowers a lone {ORT_SGD} or {ORT_ADAMW}",
            other.name, other.op_type
        )));
    }
    let adamw = n.op_type == ORT_ADAMW;
    // Input positions: SGDOptimizerV2(lr, params, gradients, update_signal?);
    // AdamWOptimizer(lr, step, params, gradients, m1, m2, update_signal?).
    let seqs: &[(usize, &str)] = if adamw {
        &[
            (2, "params"),
            (3, "gradients"),
            (4, "first_order_moments"),
            (5, "second_order_moments"),
        ]
    } else {
        &[(1, "params"), (2, "gradients")]
    };
    let arg = |k: usize| n.input.get(k).filter(|s| !s.is_empty());
    if arg(if adamw { 6 } else { 3 }).is_some() {
        return Err(nerr(
            "update_signal is not supported: the lowered updates always run".into(),
        ));
    }
    // learning_rate: a one-element float tensor input.
    let lr_name = arg(0).ok_or_else(|| nerr("has no learning-rate input".into()))?;
    let lr_vi = input(lr_name).ok_or_else(|| {
        nerr(format!(
            "learning rate `{lr_name}` is not a graph input of the optimizer"
        ))
    })?;
    let lr_ty = onnx::value_type(lr_vi).map_err(&nerr)?;
    if lr_ty.dtype != crate::tensor::DType::F32 || lr_ty.numel() != 1 {
        return Err(nerr(format!(
            "learning rate `{lr_name}` is {lr_ty}, expected one float32 element"
        )));
    }
    // params / gradients (/ moments): float tensor sequences.
    for &(k, what) in seqs {
        let name = arg(k).ok_or_else(|| nerr(format!("has no `{what}` input")))?;
        let vi = input(name).ok_or_else(|| {
            nerr(format!(
                "`{name}` ({what}) is not a graph input of the optimizer"
            ))
        })?;
        let elem = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TV::SequenceType(s)) => match s.elem_type.as_ref().and_then(|e| e.value.as_ref()) {
                Some(TV::TensorType(t)) => Some(t.elem_type),
                _ => None,
            },
            _ => {
                return Err(nerr(format!(
                    "`{name}` ({what}) must be a sequence of float tensors, one per trainable parameter"
                )))
            }
        };
        if elem.and_then(crate::tensor::DType::from_onnx) != Some(crate::tensor::DType::F32) {
            return Err(nerr(format!(
                "`{name}` ({what}) is not a sequence of float32 tensors"
            )));
        }
    }
    // The trainable parameters: the training graph's accumulated ones.
    let mut pairs = Vec::new();
    for &acc in &g.inputs {
        let name = g.name(acc);
        if let Some(param) = name.strip_suffix(ACC_SUFFIX) {
            let w = g
                .find(param)
                .filter(|w| g.tensor(*w).kind == TensorKind::Input)
                .ok_or_else(|| {
                    gerr(format!(
                        "accumulator `{name}` has no parameter input `{param}` in the training graph"
                    ))
                })?;
            if g.ty(w) != g.ty(acc) {
                return Err(gerr(format!(
                    "accumulator `{name}` is {} but parameter `{param}` is {}",
                    g.ty(acc),
                    g.ty(w)
                )));
            }
            pairs.push((w, acc));
        }
    }
    if pairs.is_empty() {
        return Err(nerr(format!(
            "updates the `params` sequence, but the training graph has no trainable parameter (no `<p>{ACC_SUFFIX}` input) to pair it with"
        )));
    }
    pairs.sort_by_key(|(w, _)| g.inputs.iter().position(|i| i == w));
    if g.find(lr_name).is_some() {
        return Err(nerr(format!(
            "learning rate `{lr_name}` collides with a tensor of the training graph"
        )));
    }
    let lr = g.add_tensor(lr_name.clone(), lr_ty, TensorKind::Input);
    g.inputs.push(lr);
    if adamw {
        let op = crate::ops::train::AdamW::from_attrs(&crate::ops::Attrs::new(
            &onnx::attributes(&n.attribute).map_err(&nerr)?,
        ))
        .map_err(|e| nerr(e.0))?;
        let step_vi = arg(1).and_then(|s| input(s));
        lower_adamw(g, &op, &nname, pairs, lr, arg(1), step_vi).map_err(|e| match e {
            LowerErr::Graph(m) => gerr(m),
            LowerErr::Node(m) => nerr(m),
        })?;
        return Ok(lr);
    }
    for (w, acc) in pairs {
        let param = g.name(w).to_string();
        let out_name = format!("{param}.sgd_updated");
        if g.find(&out_name).is_some() {
            return Err(gerr(format!("`{out_name}` is already defined")));
        }
        let ty = g.ty(w).clone();
        let node_id = NodeId(g.nodes.len() as u32);
        let out = g.add_tensor(out_name, ty, TensorKind::Value);
        g.tensors[out.idx()].producer = Some(node_id);
        g.nodes.push(Node {
            name: format!("{nname}/{param}"),
            domain: ms.to_string(),
            op_type: ORT_SGD.to_string(),
            op: std::sync::Arc::new(crate::ops::train::Sgd { lr: None }),
            inputs: vec![Some(w), Some(acc), Some(lr)],
            outputs: vec![Some(out)],
        });
    }
    Ok(lr)
}
