//! The graph verifier, run after import and after every transformation:
//! single definitions, topological order, and types that match what each
//! node's shape rule infers from its inputs now.

use crate::error::{Error, Result};
use crate::ir::{Graph, TensorKind};

pub fn verify(g: &Graph) -> Result<()> {
    let err = |msg: String| Error::Graph {
        graph: "verify".into(),
        msg,
    };
    let mut defined = vec![false; g.tensors.len()];
    for (i, t) in g.tensors.iter().enumerate() {
        match t.kind {
            TensorKind::Input => defined[i] = true,
            TensorKind::Constant => {
                let v = g
                    .constants
                    .get(&crate::ir::TensorId(i as u32))
                    .ok_or_else(|| err(format!("constant `{}` has no value", t.name)))?;
                if v.ty() != t.ty {
                    return Err(err(format!(
                        "constant `{}` is {} but typed {}",
                        t.name,
                        v.ty(),
                        t.ty
                    )));
                }
                defined[i] = true;
            }
            TensorKind::Value => {}
        }
    }
    for id in g.node_ids() {
        let n = g.node(id);
        for t in n.inputs.iter().flatten() {
            if !defined[t.idx()] {
                return Err(err(format!(
                    "node `{}` reads `{}` before it is defined",
                    n.name,
                    g.name(*t)
                )));
            }
        }
        let ins = g.op_inputs(&n.inputs);
        // The output sizes decided at import stand as declarations (a
        // strided ConvGradX's dX); the rule still checks they give its inputs.
        let outs: Vec<_> = n.outputs.iter().map(|o| o.map(|t| g.ty(t))).collect();
        let types =
            n.op.infer_declared(&ins, n.outputs.len(), &outs)
                .map_err(|e| err(format!("node `{}`: {}", n.name, e.0)))?;
        for (k, o) in n.outputs.iter().enumerate() {
            let Some(o) = o else { continue };
            if defined[o.idx()] {
                return Err(err(format!(
                    "`{}` is defined twice (again by node `{}`)",
                    g.name(*o),
                    n.name
                )));
            }
            if g.tensor(*o).producer != Some(id) {
                return Err(err(format!(
                    "`{}` does not record node `{}` as its producer",
                    g.name(*o),
                    n.name
                )));
            }
            if types.get(k) != Some(g.ty(*o)) {
                return Err(err(format!(
                    "node `{}` output {k} `{}` is typed {} but infers {:?}",
                    n.name,
                    g.name(*o),
                    g.ty(*o),
                    types.get(k)
                )));
            }
            defined[o.idx()] = true;
        }
    }
    for o in &g.outputs {
        if !defined[o.idx()] {
            return Err(err(format!(
                "graph output `{}` is never defined",
                g.name(*o)
            )));
        }
    }
    Ok(())
}
