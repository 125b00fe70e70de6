//! Splitting nodes whose smallest tile does not fit L1, before the
//! schedule and the plan: a pass on the program's graph.
//!
//! A batch normalization in training mode reduces each channel over the
//! whole batch and every spatial position before it can normalise one
//! value, so its smallest tile is one channel of X and Y (and dY and dX in
//! the gradient). Where that does not fit L1, the node is rewritten into
//! stages (`ops::norm::BnSplit`): per-channel sums, which tile along the
//! batch and the rows and accumulate across tiles, a per-channel step on
//! `[C]` vectors, and element-wise stages that tile like any element-wise op.
//!
//! Forward, `BatchNormInternal(X, scale, B, rm, rv) → (Y, rm', rv', mean, inv_std)`:
//! `BatchNormSum(X) → S`, `BatchNormSqDev(X, S) → Q`,
//! `BatchNormStats(S, Q, rm, rv) → (mean, inv_std, rm', rv')` (the running
//! statistics in place, as the node updates them), and
//! `BatchNormApply(X, mean, inv_std, scale, B) → Y`.
//!
//! Gradient, `BatchNormalizationGrad(dY, X, scale, mean, inv_std) → (dX, dScale, dBias)`:
//! `BatchNormGradSum(dY, X, mean) → (dBias, SDXM)`,
//! `BatchNormGradApply(dY, X, scale, mean, inv_std, dBias, SDXM) → dX` and
//! `Mul(SDXM, inv_std) → dScale`.
//!
//! Each stage does the node's own f32 arithmetic at that point, so the
//! split program differs from the node only where a sum is accumulated
//! over several tiles (a different order of the same additions). A node
//! whose channel fits is left as it is.
//!
//! A softmax cross-entropy loss that sums or averages over the batch,
//! `SoftmaxCrossEntropyLoss(X, labels, weight?) → (loss, log_prob)`, needs
//! its whole batch in one tile. Where that does not fit, it becomes the
//! same loss with reduction `none`, which tiles by rows, into per-row
//! losses `[B]`, and `SoftmaxCrossEntropyLossReduce(per_row, labels,
//! weight?) → loss` (`ops::loss::SceReduce`), which sums them in the
//! node's order (and divides by the batch's weight for a mean): the same
//! loss bit for bit.

use crate::error::Result;
use crate::ir::{Graph, Node, NodeId, TensorId, TensorKind};
use crate::ops::elementwise::{BinKind, Binary};
use crate::ops::loss::{Reduction, Sce, SceReduce};
use crate::ops::norm::{BatchNormGrad, BatchNormTrain, BnSplit, BnStage};
use crate::program::{Program, Role};
use crate::tensor::TensorType;

/// Split every batch normalization and batch-reducing softmax
/// cross-entropy loss of `p` whose smallest tile does not fit `l1` bytes;
/// returns how many were split.
pub fn apply(p: &mut Program, l1: u64) -> Result<usize> {
    let old = std::mem::take(&mut p.graph.nodes);
    let mut nodes: Vec<Node> = Vec::with_capacity(old.len());
    let mut train_end = p.train_end;
    let mut split = 0;
    for (i, n) in old.into_iter().enumerate() {
        if let Some((sce, c)) = unfit_sce(&n, &p.graph, l1) {
            let pieces = sce_stages(p, &n, sce, c);
            if i < p.train_end {
                train_end += pieces.len() - 1;
            }
            nodes.extend(pieces);
            split += 1;
            continue;
        }
        let Some(shape) = unfit_x(&n, &p.graph, l1) else {
            nodes.push(n);
            continue;
        };
        let any: &dyn std::any::Any = &*n.op;
        let fwd = any
            .downcast_ref::<BatchNormTrain>()
            .map(|b| (b.eps, b.momentum));
        let grad = fwd.is_none();
        let (c, count) = (shape[1], shape[0] * shape[2..].iter().product::<usize>());
        let (eps, momentum) = fwd.unwrap_or((1e-5, 0.9));
        let pieces = if grad {
            grad_stages(p, &n, c, count)
        } else {
            fwd_stages(p, &n, c, count, eps, momentum)
        };
        if i < p.train_end {
            train_end += pieces.len() - 1;
        }
        nodes.extend(pieces);
        split += 1;
    }
    p.graph.nodes = nodes;
    p.train_end = train_end;
    for t in &mut p.graph.tensors {
        t.producer = None;
    }
    for (k, n) in p.graph.nodes.iter().enumerate() {
        for t in n.outputs.iter().flatten() {
            p.graph.tensors[t.idx()].producer = Some(NodeId(k as u32));
        }
    }
    crate::verify::verify(&p.graph)?;
    Ok(split)
}

