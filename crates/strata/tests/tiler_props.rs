//! A differential property test of the tiler's windowed rules: random
//! single-node graphs of Conv (ungrouped, depthwise, two output channels per
//! input channel, other groupings), ConvGrad / ConvGradX / ConvGradW, MaxPool
//! / AveragePool and their gradients, and Pad (constant, reflect, edge; pads
//! as attributes or inputs, crops), with small random shapes, kernels,
//! strides (up to 3) and pads (a convolution's as wide as its kernel or
//! wider; a pool's narrower, as ONNX Runtime requires), lowered into a
//! random L1 budget between the node's least L1 and its whole size, single-
//! and double-buffered.
//!
//! The property: the least L1 a too-small budget's error states is a number
//! no larger than the whole node (never `u64::MAX`); at any budget at or
//! above it the node lowers (no error, no panic) within the budget, the LIR
//! checker passes (`driver::lower_program` runs it), and the simulator
//! gives the reference interpreter's outputs bit for bit, except a
//! convolution's dW and dB where the tiling cuts their reduction (over the
//! batch and dY's rows) across tiles, and its Y and dX where the tiling cuts
//! the channels they sum over (X's, dY's). There the tiles add partial sums of
//! the very same float32 products (the products are bit-identical) in
//! another order, and any two orders of summing the same `m` numbers differ
//! by at most `2 γ(m-1) Σ|p_i|` (`γ(j) = j u / (1 - j u)`, `u = 2^-24`;
//! Higham, Accuracy and Stability, 4.2), with `|p_i| ≤ (1 + u) |dy x|`: the
//! tolerance per element is that bound, `Σ|dy x|` computed in f64 by the
//! reference kernel on the inputs' absolute values, `m` the terms of the
//! element's sum (dY's elements per channel). A second, smaller property
//! runs the compiled host C on the same kind of case and requires it bit for
//! bit the simulator's (same tiles, same order).
//!
//! Case counts are fixed for CI; `PROPTEST_CASES=N` runs N of the first
//! property (and N / 8 of the C one) for exploration, best with
//! `--release`.

use proptest::prelude::*;
use strata::lir::{Buffering, Level};
use strata::ops::{Attribute, MS};
use strata::tensor::{DType, Tensor};
use strata::testing::{
    attr_f, attr_i, attr_ints, attr_s, eval_node, run_tiled, run_tiled_sim, single_node, In, Rng,
};

/// Which op a case draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Conv,
    ConvGrad,
    ConvGradX,
    ConvGradW,
    MaxPool,
    AveragePool,
    MaxPoolGrad,
    AveragePoolGrad,
    Pad,
}

const FAMILIES: [Family; 9] = [
    Family::Conv,
    Family::ConvGrad,
    Family::ConvGradX,
    Family::ConvGradW,
    Family::MaxPool,
    Family::AveragePool,
    Family::MaxPoolGrad,
    Family::AveragePoolGrad,
    Family::Pad,
];

/// The drawn parameters of one case (small integers, so that proptest
/// shrinks them towards the simplest failing case).
#[derive(Clone, Debug)]
struct Params {
    family: Family,
    /// Batch, channels (per group), a second channel count.
    n: usize,
    c: usize,
    m: usize,
    /// 0: ungrouped, 1: depthwise (C_out = C_in), 2: depthwise with two
    /// output channels per input channel, 3: two groups of `c` channels.
    grouping: u8,
    h: usize,
    w: usize,
    /// Kernel, strides and pads (top, left, bottom, right).
    k: (usize, usize),
    s: (usize, usize),
    p: [usize; 4],
    /// `[N, C, L]` instead of `[N, C, H, W]`.
    rank3: bool,
    /// Op-specific choices (bits): which outputs a ConvGrad computes,
    /// kernel_shape given or not, bias, MaxPool indices, count_include_pad,
    /// MaxPoolGrad's second input, Pad's mode and how its pads arrive.
    variant: u32,
    seed: u64,
    /// Where the budget lies between the least L1 and the whole node, in
    /// thousandths (0: exactly the least).
    frac: u32,
    double: bool,
}

