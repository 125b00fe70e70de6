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
    /// A read-only constant.
    Constant,
    /// Produced by a node.
    Value,
}

impl Role {
    /// Lives across steps, in the arena, from the program's start to its end.
    pub fn persistent(self) -> bool {
        matches!(self, Role::Weight | Role::Accumulator | Role::State)
    }
}

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
    /// The training loss (first output of the training graph), if any.
    pub loss: Option<TensorId>,
    /// Outputs read after the step (the loss; every output for a single graph).
    pub outputs: Vec<TensorId>,
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
        if let Some(opt) = optimizer {
            let m = onnx::load(opt)?;
            onnx::import_into(&mut g, &m, reg, Inputs::BindByName)?;
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
            loss,
            outputs,
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
            loss: None,
            outputs,
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