/// The nodes of `p`, by position, that [`apply`] splits for `l1` bytes of
/// L1 (none of them is changed here).
pub fn unfit(p: &Program, l1: u64) -> Vec<usize> {
    (0..p.graph.nodes.len())
        .filter(|&i| {
            let (n, g) = (&p.graph.nodes[i], &p.graph);
            unfit_x(n, g, l1).is_some() || unfit_sce(n, g, l1).is_some()
        })
        .collect()
}

/// The loss and the class count, when `n` is a softmax cross-entropy loss
/// that sums or averages over a batch `[B, C]` and does not fit `l1` bytes.
fn unfit_sce(n: &Node, g: &Graph, l1: u64) -> Option<(Sce, usize)> {
    let sce = *(&*n.op as &dyn std::any::Any).downcast_ref::<Sce>()?;
    let &Some(x) = n.inputs.first()? else {
        return None;
    };
    let shape = &g.ty(x).shape;
    if sce.reduction == Reduction::None || shape.len() != 2 || crate::tile::smallest_fits(n, g, l1)
    {
        return None;
    }
    Some((sce, shape[1]))
}

/// A loss's `reduction="none"` loss into per-row losses, and their sum or
/// mean into the loss (see the module documentation).
fn sce_stages(p: &mut Program, n: &Node, sce: Sce, classes: usize) -> Vec<Node> {
    let input = |k: usize| n.inputs.get(k).copied().flatten();
    let output = |k: usize| n.outputs.get(k).copied().flatten();
    let b = input(0).map_or(0, |x| p.graph.ty(x).shape[0]);
    let per = vector(p, n, "per_row", b);
    let rows = Sce {
        reduction: Reduction::None,
        ..sce
    };
    let mut out = vec![node(
        n,
        "rows",
        &n.op_type,
        &n.domain,
        Box::new(rows),
        n.inputs.clone(),
        vec![Some(per), output(1)],
    )];
    if output(0).is_some() {
        out.push(node(
            n,
            "reduce",
            "SoftmaxCrossEntropyLossReduce",
            crate::ops::STRATA,
            Box::new(SceReduce { sce, classes }),
            vec![Some(per), input(1), input(2)],
            vec![output(0)],
        ));
    }
    out
}

/// The shape of X, `[N, C, ..]`, when `n` is a batch normalization
/// (forward or gradient) whose smallest tile does not fit `l1` bytes.
fn unfit_x(n: &Node, g: &Graph, l1: u64) -> Option<Vec<usize>> {
    let any: &dyn std::any::Any = &*n.op;
    let grad = any.is::<BatchNormGrad>();
    if !grad && !any.is::<BatchNormTrain>() {
        return None;
    }
    let x = if grad {
        n.inputs.get(1)
    } else {
        n.inputs.first()
    };
    let &Some(x) = x? else {
        return None;
    };
    let shape = &g.ty(x).shape;
    if shape.len() < 2 || crate::tile::smallest_fits(n, g, l1) {
        return None;
    }
    Some(shape.clone())
}

/// A new `[c]` float tensor produced by a stage of node `n`.
fn vector(p: &mut Program, n: &Node, what: &str, c: usize) -> TensorId {
    let t = p.graph.add_tensor(
        format!("{}/{what}", n.name),
        TensorType::f32(vec![c]),
        TensorKind::Value,
    );
    p.roles.push(Role::Value);
    t
}