fn params() -> impl Strategy<Value = Params> {
    (
        (
            prop::sample::select(FAMILIES.to_vec()),
            1usize..=2,
            1usize..=3,
            1usize..=3,
            0u8..4,
        ),
        (1usize..=12, 1usize..=6, (1usize..=4, 1usize..=3)),
        (
            (1usize..=3, 1usize..=3),
            [0usize..=4, 0usize..=3, 0usize..=4, 0usize..=3],
        ),
        (
            prop::bool::weighted(0.1),
            any::<u32>(),
            any::<u64>(),
            prop_oneof![1 => Just(0u32), 2 => 0u32..=150, 1 => 0u32..=1000],
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (family, n, c, m, grouping),
                (h, w, k),
                (s, p),
                (rank3, variant, seed, frac, double),
            )| {
                Params {
                    family,
                    n,
                    c,
                    m,
                    grouping,
                    h,
                    w,
                    k,
                    s,
                    p,
                    rank3,
                    variant,
                    seed,
                    frac,
                    double,
                }
            },
        )
}

/// What an output of a case is, for the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    /// Each element computed in one pass: bit for bit the interpreter's.
    Exact,
    /// An ungrouped convolution's Y (a sum over the input channels and the
    /// kernel, plus the bias): bit for bit unless its tiling cuts the input
    /// channels (space axis 4).
    Y,
    /// A convolution gradient's dX (a sum over dY's channels and the
    /// kernel): bit for bit unless its tiling cuts dY's channels (space
    /// axis 4 of its phase).
    Dx,
    /// A convolution's dW or dB (reduced over the batch and dY's rows):
    /// bit for bit unless its tiling cuts the reduction.
    Dw,
    Db,
}

/// One drawn graph: a single node and its input values.
struct Case {
    domain: &'static str,
    op: &'static str,
    attrs: Vec<Attribute>,
    inputs: Vec<(In, Option<Tensor>)>,
    outputs: Vec<bool>,
    kinds: Vec<Out>,
    /// For dW / dB: the (dY, X) the node reads and its window attributes
    /// (for the f64 bound of `Out::Dw` / `Out::Db`).
    grad: Option<(Tensor, Tensor)>,
}

fn bit(v: u32, b: u32) -> bool {
    v >> b & 1 == 1
}

