//! The Graph IR: typed, shaped tensors and nodes held in arenas and named by
//! `u32` index newtypes (no pointers), so passes can copy ids freely and
//! output order is deterministic.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::ops::Op;
use crate::tensor::{Tensor, TensorType};

/// Index of a tensor in [`Graph::tensors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct TensorId(pub u32);

/// Index of a node in [`Graph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl TensorId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}
impl NodeId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// What a tensor is, from the program's point of view.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorKind {
    /// A graph input: data, weight, accumulator or flag; see `program`.
    Input,
    /// A compile-time constant (initializer or `Constant` node); value in `Graph::constants`.
    Constant,
    /// Produced by a node.
    Value,
}

#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    pub ty: TensorType,
    pub kind: TensorKind,
    pub producer: Option<NodeId>,
}

#[derive(Clone)]
pub struct Node {
    /// The node's name in the ONNX file, or a generated `<op_type>_<index>`.
    pub name: String,
    pub domain: String,
    pub op_type: String,
    /// Shared, not owned: an op is immutable once parsed, and a program
    /// copied to be prepared again (`driver::plan_and_lower`) shares its ops.
    pub op: Arc<dyn Op>,
    /// Inputs by position; `None` where an optional input is omitted.
    pub inputs: Vec<Option<TensorId>>,
    /// Outputs by position; `None` where an optional output is not requested.
    pub outputs: Vec<Option<TensorId>>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}::{})", self.name, self.domain, self.op_type)
    }
}

/// A graph in topological order.
#[derive(Clone, Default, Debug)]
pub struct Graph {
    pub tensors: Vec<TensorInfo>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
    pub constants: BTreeMap<TensorId, Tensor>,
    pub by_name: BTreeMap<String, TensorId>,
}

impl Graph {
    pub fn tensor(&self, t: TensorId) -> &TensorInfo {
        &self.tensors[t.idx()]
    }
    pub fn node(&self, n: NodeId) -> &Node {
        &self.nodes[n.idx()]
    }
    pub fn ty(&self, t: TensorId) -> &TensorType {
        &self.tensors[t.idx()].ty
    }
    /// What an op sees of the tensors `ids` (a node's inputs): each one's
    /// type, and its value when it is a compile-time constant.
    pub fn op_inputs(&self, ids: &[Option<TensorId>]) -> Vec<Option<crate::ops::OpInput<'_>>> {
        ids.iter()
            .map(|o| {
                o.map(|t| crate::ops::OpInput {
                    ty: self.ty(t),
                    value: self.constants.get(&t),
                })
            })
            .collect()
    }
    pub fn name(&self, t: TensorId) -> &str {
        &self.tensors[t.idx()].name
    }
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.by_name.get(name).copied()
    }
    pub fn add_tensor(&mut self, name: String, ty: TensorType, kind: TensorKind) -> TensorId {
        let id = TensorId(self.tensors.len() as u32);
        self.by_name.insert(name.clone(), id);
        self.tensors.push(TensorInfo {
            name,
            ty,
            kind,
            producer: None,
        });
        id
    }
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.nodes.len() as u32).map(NodeId)
    }
    /// The tensor whose storage `t` shares through aliases (views and
    /// in-place updates, followed back to their input): for a view of a
    /// constant, the constant whose bytes it is. `t` itself when it is no alias.
    pub fn alias_root(&self, t: TensorId) -> TensorId {
        let mut cur = t;
        while let Some(pr) = self.tensor(cur).producer {
            let n = self.node(pr);
            let k = n.outputs.iter().position(|o| *o == Some(cur)).unwrap();
            match n.op.aliases().iter().find(|a| a.output == k) {
                Some(a) => cur = n.inputs[a.input].expect("aliased input present"),
                None => break,
            }
        }
        cur
    }
    /// For each tensor, the nodes that read it, in schedule order.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut c = vec![Vec::new(); self.tensors.len()];
        for id in self.node_ids() {
            for t in self.nodes[id.idx()].inputs.iter().flatten() {
                if c[t.idx()].last() != Some(&id) {
                    c[t.idx()].push(id);
                }
            }
        }
        c
    }
}