fn stage(stage: BnStage, count: usize, eps: f32, momentum: f32) -> Box<BnSplit> {
    Box::new(BnSplit {
        stage,
        count,
        eps,
        momentum,
    })
}

fn node(
    n: &Node,
    suffix: &str,
    op_type: &str,
    domain: &str,
    op: Box<dyn crate::ops::Op>,
    inputs: Vec<Option<TensorId>>,
    outputs: Vec<Option<TensorId>>,
) -> Node {
    Node {
        name: format!("{}/{suffix}", n.name),
        domain: domain.into(),
        op_type: op_type.into(),
        op: op.into(),
        inputs,
        outputs,
    }
}

fn fwd_stages(
    p: &mut Program,
    n: &Node,
    c: usize,
    count: usize,
    eps: f32,
    momentum: f32,
) -> Vec<Node> {
    let input = |k: usize| n.inputs.get(k).copied().flatten();
    let output = |k: usize| n.outputs.get(k).copied().flatten();
    let s = vector(p, n, "sum", c);
    let q = vector(p, n, "sqdev", c);
    let mean = output(3).unwrap_or_else(|| vector(p, n, "mean", c));
    let inv = output(4).unwrap_or_else(|| vector(p, n, "inv_std", c));
    let st = |k: BnStage| stage(k, count, eps, momentum);
    let dom = crate::ops::STRATA;
    let mut out = vec![
        node(
            n,
            "sum",
            BnStage::Sum.op_type(),
            dom,
            st(BnStage::Sum),
            vec![input(0)],
            vec![Some(s)],
        ),
        node(
            n,
            "sqdev",
            BnStage::SqDev.op_type(),
            dom,
            st(BnStage::SqDev),
            vec![input(0), Some(s)],
            vec![Some(q)],
        ),
        node(
            n,
            "stats",
            BnStage::Stats.op_type(),
            dom,
            st(BnStage::Stats),
            vec![Some(s), Some(q), input(3), input(4)],
            vec![Some(mean), Some(inv), output(1), output(2)],
        ),
    ];
    if output(0).is_some() {
        out.push(node(
            n,
            "apply",
            BnStage::Apply.op_type(),
            dom,
            st(BnStage::Apply),
            vec![input(0), Some(mean), Some(inv), input(1), input(2)],
            vec![output(0)],
        ));
    }
    out
}

fn grad_stages(p: &mut Program, n: &Node, c: usize, count: usize) -> Vec<Node> {
    let input = |k: usize| n.inputs.get(k).copied().flatten();
    let output = |k: usize| n.outputs.get(k).copied().flatten();
    let sdb = output(2).unwrap_or_else(|| vector(p, n, "sum_dy", c));
    let sdxm = vector(p, n, "sum_dy_xmu", c);
    // The gradient stages read neither epsilon nor momentum.
    let st = |k: BnStage| stage(k, count, 0.0, 0.0);
    let dom = crate::ops::STRATA;
    let mut out = vec![node(
        n,
        "sum",
        BnStage::GradSum.op_type(),
        dom,
        st(BnStage::GradSum),
        vec![input(0), input(1), input(3)],
        vec![Some(sdb), Some(sdxm)],
    )];
    if output(0).is_some() {
        out.push(node(
            n,
            "apply",
            BnStage::GradApply.op_type(),
            dom,
            st(BnStage::GradApply),
            vec![
                input(0),
                input(1),
                input(2),
                input(3),
                input(4),
                Some(sdb),
                Some(sdxm),
            ],
            vec![output(0)],
        ));
    }
    if output(1).is_some() {
        out.push(node(
            n,
            "dscale",
            "Mul",
            "",
            Box::new(Binary(BinKind::Mul)),
            vec![Some(sdxm), input(4)],
            vec![output(1)],
        ));
    }
    out
}