/// The case a draw stands for. `None`: the draw is no graph strata accepts
/// for a reason outside the tiler (a gradient whose dX size the window does
/// not determine, the rows no window reads).
fn build(p: &Params) -> Option<Case> {
    let mut rng = Rng(p.seed | 1);
    let nsp = if p.rank3 { 1 } else { 2 };
    let (mut kh, kw) = p.k;
    let (mut sh, sw) = p.s;
    let [mut pt, pl, mut pb, pr] = p.p;
    if p.rank3 {
        (kh, sh, pt, pb) = (1, 1, 0, 0);
    }
    let pool = matches!(
        p.family,
        Family::MaxPool | Family::AveragePool | Family::MaxPoolGrad | Family::AveragePoolGrad
    );
    // A pool's pads are narrower than its kernel (ONNX Runtime requires it).
    let (pt, pl, pb, pr) = if pool {
        (pt % kh, pl % kw, pb % kh, pr % kw)
    } else {
        (pt, pl, pb, pr)
    };
    // The padded input holds one window.
    let h = p.h.max(kh.saturating_sub(pt + pb)).max(1);
    let w = p.w.max(kw.saturating_sub(pl + pr)).max(1);
    let (oh, ow) = ((h + pt + pb - kh) / sh + 1, (w + pl + pr - kw) / sw + 1);
    let spatial = |a: usize, b: usize| if p.rank3 { vec![b] } else { vec![a, b] };
    let shape = |n: usize, c: usize, a: usize, b: usize| {
        let mut s = vec![n, c];
        s.extend(spatial(a, b));
        s
    };
    let mut win = vec![];
    let v = p.variant;
    if pool || bit(v, 0) {
        win.push(attr_ints("kernel_shape", &to_i64(&spatial(kh, kw))));
    }
    if (sh, sw) != (1, 1) || bit(v, 1) {
        win.push(attr_ints("strides", &to_i64(&spatial(sh, sw))));
    }
    if (pt, pl, pb, pr) != (0, 0, 0, 0) || bit(v, 2) {
        let pads = if p.rank3 {
            vec![pl, pr]
        } else {
            vec![pt, pl, pb, pr]
        };
        win.push(attr_ints("pads", &to_i64(&pads)));
    }
    if bit(v, 3) {
        win.push(attr_ints("dilations", &vec![1; nsp]));
    }
    // Channels and group.
    let (cin, cout, group) = match p.grouping {
        0 => (p.c, p.m, 1),
        1 => (p.c + 1, p.c + 1, p.c + 1),
        2 => (p.c + 1, 2 * (p.c + 1), p.c + 1),
        _ => (2 * p.c, 2 * p.m, 2),
    };
    if group > 1 {
        win.push(attr_i("group", group as i64));
    }
    let data = |t: Tensor| (In::Data(t.ty()), Some(t));
    let x = rng.tensor(&shape(p.n, cin, h, w));
    let wt = rng.tensor(&shape(cout, cin / group, kh, kw));
    let dy = rng.tensor(&shape(p.n, cout, oh, ow));
    let case = |op, domain, attrs, inputs, outputs: Vec<bool>, kinds, grad| Case {
        domain,
        op,
        attrs,
        inputs,
        outputs,
        kinds,
        grad,
    };
    Some(match p.family {
        Family::Conv => {
            let mut ins = vec![data(x), data(wt)];
            if bit(v, 4) {
                ins.push(data(rng.tensor(&[cout])));
            }
            case("Conv", "", win, ins, vec![true], vec![Out::Y], None)
        }
        Family::ConvGrad => {
            // Any non-empty subset of (dX, dW, dB).
            let want = match v >> 4 & 7 {
                0 => 7,
                m => m,
            };
            let outputs: Vec<bool> = (0..3).map(|k| bit(want, k)).collect();
            let kinds = vec![Out::Dx, Out::Dw, Out::Db];
            let ins = vec![data(dy.clone()), data(x.clone()), data(wt)];
            case("ConvGrad", MS, win, ins, outputs, kinds, Some((dy, x)))
        }
        Family::ConvGradX => {
            // dX's size from dY under the window: where a stride leaves it
            // open, strata takes one; where no window reads some row, none.
            strata::ops::conv::in_extent(oh, kh, sh, pt, pb).ok()?;
            strata::ops::conv::in_extent(ow, kw, sw, pl, pr).ok()?;
            let ins = vec![data(dy), data(wt)];
            case("ConvGradX", MS, win, ins, vec![true], vec![Out::Dx], None)
        }
        Family::ConvGradW => {
            let mut attrs = win;
            if !bit(v, 0) {
                attrs.push(attr_ints("kernel_shape", &to_i64(&spatial(kh, kw))));
            }
            let ins = vec![data(dy.clone()), data(x.clone())];
            case(
                "ConvGradW",
                MS,
                attrs,
                ins,
                vec![true],
                vec![Out::Dw],
                Some((dy, x)),
            )
        }
        Family::MaxPool | Family::AveragePool => {
            let x = rng.tensor(&shape(p.n, p.c, h, w));
            let mut attrs = win;
            let mut outputs = vec![true];
            let op = if p.family == Family::MaxPool {
                if bit(v, 4) {
                    outputs.push(true);
                }
                "MaxPool"
            } else {
                attrs.push(attr_i("count_include_pad", bit(v, 4) as i64));
                "AveragePool"
            };
            let kinds = vec![Out::Exact; outputs.len()];
            case(op, "", attrs, vec![data(x)], outputs, kinds, None)
        }
        Family::MaxPoolGrad => {
            let dy = rng.tensor(&shape(p.n, p.c, oh, ow));
            let second = if bit(v, 4) {
                // ONNX Runtime's form: MaxPool's indices, over an X of the
                // size the gradient recovers from dY (the indices are flat
                // over X's planes).
                let h = strata::ops::conv::in_extent(oh, kh, sh, pt, pb).ok()?;
                let w = strata::ops::conv::in_extent(ow, kw, sw, pl, pr).ok()?;
                let x = rng.tensor(&shape(p.n, p.c, h, w));
                let y = eval_node("", "MaxPool", &win, vec![Some(x)], &[true, true]).unwrap();
                y[1].clone()
            } else {
                // The peer's form: MaxPool's X.
                rng.tensor(&shape(p.n, p.c, h, w))
            };
            let ins = vec![data(dy), data(second)];
            case(
                "MaxPoolGrad",
                MS,
                win,
                ins,
                vec![true],
                vec![Out::Exact],
                None,
            )
        }
        Family::AveragePoolGrad => {
            strata::ops::conv::in_extent(oh, kh, sh, pt, pb).ok()?;
            strata::ops::conv::in_extent(ow, kw, sw, pl, pr).ok()?;
            let dy = rng.tensor(&shape(p.n, p.c, oh, ow));
            let mut attrs = win;
            attrs.push(attr_i("count_include_pad", bit(v, 5) as i64));
            case(
                "AveragePoolGrad",
                MS,
                attrs,
                vec![data(dy)],
                vec![true],
                vec![Out::Exact],
                None,
            )
        }
        Family::Pad => {
            // Rank 2 to 4; per axis a pad before and after from the drawn
            // pads, some axes cropped (negative) instead.
            let rank = 2 + (v >> 4) as usize % 3;
            let dims = [p.n, p.c + 1, h, w];
            let xs = dims[4 - rank..].to_vec();
            let mode = ["constant", "reflect", "edge"][(v >> 6) as usize % 3];
            let mut pads = vec![0i64; 2 * rank];
            for a in 0..rank {
                let (b, e) = (p.p[a % 4] as i64, p.p[(a + 1) % 4] as i64);
                let crop = bit(v, 8 + a as u32) && xs[a] > 1;
                if crop {
                    pads[a] = -(b.min(xs[a] as i64 - 1) / 2);
                    pads[a + rank] = -((xs[a] as i64 - 1 + pads[a]).min(e));
                } else {
                    pads[a] = b;
                    pads[a + rank] = e;
                }
            }
            let x = rng.tensor(&xs);
            let value = rng.uniform();
            let mut attrs = vec![attr_s("mode", mode)];
            let mut ins = vec![data(x)];
            if bit(v, 12) {
                attrs.push(attr_ints("pads", &pads));
                attrs.push(attr_f("value", value));
            } else {
                ins.push((In::Const(Tensor::i64(vec![2 * rank], pads)), None));
                if bit(v, 13) {
                    ins.push((In::Const(Tensor::f32(vec![], vec![value])), None));
                }
            }
            case("Pad", "", attrs, ins, vec![true], vec![Out::Exact], None)
        }
    })
}

