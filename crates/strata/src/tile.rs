//! Tiling and lowering: how every node of a planned program runs out of L1,
//! and the lowered program ([`Lir`]) that says so step by step.
//!
//! A node's **tile space** ([`Space`]) is a box of dimensions, some of them
//! *parallel* (output elements along them are computed independently). Each
//! operand says, per axis, which space axis it follows; an operand axis of
//! size 1 against a larger space axis is broadcast. A tiling iterates some
//! parallel axes one index at a time and splits at most one parallel axis
//! into chunks; every other axis is taken whole. The tile of an operand is
//! then a box of its tensor, moved by (up to 3D, strided) DMA into a dense
//! L1 slot, and the node's own op runs on the tile's shapes: tiling along
//! parallel axes needs no op-specific kernel.
//!
//! Some spaces also have *reduced* axes ([`Space::reduce`]: the batch and
//! rows a convolution's dW and dB sum over, the per-channel sums of a
//! split batch normalization). A tiling may iterate or split them too; the
//! tiles along them then accumulate into one output tile: the first writes
//! it, each later one writes a partial tile into a slot of its own that an
//! `Add` kernel adds in, and the output tile is stored once. That sums in
//! another order than the node does whole, so within a buffering it is a
//! candidate only where no tiling that keeps the reduction whole fits (the
//! simulator and the C agree bit for bit either way: same tiles, same
//! order); a program whose reductions all fit gives the interpreter's
//! results bit for bit.
//!
//! An op without a tile space runs as one tile: every operand whole in L1.
//! The tiling is chosen per node by the cycle model ([`Platform`]) under the
//! L1 budget: fewest modelled cycles, fewer tiles on a tie.
//!
//! Waits are placed by hazard, not by pattern: before a DMA writes a slot or
//! a kernel writes one, every DMA still touching that slot is waited for;
//! before a kernel reads a slot, its inbound DMA is. Double buffering is
//! then only an issue order (the next tile's loads go out before this tile
//! computes) and enough slots (two; three where an in-place update loads and
//! stores the same slot), for every op, with no exceptions.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{Graph, Node, NodeId, TensorId};
use crate::lir::{
    self, Base, Buffering, Dma, HomeBox, Kernel, Level, Lir, Loc, NodeTiling, Operand, Step,
};
use crate::ops::AliasKind;
use crate::plan::{MemoryPlan, ALIGN};
use crate::platform::{Platform, Work};
use crate::program::Program;
use crate::tensor::TensorType;

/// How an operand's axes follow the tile space: per operand axis, the space
/// axis it follows, or `None` (taken whole).
pub type AxisMap = Vec<Option<usize>>;

/// A node's tile space (see the module doc).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Space {
    pub dims: Vec<usize>,
    pub parallel: Vec<bool>,
    /// Reduced axes (empty: none): the outputs do not follow them, and the
    /// tiles along them accumulate into the same output tile (the first
    /// writes it, each later one writes a partial tile that an `Add` kernel
    /// adds in). They are the space's last axes, so the tiles of one output
    /// tile run one after another.
    pub reduce: Vec<bool>,
    /// How a tile's op differs from the node's.
    pub retile: Retile,
    /// Input axes read through a window of a space axis (a convolution's
    /// rows, a constant Pad's padded axes): `(input, axis, space axis,
    /// kernel, stride, pad before)`. The axis map leaves them unmapped; the
    /// box is the rows the tile's windows read, and the tile's op gets the
    /// pads that remain inside it.
    pub windows: Vec<(usize, usize, usize, usize, usize, usize)>,
    /// Transposed windows: input `dY` rows read by output (dX) rows, as
    /// `(input, axis, space axis, kernel, stride, pad before)`. Split chunks
    /// along the space axis are multiples of the stride (the last may be
    /// shorter).
    pub twindows: Vec<(usize, usize, usize, usize, usize, usize)>,
    /// Per input position: its axis map, or `None` for an absent input.
    pub inputs: Vec<Option<AxisMap>>,
    pub outputs: Vec<Option<AxisMap>>,
}

impl Space {
    /// Whether space axis `a` is reduced (see [`Space::reduce`]).
    pub fn reduced(&self, a: usize) -> bool {
        self.reduce.get(a).copied().unwrap_or(false)
    }
    /// Whether a tiling may cut axis `a`: parallel or reduced, and longer than 1.
    fn cuttable(&self, a: usize) -> bool {
        (self.parallel[a] || self.reduced(a)) && self.dims[a] > 1
    }
}

/// How the op of one tile differs from the node's op.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Retile {
    /// The node's op runs every tile.
    #[default]
    Same,
    /// A depthwise convolution without rows (not 2D): the tile's group
    /// count is its extent on this space axis.
    Group(usize),
    /// The window of `Space::windows`: the tile's pads along the first
    /// spatial axis, and for a depthwise convolution its group count, the
    /// tile's extent on this space axis.
    Rows { group: Option<usize> },
    /// The transposed window of `Space::twindows`: a convolution gradient's
    /// dX rows; the tile's pads along the first spatial axis (the kernel's
    /// extents are `kernel`), and for a depthwise convolution its group
    /// count, the tile's extent on this space axis.
    TRows {
        group: Option<usize>,
        kernel: [usize; 2],
    },
    /// A softmax cross-entropy gradient's rows (space axis 0): the tile's
    /// op knows its first row, its labels being the whole batch's.
    SceRows,
    /// MaxPool's indices (flat over the whole input, as ONNX defines them)
    /// from a tile of (n, c) planes, and MaxPoolGrad reading them: the
    /// tile's op knows where its planes sit (space axes 0 and 1 are N and C).
    Planes,
    /// The window of `Space::windows` read by a convolution gradient's dW or
    /// dB over a tile of dY's rows: the tile's pads along the first spatial
    /// axis (the kernel's extents are `kernel`), and for a depthwise
    /// convolution its group count, the tile's extent on this space axis.
    WRows {
        group: Option<usize>,
        kernel: [usize; 2],
    },
    /// A constant Pad whose padded axes are read through the windows of
    /// `Space::windows` (kernel 1, stride 1, pad the pad before): the
    /// tile's pads are those inside its rows, on every such axis.
    Pad,
    /// A ReduceMean whose reduced axes (the space's reduced ones) count
    /// this many values: a tile that holds only part of them divides its
    /// sum by the node's count, so the tiles' partial means add up.
    Mean(usize),
    /// MSELoss or MSELossGrad, whose mean is over this many values (every
    /// element of its inputs): a tile that holds only part of them divides
    /// by the node's count (the loss: its partial sum, so the tiles'
    /// partial means add up; the gradient: its scale, `2 / count`).
    Count(usize),
}

/// Right-aligned (numpy broadcast) axis map of a rank-`r` operand in a rank-`rank` space.
fn right_aligned(r: usize, rank: usize) -> Option<AxisMap> {
    (r <= rank).then(|| (0..r).map(|i| Some(i + rank - r)).collect())
}

/// The space of an element-wise op (with numpy broadcasting): output 0's
/// shape, every axis parallel.
fn elementwise(
    ins: &[Option<&TensorType>],
    outs: &[Option<&TensorType>],
    skip: &[usize],
) -> Option<Space> {
    let y = outs.first().copied().flatten()?;
    let rank = y.shape.len();
    let mut inputs = Vec::new();
    for (i, t) in ins.iter().enumerate() {
        inputs.push(match t {
            None => None,
            Some(_) if skip.contains(&i) => Some(vec![None; t.unwrap().shape.len()]),
            Some(t) => Some(right_aligned(t.shape.len(), rank)?),
        });
    }
    let mut outputs = Vec::new();
    for t in outs {
        outputs.push(match t {
            None => None,
            Some(t) if t.shape == y.shape => Some((0..rank).map(Some).collect()),
            Some(_) => return None,
        });
    }
    Some(Space {
        dims: y.shape.clone(),
        parallel: vec![true; rank],
        inputs,
        outputs,
        ..Default::default()
    })
}

/// Map of an operand whose axes `k` follow space axes `to[k]`, the rest whole.
fn map(rank: usize, pairs: &[(usize, usize)]) -> AxisMap {
    let mut m = vec![None; rank];
    for &(k, a) in pairs {
        if k < rank {
            m[k] = Some(a);
        }
    }
    m
}

/// One pass of a node over its tiles: the outputs it computes, its tile
/// space (`None`: one tile), and the inputs it only needs the shapes of
/// (they stay at home and are never read).
#[derive(Clone, Debug)]
pub struct Phase {
    pub outputs: Vec<usize>,
    pub space: Option<Space>,
    pub shape_only: Vec<usize>,
}

/// How a node runs: one phase per output where the outputs split the work
/// differently (the gradients of a convolution), else one phase.
pub fn phases(n: &Node, g: &Graph) -> Vec<Phase> {
    let present: Vec<usize> = (0..n.outputs.len())
        .filter(|&o| n.outputs[o].is_some())
        .collect();
    if let Some(ph) = conv_grad_phases(n, g, &present) {
        return ph;
    }
    if let Some(ph) = ln_grad_phases(n, g, &present) {
        return ph;
    }
    let space = space(n, g);
    // Expand's `shape` input is read at compile time only (the tile's op
    // takes its output tile's shape), and so are a tiled Pad's pads, value
    // and axes (the tile's op holds its own pads).
    let shape_only = if n.op_type == "Expand" && n.inputs.get(1).copied().flatten().is_some() {
        vec![1]
    } else if space.as_ref().is_some_and(|sp| sp.retile == Retile::Pad) {
        (1..n.inputs.len())
            .filter(|&i| n.inputs[i].is_some())
            .collect()
    } else {
        vec![]
    };
    vec![Phase {
        outputs: present,
        space,
        shape_only,
    }]
}

/// LayerNormalizationGrad (dY, X, scale, mean, inv_std_dev) → (dX, dScale,
/// dBias): dX by rows (the normalised axes whole, mean and inv_std_dev by
/// rows); dScale and dBias, sums over the rows, by columns of the
/// normalised axes (every row of dY, X, mean and inv_std_dev; each column
/// summed over the rows in the node's order, so a tile's sums are the
/// node's).
fn ln_grad_phases(n: &Node, g: &Graph, present: &[usize]) -> Option<Vec<Phase>> {
    let op: &dyn std::any::Any = &*n.op;
    let lg = op.downcast_ref::<crate::ops::transformer::LayerNormGrad>()?;
    let ty = |i: usize| n.inputs.get(i).copied().flatten().map(|t| g.ty(t));
    let x = ty(1)?;
    let r = x.shape.len();
    let a = {
        let a = if lg.axis < 0 {
            lg.axis + r as i64
        } else {
            lg.axis
        };
        (0..r as i64).contains(&a).then_some(a as usize)?
    };
    let ins: Vec<Option<&TensorType>> = n.inputs.iter().map(|t| t.map(|t| g.ty(t))).collect();
    let whole = |t: &TensorType| vec![None; t.shape.len()];
    // Mean and inv_std_dev by rows: X's leading axes, the rest 1.
    let stat = |t: &TensorType| -> Option<AxisMap> {
        (t.shape.len() == r && t.shape[a..].iter().all(|&d| d == 1))
            .then(|| (0..r).map(|i| (i < a).then_some(i)).collect())
    };
    let mut out = Vec::new();
    let rows: Vec<usize> = present.iter().copied().filter(|&o| o == 0).collect();
    let cols: Vec<usize> = present.iter().copied().filter(|&o| o > 0).collect();
    if !rows.is_empty() {
        let sp = (|| {
            let by_rows: AxisMap = (0..r).map(|i| (i < a).then_some(i)).collect();
            let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
            inputs[0] = Some(by_rows.clone());
            inputs[1] = Some(by_rows.clone());
            inputs[3] = Some(stat(ty(3)?)?);
            inputs[4] = Some(stat(ty(4)?)?);
            let mut outputs: Vec<Option<AxisMap>> = vec![None; n.outputs.len()];
            outputs[0] = Some(by_rows);
            Some(Space {
                dims: x.shape.clone(),
                parallel: (0..r).map(|i| i < a).collect(),
                inputs,
                outputs,
                ..Default::default()
            })
        })();
        let outs: Vec<Option<&TensorType>> = (0..n.outputs.len())
            .map(|k| (k == 0).then(|| n.outputs[0].map(|t| g.ty(t))).flatten())
            .collect();
        out.push(Phase {
            outputs: rows,
            space: sp.filter(|sp| valid(sp, &ins, &outs)),
            shape_only: vec![],
        });
    }
    if !cols.is_empty() {
        // The space is the normalised axes; scale follows them (its
        // shape is theirs) and is only needed for its shape.
        let nd = r - a;
        let by_cols: AxisMap = (0..r).map(|i| (i >= a).then(|| i - a)).collect();
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some(by_cols.clone());
        inputs[1] = Some(by_cols);
        let scale_ok = ty(2).is_some_and(|s| s.shape == x.shape[a..]);
        if scale_ok {
            inputs[2] = Some((0..nd).map(Some).collect());
        }
        let mut outputs: Vec<Option<AxisMap>> = vec![None; n.outputs.len()];
        for &o in &cols {
            outputs[o] = Some((0..nd).map(Some).collect());
        }
        let sp = Space {
            dims: x.shape[a..].to_vec(),
            parallel: vec![scale_ok; nd],
            inputs,
            outputs,
            ..Default::default()
        };
        let outs: Vec<Option<&TensorType>> = (0..n.outputs.len())
            .map(|k| {
                cols.contains(&k)
                    .then(|| n.outputs[k].map(|t| g.ty(t)))
                    .flatten()
            })
            .collect();
        out.push(Phase {
            outputs: cols,
            space: (scale_ok && valid(&sp, &ins, &outs)).then_some(sp),
            shape_only: vec![2],
        });
    }
    Some(out)
}

