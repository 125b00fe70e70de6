//! The reference interpreter: runs a [`Program`] on the Graph IR with each
//! op's reference kernel. It is the golden model the compiled C is held to.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{NodeId, TensorId};
use crate::ops::AliasKind;
use crate::program::Program;
use crate::tensor::{Tensor, TensorType};

/// Tensor values by id.
pub type Env = BTreeMap<TensorId, Tensor>;

/// Run nodes `range` of the program's schedule on `env`.
pub fn run_nodes(p: &Program, env: &mut Env, range: std::ops::Range<usize>) -> Result<()> {
    run_nodes_in(p, env, range, false)
}

/// Run nodes `range` with every float32 tensor held in f64: the oracle.
/// The caller puts wide values of the inputs and constants in `env`; a
/// float32 output a kernel makes from non-float inputs is widened too, so
/// every kernel sees wide inputs and computes in f64.
pub fn run_nodes_wide(p: &Program, env: &mut Env, range: std::ops::Range<usize>) -> Result<()> {
    run_nodes_in(p, env, range, true)
}

fn run_nodes_in(
    p: &Program,
    env: &mut Env,
    range: std::ops::Range<usize>,
    wide: bool,
) -> Result<()> {
    let g = &p.graph;
    for i in range {
        let id = NodeId(i as u32);
        let n = g.node(id);
        let mut ins = Vec::with_capacity(n.inputs.len());
        for t in &n.inputs {
            ins.push(match t {
                None => None,
                Some(t) => {
                    Some(
                        env.get(t)
                            .or_else(|| g.constants.get(t))
                            .ok_or_else(|| Error::Node {
                                node: n.name.clone(),
                                op_type: n.op_type.clone(),
                                msg: format!("input `{}` has no value", g.name(*t)),
                            })?,
                    )
                }
            });
        }
        let out_types: Vec<Option<&TensorType>> =
            n.outputs.iter().map(|o| o.map(|t| g.ty(t))).collect();
        let outs = n.op.eval(&ins, &out_types).map_err(|e| Error::Node {
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            msg: e.0,
        })?;
        let mut writes = Vec::new();
        for (k, o) in n.outputs.iter().enumerate() {
            if let Some(o) = o {
                let v = outs.get(k).cloned().ok_or_else(|| Error::Node {
                    node: n.name.clone(),
                    op_type: n.op_type.clone(),
                    msg: format!("reference kernel returned no output {k}"),
                })?;
                writes.push((*o, if wide { v.widened() } else { v }));
            }
        }
        // An in-place output is the input's buffer: the input now holds the new value too.
        for a in n.op.aliases() {
            if a.kind == AliasKind::InPlace {
                if let (Some(Some(t)), Some(Some(o))) =
                    (n.inputs.get(a.input), n.outputs.get(a.output))
                {
                    let v = writes.iter().find(|(w, _)| w == o).map(|(_, v)| v.clone());
                    if let Some(v) = v {
                        writes.push((*t, v));
                    }
                }
            }
        }
        for (t, v) in writes {
            env.insert(t, v);
        }
    }
    Ok(())
}

/// Run one training step (or the single graph).
pub fn train_step(p: &Program, env: &mut Env) -> Result<()> {
    run_nodes(p, env, 0..p.train_end)
}

/// Run the optimizer.
pub fn optimizer_step(p: &Program, env: &mut Env) -> Result<()> {
    run_nodes(p, env, p.train_end..p.nodes_total())
}