fn to_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// A copy of a node's input list (one graph per run).
fn copy(ins: &[(In, Option<Tensor>)]) -> Vec<In> {
    ins.iter()
        .map(|(i, _)| match i {
            In::Data(t) => In::Data(t.clone()),
            In::Const(v) => In::Const(v.clone()),
            In::Absent => In::Absent,
        })
        .collect()
}

fn values(c: &Case) -> Vec<Tensor> {
    c.inputs.iter().filter_map(|(_, v)| v.clone()).collect()
}

fn describe(c: &Case) -> String {
    let shapes: Vec<_> = c
        .inputs
        .iter()
        .map(|(i, v)| match (i, v) {
            (_, Some(v)) => format!("{:?}", v.shape),
            (In::Const(t), None) => format!("const {:?}", t.to_i64()),
            _ => "-".into(),
        })
        .collect();
    let attrs: Vec<_> = c
        .attrs
        .iter()
        .map(|a| format!("{}={:?}", a.name, a.value))
        .collect();
    format!(
        "{} {} outputs {:?} inputs {} attrs {}",
        c.domain,
        c.op,
        c.outputs,
        shapes.join(" "),
        attrs.join(" ")
    )
}

/// The least L1 the node needs, as the error at an L1 of one byte states it.
fn least_l1(c: &Case) -> Result<u64, String> {
    let g = single_node(c.domain, c.op, &c.attrs, copy(&c.inputs), &c.outputs)?;
    let e = match run_tiled_sim(g, values(c), 1, Buffering::Single) {
        Ok(_) => return Err("lowered into one byte of L1".into()),
        Err(e) => e.to_string(),
    };
    e.split("needs at least ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no figure in: {e}"))
}

/// Every tensor of the node whole, each slot 16-byte aligned: the L1 of
/// the node as one tile.
fn whole_l1(c: &Case) -> u64 {
    let g = single_node(c.domain, c.op, &c.attrs, copy(&c.inputs), &c.outputs).unwrap();
    g.tensors
        .iter()
        .map(|t| (t.ty.bytes() as u64).div_ceil(16) * 16)
        .sum()
}

/// Whether the tiling of output `k` (a ConvGrad's phase, `how` as the
/// lowering reports it) cuts its reduction: dW's reduced space axes are 4
/// and 5, dB's 1 and 2.
fn cuts_reduction(how: &str, k: usize, kind: Out) -> bool {
    // One phase per output where the node has several (`output k: ..`
    // joined by `; `), else one phase for all.
    let tag = format!("output {k}: ");
    let phase = how
        .split("; ")
        .find_map(|s| s.strip_prefix(tag.as_str()))
        .unwrap_or(how);
    let axes: &[&str] = match kind {
        Out::Dw => &["axis 4 ", "axis 5 "],
        Out::Db => &["axis 1 ", "axis 2 "],
        Out::Y | Out::Dx => &["axis 4 "],
        Out::Exact => &[],
    };
    axes.iter().any(|a| phase.contains(a))
}