/// ConvGrad (dY, X, W) → (dX, dW, dB), ConvGradX (dY, W) → dX and
/// ConvGradW (dY, X) → dW: dX splits over N, C_in and its rows (reading
/// dY's rows through transposed windows; depthwise, dY's channels too);
/// dW splits over C_out (ungrouped, C_in too) and sums over N and dY's
/// rows; dB splits over C_out and sums the same. Any other grouping (a
/// channel multiplier, or groups of several channels) keeps the channels
/// whole, since a tile of them would cut its groups: dX splits over N
/// and its rows, dW and dB only sum. Each output is its own phase.
fn conv_grad_phases(n: &Node, g: &Graph, present: &[usize]) -> Option<Vec<Phase>> {
    let (xi, wi) = match n.op_type.as_str() {
        "ConvGrad" => (Some(1), Some(2)),
        "ConvGradX" => (None, Some(1)),
        "ConvGradW" => (Some(1), None),
        _ => return None,
    };
    let ty = |i: Option<usize>| {
        i.and_then(|i| n.inputs.get(i).copied().flatten())
            .map(|t| g.ty(t))
    };
    let dy = ty(Some(0))?;
    let (x, w) = (ty(xi), ty(wi));
    if dy.shape.len() != 4 {
        return None;
    }
    let outs_ty = |k: usize| n.outputs.get(k).copied().flatten().map(|t| g.ty(t));
    let op: &dyn std::any::Any = &*n.op;
    let cg = op.downcast_ref::<crate::ops::conv::ConvGrad>()?;
    // The grouping, from the node's group count: ungrouped; depthwise
    // (one input and one output channel per group, so a tile of channels
    // is a depthwise convolution of its own, its group count its
    // channels); or any other (a channel multiplier, groups of several
    // channels), whose channels stay whole, since a tile of them would cut
    // a group, and whose tiles' ops keep the node's group count. The
    // input channels are X's, or ConvGradX's dX's (it has no X).
    let xc = if n.op_type == "ConvGradX" {
        outs_ty(0)
    } else {
        x
    };
    let cin = xc?.shape.get(1).copied()?;
    let ungrouped = cg.group == 1;
    let dw = cg.group > 1 && cin == cg.group && dy.shape[1] == cg.group;
    let grouped = !ungrouped && !dw;
    // (kernel, stride, pad before) along the rows.
    let kh = w
        .map(|w| w.shape[2])
        .or_else(|| outs_ty(0).map(|t| t.shape[2]))?;
    let kw = w
        .map(|w| w.shape[3])
        .or_else(|| outs_ty(0).map(|t| t.shape[3]))?;
    let w2 = cg.win.resolve(2, Some(vec![kh, kw])).ok()?;
    let win = (w2.k.0, w2.s.0, w2.p.0);
    let out_kind = |o: usize| match n.op_type.as_str() {
        "ConvGrad" => o,
        "ConvGradX" => 0,
        _ => 1,
    };
    let mut out = Vec::new();
    for &o in present {
        let y = g.ty(n.outputs[o].unwrap());
        let r = y.shape.len();
        let mut inputs: Vec<Option<AxisMap>> = n
            .inputs
            .iter()
            .map(|t| t.map(|t| vec![None; g.ty(t).shape.len()]))
            .collect();
        let mut outputs: Vec<Option<AxisMap>> = vec![None; n.outputs.len()];
        outputs[o] = Some((0..r).map(Some).collect());
        let mut shape_only = vec![];
        let parallel;
        let mut dims = y.shape.clone();
        let mut reduce = vec![];
        let mut windows = vec![];
        let mut twindows = vec![];
        let retile;
        match out_kind(o) {
            0 => {
                // dX [N, C_in, H, W], also by rows of dX through the
                // transposed windows of dY. dX's rows are the output's
                // (ConvGradX: the declared dX, which a strided dY alone
                // does not determine), and a tile's op takes its dX rows
                // from its output tile, with the pads inside them.
                twindows = vec![(0, 2, 2, win.0, win.1, win.2)];
                retile = Retile::TRows {
                    group: dw.then_some(1),
                    kernel: [kh, kw],
                };
                inputs[0] = Some(if dw {
                    map(4, &[(0, 0), (1, 1)])
                } else if grouped {
                    map(4, &[(0, 0)])
                } else {
                    // Ungrouped, dY's channels (C_out) are summed over: a
                    // reduced axis after dX's, which dY's and W's axis 0
                    // follow, cut only where no tiling that keeps them
                    // whole fits (the tiles' partial dX accumulate).
                    dims.push(dy.shape[1]);
                    reduce = vec![false, false, false, false, true];
                    map(4, &[(0, 0), (1, 4)])
                });
                parallel = (0..dims.len())
                    .map(|a| a < 3 && !(grouped && a == 1))
                    .collect();
                if let Some(wi) = wi {
                    inputs[wi] = Some(if dw {
                        map(4, &[(0, 1)])
                    } else if grouped {
                        vec![None; 4]
                    } else {
                        map(4, &[(0, 4), (1, 1)])
                    });
                }
                if let Some(xi) = xi {
                    inputs[xi] = Some(map(4, &[(0, 0), (1, 1), (2, 2)]));
                    shape_only.push(xi);
                }
            }
            1 => {
                // dW [C_out, C_in, kh, kw], summed over N and dY's rows:
                // space axes 4 and 5, reduced; X's rows through the
                // windows of those dY rows.
                if r != 4 {
                    return None;
                }
                dims = vec![
                    y.shape[0],
                    y.shape[1],
                    y.shape[2],
                    y.shape[3],
                    dy.shape[0],
                    dy.shape[2],
                ];
                parallel = vec![!grouped, ungrouped, false, false, false, false];
                reduce = vec![false, false, false, false, true, true];
                inputs[0] = Some(map(4, &[(0, 4), (1, 0), (2, 5)]));
                let xi = xi?;
                inputs[xi] = Some(if dw {
                    map(4, &[(0, 4), (1, 0)])
                } else if grouped {
                    map(4, &[(0, 4)])
                } else {
                    map(4, &[(0, 4), (1, 1)])
                });
                windows.push((xi, 2, 5, win.0, win.1, win.2));
                if let Some(wi) = wi {
                    inputs[wi] = Some(if dw {
                        map(4, &[(0, 0)])
                    } else {
                        map(4, &[(0, 0), (1, 1)])
                    });
                    shape_only.push(wi);
                }
                retile = Retile::WRows {
                    group: dw.then_some(0),
                    kernel: [kh, kw],
                };
            }
            _ => {
                // dB [C_out], summed over N and dY's rows (space axes 1
                // and 2, reduced); X and W give the geometry only (X's
                // rows through the windows of the dY rows).
                dims = vec![y.shape[0], dy.shape[0], dy.shape[2]];
                parallel = vec![!grouped, false, false];
                reduce = vec![false, true, true];
                inputs[0] = Some(map(4, &[(0, 1), (1, 0), (2, 2)]));
                if let Some(wi) = wi {
                    inputs[wi] = Some(map(4, &[(0, 0)]));
                    shape_only.push(wi);
                }
                let xi = xi?;
                inputs[xi] = Some(if dw {
                    map(4, &[(0, 1), (1, 0)])
                } else {
                    map(4, &[(0, 1)])
                });
                windows.push((xi, 2, 2, win.0, win.1, win.2));
                shape_only.push(xi);
                retile = Retile::WRows {
                    group: dw.then_some(0),
                    kernel: [kh, kw],
                };
            }
        }
        let sp = Space {
            dims,
            parallel,
            reduce,
            retile,
            windows,
            twindows,
            inputs,
            outputs,
        };
        let ins: Vec<Option<&TensorType>> = n.inputs.iter().map(|t| t.map(|t| g.ty(t))).collect();
        let outs: Vec<Option<&TensorType>> = (0..n.outputs.len())
            .map(|k| if k == o { Some(y) } else { None })
            .collect();
        out.push(Phase {
            outputs: vec![o],
            space: valid(&sp, &ins, &outs).then_some(sp),
            shape_only,
        });
    }
    Some(out)
}

/// The tile space of a node, from its op type and operand types; `None`:
/// the node runs as one tile.
pub fn space(n: &Node, g: &Graph) -> Option<Space> {
    let ins: Vec<Option<&TensorType>> = n.inputs.iter().map(|t| t.map(|t| g.ty(t))).collect();
    let outs: Vec<Option<&TensorType>> = n.outputs.iter().map(|t| t.map(|t| g.ty(t))).collect();
    let rank = |t: Option<&TensorType>| t.map_or(0, |t| t.shape.len());
    let sp = match n.op_type.as_str() {
        "Add"
        | "Sub"
        | "Mul"
        | "Div"
        | "Pow"
        | "Sqrt"
        | "Abs"
        | "Neg"
        | "Sign"
        | "Exp"
        | "Log"
        | "Sigmoid"
        | "Tanh"
        | "LeakyRelu"
        | "Relu"
        | "ReluGrad"
        | "SigmoidGrad"
        | "TanhGrad"
        | "LeakyReluGrad"
        | "Gelu"
        | "GeluGrad"
        | "InPlaceAccumulatorV2"
        | "SGD"
        | "AdamW"
        | "Sum"
        | "Scale"
        | "StepCount" => elementwise(&ins, &outs, &[]),
        // A broadcast: the input's unit axes are broadcast; `shape` whole.
        "Expand" => elementwise(&ins, &outs, &[1]),
        "Conv" => {
            // X [N, C, H, W], W [M, C/g, kh, kw], B [M] -> Y [N, M, OH, OW]:
            // N parallel, and output rows through X's windows (the tile's
            // op gets the pads inside its rows). Ungrouped, M parallel too;
            // depthwise, M too with X's channels following it (the tile's
            // group its channels); any other grouping keeps M whole (a tile
            // of output channels would cut its groups).
            let (x, w, y) = (
                ins.first()?.as_ref()?,
                ins.get(1)?.as_ref()?,
                outs.first()?.as_ref()?,
            );
            let depthwise =
                w.shape.get(1) == Some(&1) && x.shape.get(1) == y.shape.get(1) && x.shape[1] > 1;
            let group1 = w.shape.get(1) == x.shape.get(1);
            let xm = if depthwise {
                map(x.shape.len(), &[(0, 0), (1, 1)])
            } else {
                map(x.shape.len(), &[(0, 0)])
            };
            let conv = (&*n.op as &dyn std::any::Any).downcast_ref::<crate::ops::conv::Conv>()?;
            let rows = y.shape.len() == 4 && x.shape.len() == 4;
            if !(depthwise || group1 || rows) {
                return None;
            }
            let (windows, retile) = if rows {
                let w2 = conv.win.resolve(2, Some(w.shape[2..].to_vec())).ok()?;
                (
                    vec![(0, 2, 2, w2.k.0, w2.s.0, w2.p.0)],
                    Retile::Rows {
                        group: depthwise.then_some(1),
                    },
                )
            } else if depthwise {
                (vec![], Retile::Group(1))
            } else {
                (vec![], Retile::Same)
            };
            // Ungrouped by rows: the input channels are a reduced axis
            // after Y's (X's and W's axis 1 follow it), cut only where no
            // tiling that keeps them whole fits; the tiles' partial sums
            // accumulate, the first with the bias (`Retile::Rows`).
            let channels = rows && group1 && !depthwise && x.shape[1] > 1;
            let mut dims = y.shape.clone();
            let (mut xm, mut wm) = (xm, map(w.shape.len(), &[(0, 1)]));
            if channels {
                xm[1] = Some(dims.len());
                wm[1] = Some(dims.len());
                dims.push(x.shape[1]);
            }
            let ry = y.shape.len();
            Some(Space {
                parallel: (0..dims.len())
                    .map(|a| match a {
                        0 => true,
                        1 => depthwise || group1,
                        2 => rows,
                        _ => false,
                    })
                    .collect(),
                reduce: if channels {
                    (0..dims.len()).map(|a| a >= ry).collect()
                } else {
                    vec![]
                },
                dims,
                retile,
                windows,
                twindows: vec![],
                inputs: ins
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        t.map(|t| match i {
                            0 => xm.clone(),
                            1 => wm.clone(),
                            _ => map(t.shape.len(), &[(0, 1)]),
                        })
                    })
                    .collect(),
                outputs: vec![Some(map(y.shape.len(), &[(0, 0), (1, 1), (2, 2), (3, 3)]))],
            })
        }
        "MaxPool"
        | "AveragePool"
        | "GlobalAveragePool"
        | "MaxPoolGrad"
        | "AveragePoolGrad"
        | "GlobalAveragePoolGrad" => {
            // Per (n, c) plane; MaxPool's indices (output 1) as its values.
            let y = outs.first()?.as_ref()?;
            let indices = n.op_type == "MaxPool" && outs.get(1).copied().flatten().is_some();
            if y.shape.len() < 3
                || outs
                    .iter()
                    .skip(if indices { 2 } else { 1 })
                    .any(|o| o.is_some())
            {
                return None;
            }
            let r = y.shape.len();
            let mut parallel = vec![false; r];
            parallel[0] = true;
            parallel[1] = true;
            // Indices are flat over the whole tensor: a tile's op places its planes.
            let reads_indices = n.op_type == "MaxPoolGrad"
                && ins
                    .get(1)
                    .copied()
                    .flatten()
                    .is_some_and(|t| t.dtype == crate::tensor::DType::I64);
            Some(Space {
                dims: y.shape.clone(),
                parallel,
                retile: if indices || reads_indices {
                    Retile::Planes
                } else {
                    Retile::Same
                },
                inputs: ins
                    .iter()
                    .map(|t| {
                        t.map(|t| {
                            if t.shape.len() == r {
                                map(r, &[(0, 0), (1, 1)])
                            } else {
                                vec![None; t.shape.len()]
                            }
                        })
                    })
                    .collect(),
                outputs: outs
                    .iter()
                    .map(|o| o.map(|_| (0..r).map(Some).collect()))
                    .collect(),
                ..Default::default()
            })
        }
        "BatchNormInternal" | "BatchNormalizationGrad" => {
            // Per channel: X/dY/Y follow the space, [C] vectors follow axis 1.
            let y = outs.first()?.as_ref()?;
            let r = y.shape.len();
            if r < 2 {
                return None;
            }
            let mut parallel = vec![false; r];
            parallel[1] = true;
            let m = |t: &TensorType| {
                if t.shape.len() == r {
                    (0..r).map(Some).collect()
                } else if t.shape.len() == 1 {
                    vec![Some(1)]
                } else {
                    vec![None; t.shape.len()]
                }
            };
            Some(Space {
                dims: y.shape.clone(),
                parallel,
                inputs: ins.iter().map(|t| t.map(m)).collect(),
                outputs: outs.iter().map(|t| t.map(m)).collect(),
                ..Default::default()
            })
        }
        "BatchNormSum" | "BatchNormSqDev" | "BatchNormGradSum" => {
            // Per-channel sums of a split batch normalization: channels
            // parallel; the batch and the first spatial axis reduced, their
            // tiles accumulating into the channels' sums.
            let x = ins.first().copied().flatten()?;
            let r = x.shape.len();
            if r < 2 {
                return None;
            }
            let k = r.min(3);
            let xm: AxisMap = (0..r)
                .map(|a| match a {
                    0 => Some(1),
                    1 => Some(0),
                    2 => Some(2),
                    _ => None,
                })
                .collect();
            let mut dims = vec![x.shape[1], x.shape[0]];
            dims.extend(x.shape.get(2));
            Some(Space {
                dims,
                parallel: (0..k).map(|a| a == 0).collect(),
                reduce: (0..k).map(|a| a > 0).collect(),
                inputs: ins
                    .iter()
                    .map(|t| {
                        t.map(|t| {
                            if t.shape.len() == r {
                                xm.clone()
                            } else {
                                vec![Some(0)]
                            }
                        })
                    })
                    .collect(),
                outputs: outs.iter().map(|t| t.map(|_| vec![Some(0)])).collect(),
                ..Default::default()
            })
        }
        "BatchNormApply" | "BatchNormGradApply" => {
            // Element-wise over X, the [C] vectors following its channels.
            let y = outs.first()?.as_ref()?;
            let r = y.shape.len();
            if r < 2 {
                return None;
            }
            let m = |t: &TensorType| -> AxisMap {
                if t.shape.len() == r {
                    (0..r).map(Some).collect()
                } else {
                    vec![Some(1)]
                }
            };
            Some(Space {
                dims: y.shape.clone(),
                parallel: vec![true; r],
                inputs: ins.iter().map(|t| t.map(m)).collect(),
                outputs: outs.iter().map(|t| t.map(m)).collect(),
                ..Default::default()
            })
        }
        "BatchNormStats" => elementwise(&ins, &outs, &[]),
        _ => attr_space(n, g, &ins, &outs),
    }?;
    let _ = rank;
    valid(&sp, &ins, &outs).then_some(sp)
}