/// Per element of a dW (or dB), the bound on two float32 sums of its terms
/// in different orders: `2 γ(m) (1 + u) Σ|p_i|` (see the module doc).
fn reduction_bound(c: &Case, kind: Out) -> Vec<f64> {
    let abs = |t: &Tensor| {
        Tensor::real::<f64>(
            t.shape.clone(),
            t.to_f64().iter().map(|v| v.abs()).collect(),
        )
    };
    let u = f64::powi(2.0, -24);
    let bound = |sums: Vec<f64>, m: f64| -> Vec<f64> {
        let gamma = m * u / (1.0 - m * u);
        sums.iter().map(|s| 2.0 * gamma * (1.0 + u) * s).collect()
    };
    let input = |i: usize| c.inputs[i].1.as_ref().unwrap();
    match kind {
        Out::Y => {
            // Σ|x w| + |b| over the input channels and the kernel: the
            // convolution of the absolute values; m: the terms of a sum.
            let w = input(1);
            let ins: Vec<Option<Tensor>> =
                (0..c.inputs.len()).map(|i| Some(abs(input(i)))).collect();
            let out = eval_node("", "Conv", &c.attrs, ins, &[true]).unwrap();
            return bound(out[0].to_f64(), (w.numel() / w.shape[0] + 1) as f64);
        }
        Out::Dx => {
            // Σ|dy w| over dY's channels and the kernel.
            let (op, ins, want) = if c.op == "ConvGradX" {
                (
                    "ConvGradX",
                    vec![Some(abs(input(0))), Some(abs(input(1)))],
                    vec![true],
                )
            } else {
                let ins = (0..3).map(|i| Some(abs(input(i)))).collect();
                ("ConvGrad", ins, vec![true, false, false])
            };
            let w = input(if c.op == "ConvGradX" { 1 } else { 2 });
            let out = eval_node(MS, op, &c.attrs, ins, &want).unwrap();
            let m = w.shape[0] * w.numel() / (w.shape[0] * w.shape[1]);
            return bound(out[0].to_f64(), m as f64);
        }
        _ => {}
    }
    let (dy, x) = c.grad.as_ref().unwrap();
    let mut attrs = c.attrs.clone();
    // ConvGradW reads its kernel from `kernel_shape`; ConvGrad from W.
    let (op, ins, want) = match kind {
        Out::Dw => {
            if !attrs.iter().any(|a| a.name == "kernel_shape") {
                let w = &c.inputs[2].1.as_ref().unwrap().shape;
                attrs.push(attr_ints("kernel_shape", &to_i64(&w[2..])));
            }
            ("ConvGradW", vec![Some(abs(dy)), Some(abs(x))], vec![true])
        }
        _ => {
            let w = c.inputs[2].1.as_ref().unwrap();
            (
                "ConvGrad",
                vec![Some(abs(dy)), Some(abs(x)), Some(abs(w))],
                vec![false, false, true],
            )
        }
    };
    let out = eval_node(MS, op, &attrs, ins, &want).unwrap();
    let sums = out.last().unwrap().to_f64();
    // Terms per element: dY's elements of one output channel.
    let m = (dy.numel() / dy.shape[1]) as f64;
    let u = f64::powi(2.0, -24);
    let gamma = m * u / (1.0 - m * u);
    sums.iter().map(|s| 2.0 * gamma * (1.0 + u) * s).collect()
}

/// Lower the case into its drawn budget and compare the simulator with the
/// interpreter; with `with_c`, the compiled C with the simulator too.
fn check(p: &Params, with_c: bool) -> Result<(), TestCaseError> {
    let Some(c) = build(p) else {
        return Ok(());
    };
    let what = describe(&c);
    let need = match least_l1(&c) {
        Ok(n) => n,
        Err(e) if e.contains("cannot recover the input size") => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("{what}: {e}"))),
    };
    let whole = whole_l1(&c);
    prop_assert!(
        need <= whole,
        "{}: the least L1 stated, {}, exceeds the whole node's {}",
        what,
        need,
        whole
    );
    let l1 = need + (whole - need) * p.frac as u64 / 1000;
    let b = if p.double {
        Buffering::Double
    } else {
        Buffering::Single
    };
    let what = format!("{what} at L1 {l1} (least {need}, whole {whole}) {b:?}");
    let g = single_node(c.domain, c.op, &c.attrs, copy(&c.inputs), &c.outputs).unwrap();
    let (interp, sim, tiling, l1_arena, cvals) = if with_c {
        let r = run_tiled(g, values(&c), l1, b)
            .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        let arena = r.tilings[0].l1_bytes;
        (r.interp, r.sim, r.tilings[0].clone(), arena, Some(r.c))
    } else {
        let r = run_tiled_sim(g, values(&c), l1, b)
            .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        let arena = r.lir.arenas.get(&Level::L1).copied().unwrap_or(0);
        (r.interp, r.sim, r.lir.tilings[0].clone(), arena, None)
    };
    let what = format!("{what} ({} tiles: {})", tiling.tiles, tiling.how);
    prop_assert!(
        tiling.l1_bytes <= l1 && l1_arena <= l1,
        "{}: {} bytes of L1",
        what,
        tiling.l1_bytes.max(l1_arena)
    );
    let present: Vec<usize> = (0..c.outputs.len()).filter(|&k| c.outputs[k]).collect();
    prop_assert_eq!(interp.len(), present.len());
    for (j, &k) in present.iter().enumerate() {
        let (i, s) = (&interp[j], &sim[j]);
        prop_assert_eq!(i.ty(), s.ty(), "{}: output {}", what, k);
        if let Some(cv) = &cvals {
            prop_assert!(
                s.to_le_bytes() == cv[j].to_le_bytes(),
                "{}: C output {} differs from the simulator's",
                what,
                k
            );
        }
        let kind = c.kinds[k];
        if kind == Out::Exact || !cuts_reduction(&tiling.how, k, kind) {
            prop_assert!(
                i.to_le_bytes() == s.to_le_bytes(),
                "{}: output {} differs from the interpreter's",
                what,
                k
            );
        } else {
            prop_assert_eq!(i.dtype(), DType::F32);
            let bound = reduction_bound(&c, kind);
            for (e, ((a, b), t)) in i.as_f32().iter().zip(s.as_f32()).zip(&bound).enumerate() {
                let d = (*a as f64 - *b as f64).abs();
                prop_assert!(
                    d <= *t,
                    "{}: output {} element {}: {} against the interpreter's {} (bound {})",
                    what,
                    k,
                    e,
                    b,
                    a,
                    t
                );
            }
        }
    }
    Ok(())
}

/// `PROPTEST_CASES`, else `default`.
fn cases(default: u32, divisor: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |n| (n / divisor).max(1))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256, 1), ..ProptestConfig::default() })]
    /// Windowed nodes lower at any L1 from their stated least up, pass the
    /// checker and give the interpreter's outputs (see the module doc).
    #[test]
    fn windowed_nodes_tile_at_any_l1_from_their_least(p in params()) {
        check(&p, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(12, 8), ..ProptestConfig::default() })]
    /// The same, through the compiled host C too: bit for bit the simulator's.
    #[test]
    fn windowed_nodes_in_c_match_the_simulator(p in params()) {
        check(&p, true)?;
    }
}

/// The minimal cases the property found, each a tiler bug fixed since
/// (`tiling.rs` has a named test of each), through the simulator and the C.
#[test]
fn cases_the_property_found() {
    let base = Params {
        family: Family::ConvGrad,
        n: 1,
        c: 1,
        m: 1,
        grouping: 0,
        h: 1,
        w: 1,
        k: (1, 2),
        s: (1, 1),
        p: [0, 0, 1, 0],
        rank3: false,
        variant: 0b111_0001,
        seed: 0,
        frac: 0,
        double: false,
    };
    for p in [
        // kernel_shape 1x2 (not square), a bottom pad: every dX row tile's
        // op resolved its window against a 1x1 kernel and failed.
        base.clone(),
        // Stride 3, a 2x1 kernel and a top pad of 3: the one window reads
        // only the pad and dX's row lies past it; no tiling was a
        // candidate (least L1 u64::MAX).
        Params {
            k: (2, 1),
            s: (3, 1),
            p: [3, 0, 0, 0],
            variant: 0b111_0000,
            ..base
        },
    ] {
        for double in [false, true] {
            let p = Params {
                double,
                ..p.clone()
            };
            check(&p, true).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        }
    }
}