/// Tile spaces that depend on an op's attributes, read from its type.
fn attr_space(
    n: &Node,
    g: &Graph,
    ins: &[Option<&TensorType>],
    outs: &[Option<&TensorType>],
) -> Option<Space> {
    use crate::ops::{basic, loss, ort, train, transformer};
    let op: &dyn std::any::Any = &*n.op;
    let y = outs.first().copied().flatten()?;
    let r = y.shape.len();
    let ident: AxisMap = (0..r).map(Some).collect();
    let whole = |t: &TensorType| vec![None; t.shape.len()];
    let norm = |axis: i64, rank: usize| -> Option<usize> {
        let a = if axis < 0 { axis + rank as i64 } else { axis };
        (0..rank as i64).contains(&a).then_some(a as usize)
    };
    // The training-state updates are element-wise whatever their node is
    // called (ONNX Runtime's sequence optimizers are lowered to them).
    if op.is::<train::Sgd>()
        || op.is::<train::AdamW>()
        || op.is::<train::Accumulate>()
        || op.is::<train::StepCount>()
    {
        return elementwise(ins, outs, &[]);
    }
    if let Some(red) = op.downcast_ref::<basic::Reduce>() {
        // Kept axes are parallel; the reduced axes follow space axes of
        // their own after Y's, reduced (`Space::reduce`): a tile's op sums
        // its part and the tiles accumulate. A tile of a mean cut across
        // tiles divides by the node's count (`Retile::Mean`).
        let x = ins.first().copied().flatten()?;
        let axes: Vec<i64> = match (&red.axes_attr, n.inputs.get(1).copied().flatten()) {
            (Some(a), _) => a.clone(),
            (None, Some(t)) => g.constants.get(&t)?.to_i64(),
            (None, None) => vec![],
        };
        let rx = x.shape.len();
        // No axes: every axis (or, with noop_with_empty_axes, a copy,
        // which has no rule here).
        let axes = match (axes.is_empty(), red.noop_with_empty_axes) {
            (false, _) => axes,
            (true, false) => (0..rx as i64).collect(),
            (true, true) => return None,
        };
        let mut reduced = vec![false; rx];
        for a in axes {
            reduced[norm(a, rx)?] = true;
        }
        let mut xm = vec![None; rx];
        let mut k = 0;
        for i in 0..rx {
            if red.keepdims {
                if !reduced[i] {
                    xm[i] = Some(i);
                }
            } else if !reduced[i] {
                xm[i] = Some(k);
                k += 1;
            }
        }
        let mut dims = y.shape.clone();
        for i in (0..rx).filter(|&i| reduced[i]) {
            xm[i] = Some(dims.len());
            dims.push(x.shape[i]);
        }
        let count: usize = dims[r..].iter().product();
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some(xm);
        return Some(Space {
            parallel: (0..dims.len()).map(|a| a < r).collect(),
            reduce: (0..dims.len()).map(|a| a >= r).collect(),
            dims,
            retile: if red.kind == basic::ReduceKind::Mean {
                Retile::Mean(count)
            } else {
                Retile::Same
            },
            inputs,
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some(sce) = op.downcast_ref::<loss::Sce>() {
        // SoftmaxCrossEntropyLoss with reduction `none`: every row is its
        // own (rows of the scores, the labels, the losses and log_prob;
        // the class weights whole). A sum or a mean over the batch has no
        // rule: where it does not fit L1, `crate::split` makes it a
        // `none` loss and its reduction.
        let x = ins.first().copied().flatten()?;
        if sce.reduction != loss::Reduction::None || x.shape.len() != 2 {
            return None;
        }
        let rows: AxisMap = vec![Some(0), None];
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some(rows.clone());
        *inputs.get_mut(1)? = Some(vec![Some(0)]);
        let outputs = outs
            .iter()
            .enumerate()
            .map(|(k, t)| t.map(|_| if k == 0 { vec![Some(0)] } else { rows.clone() }))
            .collect();
        return Some(Space {
            dims: vec![x.shape[0]],
            parallel: vec![true],
            inputs,
            outputs,
            ..Default::default()
        });
    }
    if op.is::<loss::SceGrad>() {
        // SoftmaxCrossEntropyLossGrad: rows of dY (reduction `none`),
        // log_prob and dX; the labels and class weights whole, so that a
        // tile's op (`Retile::SceRows`) divides a mean by the whole batch's
        // weight and reads its rows' labels.
        let types: Vec<Option<&TensorType>> = ins.to_vec();
        let g = loss::grad_args(&types).ok()?;
        let lp = ins.get(g.logp).copied().flatten()?;
        if lp.shape.len() != 2 {
            return None;
        }
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[g.logp] = Some(vec![Some(0), None]);
        if let Some(d) = g.dy {
            let dy = ins.get(d).copied().flatten()?;
            if dy.shape.len() == 1 {
                inputs[d] = Some(vec![Some(0)]);
            }
        }
        return Some(Space {
            dims: vec![lp.shape[0]],
            parallel: vec![true],
            retile: Retile::SceRows,
            inputs,
            outputs: vec![Some(vec![Some(0), None])],
            ..Default::default()
        });
    }
    if op.is::<loss::Mse>() {
        // MSELoss: a sum over every element of (pred, target) to a scalar.
        // Every axis is reduced (`Space::reduce`): a tile's op sums its
        // part, divided by the node's count (`Retile::Count`), and the
        // tiles accumulate into the loss.
        let p = ins.first().copied().flatten()?;
        let rp = p.shape.len();
        if rp == 0 || r != 0 {
            return None;
        }
        let by_elem: AxisMap = (0..rp).map(Some).collect();
        return Some(Space {
            dims: p.shape.clone(),
            parallel: vec![false; rp],
            reduce: vec![true; rp],
            retile: Retile::Count(p.numel()),
            inputs: ins.iter().map(|t| t.map(|_| by_elem.clone())).collect(),
            outputs: vec![Some(vec![])],
            ..Default::default()
        });
    }
    if op.is::<loss::MseGrad>() {
        // MSELossGrad: element-wise, each tile scaling by the node's count.
        let mut sp = elementwise(ins, outs, &[])?;
        sp.retile = Retile::Count(y.numel());
        return Some(sp);
    }
    // A matrix product over the last two axes: Y [.., M, N] = A [.., M, K] B [.., K, N].
    let matmul = |ta: bool, tb: bool| -> Option<Space> {
        let (a, b) = (
            ins.first().copied().flatten()?,
            ins.get(1).copied().flatten()?,
        );
        if r < 2 || a.shape.len() < 2 || b.shape.len() < 2 {
            return None;
        }
        // Batch axes broadcast right-aligned against Y's; `follows` is the
        // operand's axis that follows Y's axis `y_axis`.
        let operand = |t: &TensorType, follows: usize, y_axis: usize| {
            let rt = t.shape.len();
            let mut m: AxisMap = (0..rt)
                .map(|i| (i + r >= rt && i < rt - 2).then(|| i + r - rt))
                .collect();
            m[follows] = Some(y_axis);
            m
        };
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        let (ra, rb) = (a.shape.len(), b.shape.len());
        // A's rows: [.., M, K], or [.., K, M] transposed; B's columns: [.., K, N] or [.., N, K].
        inputs[0] = Some(operand(a, if ta { ra - 1 } else { ra - 2 }, r - 2));
        inputs[1] = Some(operand(b, if tb { rb - 2 } else { rb - 1 }, r - 1));
        if let Some(c) = ins.get(2).copied().flatten() {
            inputs[2] = Some(right_aligned(c.shape.len(), r)?);
        }
        Some(Space {
            dims: y.shape.clone(),
            parallel: vec![true; r],
            inputs,
            outputs: vec![Some(ident.clone())],
            ..Default::default()
        })
    };
    if let Some(gm) = op.downcast_ref::<basic::Gemm>() {
        // ONNX's 2-D Gemm, and the peer's batched one (leading batch axes
        // broadcast as MatMul's, the bias broadcast to Y).
        return matmul(gm.trans_a, gm.trans_b);
    }
    if op.downcast_ref::<transformer::MatMul>().is_some() {
        return matmul(false, false);
    }
    if let Some(f) = op.downcast_ref::<ort::FusedMatMul>() {
        return matmul(f.trans_a, f.trans_b);
    }
    // Row-wise ops: the normalised axes whole, the others parallel.
    let rows = |first_norm: usize, only: Option<usize>| -> Vec<bool> {
        (0..r)
            .map(|i| match only {
                Some(a) => i != a,
                None => i < first_norm,
            })
            .collect()
    };
    let softmax = |s: &transformer::Softmax| -> Option<Space> {
        let a = norm(s.axis, r)?;
        let parallel = if s.coerce {
            rows(a, None)
        } else {
            rows(0, Some(a))
        };
        Some(Space {
            dims: y.shape.clone(),
            parallel,
            inputs: ins
                .iter()
                .map(|t| {
                    t.map(|t| {
                        if t.shape == y.shape {
                            ident.clone()
                        } else {
                            whole(t)
                        }
                    })
                })
                .collect(),
            outputs: vec![Some(ident.clone())],
            ..Default::default()
        })
    };
    if let Some(s) = op.downcast_ref::<transformer::Softmax>() {
        return softmax(s);
    }
    if let Some(s) = op.downcast_ref::<transformer::SoftmaxGrad>() {
        return softmax(&s.0);
    }
    // Data movement along one axis (Slice's sliced axes, Concat's and
    // Split's axis): the other axes are parallel and follow Y's (X's for
    // Split), that axis is whole in every tile, and a tile runs the node's
    // own op, whose parameters name only that axis.
    use crate::ops::shape::{Concat, Gather, Slice, Split};
    let except = |rank: usize, whole: &[bool]| -> AxisMap {
        (0..rank).map(|i| (!whole[i]).then_some(i)).collect()
    };
    if let Some(sl) = op.downcast_ref::<Slice>() {
        let x = ins.first().copied().flatten()?;
        let rx = x.shape.len();
        let mut sliced = vec![false; rx];
        for a in sl.sliced_axes(&g.op_inputs(&n.inputs)).ok()? {
            sliced[a] = true;
        }
        if rx != r {
            return None;
        }
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some(except(rx, &sliced));
        return Some(Space {
            dims: y.shape.clone(),
            parallel: sliced.iter().map(|&s| !s).collect(),
            inputs,
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some(c) = op.downcast_ref::<Concat>() {
        let a = norm(c.axis, r)?;
        let along: Vec<bool> = (0..r).map(|i| i == a).collect();
        return Some(Space {
            dims: y.shape.clone(),
            parallel: along.iter().map(|&w| !w).collect(),
            inputs: ins.iter().map(|t| t.map(|_| except(r, &along))).collect(),
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some(sp) = op.downcast_ref::<Split>() {
        let x = ins.first().copied().flatten()?;
        let rx = x.shape.len();
        let a = norm(sp.axis, rx)?;
        let along: Vec<bool> = (0..rx).map(|i| i == a).collect();
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some((0..rx).map(Some).collect());
        return Some(Space {
            dims: x.shape.clone(),
            parallel: along.iter().map(|&w| !w).collect(),
            inputs,
            outputs: outs.iter().map(|t| t.map(|_| except(rx, &along))).collect(),
            ..Default::default()
        });
    }
    if let Some(ga) = op.downcast_ref::<Gather>() {
        // Y = X[:a] + indices + X[a+1:]: every axis of Y parallel; X's axis
        // `a` whole (a tile's indices may pick any row of it), the indices
        // following Y's middle axes.
        let (x, idx) = (
            ins.first().copied().flatten()?,
            ins.get(1).copied().flatten()?,
        );
        let rx = x.shape.len();
        let a = norm(ga.axis, rx)?;
        let ni = idx.shape.len();
        if r != rx - 1 + ni {
            return None;
        }
        let xm: AxisMap = (0..rx)
            .map(|i| match i.cmp(&a) {
                std::cmp::Ordering::Less => Some(i),
                std::cmp::Ordering::Equal => None,
                std::cmp::Ordering::Greater => Some(i - 1 + ni),
            })
            .collect();
        return Some(Space {
            dims: y.shape.clone(),
            parallel: vec![true; r],
            inputs: vec![Some(xm), Some((a..a + ni).map(Some).collect())],
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some(tr) = op.downcast_ref::<crate::ops::shape::Transpose>() {
        // Output axis j is input axis perm[j]: every axis parallel, the
        // input's axis perm[j] follows space axis j; a tile transposes its box.
        let x = ins.first().copied().flatten()?;
        let rx = x.shape.len();
        let perm: Vec<usize> = match &tr.perm {
            None => (0..rx).rev().collect(),
            Some(p) => p.iter().map(|&a| norm(a, rx)).collect::<Option<_>>()?,
        };
        if perm.len() != rx || rx != r {
            return None;
        }
        let mut xm: AxisMap = vec![None; rx];
        for (j, &pj) in perm.iter().enumerate() {
            if xm[pj].is_some() {
                return None;
            }
            xm[pj] = Some(j);
        }
        return Some(Space {
            dims: y.shape.clone(),
            parallel: vec![true; r],
            inputs: vec![Some(xm)],
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some((mode, begin, end, _)) = pad_geometry(n, g) {
        // An axis without pads follows the space; an axis a constant pad
        // widens is read through a window of kernel 1, stride 1 and pad its
        // pad before (a tile holds the rows of X its rows show, and its op
        // the pads inside its rows); an axis padded by reflection or by its
        // edge, or cropped, stays whole.
        let x = ins.first().copied().flatten()?;
        if x.shape.len() != r || begin.len() != r {
            return None;
        }
        let mut xm: AxisMap = vec![None; r];
        let mut parallel = vec![true; r];
        let mut windows = vec![];
        for a in 0..r {
            if begin[a] == 0 && end[a] == 0 {
                xm[a] = Some(a);
            } else if mode == crate::ops::shape::PadMode::Constant && begin[a] >= 0 && end[a] >= 0 {
                windows.push((0, a, a, 1, 1, begin[a] as usize));
            } else {
                parallel[a] = false;
            }
        }
        let mut inputs: Vec<Option<AxisMap>> = ins.iter().map(|t| t.map(whole)).collect();
        inputs[0] = Some(xm);
        return Some(Space {
            dims: y.shape.clone(),
            parallel,
            retile: Retile::Pad,
            windows,
            inputs,
            outputs: vec![Some(ident)],
            ..Default::default()
        });
    }
    if let Some(ln) = op.downcast_ref::<transformer::LayerNorm>() {
        // X and Y by rows; scale and bias whole; mean and 1/std [.., 1, ..] by rows.
        let a = norm(ln.axis, r)?;
        let by_rows = |t: &TensorType| -> AxisMap {
            if t.shape.len() == r {
                (0..r).map(|i| (i < a).then_some(i)).collect()
            } else {
                whole(t)
            }
        };
        return Some(Space {
            dims: y.shape.clone(),
            parallel: rows(a, None),
            inputs: ins
                .iter()
                .enumerate()
                .map(|(i, t)| t.map(|t| if i == 0 { by_rows(t) } else { whole(t) }))
                .collect(),
            outputs: outs.iter().map(|t| t.map(by_rows)).collect(),
            ..Default::default()
        });
    }
    None
}

/// A Pad node's mode, its pads before and after every axis, and its value
/// (from its attributes or its constant inputs).
fn pad_geometry(
    n: &Node,
    g: &Graph,
) -> Option<(crate::ops::shape::PadMode, Vec<i64>, Vec<i64>, f32)> {
    let pd = (&*n.op as &dyn std::any::Any).downcast_ref::<crate::ops::shape::Pad>()?;
    let (begin, end, value) = pd.pads(&g.op_inputs(&n.inputs)).ok()?;
    Some((pd.mode, begin, end, value))
}

/// Every mapped operand axis is the space axis's size (or 1: broadcast).
fn valid(sp: &Space, ins: &[Option<&TensorType>], outs: &[Option<&TensorType>]) -> bool {
    let ok = |t: &Option<&TensorType>, m: &Option<AxisMap>, output: bool| match (t, m) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(t), Some(m)) => {
            m.len() == t.shape.len()
                && m.iter().zip(&t.shape).all(|(a, &d)| match a {
                    None => true,
                    Some(a) => *a < sp.dims.len() && (d == sp.dims[*a] || (d == 1 && !output)),
                })
        }
    };
    // Reduced axes: none, or a suffix of the axes, never parallel, and
    // followed by no output.
    let r = sp.dims.len();
    let first_reduced = (0..r).find(|&a| sp.reduced(a)).unwrap_or(r);
    let reduce_ok = (sp.reduce.is_empty() || sp.reduce.len() == r)
        && (first_reduced..r).all(|a| sp.reduced(a) && !sp.parallel[a])
        && sp
            .outputs
            .iter()
            .flatten()
            .all(|m| m.iter().flatten().all(|&a| !sp.reduced(a)));
    reduce_ok
        && sp.inputs.len() == ins.len()
        && sp.outputs.len() == outs.len()
        && sp.dims.len() == sp.parallel.len()
        && ins.iter().zip(&sp.inputs).all(|(t, m)| ok(t, m, false))
        && outs.iter().zip(&sp.outputs).all(|(t, m)| ok(t, m, true))
}

/// A tiling of a space: axes iterated one index at a time, at most one
/// split axis with its chunk size; the rest whole.
#[derive(Clone, Debug, PartialEq)]
pub struct Tiling {
    pub iter: Vec<bool>,
    pub split: Option<(usize, usize)>,
}

impl Tiling {
    /// Per tile, its range on every space axis; row-major over the iterated and split axes.
    fn tiles(&self, dims: &[usize]) -> Vec<Vec<(usize, usize)>> {
        let mut tiles = vec![dims.iter().map(|&d| (0, d)).collect::<Vec<_>>()];
        for (a, &d) in dims.iter().enumerate() {
            let step = if self.iter[a] {
                1
            } else if self.split.map(|s| s.0) == Some(a) {
                self.split.unwrap().1
            } else {
                continue;
            };
            let mut next = Vec::with_capacity(tiles.len() * d.div_ceil(step));
            for t in &tiles {
                let mut lo = 0;
                while lo < d {
                    let mut t2 = t.clone();
                    t2[a] = (lo, (lo + step).min(d));
                    next.push(t2);
                    lo += step;
                }
            }
            tiles = next;
        }
        tiles
    }
    /// The tiles up to position: per class of tiles (first, interior and
    /// last along each iterated or split axis) one representative and how
    /// many tiles it stands for. Tiles of a class have the same extents and
    /// the same clipping at the edges, so they cost the same: where windows
    /// (`wins`, see [`window_geometry`]) clip interior tiles differently (a
    /// pad wider than a tile), the interior splits into one class per
    /// clipping.
    fn classes(&self, dims: &[usize], wins: &[WinGeom]) -> Vec<(Vec<(usize, usize)>, usize)> {
        let mut out = vec![(dims.iter().map(|&d| (0, d)).collect::<Vec<_>>(), 1usize)];
        for (a, &d) in dims.iter().enumerate() {
            let step = if self.iter[a] {
                1
            } else if self.split.map(|s| s.0) == Some(a) {
                self.split.unwrap().1
            } else {
                continue;
            };
            let n = d.div_ceil(step);
            let range = |k: usize| (k * step, ((k + 1) * step).min(d));
            let reps: Vec<((usize, usize), usize)> = match n {
                1 => vec![(range(0), 1)],
                2 => vec![(range(0), 1), (range(1), 1)],
                _ => {
                    let mut reps = vec![(range(0), 1)];
                    let sig = |k: usize| -> Clip {
                        wins.iter()
                            .filter(|w| w.0 == a)
                            .map(|w| w.clip(range(k)))
                            .collect()
                    };
                    // Per clipping: (its signature, first tile, tiles).
                    let mut interior: Vec<(Clip, usize, usize)> = Vec::new();
                    for k in 1..n - 1 {
                        let sk = sig(k);
                        match interior.iter_mut().find(|c| c.0 == sk) {
                            Some(c) => c.2 += 1,
                            None => interior.push((sk, k, 1)),
                        }
                    }
                    reps.extend(interior.into_iter().map(|(_, k, c)| (range(k), c)));
                    reps.push((range(n - 1), 1));
                    reps
                }
            };
            out = out
                .iter()
                .flat_map(|(t, c)| {
                    reps.iter().map(move |&(r, k)| {
                        let mut t2 = t.clone();
                        t2[a] = r;
                        (t2, c * k)
                    })
                })
                .collect();
        }
        out
    }
    /// Tiles per output tile: how many tiles along the reduced axes
    /// accumulate into each (1 without reduced axes).
    fn reduce_tiles(&self, sp: &Space) -> usize {
        sp.dims
            .iter()
            .enumerate()
            .filter(|&(a, _)| sp.reduced(a))
            .map(|(a, &d)| {
                if self.iter[a] {
                    d
                } else if self.split.map(|s| s.0) == Some(a) {
                    d.div_ceil(self.split.unwrap().1)
                } else {
                    1
                }
            })
            .product()
    }
    fn count(&self, dims: &[usize]) -> usize {
        dims.iter()
            .enumerate()
            .map(|(a, &d)| {
                if self.iter[a] {
                    d
                } else if self.split.map(|s| s.0) == Some(a) {
                    d.div_ceil(self.split.unwrap().1)
                } else {
                    1
                }
            })
            .product()
    }
    fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .iter
            .iter()
            .enumerate()
            .filter(|(_, &i)| i)
            .map(|(a, _)| format!("axis {a} by 1"))
            .collect();
        if let Some((a, s)) = self.split {
            parts.push(format!("axis {a} by {s}"));
        }
        if parts.is_empty() {
            "whole".into()
        } else {
            parts.join(", ")
        }
    }
}

/// An input axis read through windows: (axis, space axis, kernel, stride,
/// pad before, transposed).
type Win = (usize, usize, usize, usize, usize, bool);

/// How every window on a space axis clips one tile ([`WinGeom::clip`]).
type Clip = Vec<(usize, usize, usize)>;

/// A window's geometry along its space axis: (space axis, input rows,
/// kernel, stride, pad before, transposed).
#[derive(Clone, Copy, Debug)]
struct WinGeom(usize, usize, usize, usize, usize, bool);

impl WinGeom {
    /// How the window clips a tile's range on its space axis: the rows it
    /// reads and the pads that remain before and after (transposed: the dY
    /// rows and where the first sits against the tile's first row).
    fn clip(&self, r: (usize, usize)) -> (usize, usize, usize) {
        let WinGeom(_, h, k, s, p, t) = *self;
        if t {
            let (o0, o1) = trows(h, r, k, s, p);
            (o1 - o0, (p + r.0).wrapping_sub(o0 * s), 0)
        } else {
            let ((lo, hi), pt, pb) = window_rows(h, r, k, s, p);
            (hi - lo, pt, pb)
        }
    }
}

/// Every window of a node's space, with its input's rows.
fn window_geometry(n: &Node, g: &Graph, sp: &Space) -> Vec<WinGeom> {
    let geom = |t: bool| {
        move |&(i, a, sa, k, s, p): &(usize, usize, usize, usize, usize, usize)| {
            let h = n.inputs[i].map_or(0, |x| g.ty(x).shape[a]);
            WinGeom(sa, h, k, s, p, t)
        }
    };
    sp.windows
        .iter()
        .map(geom(false))
        .chain(sp.twindows.iter().map(geom(true)))
        .collect()
}

/// The windows of input `i` in a space.
fn windows_of(sp: &Space, i: Option<usize>) -> Vec<Win> {
    let f = |t: bool| {
        move |&(_, a, sa, k, st, p): &(usize, usize, usize, usize, usize, usize)| {
            (a, sa, k, st, p, t)
        }
    };
    let of = |w: &&(usize, usize, usize, usize, usize, usize)| Some(w.0) == i;
    sp.windows
        .iter()
        .filter(of)
        .map(f(false))
        .chain(sp.twindows.iter().filter(of).map(f(true)))
        .collect()
}

/// The rows `[o0, o1)` of dY (of `oh` rows) that reach dX rows `[i0, i1)`
/// through a convolution's windows; never empty. The first is never a
/// window that starts after row `i0` (the tile's pad before, `p + i0 - o0
/// s`, is not negative): where no window reaching `i0` starts at or before
/// it (a kernel shorter than the stride, pads wider than the kernel, a
/// tile past the last window), it is the last window starting before the
/// tile, which reads only that pad. A tile no window reaches (past the
/// last one: rows only X or the declared dX has) thus reads one dY row
/// and computes zeros.
fn trows(oh: usize, (i0, i1): (usize, usize), k: usize, s: usize, p: usize) -> (usize, usize) {
    let lo = i0 as i64 + p as i64 - k as i64 + 1;
    let reach = if lo <= 0 {
        0
    } else {
        (lo as usize).div_ceil(s)
    };
    let o0 = reach.min((i0 + p) / s).min(oh.saturating_sub(1));
    let o1 = ((i1 - 1 + p) / s + 1).min(oh);
    (o0, o1)
}

/// The rows `[lo, hi)` of an input axis of size `h` that the windows of
/// output rows `[o0, o1)` read, and the pads before and after that remain.
/// Windows that read only padding (a Pad's tile inside its pads) read no
/// rows, all their extent a pad before.
fn window_rows(
    h: usize,
    (o0, o1): (usize, usize),
    k: usize,
    s: usize,
    p: usize,
) -> ((usize, usize), usize, usize) {
    let lo = (o0 * s) as i64 - p as i64;
    let hi = ((o1 - 1) * s) as i64 - p as i64 + k as i64;
    if hi <= 0 || lo >= h as i64 {
        let at = if lo >= h as i64 { h } else { 0 };
        return ((at, at), (hi - lo) as usize, 0);
    }
    let (clo, chi) = (lo.max(0), hi.min(h as i64));
    (
        (clo as usize, chi as usize),
        (clo - lo) as usize,
        (hi - chi) as usize,
    )
}

/// An operand's box for a tile, windows included.
fn region_w(
    shape: &[usize],
    m: &AxisMap,
    wins: &[Win],
    tile: &[(usize, usize)],
) -> Vec<(usize, usize)> {
    let mut r = region(shape, m, tile);
    for &(a, sa, k, st, p, t) in wins {
        r[a] = if t {
            trows(shape[a], tile[sa], k, st, p)
        } else {
            window_rows(shape[a], tile[sa], k, st, p).0
        };
    }
    r
}

/// An operand's box for a tile: per operand axis `[lo, hi)`.
fn region(shape: &[usize], m: &AxisMap, tile: &[(usize, usize)]) -> Vec<(usize, usize)> {
    shape
        .iter()
        .zip(m)
        .map(|(&d, a)| match a {
            Some(_) if d == 1 => (0, 1),
            Some(a) => tile[*a],
            None => (0, d),
        })
        .collect()
}

/// One DMA's geometry: a run of contiguous bytes and up to two outer loops
/// per command (more loops become more commands), from a box of a dense
/// tensor to a dense tile.
#[derive(Clone, Debug)]
struct Boxed {
    src_off: u64,
    run: u64,
    /// Outer loops, innermost first: (count, source stride, tile stride).
    outer: Vec<(u64, u64, u64)>,
}

fn boxed(shape: &[usize], elem: usize, reg: &[(usize, usize)]) -> Boxed {
    let r = shape.len();
    let mut ss = vec![elem as u64; r];
    let mut ds = vec![elem as u64; r];
    for i in (0..r.saturating_sub(1)).rev() {
        ss[i] = ss[i + 1] * shape[i + 1] as u64;
        ds[i] = ds[i + 1] * (reg[i + 1].1 - reg[i + 1].0) as u64;
    }
    let src_off = (0..r).map(|i| reg[i].0 as u64 * ss[i]).sum();
    let mut run = elem as u64;
    let mut i = r;
    while i > 0 && reg[i - 1] == (0, shape[i - 1]) {
        run *= shape[i - 1] as u64;
        i -= 1;
    }
    if i > 0 {
        run *= (reg[i - 1].1 - reg[i - 1].0) as u64;
        i -= 1;
    }
    let mut outer: Vec<(u64, u64, u64)> = Vec::new();
    while i > 0 {
        i -= 1;
        let c = (reg[i].1 - reg[i].0) as u64;
        if c == 1 {
            continue;
        }
        match outer.last_mut() {
            Some(last) if last.1 * last.0 == ss[i] && last.2 * last.0 == ds[i] => {
                last.0 *= c;
            }
            None if run == ss[i] && run == ds[i] => run *= c,
            _ => outer.push((c, ss[i], ds[i])),
        }
    }
    Boxed {
        src_off,
        run,
        outer,
    }
}

/// The commands of one box transfer: (home delta, tile delta, shape), each
/// at most [`lir::DMA_MAX_BYTES`].
fn commands(b: &Boxed) -> Vec<(u64, u64, lir::Shape)> {
    // Loops beyond the second become separate commands.
    let inner: Vec<(u64, u64, u64)> = b.outer.iter().take(2).copied().collect();
    let extra: Vec<(u64, u64, u64)> = b.outer.iter().skip(2).copied().collect();
    let mut bases = vec![(0u64, 0u64)];
    for &(c, s, d) in &extra {
        bases = bases
            .iter()
            .flat_map(|&(hs, ts)| (0..c).map(move |k| (hs + k * s, ts + k * d)))
            .collect();
    }
    let get = |k: usize| inner.get(k).copied().unwrap_or((1, 0, 0));
    let (c0, s0, d0) = get(0);
    let (c1, s1, d1) = get(1);
    let shape = lir::Shape {
        bytes: b.run,
        counts: [c0, c1],
        src_strides: [s0, s1],
        dst_strides: [d0, d1],
    };
    let mut out = Vec::new();
    for (hs, ts) in bases {
        split_command(hs, ts, shape, &mut out);
    }
    out
}

/// Split a command whose total exceeds the DMA limit.
fn split_command(hs: u64, ts: u64, sh: lir::Shape, out: &mut Vec<(u64, u64, lir::Shape)>) {
    const MAX: u64 = lir::DMA_MAX_BYTES / ALIGN * ALIGN;
    if sh.total() <= lir::DMA_MAX_BYTES {
        out.push((hs, ts, sh));
        return;
    }
    if sh.bytes * sh.counts[0] <= lir::DMA_MAX_BYTES {
        // Rows of the outer loop in groups.
        let per = (lir::DMA_MAX_BYTES / (sh.bytes * sh.counts[0])).max(1);
        let mut j = 0;
        while j < sh.counts[1] {
            let n = per.min(sh.counts[1] - j);
            out.push((
                hs + j * sh.src_strides[1],
                ts + j * sh.dst_strides[1],
                lir::Shape {
                    counts: [sh.counts[0], n],
                    ..sh
                },
            ));
            j += n;
        }
        return;
    }
    for j in 0..sh.counts[1] {
        if sh.bytes <= lir::DMA_MAX_BYTES {
            let per = lir::DMA_MAX_BYTES / sh.bytes;
            let mut i = 0;
            while i < sh.counts[0] {
                let n = per.min(sh.counts[0] - i);
                out.push((
                    hs + j * sh.src_strides[1] + i * sh.src_strides[0],
                    ts + j * sh.dst_strides[1] + i * sh.dst_strides[0],
                    lir::Shape {
                        counts: [n, 1],
                        src_strides: [sh.src_strides[0], 0],
                        dst_strides: [sh.dst_strides[0], 0],
                        ..sh
                    },
                ));
                i += n;
            }
        } else {
            for i in 0..sh.counts[0] {
                let (h0, t0) = (
                    hs + j * sh.src_strides[1] + i * sh.src_strides[0],
                    ts + j * sh.dst_strides[1] + i * sh.dst_strides[0],
                );
                let mut k = 0;
                while k < sh.bytes {
                    let n = MAX.min(sh.bytes - k);
                    out.push((h0 + k, t0 + k, lir::Shape::contiguous(n)));
                    k += n;
                }
            }
        }
    }
}

/// The work of one kernel call on the given operand types (for the cycle model).
pub fn work(op_type: &str, ins: &[Option<&TensorType>], outs: &[Option<&TensorType>]) -> Work {
    let numel = |t: Option<&TensorType>| t.map_or(0, |t| t.numel() as u64);
    let inp = |i: usize| ins.get(i).copied().flatten();
    let out = |i: usize| outs.get(i).copied().flatten();
    match op_type {
        "Gemm" | "MatMul" | "FusedMatMul" => {
            let (y, a) = (out(0), inp(0));
            match (y, a) {
                (Some(y), Some(a)) if !y.shape.is_empty() => {
                    let n = *y.shape.last().unwrap() as u64;
                    let rows = (y.numel() as u64 / n.max(1)).max(1);
                    let k = (a.numel() as u64 / rows).max(1);
                    Work::Macs(y.numel() as u64 * k)
                }
                _ => Work::Elems(numel(y)),
            }
        }
        "Conv" => {
            let (y, w) = (out(0), inp(1));
            let per = w.map_or(1, |w| {
                w.numel() as u64 / (*w.shape.first().unwrap_or(&1) as u64).max(1)
            });
            Work::Macs(numel(y) * per)
        }
        "ConvGrad" | "ConvGradX" | "ConvGradW" => {
            // Each gradient costs a forward convolution: |dY| × (|W| / M).
            let dy = inp(0);
            let m = dy.and_then(|t| t.shape.get(1)).copied().unwrap_or(1) as u64;
            let w_elems = match op_type {
                "ConvGradW" => numel(out(0)),
                "ConvGradX" => numel(inp(1)),
                _ => numel(inp(2)),
            };
            let grads = outs.iter().take(2).filter(|o| o.is_some()).count().max(1) as u64;
            Work::Macs(numel(dy) * (w_elems / m.max(1)) * grads)
        }
        _ => {
            let i: u64 = ins.iter().map(|t| numel(*t)).sum();
            let o: u64 = outs.iter().map(|t| numel(*t)).sum();
            Work::Elems(i.max(o))
        }
    }
}

/// Where a tensor lives at home (its level's arena, or a constant).
pub fn home(p: &Program, plan: &MemoryPlan, t: TensorId) -> Loc {
    match plan.home(t) {
        Some((level, off)) => Loc::arena(level, off),
        None => Loc {
            base: Base::Const(p.graph.alias_root(t)),
            offset: 0,
        },
    }
}

/// One operand stream of a node: an input, an output, or an input updated
/// in place (loaded and stored through the same slot).
#[derive(Clone, Debug)]
struct Stream {
    tensor: TensorId,
    /// Input position, when loaded.
    input: Option<usize>,
    /// Output positions written through this stream.
    outputs: Vec<usize>,
    map: AxisMap,
    wins: Vec<Win>,
    /// Same box for every tile: loaded once (inputs only).
    resident: bool,
    slots: usize,
    slot_bytes: u64,
    /// An output accumulated over several tiles (a reduced axis is cut):
    /// one more L1 slot, after the others, for the partial tiles.
    partial: bool,
    /// L1 offset of slot 0; slot k at `base + k * slot_bytes`.
    base: u64,
    /// Home in L3: tiles pass through L2 staging slots (set at emission).
    staged: bool,
    /// L2 offset of the stream's staging slots: `in_slots` for loads, then
    /// `out_slots` for stores, each `slot_bytes`.
    stage_base: u64,
}

impl Stream {
    /// L2 staging slots for loads and for stores, were the tensor in L3:
    /// two of each when double-buffered (the next tile arrives from L3
    /// while this one moves to L1; the last tile leaves for L3 while this
    /// one comes back from L1), else one; single-buffered, an in-place
    /// stream stores through the slot it loaded through (no store slots).
    fn stage_slots(&self, buffering: Buffering, ntiles: usize) -> (usize, usize) {
        let two = buffering == Buffering::Double && ntiles > 1;
        if !two && self.input.is_some() && !self.outputs.is_empty() {
            return (1, 0);
        }
        let ins = match self.input {
            None => 0,
            Some(_) if self.resident || !two => 1,
            Some(_) => 2,
        };
        let outs = match (self.outputs.is_empty(), two) {
            (true, _) => 0,
            (false, true) => 2,
            (false, false) => 1,
        };
        (ins, outs)
    }
    /// L1 bytes of the stream's slots.
    fn l1_bytes(&self) -> u64 {
        self.slot_bytes * (self.slots as u64 + self.partial as u64)
    }
    /// L2 staging bytes the stream takes were its tensor in L3.
    fn stage_bytes(&self, buffering: Buffering, ntiles: usize) -> u64 {
        let (i, o) = self.stage_slots(buffering, ntiles);
        self.slot_bytes * (i + o) as u64
    }
}

fn pad(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// The streams of a node under a tiling, with slot sizes (offsets unset).
fn streams(
    n: &Node,
    g: &Graph,
    ph: &Phase,
    sp: &Space,
    t: &Tiling,
    buffering: Buffering,
) -> Vec<Stream> {
    let moving = |a: &Option<usize>, d: usize| match a {
        Some(a) => d != 1 && (t.iter[*a] || t.split.map(|s| s.0) == Some(*a)),
        None => false,
    };
    let classes = t.classes(&sp.dims, &window_geometry(n, g, sp));
    let ntiles = t.count(&sp.dims);
    let rtiles = t.reduce_tiles(sp);
    let max_bytes = |tensor: TensorId, m: &AxisMap, wins: &[Win]| -> u64 {
        let ty = g.ty(tensor);
        classes
            .iter()
            .map(|(tile, _)| {
                let r = region_w(&ty.shape, m, wins, tile);
                r.iter().map(|(a, b)| (b - a) as u64).product::<u64>() * ty.dtype.size() as u64
            })
            .max()
            .unwrap_or(0)
    };
    let in_place: Vec<(usize, usize)> =
        n.op.aliases()
            .iter()
            .filter(|a| a.kind == AliasKind::InPlace)
            .map(|a| (a.output, a.input))
            .collect();
    let mut out: Vec<Stream> = Vec::new();
    for (i, ti) in n.inputs.iter().enumerate() {
        let Some(tensor) = ti else { continue };
        if ph.shape_only.contains(&i) {
            continue;
        }
        let m = sp.inputs[i].clone().unwrap();
        let wins = windows_of(sp, Some(i));
        let shape = &g.ty(*tensor).shape;
        let resident = !m.iter().zip(shape).any(|(a, &d)| moving(a, d))
            && !wins.iter().any(|w| moving(&Some(w.1), 2));
        let outputs: Vec<usize> = in_place
            .iter()
            .filter(|(o, ii)| *ii == i && ph.outputs.contains(o))
            .map(|(o, _)| *o)
            .collect();
        let slots = match (buffering, resident, outputs.is_empty()) {
            (_, true, _) | (Buffering::Single, _, _) => 1,
            (Buffering::Double, false, true) => 2,
            (Buffering::Double, false, false) => 3,
        };
        out.push(Stream {
            tensor: *tensor,
            input: Some(i),
            outputs,
            slot_bytes: pad(max_bytes(*tensor, &m, &wins)),
            map: m,
            wins,
            resident,
            slots,
            partial: false,
            base: 0,
            staged: false,
            stage_base: 0,
        });
    }
    for (o, to) in n.outputs.iter().enumerate() {
        let Some(tensor) = to else { continue };
        if !ph.outputs.contains(&o) || out.iter().any(|s| s.outputs.contains(&o)) {
            continue;
        }
        let m = sp.outputs[o].clone().unwrap();
        out.push(Stream {
            tensor: *tensor,
            input: None,
            outputs: vec![o],
            slot_bytes: pad(max_bytes(*tensor, &m, &[])),
            map: m,
            wins: vec![],
            resident: false,
            // Outputs move once per output tile: per group of reduce tiles.
            slots: if buffering == Buffering::Double && ntiles / rtiles > 1 {
                2
            } else {
                1
            },
            partial: rtiles > 1,
            base: 0,
            staged: false,
            stage_base: 0,
        });
    }
    out
}

/// Modelled cycles of a node under a tiling (see the module doc).
#[allow(clippy::too_many_arguments)]
fn model_cycles(
    n: &Node,
    g: &Graph,
    ph: &Phase,
    sp: &Space,
    t: &Tiling,
    streams: &[Stream],
    pf: &Platform,
    buffering: Buffering,
) -> f64 {
    let mut total_in = 0.0;
    let mut total_out = 0.0;
    let mut total_c = 0.0;
    let mut resident = 0.0;
    // An output tile accumulated over `rt` tiles is stored once, and each
    // tile but its first adds its partial tile in.
    let rt = t.reduce_tiles(sp) as f64;
    for (tile, count) in t.classes(&sp.dims, &window_geometry(n, g, sp)) {
        let (mut din, mut din_res, mut dout, mut acc) = (0.0, 0.0, 0.0, 0.0);
        let mut in_tys: Vec<Option<TensorType>> = vec![None; n.inputs.len()];
        let mut out_tys: Vec<Option<TensorType>> = vec![None; n.outputs.len()];
        for &i in &ph.shape_only {
            if let (Some(t), Some(m)) = (n.inputs[i], &sp.inputs[i]) {
                let ty = g.ty(t);
                let reg = region_w(&ty.shape, m, &windows_of(sp, Some(i)), &tile);
                in_tys[i] = Some(TensorType::new(
                    ty.dtype,
                    reg.iter().map(|(a, b)| b - a).collect(),
                ));
            }
        }
        for s in streams {
            let ty = g.ty(s.tensor);
            let reg = region_w(&ty.shape, &s.map, &s.wins, &tile);
            let tty = TensorType::new(ty.dtype, reg.iter().map(|(a, b)| b - a).collect());
            let cost: f64 = if tty.numel() == 0 {
                0.0
            } else {
                commands(&boxed(&ty.shape, ty.dtype.size(), &reg))
                    .iter()
                    .map(|(_, _, sh)| pf.dma_issue + pf.dma_cycles(sh.total(), sh.runs()))
                    .sum()
            };
            if let Some(i) = s.input {
                if s.resident {
                    din_res = cost;
                } else {
                    din += cost;
                }
                in_tys[i] = Some(tty.clone());
            }
            if !s.outputs.is_empty() {
                dout += cost / rt;
                if s.partial {
                    acc += pf.kernel_cycles(Work::Elems(tty.numel() as u64)) * (rt - 1.0) / rt;
                }
                for &o in &s.outputs {
                    out_tys[o] = Some(tty.clone());
                }
            }
        }
        let ins: Vec<Option<&TensorType>> = in_tys.iter().map(|t| t.as_ref()).collect();
        let outs: Vec<Option<&TensorType>> = out_tys.iter().map(|t| t.as_ref()).collect();
        let c = pf.kernel_cycles(work(&n.op_type, &ins, &outs)) + acc;
        let k = count as f64;
        total_in += din * k;
        total_out += dout * k;
        total_c += c * k;
        resident = f64::max(resident, din_res);
    }
    // Resident inputs load once.
    let total_in = total_in + resident;
    match buffering {
        Buffering::Single => total_in + total_c + total_out,
        Buffering::Double => {
            // Once the pipeline is full a tile costs max(compute, transfers).
            let nt = t.count(&sp.dims) as f64;
            let per = (total_c / nt).max((total_in + total_out) / nt);
            per * nt + (total_in + total_out) / nt
        }
    }
}

/// Candidate chunk sizes below `d` along an axis of size `d`, all
/// multiples of `step` (an axis read through a strided transposed window
/// splits in stride multiples): its divisors and `step` times the powers
/// of two, so that a stride that divides no chunk of the height (3 on 17
/// rows) still cuts it, the last chunk ragged.
fn chunk_sizes(d: usize, step: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..d).filter(|c| d.is_multiple_of(*c)).collect();
    let mut p = step;
    while p < d {
        v.push(p);
        p *= 2;
    }
    v.retain(|c| c.is_multiple_of(step));
    v.sort_unstable();
    v.dedup();
    v
}

/// Choose the tiling of one node under the L1 budget.
fn choose(
    n: &Node,
    g: &Graph,
    ph: &Phase,
    sp: &Space,
    l1: u64,
    buffering: Buffering,
    pf: &Platform,
) -> std::result::Result<Vec<Choice>, u64> {
    let r = sp.dims.len();
    let mut least = u64::MAX;
    let par: Vec<usize> = (0..r).filter(|&a| sp.cuttable(a)).collect();
    // Axes read through a strided transposed window split in stride multiples only.
    let no_iter = |a: usize| sp.twindows.iter().any(|w| w.2 == a && w.4 > 1);
    let mut ranked: Vec<(f64, usize, Tiling, Vec<Stream>, u64)> = Vec::new();
    // Iterated axes: any subset of the parallel axes before the split axis (or all, unsplit).
    let subsets = 1usize << par.len().min(6);
    let mut cands: Vec<Tiling> = Vec::new();
    for mask in 0..subsets {
        let mut iter = vec![false; r];
        let mut skip = false;
        for (k, &a) in par.iter().enumerate() {
            if mask & (1 << k) != 0 {
                iter[a] = true;
                skip |= no_iter(a);
            }
        }
        if skip {
            continue;
        }
        cands.push(Tiling {
            iter: iter.clone(),
            split: None,
        });
        for &a in &par {
            if iter[a] || iter.iter().enumerate().any(|(b, &it)| it && b > a) {
                continue;
            }
            let step = sp
                .twindows
                .iter()
                .filter(|w| w.2 == a)
                .map(|w| w.4)
                .max()
                .unwrap_or(1);
            for c in chunk_sizes(sp.dims[a], step) {
                cands.push(Tiling {
                    iter: iter.clone(),
                    split: Some((a, c)),
                });
            }
        }
    }
    for t in cands {
        let ntiles = t.count(&sp.dims);
        if ntiles > 65_536 {
            continue;
        }
        let st = streams(n, g, ph, sp, &t, buffering);
        // A tile accumulating into an output tile computes a partial of
        // its own; an input updated in place cannot.
        if t.reduce_tiles(sp) > 1
            && st
                .iter()
                .any(|s| s.input.is_some() && !s.outputs.is_empty())
        {
            continue;
        }
        let bytes: u64 = st.iter().map(Stream::l1_bytes).sum();
        least = least.min(bytes);
        if bytes > l1 {
            continue;
        }
        let c = model_cycles(n, g, ph, sp, &t, &st, pf, buffering);
        ranked.push((c, ntiles, t, st, bytes));
    }
    if ranked.is_empty() {
        return Err(least);
    }
    // A reduction is cut across tiles only where no tiling of this
    // buffering that keeps it whole fits: whole, every output element is
    // summed in one pass in the interpreter's order, bit for bit. (The
    // double-buffered cut may still win over the single-buffered whole
    // tiling, timed, in `lower_phase`.)
    if ranked.iter().any(|c| c.2.reduce_tiles(sp) == 1) {
        ranked.retain(|c| c.2.reduce_tiles(sp) == 1);
    }
    // Fewest modelled cycles, then fewest tiles; the sort is stable, so
    // equal candidates keep their enumeration order (deterministic).
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(ranked
        .into_iter()
        .take(CANDIDATES)
        .map(|(_, _, t, s, b)| (t, s, b))
        .collect())
}

/// How many of the model's best tilings per buffering are emitted and timed exactly.
const CANDIDATES: usize = 3;

/// Lowering options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The L1 budget; `None`: kernels read their operands at home (no L1, no DMA).
    pub l1: Option<u64>,
    pub buffering: Buffering,
    pub platform: Platform,
}

/// A DMA in flight: (id, the (stream, slot key) pairs it touches, inbound).
/// Slot keys: `k` is L1 slot k; `IN + k` and `OUT + k` the stream's L2
/// staging slots for loads and for stores.
type InFlight = (u32, Vec<(usize, usize)>, bool);
const IN: usize = 1 << 8;
const OUT: usize = 2 << 8;

/// Tiling choices by node signature (op, attributes, operand types, phase).
type ChoiceCache = std::collections::HashMap<String, (Buffering, Tiling, String)>;

/// The tilings a lowering chose, to lower the same program again (with other
/// homes) into exactly the same tiles.
#[derive(Clone, Debug, Default)]
pub struct Choices(ChoiceCache);

/// A tiling with its streams and L1 bytes.
type Choice = (Tiling, Vec<Stream>, u64);

/// Issues steps for one node, placing waits by hazard.
struct Emitter<'a> {
    steps: &'a mut Vec<Step>,
    next_id: &'a mut u32,
    flight: Vec<InFlight>,
}

impl Emitter<'_> {
    /// Wait for every DMA in flight that touches a (stream, slot key) pair
    /// matching `f(stream, key, inbound)`.
    fn wait_where(&mut self, f: impl Fn(usize, usize, bool) -> bool) {
        let (now, keep): (Vec<InFlight>, Vec<InFlight>) = self
            .flight
            .drain(..)
            .partition(|(_, keys, i)| keys.iter().any(|&(s, k)| f(s, k, *i)));
        for (id, ..) in now {
            self.steps.push(Step::Wait(id));
        }
        self.flight = keep;
    }
    fn dma(
        &mut self,
        src: Loc,
        dst: Loc,
        shape: lir::Shape,
        keys: Vec<(usize, usize)>,
        inbound: bool,
    ) {
        let id = *self.next_id;
        *self.next_id += 1;
        self.steps.push(Step::Dma(Dma {
            id,
            src,
            dst,
            shape,
        }));
        self.flight.push((id, keys, inbound));
    }
    /// A box of a tensor at `home` into its dense tile at `tile`.
    fn load_box(&mut self, home: Loc, tile: Loc, b: &Boxed, key: (usize, usize)) {
        for (hd, td, sh) in commands(b) {
            self.dma(home.offset_by(hd), tile.offset_by(td), sh, vec![key], true);
        }
    }
    /// A dense tile at `tile` back into its box of the tensor at `home`.
    fn store_box(&mut self, tile: Loc, home: Loc, b: &Boxed, key: (usize, usize)) {
        for (hd, td, sh) in commands(b) {
            // Tile to home: the strides swap roles.
            let sh = lir::Shape {
                src_strides: sh.dst_strides,
                dst_strides: sh.src_strides,
                ..sh
            };
            self.dma(tile.offset_by(td), home.offset_by(hd), sh, vec![key], false);
        }
    }
    /// A dense copy of `bytes` from `src` to `dst`, in commands under the limit.
    fn copy(&mut self, src: Loc, dst: Loc, bytes: u64, keys: &[(usize, usize)], inbound: bool) {
        const CHUNK: u64 = lir::DMA_MAX_BYTES / ALIGN * ALIGN;
        let mut at = 0;
        while at < bytes {
            let n = CHUNK.min(bytes - at);
            self.dma(
                src.offset_by(at),
                dst.offset_by(at),
                lir::Shape::contiguous(n),
                keys.to_vec(),
                inbound,
            );
            at += n;
        }
    }
}

fn operand(
    g: &Graph,
    t: TensorId,
    loc: Loc,
    ty: TensorType,
    home: Option<HomeBox>,
    whole: bool,
) -> Operand {
    Operand {
        loc,
        value: if whole {
            g.constants.get(&t).cloned()
        } else {
            None
        },
        ty,
        home,
        shape_only: false,
    }
}

/// The op of one tile where it differs from the node's.
fn tile_op(
    n: &Node,
    g: &Graph,
    sp: &Space,
    tile: &[(usize, usize)],
) -> Result<Option<std::sync::Arc<dyn crate::ops::Op>>, String> {
    use crate::ops::conv::{Conv, ConvGrad, Window};
    let op: &dyn std::any::Any = &*n.op;
    let expected = |what: &str| format!("its tiling rule expects {what}");
    let input = |i: usize| {
        n.inputs[i].ok_or_else(|| format!("input {i}, which its tiling cuts, is absent"))
    };
    let window = |w: Option<&(usize, usize, usize, usize, usize, usize)>| {
        w.copied()
            .ok_or_else(|| "its tiling rule has no window".to_string())
    };
    // The node's window with the tile's pads along the rows (`kernel`:
    // the node's kernel extents, for the columns' pads).
    let row_pads = |c: &Window, kernel: Vec<usize>, pt: i64, pb: i64| {
        let w2 = c
            .resolve(2, Some(kernel))
            .map_err(|e| format!("its window does not resolve: {e}"))?;
        Ok::<_, String>(Window {
            pads: Some(vec![pt, w2.p.1 as i64, pb, w2.p.3 as i64]),
            ..c.clone()
        })
    };
    Ok(match sp.retile {
        Retile::Same => None,
        Retile::Group(axis) => {
            let c = op
                .downcast_ref::<Conv>()
                .ok_or_else(|| expected("a Conv"))?;
            Some(std::sync::Arc::new(Conv {
                win: c.win.clone(),
                group: tile[axis].1 - tile[axis].0,
                no_bias: false,
            }))
        }
        Retile::Rows { group } => {
            let c = op
                .downcast_ref::<Conv>()
                .ok_or_else(|| expected("a Conv"))?;
            let (i, a, sa, k, st, p) = window(sp.windows.first())?;
            let h = g.ty(input(i)?).shape[a];
            let (_, pt, pb) = window_rows(h, tile[sa], k, st, p);
            let w = g.ty(input(1)?);
            let win = row_pads(&c.win, w.shape[2..].to_vec(), pt as i64, pb as i64)?;
            // Input channels cut across tiles (the space's last axis,
            // reduced): the first tile adds the bias, the later ones not.
            let later = sp.reduce.last() == Some(&true) && tile.last().is_some_and(|t| t.0 > 0);
            Some(std::sync::Arc::new(Conv {
                win,
                group: group.map_or(c.group, |ax| tile[ax].1 - tile[ax].0),
                no_bias: later,
            }))
        }
        Retile::Planes => {
            use crate::ops::pool::{PlaneAt, Pool, PoolGrad};
            let at = PlaneAt {
                n0: tile[0].0,
                c0: tile[1].0,
                channels: sp.dims[1],
            };
            if let Some(p) = op.downcast_ref::<Pool>() {
                Some(std::sync::Arc::new(Pool {
                    kind: p.kind,
                    win: p.win.clone(),
                    at,
                }))
            } else {
                let p = op
                    .downcast_ref::<PoolGrad>()
                    .ok_or_else(|| expected("a pool or its gradient"))?;
                Some(std::sync::Arc::new(PoolGrad {
                    kind: p.kind,
                    win: p.win.clone(),
                    at,
                }))
            }
        }
        Retile::WRows { group, kernel } => {
            let c = op
                .downcast_ref::<ConvGrad>()
                .ok_or_else(|| expected("a conv gradient"))?;
            let (i, a, sa, k, st, p) = window(sp.windows.first())?;
            let h = g.ty(input(i)?).shape[a];
            let (_, pt, pb) = window_rows(h, tile[sa], k, st, p);
            let win = row_pads(&c.win, kernel.to_vec(), pt as i64, pb as i64)?;
            Some(std::sync::Arc::new(ConvGrad {
                win,
                group: group.map_or(c.group, |ax| tile[ax].1 - tile[ax].0),
                kind: c.kind,
            }))
        }
        Retile::Pad => {
            let (mode, mut begin, mut end, value) =
                pad_geometry(n, g).ok_or_else(|| expected("a Pad whose pads resolve"))?;
            for &(i, a, sa, k, st, p) in &sp.windows {
                let h = g.ty(input(i)?).shape[a];
                let (_, pt, pb) = window_rows(h, tile[sa], k, st, p);
                (begin[a], end[a]) = (pt as i64, pb as i64);
            }
            begin.extend(end);
            Some(std::sync::Arc::new(crate::ops::shape::Pad {
                mode,
                pads_attr: Some(begin),
                value_attr: value,
                tile: true,
            }))
        }
        Retile::SceRows => {
            let sg = op
                .downcast_ref::<crate::ops::loss::SceGrad>()
                .ok_or_else(|| expected("a softmax cross-entropy gradient"))?;
            (tile[0] != (0, sp.dims[0])).then(|| {
                std::sync::Arc::new(crate::ops::loss::SceGrad(sg.0, Some(tile[0].0)))
                    as std::sync::Arc<dyn crate::ops::Op>
            })
        }
        Retile::Mean(count) => {
            let whole = (0..sp.dims.len())
                .filter(|&a| sp.reduced(a))
                .all(|a| tile[a] == (0, sp.dims[a]));
            let r = op
                .downcast_ref::<crate::ops::basic::Reduce>()
                .ok_or_else(|| expected("a reduction"))?;
            (!whole).then(|| {
                std::sync::Arc::new(crate::ops::basic::Reduce {
                    kind: r.kind,
                    axes_attr: r.axes_attr.clone(),
                    keepdims: r.keepdims,
                    noop_with_empty_axes: r.noop_with_empty_axes,
                    divisor: Some(count),
                }) as std::sync::Arc<dyn crate::ops::Op>
            })
        }
        Retile::Count(count) => {
            use crate::ops::loss::{Mse, MseGrad};
            let held: usize = tile.iter().map(|(a, b)| b - a).product();
            if held == count {
                None
            } else if op.is::<Mse>() {
                Some(std::sync::Arc::new(Mse { count: Some(count) }))
            } else if op.is::<MseGrad>() {
                Some(std::sync::Arc::new(MseGrad { count: Some(count) }))
            } else {
                return Err(expected("MSELoss or its gradient"));
            }
        }
        Retile::TRows { group, kernel } => {
            let c = op
                .downcast_ref::<ConvGrad>()
                .ok_or_else(|| expected("a conv gradient"))?;
            let (i, a, sa, k, st, p) = window(sp.twindows.first())?;
            let oh = g.ty(input(i)?).shape[a];
            let (i0, i1) = tile[sa];
            let (o0, o1) = trows(oh, (i0, i1), k, st, p);
            let pt = p + i0 - o0 * st;
            let pb = ((o1 as i64 - 1) * st as i64 - p as i64 + k as i64 - i1 as i64).max(0);
            let win = row_pads(&c.win, kernel.to_vec(), pt as i64, pb)?;
            Some(std::sync::Arc::new(ConvGrad {
                win,
                group: group.map_or(c.group, |ax| tile[ax].1 - tile[ax].0),
                kind: c.kind,
            }))
        }
    })
}

/// A phase's tile space: its own, or (no tiling rule) one tile of whole tensors.
fn phase_space(n: &Node, g: &Graph, ph: &Phase) -> Space {
    ph.space.clone().unwrap_or_else(|| Space {
        dims: vec![],
        parallel: vec![],
        inputs: n
            .inputs
            .iter()
            .map(|t| t.map(|t| vec![None; g.ty(t).shape.len()]))
            .collect(),
        outputs: n
            .outputs
            .iter()
            .map(|t| t.map(|t| vec![None; g.ty(t).shape.len()]))
            .collect(),
        ..Default::default()
    })
}

/// Whether every output of node `n` is a view of an input (no kernel, no tiles).
fn is_view(n: &Node) -> bool {
    n.outputs.iter().enumerate().all(|(o, t)| {
        t.is_none()
            || n.op
                .aliases()
                .iter()
                .any(|a| a.output == o && a.kind == AliasKind::View)
    })
}

/// Whether node `n`'s smallest tile (single-buffered; the whole op where
/// it has no tiling rule) fits `l1` bytes.
pub fn smallest_fits(n: &Node, g: &Graph, l1: u64) -> bool {
    least_l1(n, g).0 <= l1
}

/// The L1 bytes of node `n`'s smallest tile (single-buffered, its largest
/// phase), and whether that phase has no tiling rule (one whole tile).
fn least_l1(n: &Node, g: &Graph) -> (u64, bool) {
    let mut worst = (0u64, false);
    for ph in phases(n, g) {
        let sp = phase_space(n, g, &ph);
        let least = choose(n, g, &ph, &sp, 0, Buffering::Single, &Platform::default())
            .err()
            .unwrap_or(0);
        if least > worst.0 {
            worst = (least, ph.space.is_none());
        }
    }
    worst
}

/// The error for an L1 of `l1` bytes that some node's smallest tile does
/// not fit: it names the node whose smallest tile is largest, so the bytes
/// it gives are what the whole program needs (not only the first node
/// lowered that does not fit).
fn l1_shortfall(p: &Program, l1: u64) -> Error {
    let g = &p.graph;
    let (mut need, mut at) = (0u64, None);
    for n in g.nodes.iter().filter(|n| !is_view(n)) {
        let (least, whole) = least_l1(n, g);
        if least > need {
            (need, at) = (least, Some((n, whole)));
        }
    }
    let what = match at {
        Some((n, whole)) => format!(
            "node `{}`, {}: its smallest tile{}, the largest of any node",
            n.name,
            n.op_type,
            if whole {
                ", the whole op: no tiling rule splits it"
            } else {
                ""
            }
        ),
        None => "no node's smallest tile".into(),
    };
    Error::DoesNotFit {
        level: format!("L1 ({what})"),
        needed: need,
        capacity: l1,
        missing: need.saturating_sub(l1),
        proven: true,
        lower_bound: need,
    }
}

/// How one phase was lowered.
struct PhaseOut {
    tiles: u32,
    how: String,
    l1_bytes: u64,
    /// L2 staging bytes its L3 streams took.
    staged: u64,
    /// Per stream: its tensor and the staging bytes it would take in L3.
    stage_need: Vec<(TensorId, u64)>,
}

/// Lower one phase of node `i` into `steps`.
#[allow(clippy::too_many_arguments)]
fn lower_phase(
    p: &Program,
    plan: &MemoryPlan,
    opt: &Options,
    l1: u64,
    i: usize,
    ph: &Phase,
    steps: &mut Vec<Step>,
    next_id: &mut u32,
    cache: &mut ChoiceCache,
    staging: Option<u64>,
) -> Result<PhaseOut> {
    let g = &p.graph;
    let n = &g.nodes[i];
    // Nodes of the same op, attributes and shapes tile the same way: choose once.
    let key = format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}",
        n.op,
        n.inputs
            .iter()
            .map(|t| t.map(|t| g.ty(t)))
            .collect::<Vec<_>>(),
        n.outputs
            .iter()
            .map(|t| t.map(|t| g.ty(t)))
            .collect::<Vec<_>>(),
        ph.outputs,
        ph.shape_only
    );
    let sp = phase_space(n, g, ph);
    // Candidates: the model's best few double-buffered tilings (when asked
    // for) and its best single-buffered ones; each is emitted and timed by
    // the simulator's clock, and the fastest wins (the requested buffering
    // on a tie). A node runs single-buffered only where that is faster, or
    // where its double-buffered tiles do not fit: its tiling says so.
    if let Some((b, t, how)) = cache.get(&key) {
        let st = streams(n, g, ph, &sp, t, *b);
        let bytes = st.iter().map(Stream::l1_bytes).sum();
        let ntiles = t.count(&sp.dims);
        let stage_need = st
            .iter()
            .map(|s| (s.tensor, s.stage_bytes(*b, ntiles)))
            .collect();
        let (ntiles, staged) = emit_tiles(p, plan, i, ph, &sp, t, st, *b, staging, steps, next_id)?;
        return Ok(PhaseOut {
            tiles: ntiles as u32,
            how: how.clone(),
            l1_bytes: bytes,
            staged,
            stage_need,
        });
    }
    let mut cands: Vec<(Buffering, Choice)> = Vec::new();
    for b in [opt.buffering, Buffering::Single] {
        if cands.iter().any(|(cb, _)| *cb == b) {
            continue;
        }
        if let Ok(v) = choose(n, g, ph, &sp, l1, b, &opt.platform) {
            cands.extend(v.into_iter().map(|c| (b, c)));
        }
    }
    if cands.is_empty() {
        return Err(l1_shortfall(p, l1));
    }
    let mut best: Option<(f64, String, Buffering, Tiling)> = None;
    for (k, (buffering, (t, st, _))) in cands.into_iter().enumerate() {
        let mut scratch = Vec::new();
        let mut id = *next_id;
        emit_tiles(
            p,
            plan,
            i,
            ph,
            &sp,
            &t,
            st,
            buffering,
            staging,
            &mut scratch,
            &mut id,
        )?;
        let cycles = crate::sim::time(&scratch, g, &opt.platform);
        if best.as_ref().is_none_or(|b| cycles < b.0 - 1e-9) {
            let mut how = t.describe();
            if buffering != opt.buffering {
                how.push_str(if opt.buffering == Buffering::Double && k == 0 {
                    " (single-buffered: double-buffered tiles do not fit)"
                } else {
                    " (single-buffered: faster here than double)"
                });
            }
            best = Some((cycles, how, buffering, t));
        }
    }
    let (_, how, b, t) = best.unwrap();
    cache.insert(key, (b, t, how));
    // Emit the choice (with its staging) the way a later node of the same signature will.
    lower_phase(p, plan, opt, l1, i, ph, steps, next_id, cache, staging)
}

/// Emit the steps of one phase under a tiling; returns the number of tiles
/// and the L2 staging bytes its L3 streams took.
///
/// With `staging` (the L2 staging area's start), a stream whose tensor lives
/// in L3 moves through L2 staging slots: a load is L3 → L2 slot → L1 slot,
/// a store L1 slot → L2 slot → L3. Double-buffered, the pipeline runs one
/// stage ahead on each side: tile k+2 comes in from L3 and tile k−1 goes
/// out to L3 while tile k computes and tile k+1 moves into L1. Without
/// `staging`, L3 streams are timed as direct transfers (never emitted so).
#[allow(clippy::too_many_arguments)]
fn emit_tiles(
    p: &Program,
    plan: &MemoryPlan,
    i: usize,
    ph: &Phase,
    sp: &Space,
    t: &Tiling,
    mut st: Vec<Stream>,
    buffering: Buffering,
    staging: Option<u64>,
    steps: &mut Vec<Step>,
    next_id: &mut u32,
) -> Result<(usize, u64)> {
    let g = &p.graph;
    let n = &g.nodes[i];
    let tiles = t.tiles(&sp.dims);
    let mut off = 0;
    let mut stage_off = 0;
    for s in &mut st {
        s.base = off;
        off += s.l1_bytes();
        if let Some(base) = staging {
            if home(p, plan, s.tensor).level() == Level::L3 {
                s.staged = true;
                s.stage_base = base + stage_off;
                stage_off += s.stage_bytes(buffering, tiles.len());
            }
        }
    }
    let mut em = Emitter {
        steps,
        next_id,
        flight: Vec::new(),
    };
    // The box of stream `s` in tile k (None: empty).
    let boxk = |s: &Stream, k: usize| -> Option<(Boxed, u64)> {
        let ty = g.ty(s.tensor);
        let reg = region_w(&ty.shape, &s.map, &s.wins, &tiles[k]);
        if reg.iter().any(|(a, b)| a == b) {
            return None;
        }
        let bytes =
            reg.iter().map(|(a, b)| (b - a) as u64).product::<u64>() * ty.dtype.size() as u64;
        Some((boxed(&ty.shape, ty.dtype.size(), &reg), bytes))
    };
    let l1_slot =
        |s: &Stream, slot: usize| Loc::arena(Level::L1, s.base + slot as u64 * s.slot_bytes);
    // Tiles along the reduced axes accumulate into one output tile: an
    // output stream moves once per group of `rt` consecutive tiles.
    let rt = t.reduce_tiles(sp);
    let last_of_group = |k: usize| k % rt == rt - 1;
    let out_index = |s: &Stream, k: usize| if s.input.is_none() { k / rt } else { k };
    let in_slot = |s: &Stream, k: usize| {
        let (ni, _) = s.stage_slots(buffering, tiles.len());
        let j = k % ni.max(1);
        (
            IN + j,
            Loc::arena(Level::L2, s.stage_base + j as u64 * s.slot_bytes),
        )
    };
    let out_slot = |s: &Stream, k: usize| {
        let (ni, no) = s.stage_slots(buffering, tiles.len());
        if no == 0 {
            return in_slot(s, k);
        }
        let j = out_index(s, k) % no;
        (
            OUT + j,
            Loc::arena(Level::L2, s.stage_base + (ni + j) as u64 * s.slot_bytes),
        )
    };
    let loads = |s: &Stream, k: usize| s.input.is_some() && !(s.resident && k > 0);
    // L3 → L2 staging slot, for the staged inputs of tile k.
    let stage_in = |em: &mut Emitter, k: usize| {
        for (si, s) in st.iter().enumerate() {
            if !s.staged || !loads(s, k) {
                continue;
            }
            let Some((b, _)) = boxk(s, k) else { continue };
            let (key, l2) = in_slot(s, k);
            em.wait_where(|ss, sk, _| ss == si && sk == key);
            em.load_box(
                home(p, plan, s.tensor).offset_by(b.src_off),
                l2,
                &b,
                (si, key),
            );
        }
    };
    // Home (or L2 staging slot) → L1 slot, for the inputs of tile k.
    let load = |em: &mut Emitter, k: usize| {
        for (si, s) in st.iter().enumerate() {
            if !loads(s, k) {
                continue;
            }
            let slot = k % s.slots;
            em.wait_where(|ss, sk, _| ss == si && sk == slot);
            let Some((b, bytes)) = boxk(s, k) else {
                continue;
            };
            let l = l1_slot(s, slot);
            if s.staged {
                let (key, l2) = in_slot(s, k);
                em.wait_where(|ss, sk, inbound| ss == si && sk == key && inbound);
                em.copy(l2, l, bytes, &[(si, slot), (si, key)], true);
            } else {
                em.load_box(
                    home(p, plan, s.tensor).offset_by(b.src_off),
                    l,
                    &b,
                    (si, slot),
                );
            }
        }
    };
    let slot_of = |s: &Stream, k: usize| {
        if s.resident {
            0
        } else {
            out_index(s, k) % s.slots
        }
    };
    // L1 slot → home (or L2 staging slot), for the outputs of tile k.
    let store = |em: &mut Emitter, k: usize| {
        for (si, s) in st.iter().enumerate() {
            if s.outputs.is_empty() || !last_of_group(k) {
                continue;
            }
            let Some((b, bytes)) = boxk(s, k) else {
                continue;
            };
            let slot = slot_of(s, k);
            let l = l1_slot(s, slot);
            if s.staged {
                let (key, l2) = out_slot(s, k);
                em.wait_where(|ss, sk, _| ss == si && sk == key);
                em.copy(l, l2, bytes, &[(si, slot), (si, key)], false);
            } else {
                em.store_box(
                    l,
                    home(p, plan, s.tensor).offset_by(b.src_off),
                    &b,
                    (si, slot),
                );
            }
        }
    };
    // L2 staging slot → L3, for the staged outputs of tile k.
    let stage_out = |em: &mut Emitter, k: usize| {
        for (si, s) in st.iter().enumerate() {
            if !s.staged || s.outputs.is_empty() || !last_of_group(k) {
                continue;
            }
            let Some((b, _)) = boxk(s, k) else { continue };
            let (key, l2) = out_slot(s, k);
            em.wait_where(|ss, sk, _| ss == si && sk == key);
            em.store_box(
                l2,
                home(p, plan, s.tensor).offset_by(b.src_off),
                &b,
                (si, key),
            );
        }
    };
    let nt = tiles.len();
    if buffering == Buffering::Double {
        stage_in(&mut em, 0);
        if nt > 1 {
            stage_in(&mut em, 1);
        }
        load(&mut em, 0);
    }
    for (k, tile) in tiles.iter().enumerate() {
        match buffering {
            Buffering::Single => {
                stage_in(&mut em, k);
                load(&mut em, k);
            }
            Buffering::Double => {
                if k + 1 < nt {
                    load(&mut em, k + 1);
                }
                if k + 2 < nt {
                    stage_in(&mut em, k + 2);
                }
            }
        }
        // Inputs landed; output slots free.
        em.wait_where(|ss, sk, inbound| {
            let s = &st[ss];
            sk == slot_of(s, k) && (inbound || !s.outputs.is_empty())
        });
        let mut ins: Vec<Option<Operand>> = vec![None; n.inputs.len()];
        let mut outs: Vec<Option<Operand>> = vec![None; n.outputs.len()];
        let mut accumulate = Vec::new();
        for &si in &ph.shape_only {
            if let (Some(t), Some(m)) = (n.inputs[si], &sp.inputs[si]) {
                let ty = g.ty(t);
                let reg = region_w(&ty.shape, m, &windows_of(sp, Some(si)), tile);
                let tty = TensorType::new(ty.dtype, reg.iter().map(|(a, b)| b - a).collect());
                ins[si] = Some(Operand {
                    shape_only: true,
                    ..operand(g, t, home(p, plan, t), tty, None, false)
                });
            }
        }
        for s in &st {
            let ty = g.ty(s.tensor);
            let reg = region_w(&ty.shape, &s.map, &s.wins, tile);
            let tty = TensorType::new(ty.dtype, reg.iter().map(|(a, b)| b - a).collect());
            let whole = reg
                .iter()
                .zip(&ty.shape)
                .all(|((a, b), &d)| *a == 0 && *b == d);
            let b = boxed(&ty.shape, ty.dtype.size(), &reg);
            let origin = HomeBox {
                at: home(p, plan, s.tensor).offset_by(b.src_off),
                run: b.run,
                outer: b.outer.clone(),
            };
            let mut loc = l1_slot(s, slot_of(s, k));
            if s.partial && k % rt != 0 {
                // A later tile of the group: its partial goes to the
                // partial slot, and is added into the output tile.
                let acc = operand(g, s.tensor, loc, tty.clone(), Some(origin.clone()), false);
                loc = l1_slot(s, s.slots);
                let part = operand(g, s.tensor, loc, tty.clone(), Some(origin.clone()), false);
                accumulate.push(Kernel {
                    node: NodeId(i as u32),
                    op: Some(std::sync::Arc::new(crate::ops::elementwise::Binary(
                        crate::ops::elementwise::BinKind::Add,
                    ))),
                    tile: k as u32,
                    inputs: vec![Some(acc.clone()), Some(part)],
                    outputs: vec![Some(acc)],
                });
            }
            if let Some(i) = s.input {
                ins[i] = Some(operand(
                    g,
                    s.tensor,
                    loc,
                    tty.clone(),
                    Some(origin.clone()),
                    whole,
                ));
            }
            for &o in &s.outputs {
                let ot = n.outputs[o].unwrap();
                outs[o] = Some(operand(
                    g,
                    ot,
                    loc,
                    tty.clone(),
                    Some(origin.clone()),
                    false,
                ));
            }
        }
        // A tiling `choose` accepted whose tile op cannot be built is a
        // strata bug: fail here, naming it, rather than run the node's
        // own op on a tile it does not describe.
        let op = tile_op(n, g, sp, tile).map_err(|why| Error::Node {
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            msg: format!(
                "strata bug: tile {k} of its tiling `{}` has no op: {why}",
                t.describe()
            ),
        })?;
        em.steps.push(Step::Kernel(Kernel {
            node: NodeId(i as u32),
            op,
            tile: k as u32,
            inputs: ins,
            outputs: outs,
        }));
        em.steps.extend(accumulate.into_iter().map(Step::Kernel));
        match buffering {
            Buffering::Single => {
                store(&mut em, k);
                stage_out(&mut em, k);
            }
            Buffering::Double => {
                if k > 0 {
                    stage_out(&mut em, k - 1);
                }
                store(&mut em, k);
            }
        }
    }
    if buffering == Buffering::Double && nt > 0 {
        stage_out(&mut em, nt - 1);
    }
    em.wait_where(|_, _, _| true);
    Ok((nt, stage_off))
}

/// Lower a planned program to LIR.
pub fn lower(p: &Program, plan: &MemoryPlan, opt: &Options) -> Result<Lir> {
    lower_with(p, plan, opt, &mut Choices::default())
}

/// Lower a planned program to LIR, taking each node's tiling from `choices`
/// where it has one and recording the others there: lowering the same
/// program again with the same choices gives the same tiles whatever the
/// homes, so the staging a plan reserved from one lowering is what the next
/// takes.
pub fn lower_with(
    p: &Program,
    plan: &MemoryPlan,
    opt: &Options,
    choices: &mut Choices,
) -> Result<Lir> {
    let g = &p.graph;
    let mut steps = Vec::new();
    let mut node_steps = Vec::with_capacity(g.nodes.len());
    let mut tilings = Vec::new();
    let mut l1_peak = 0u64;
    let mut staging_peak = 0u64;
    let mut next_id = 0u32;
    let cache = &mut choices.0;
    let mut train_end = 0;
    let staging = plan.l3.is_some().then(|| plan.staging_base());
    for (i, n) in g.nodes.iter().enumerate() {
        if i == p.train_end {
            train_end = steps.len();
        }
        let start = steps.len();
        if is_view(n) {
            tilings.push(NodeTiling {
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                tiles: 0,
                how: "view".into(),
                l1_bytes: 0,
                staging_bytes: 0,
                stage_need: vec![],
            });
        } else if let Some(l1) = opt.l1 {
            let mut hows = Vec::new();
            let (mut ntiles, mut nbytes, mut staged) = (0u32, 0u64, 0u64);
            let mut stage_need = Vec::new();
            for ph in phases(n, g) {
                let out = lower_phase(
                    p,
                    plan,
                    opt,
                    l1,
                    i,
                    &ph,
                    &mut steps,
                    &mut next_id,
                    cache,
                    staging,
                )?;
                ntiles += out.tiles;
                nbytes = nbytes.max(out.l1_bytes);
                staged = staged.max(out.staged);
                stage_need.push(out.stage_need);
                hows.push(match ph.outputs.as_slice() {
                    [o] if n.outputs.iter().flatten().count() > 1 => {
                        format!("output {o}: {}", out.how)
                    }
                    _ => out.how,
                });
            }
            l1_peak = l1_peak.max(nbytes);
            staging_peak = staging_peak.max(staged);
            tilings.push(NodeTiling {
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                tiles: ntiles,
                how: hows.join("; "),
                l1_bytes: nbytes,
                staging_bytes: staged,
                stage_need,
            });
        } else {
            let (t, staged) = lower_untiled(p, plan, i, staging, &mut steps, &mut next_id);
            staging_peak = staging_peak.max(staged);
            tilings.push(t);
        }
        // The node's tiles repeat: roll them into tile loops.
        let rolled = lir::roll(steps.split_off(start));
        steps.extend(rolled);
        node_steps.push(start..steps.len());
    }
    if p.train_end >= g.nodes.len() {
        train_end = steps.len();
    }
    if staging_peak > plan.staging {
        return Err(Error::PlanCheck(format!(
            "the lowering stages {staging_peak} bytes of L3 tensors in L2, but the plan reserved {}",
            plan.staging
        )));
    }
    let mut arenas = BTreeMap::new();
    let mut lower_bounds = BTreeMap::new();
    arenas.insert(Level::L2, plan.l2_bytes());
    lower_bounds.insert(Level::L2, plan.lower_bound + plan.staging);
    if let Some(l3) = plan.l3.as_ref().filter(|a| a.arena_bytes > 0) {
        arenas.insert(Level::L3, l3.arena_bytes);
        lower_bounds.insert(Level::L3, l3.lower_bound);
    }
    if opt.l1.is_some() && l1_peak > 0 {
        // Each node's slots live only during the node, so the L1 arena is
        // the largest working set, which is also the bound.
        arenas.insert(Level::L1, l1_peak);
        lower_bounds.insert(Level::L1, l1_peak);
    }
    Ok(Lir {
        arenas,
        lower_bounds,
        steps,
        train_end,
        node_steps,
        tilings,
        buffering: opt.l1.map(|_| opt.buffering),
        staging: staging.map(|b| (b, b + plan.staging)),
    })
}

/// One node as one kernel on whole tensors at home (the untiled baseline):
/// operands in L2 are read where they live; operands in L3 are staged whole
/// into L2 (`staging`), and outputs in L3 written back after the kernel.
/// Returns the node's tiling and the staging bytes it took.
fn lower_untiled(
    p: &Program,
    plan: &MemoryPlan,
    i: usize,
    staging: Option<u64>,
    steps: &mut Vec<Step>,
    next_id: &mut u32,
) -> (NodeTiling, u64) {
    let g = &p.graph;
    let n = &g.nodes[i];
    let mut em = Emitter {
        steps,
        next_id,
        flight: Vec::new(),
    };
    let mut used = 0u64;
    let mut stage_need = Vec::new();
    let mut l1_bytes = 0u64;
    // (tensor, L2 staging location, whole-tensor box) of each staged operand.
    let mut staged_at: Vec<(TensorId, Loc, Boxed)> = Vec::new();
    let stage = |t: TensorId, used: &mut u64| -> Option<(Loc, Boxed)> {
        let h = home(p, plan, t);
        let ty = g.ty(t);
        let base = staging?;
        if h.level() != Level::L3 || ty.bytes() == 0 {
            return None;
        }
        let full: Vec<(usize, usize)> = ty.shape.iter().map(|&d| (0, d)).collect();
        let b = boxed(&ty.shape, ty.dtype.size(), &full);
        let loc = Loc::arena(Level::L2, base + *used);
        *used += pad(ty.bytes() as u64);
        Some((loc, b))
    };
    let mut ins = Vec::with_capacity(n.inputs.len());
    for t in &n.inputs {
        let Some(t) = *t else {
            ins.push(None);
            continue;
        };
        let ty = g.ty(t);
        stage_need.push((t, pad(ty.bytes() as u64)));
        l1_bytes += pad(ty.bytes() as u64);
        match stage(t, &mut used) {
            Some((loc, b)) => {
                let h = home(p, plan, t);
                em.load_box(h, loc, &b, (0, 0));
                let hb = HomeBox {
                    at: h,
                    run: b.run,
                    outer: b.outer.clone(),
                };
                ins.push(Some(operand(g, t, loc, ty.clone(), Some(hb), true)));
                staged_at.push((t, loc, b));
            }
            None => ins.push(Some(operand(
                g,
                t,
                home(p, plan, t),
                ty.clone(),
                None,
                true,
            ))),
        }
    }
    em.wait_where(|_, _, _| true);
    let aliases = n.op.aliases();
    let mut outs = Vec::with_capacity(n.outputs.len());
    let mut stores: Vec<(Loc, Loc, Boxed)> = Vec::new();
    for (o, t) in n.outputs.iter().enumerate() {
        let Some(t) = *t else {
            outs.push(None);
            continue;
        };
        let ty = g.ty(t);
        let h = home(p, plan, t);
        // An in-place output is computed over its input's staged copy.
        let over = aliases
            .iter()
            .filter(|a| a.output == o && a.kind == AliasKind::InPlace)
            .find_map(|a| {
                let it = n.inputs.get(a.input).copied().flatten()?;
                staged_at.iter().find(|(u, ..)| *u == it)
            })
            .map(|(_, loc, b)| (*loc, b.clone()));
        let placed = match over {
            Some(x) => Some(x),
            None => {
                let ty_bytes = pad(ty.bytes() as u64);
                stage_need.push((t, ty_bytes));
                l1_bytes += ty_bytes;
                stage(t, &mut used)
            }
        };
        match placed {
            Some((loc, b)) => {
                let hb = HomeBox {
                    at: h,
                    run: b.run,
                    outer: b.outer.clone(),
                };
                outs.push(Some(operand(g, t, loc, ty.clone(), Some(hb), false)));
                stores.push((loc, h, b));
            }
            None => outs.push(Some(operand(g, t, h, ty.clone(), None, true))),
        }
    }
    em.steps.push(Step::Kernel(Kernel {
        node: NodeId(i as u32),
        op: None,
        tile: 0,
        inputs: ins,
        outputs: outs,
    }));
    for (loc, h, b) in stores {
        em.store_box(loc, h, &b, (0, 0));
    }
    em.wait_where(|_, _, _| true);
    (
        NodeTiling {
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            tiles: 1,
            how: "whole, computed out of L2 (untiled)".into(),
            l1_bytes,
            staging_bytes: used,
            stage_need: vec![stage_need],
        },
        used,
    )
}

/// The constants a lowered program may address, with their sizes.
pub fn const_sizes(p: &Program) -> lir::ConstSizes {
    p.graph
        .constants
        .iter()
        .map(|(t, v)| (*t, v.ty().bytes() as u64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every (home byte, tile byte) pair the commands move.
    fn moved(b: &Boxed) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        for (hd, td, sh) in commands(b) {
            assert!(
                sh.total() >= 1 && sh.total() <= lir::DMA_MAX_BYTES,
                "{sh:?}"
            );
            for ((hs, he), (ts, _)) in sh.ranges(sh.src_strides).zip(sh.ranges(sh.dst_strides)) {
                for k in 0..he - hs {
                    v.push((b.src_off + hd + hs + k, td + ts + k));
                }
            }
        }
        v.sort_unstable();
        v
    }

    /// The pairs a box of a dense tensor maps to a dense tile, element by element.
    fn expected(shape: &[usize], elem: usize, reg: &[(usize, usize)]) -> Vec<(u64, u64)> {
        let r = shape.len();
        let tdims: Vec<usize> = reg.iter().map(|(a, b)| b - a).collect();
        let n: usize = tdims.iter().product();
        let mut v = Vec::new();
        for flat in 0..n {
            let (mut rem, mut src, mut dst) = (flat, 0usize, 0usize);
            let mut idx = vec![0; r];
            for i in (0..r).rev() {
                idx[i] = rem % tdims[i];
                rem /= tdims[i];
            }
            for i in 0..r {
                src = src * shape[i] + reg[i].0 + idx[i];
                dst = dst * tdims[i] + idx[i];
            }
            for k in 0..elem {
                v.push(((src * elem + k) as u64, (dst * elem + k) as u64));
            }
        }
        v.sort_unstable();
        v
    }

    #[test]
    fn an_exact_2_pow_17_transfer_is_two_commands() {
        let b = boxed(&[1 << 15], 4, &[(0, 1 << 15)]);
        let c = commands(&b);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c.iter().map(|(_, _, s)| s.total()).sum::<u64>(), 1 << 17);
        assert_eq!(moved(&b), expected(&[1 << 15], 4, &[(0, 1 << 15)]));
    }

    /// A tile op that cannot be built is an error naming what the tiling
    /// rule expected, not a silent fall back to the node's own op (which
    /// hid a conv-gradient bug until the simulator compared values).
    #[test]
    fn a_tile_op_that_cannot_be_built_is_an_error() {
        use crate::tensor::{DType, TensorType};
        use crate::testing::{attr_ints, single_node, In};
        let x = TensorType::new(DType::F32, vec![1, 2, 6, 6]);
        let w = TensorType::new(DType::F32, vec![3, 2, 3, 3]);
        let conv = single_node(
            "",
            "Conv",
            &[attr_ints("pads", &[1, 1, 1, 1])],
            vec![In::Data(x.clone()), In::Data(w)],
            &[true],
        )
        .unwrap();
        let n = &conv.nodes[0];
        let sp = phase_space(n, &conv, &phases(n, &conv)[0]);
        assert!(matches!(sp.retile, Retile::Rows { .. }), "{:?}", sp.retile);
        let mut rows: Vec<(usize, usize)> = sp.dims.iter().map(|&d| (0, d)).collect();
        let (_, _, sa, ..) = sp.windows[0];
        rows[sa] = (0, 3);
        assert!(tile_op(n, &conv, &sp, &rows).unwrap().is_some());
        // The same space on a node whose op is not a Conv.
        let relu = single_node("", "Relu", &[], vec![In::Data(x)], &[true]).unwrap();
        let err = tile_op(&relu.nodes[0], &relu, &sp, &rows).err();
        assert_eq!(err.as_deref(), Some("its tiling rule expects a Conv"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Any box of any dense tensor (rank 1-5) is moved byte for byte.
        #[test]
        fn boxes_move_exactly_their_bytes(
            dims in proptest::collection::vec((1usize..7, 0usize..7, 0usize..7), 1..6),
            elem in prop_oneof![Just(1usize), Just(4), Just(8)],
        ) {
            let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let reg: Vec<(usize, usize)> = dims
                .iter()
                .map(|&(d, a, b)| {
                    let (a, b) = (a % d, b % d);
                    (a.min(b), a.max(b) + 1)
                })
                .collect();
            let b = boxed(&shape, elem, &reg);
            prop_assert_eq!(moved(&b), expected(&shape, elem, &reg));
        }

        /// Large boxes split under the command limit and still move every byte.
        #[test]
        fn large_boxes_split_under_the_limit(rows in 1usize..40, cols in 1usize..5000, take in 1usize..40) {
            let take = take.min(rows);
            let reg = vec![(rows - take, rows), (0, cols)];
            let b = boxed(&[rows, cols], 4, &reg);
            prop_assert_eq!(moved(&b), expected(&[rows, cols], 4, &reg));
            let b = boxed(&[cols, rows], 4, &[(0, cols), (rows - take, rows)]);
            prop_assert_eq!(moved(&b), expected(&[cols, rows], 4, &[(0, cols), (rows - take, rows)]));
        }
    }
}
