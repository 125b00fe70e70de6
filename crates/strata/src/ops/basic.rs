//! Gemm, Relu/ReluGrad, the view ops, and the reductions.

use super::util::{grad_pair_calls, grad_pair_eval, grad_pair_type, norm_axis};
use super::{
    arg, boxed, replaced_by_attribute, req, Alias, Arg, Arity, Attrs, KernelCall, Op, OpError,
    OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "Gemm", Arity::range(2, 3), |a| {
        boxed(Gemm {
            alpha: a.float_or("alpha", 1.0),
            beta: a.float_or("beta", 1.0),
            trans_a: a.int_or("transA", 0) != 0,
            trans_b: a.int_or("transB", 0) != 0,
        })
    });
    r.add(&[""], "Relu", Arity::exactly(1), |_| boxed(Relu));
    r.add(&[MS, ""], "ReluGrad", Arity::exactly(2), |_| {
        boxed(ReluGrad)
    });
    r.add(&[""], "Identity", Arity::exactly(1), |_| {
        boxed(View {
            kind: ViewKind::Identity,
        })
    });
    r.add(&[""], "Reshape", Arity::exactly(2), |a| {
        a.reject_if(a.int_or("allowzero", 0) != 0, "Reshape with allowzero=1")?;
        boxed(View {
            kind: ViewKind::Reshape,
        })
    });
    r.add(&[""], "Flatten", Arity::exactly(1), |a| {
        boxed(View {
            kind: ViewKind::Flatten(a.int_or("axis", 1)),
        })
    });
    r.add(&[""], "Squeeze", Arity::range(1, 2), |a| {
        boxed(View {
            kind: ViewKind::Squeeze(a.ints("axes")),
        })
    });
    r.add(&[""], "Unsqueeze", Arity::range(1, 2), |a| {
        boxed(View {
            kind: ViewKind::Unsqueeze(a.ints("axes")),
        })
    });
    r.add(&[""], "Shape", Arity::exactly(1), |a| {
        boxed(Shape {
            start: a.int_or("start", 0),
            end: a.int("end"),
        })
    });
    r.add(&[""], "ReduceSum", Arity::range(1, 2), |a| {
        parse_reduce(a, ReduceKind::Sum)
    });
    r.add(&[""], "ReduceMean", Arity::range(1, 2), |a| {
        parse_reduce(a, ReduceKind::Mean)
    });
}

fn f32_input<'a>(inputs: &[Option<OpInput<'a>>], i: usize) -> Result<&'a TensorType, OpError> {
    let t = req(inputs, i)?.ty;
    ensure!(
        t.dtype == DType::F32,
        "input {i} must be float32, found {t}"
    );
    Ok(t)
}

// ---------------------------------------------------------------- Gemm

#[derive(Debug)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
}

/// Sizes and strides of one (batched) Gemm.
struct GemmDims {
    m: usize,
    n: usize,
    k: usize,
    /// Batch dims of the output and, per batch dim, the element strides of
    /// A's, B's and C's matrices (0 where the operand broadcasts).
    batch: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
    sc: Vec<usize>,
    /// Row/column strides of the bias C within one [M, N] matrix; None without bias.
    c: Option<(usize, usize)>,
}

impl GemmDims {
    fn out_shape(&self) -> Vec<usize> {
        let mut s = self.batch.clone();
        s.extend([self.m, self.n]);
        s
    }
    /// Matrix offsets of A, B and C for flat batch index `bi`.
    fn offsets(&self, bi: usize) -> (usize, usize, usize) {
        let (mut oa, mut ob, mut oc, mut rem) = (0, 0, 0, bi);
        for d in (0..self.batch.len()).rev() {
            let i = rem % self.batch[d];
            rem /= self.batch[d];
            oa += i * self.sa[d];
            ob += i * self.sb[d];
            oc += i * self.sc[d];
        }
        (oa, ob, oc)
    }
}

impl Gemm {
    /// ONNX Gemm is 2-D; the peer's graphs also use it batched: A and B of
    /// rank 2 to 4 whose leading dims are batch dims (numpy broadcast, a 2-D
    /// operand shared by every batch), transA/transB on the last two dims,
    /// and a bias C that broadcasts to the output [batch..., M, N] (in the
    /// peer's graphs [N] or [M, N], shared over rows and batch).
    fn dims(&self, a: &[usize], b: &[usize], c: Option<&[usize]>) -> Result<GemmDims, OpError> {
        ensure!(
            (2..=4).contains(&a.len()) && (2..=4).contains(&b.len()),
            "Gemm needs A and B of rank 2 to 4, found {a:?} and {b:?}"
        );
        let (ar, br) = (a.len(), b.len());
        let (m, ka) = if self.trans_a {
            (a[ar - 1], a[ar - 2])
        } else {
            (a[ar - 2], a[ar - 1])
        };
        let (kb, n) = if self.trans_b {
            (b[br - 1], b[br - 2])
        } else {
            (b[br - 2], b[br - 1])
        };
        ensure!(
            ka == kb,
            "Gemm inner dimensions differ: A {a:?} (transA={}) vs B {b:?} (transB={})",
            self.trans_a as u8,
            self.trans_b as u8
        );
        let (batch, sa, sb) = super::transformer::batch_broadcast(
            &a[..ar - 2],
            &b[..br - 2],
            m * ka,
            ka * n,
            "Gemm",
        )?;
        let mut d = GemmDims {
            m,
            n,
            k: ka,
            sc: vec![0; batch.len()],
            batch,
            sa,
            sb,
            c: None,
        };
        if let Some(cs) = c {
            let out = d.out_shape();
            let bad = || op_err!("Gemm bias C {cs:?} does not broadcast to the output {out:?}");
            if cs.len() > out.len() {
                return Err(bad());
            }
            let padded: Vec<usize> = std::iter::repeat_n(1, out.len() - cs.len())
                .chain(cs.iter().copied())
                .collect();
            if padded.iter().zip(&out).any(|(&c, &o)| c != 1 && c != o) {
                return Err(bad());
            }
            let st = super::util::broadcast_strides(&padded, &out);
            let nb = d.batch.len();
            d.sc = st[..nb].to_vec();
            d.c = Some((st[nb], st[nb + 1]));
        }
        Ok(d)
    }

    /// Element strides of A along (M, K) and of B along (K, N).
    fn mat_strides(&self, d: &GemmDims) -> (usize, usize, usize, usize) {
        let (sam, sak) = if self.trans_a { (1, d.m) } else { (d.k, 1) };
        let (sbk, sbn) = if self.trans_b { (1, d.k) } else { (d.n, 1) };
        (sam, sak, sbk, sbn)
    }
}

impl Op for Gemm {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let a = f32_input(inputs, 0)?;
        let b = f32_input(inputs, 1)?;
        let c = match inputs.get(2).copied().flatten() {
            Some(c) => Some(f32_input(inputs, 2).map(|_| c.ty.shape.as_slice())?),
            None => None,
        };
        let d = self.dims(&a.shape, &b.shape, c)?;
        Ok(vec![TensorType::f32(d.out_shape())])
    }

    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let a = arg(inputs, 0)?;
        let b = arg(inputs, 1)?;
        let c = inputs.get(2).copied().flatten();
        let d = self.dims(&a.shape, &b.shape, c.map(|c| c.shape.as_slice()))?;
        let (sam, sak, sbk, sbn) = self.mat_strides(&d);
        let nb: usize = d.batch.iter().product();
        Ok(vec![crate::by_real!(inputs, R => {
            let (av, bv) = (a.as_real::<R>(), b.as_real::<R>());
            let (alpha, beta) = (R::from_f32(self.alpha), R::from_f32(self.beta));
            let mut y = vec![R::ZERO; nb * d.m * d.n];
            for bi in 0..nb {
                let (oa, ob, oc) = d.offsets(bi);
                for i in 0..d.m {
                    for j in 0..d.n {
                        let mut acc = R::ZERO;
                        for p in 0..d.k {
                            acc += av[oa + i * sam + p * sak] * bv[ob + p * sbk + j * sbn];
                        }
                        let mut v = alpha * acc;
                        if let (Some(c), Some((cr, cc))) = (c, d.c) {
                            v += beta * c.as_real::<R>()[oc + i * cr + j * cc];
                        }
                        y[(bi * d.m + i) * d.n + j] = v;
                    }
                }
            }
            Tensor::real::<R>(d.out_shape(), y)
        })])
    }

    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (a, b) = (k.input(0)?, k.input(1)?);
        let d = self.dims(
            &a.shape,
            &b.shape,
            k.opt_input(2).map(|c| c.shape.as_slice()),
        )?;
        let (sam, sak, sbk, sbn) = self.mat_strides(&d);
        let (cr, cc) = d.c.unwrap_or((0, 0));
        Ok(vec![KernelCall::new(
            "st_gemm",
            vec![
                ("a", Arg::input(0)),
                ("b", Arg::input(1)),
                ("c", Arg::opt_input(2)),
                ("y", Arg::output(0)),
                ("m", Arg::int(d.m)),
                ("n", Arg::int(d.n)),
                ("k", Arg::int(d.k)),
                ("sam", Arg::int(sam)),
                ("sak", Arg::int(sak)),
                ("sbk", Arg::int(sbk)),
                ("sbn", Arg::int(sbn)),
                ("scm", Arg::int(cr)),
                ("scn", Arg::int(cc)),
                ("alpha", Arg::Float(self.alpha)),
                ("beta", Arg::Float(self.beta)),
                ("nbd", Arg::int(d.batch.len())),
                ("bdims", Arg::dims8(&d.batch, 1)),
                ("sa", Arg::dims8(&d.sa, 0)),
                ("sb", Arg::dims8(&d.sb, 0)),
                ("sc", Arg::dims8(&d.sc, 0)),
            ],
        )])
    }
}

// ---------------------------------------------------------------- Relu

#[derive(Debug)]
pub struct Relu;

impl Op for Relu {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![f32_input(inputs, 0)?.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        Ok(vec![crate::by_real!(inputs, R => {
            let y = x
                .as_real::<R>()
                .iter()
                .map(|&v| if v > R::ZERO { v } else { R::ZERO })
                .collect();
            Tensor::real::<R>(x.shape.clone(), y)
        })])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        Ok(vec![KernelCall::new(
            "st_relu",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("n", Arg::int(n)),
            ],
        )])
    }
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        vec![(0, 0)]
    }
}

#[derive(Debug)]
pub struct ReluGrad;

impl Op for ReluGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![grad_pair_type(inputs, "ReluGrad", "X")?])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => grad_pair_eval::<R>(inputs, |g, x| if x > R::ZERO { g } else { R::ZERO }))
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        grad_pair_calls(k, "st_relu_grad", "x", vec![])
    }
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        vec![(0, 0), (0, 1)]
    }
}

// ---------------------------------------------------------------- views

#[derive(Debug)]
pub enum ViewKind {
    Identity,
    Reshape,
    Flatten(i64),
    /// Axes from the attribute (opset < 13) or, when `None`, from input 1 / all size-1 dims.
    Squeeze(Option<Vec<i64>>),
    Unsqueeze(Option<Vec<i64>>),
}

/// An op whose output is its input's bytes under another shape.
#[derive(Debug)]
pub struct View {
    pub kind: ViewKind,
}

fn const_ints(
    inputs: &[Option<OpInput<'_>>],
    i: usize,
    what: &str,
) -> Result<Option<Vec<i64>>, OpError> {
    match inputs.get(i).copied().flatten() {
        None => Ok(None),
        Some(inp) => match inp.value {
            Some(v) => Ok(Some(v.to_i64())),
            None => Err(op_err!(
                "{what} (input {i}) must be a constant: strata needs static shapes"
            )),
        },
    }
}

impl View {
    fn out_shape(&self, inputs: &[Option<OpInput<'_>>]) -> Result<Vec<usize>, OpError> {
        let x = req(inputs, 0)?.ty;
        let rank = x.shape.len();
        Ok(match &self.kind {
            ViewKind::Identity => x.shape.clone(),
            ViewKind::Reshape => {
                let spec = const_ints(inputs, 1, "the target shape")?
                    .ok_or_else(|| op_err!("Reshape needs a shape input"))?;
                let mut out = Vec::with_capacity(spec.len());
                let mut infer_at = None;
                for (i, &s) in spec.iter().enumerate() {
                    match s {
                        -1 => {
                            ensure!(infer_at.is_none(), "Reshape: more than one -1 in {spec:?}");
                            infer_at = Some(i);
                            out.push(1);
                        }
                        0 => out.push(*x.shape.get(i).ok_or_else(|| {
                            op_err!("Reshape: 0 at position {i} beyond input rank {rank}")
                        })?),
                        s if s > 0 => out.push(s as usize),
                        s => return Err(op_err!("Reshape: invalid dimension {s}")),
                    }
                }
                let known: usize = out.iter().product();
                if let Some(i) = infer_at {
                    ensure!(
                        known > 0 && x.numel() % known == 0,
                        "Reshape: cannot infer -1 from {} elements and {spec:?}",
                        x.numel()
                    );
                    out[i] = x.numel() / known;
                }
                out
            }
            ViewKind::Flatten(axis) => {
                let a = if *axis < 0 {
                    (*axis + rank as i64) as usize
                } else {
                    *axis as usize
                };
                ensure!(
                    a <= rank,
                    "Flatten: axis {axis} out of range for rank {rank}"
                );
                vec![x.shape[..a].iter().product(), x.shape[a..].iter().product()]
            }
            ViewKind::Squeeze(attr) => {
                let axes = match attr {
                    Some(a) => {
                        replaced_by_attribute(inputs, 1..2, "axes")?;
                        Some(a.clone())
                    }
                    None => const_ints(inputs, 1, "Squeeze axes")?,
                };
                match axes {
                    None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
                    Some(axes) => {
                        let mut drop = vec![false; rank];
                        for a in axes {
                            let a = norm_axis(a, rank)?;
                            ensure!(
                                x.shape[a] == 1,
                                "Squeeze: axis {a} has size {}, not 1",
                                x.shape[a]
                            );
                            drop[a] = true;
                        }
                        x.shape
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| !drop[*i])
                            .map(|(_, &d)| d)
                            .collect()
                    }
                }
            }
            ViewKind::Unsqueeze(attr) => {
                let axes = match attr {
                    Some(a) => {
                        replaced_by_attribute(inputs, 1..2, "axes")?;
                        a.clone()
                    }
                    None => const_ints(inputs, 1, "Unsqueeze axes")?
                        .ok_or_else(|| op_err!("Unsqueeze needs axes"))?,
                };
                let out_rank = rank + axes.len();
                let mut ins = vec![false; out_rank];
                for a in axes {
                    let a = norm_axis(a, out_rank)?;
                    ensure!(!ins[a], "Unsqueeze: axis {a} repeated");
                    ins[a] = true;
                }
                let mut src = x.shape.iter();
                (0..out_rank)
                    .map(|i| if ins[i] { 1 } else { *src.next().unwrap() })
                    .collect()
            }
        })
    }
}

impl Op for View {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        let shape = self.out_shape(inputs)?;
        ensure!(
            shape.iter().product::<usize>() == x.numel(),
            "cannot view {x} as {shape:?}: element counts differ"
        );
        Ok(vec![TensorType::new(x.dtype, shape)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let ty = outputs[0].ok_or_else(|| op_err!("view output missing"))?;
        Ok(vec![Tensor {
            shape: ty.shape.clone(),
            data: x.data.clone(),
        }])
    }
    fn kernel_calls(&self, _: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        Ok(Vec::new())
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias::view(0, 0)]
    }
}

// ---------------------------------------------------------------- reductions

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReduceKind {
    Sum,
    Mean,
}

#[derive(Debug)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axes_attr: Option<Vec<i64>>,
    pub keepdims: bool,
    pub noop_with_empty_axes: bool,
    /// What a mean divides by, when not its own reduced count: a tile of a
    /// mean cut across tiles divides by the whole node's count.
    pub divisor: Option<usize>,
}

fn parse_reduce(a: &Attrs<'_>, kind: ReduceKind) -> Result<Box<dyn Op>, OpError> {
    boxed(Reduce {
        kind,
        axes_attr: a.ints("axes"),
        keepdims: a.int_or("keepdims", 1) != 0,
        noop_with_empty_axes: a.int_or("noop_with_empty_axes", 0) != 0,
        divisor: None,
    })
}

/// A reduction resolved against its input shape.
#[derive(Debug)]
pub struct ReducePlan {
    pub out_shape: Vec<usize>,
    /// Input dims and strides of the kept axes, in order.
    pub kept_dims: Vec<usize>,
    pub kept_strides: Vec<usize>,
    /// Input dims and strides of the reduced axes, in order.
    pub red_dims: Vec<usize>,
    pub red_strides: Vec<usize>,
}

impl ReducePlan {
    /// Reduce the axes flagged in `reduce` of `shape`.
    pub fn new(shape: &[usize], reduce: &[bool], keepdims: bool) -> ReducePlan {
        let st = super::util::strides(shape);
        let mut p = ReducePlan {
            out_shape: vec![],
            kept_dims: vec![],
            kept_strides: vec![],
            red_dims: vec![],
            red_strides: vec![],
        };
        for (i, &d) in shape.iter().enumerate() {
            if reduce[i] {
                p.red_dims.push(d);
                p.red_strides.push(st[i]);
                if keepdims {
                    p.out_shape.push(1);
                }
            } else {
                p.kept_dims.push(d);
                p.kept_strides.push(st[i]);
                p.out_shape.push(d);
            }
        }
        p
    }
    pub fn red_count(&self) -> usize {
        self.red_dims.iter().product()
    }
    /// Input offsets of every reduced element for output `o`, in row-major order.
    pub fn for_each(&self, o: usize, mut f: impl FnMut(usize)) {
        let mut base = 0;
        let mut rem = o;
        for i in (0..self.kept_dims.len()).rev() {
            base += (rem % self.kept_dims[i]) * self.kept_strides[i];
            rem /= self.kept_dims[i];
        }
        for r in 0..self.red_count() {
            let mut off = base;
            let mut rem = r;
            for i in (0..self.red_dims.len()).rev() {
                off += (rem % self.red_dims[i]) * self.red_strides[i];
                rem /= self.red_dims[i];
            }
            f(off);
        }
    }
}

impl Reduce {
    fn plan(&self, inputs: &[Option<OpInput<'_>>]) -> Result<ReducePlan, OpError> {
        let x = f32_input(inputs, 0)?;
        let axes = match &self.axes_attr {
            Some(a) => {
                replaced_by_attribute(inputs, 1..2, "axes")?;
                Some(a.clone())
            }
            None => const_ints(inputs, 1, "the reduction axes")?,
        };
        let rank = x.shape.len();
        let mut reduce = vec![false; rank];
        match axes {
            Some(a) if !a.is_empty() => {
                for ax in a {
                    reduce[norm_axis(ax, rank)?] = true;
                }
            }
            _ if self.noop_with_empty_axes => {}
            _ => reduce.iter_mut().for_each(|r| *r = true),
        }
        Ok(ReducePlan::new(&x.shape, &reduce, self.keepdims))
    }
    fn plan_of(&self, x: &TensorType, axes: Option<&Tensor>) -> Result<ReducePlan, OpError> {
        let inp = [
            Some(OpInput { ty: x, value: None }),
            axes.map(|v| OpInput {
                ty: x,
                value: Some(v),
            }),
        ];
        self.plan(&inp)
    }
}

impl Op for Reduce {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![TensorType::f32(self.plan(inputs)?.out_shape)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let p = self.plan_of(&x.ty(), inputs.get(1).copied().flatten())?;
        let n_out: usize = p.kept_dims.iter().product();
        Ok(vec![crate::by_real!(inputs, R => {
            let xv = x.as_real::<R>();
            let count = R::from_usize(self.divisor.unwrap_or(p.red_count()));
            let y = (0..n_out)
                .map(|o| {
                    let mut sum = super::util::Psum::new();
                    p.for_each(o, |off| sum.add(xv[off]));
                    let acc = sum.total();
                    if self.kind == ReduceKind::Mean {
                        acc / count
                    } else {
                        acc
                    }
                })
                .collect();
            Tensor::real::<R>(p.out_shape.clone(), y)
        })])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let p = self.plan_of(k.input(0)?, k.value(1))?;
        let mut call = reduce_call(&p, self.kind == ReduceKind::Mean)?;
        if let (Some(d), ReduceKind::Mean) = (self.divisor, self.kind) {
            call.args.push(("div", Arg::int(d)));
        }
        Ok(vec![call])
    }
}

/// The `st_reduce` call of a reduction plan: input 0 into output 0.
pub fn reduce_call(p: &ReducePlan, mean: bool) -> Result<KernelCall, OpError> {
    ensure!(
        p.kept_dims.len() <= 8 && p.red_dims.len() <= 8,
        "reductions support rank <= 8"
    );
    Ok(KernelCall::new(
        "st_reduce",
        vec![
            ("x", Arg::input(0)),
            ("y", Arg::output(0)),
            ("n_kept", Arg::int(p.kept_dims.len())),
            ("kept_dims", Arg::dims8(&p.kept_dims, 1)),
            ("kept_strides", Arg::dims8(&p.kept_strides, 1)),
            ("n_red", Arg::int(p.red_dims.len())),
            ("red_dims", Arg::dims8(&p.red_dims, 1)),
            ("red_strides", Arg::dims8(&p.red_strides, 1)),
            ("mean", Arg::int(mean as u8)),
        ],
    ))
}

// ---------------------------------------------------------------- Shape

/// `Shape`: the (sliced) shape of its input as int64. Shapes are static, so
/// the importer folds every Shape node into a constant.
#[derive(Debug)]
pub struct Shape {
    pub start: i64,
    pub end: Option<i64>,
}

impl Shape {
    fn dims(&self, shape: &[usize]) -> Vec<i64> {
        let r = shape.len() as i64;
        let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) } as usize;
        let (s, e) = (clamp(self.start), clamp(self.end.unwrap_or(r)));
        shape
            .get(s..e.max(s))
            .unwrap_or(&[])
            .iter()
            .map(|&d| d as i64)
            .collect()
    }
}

impl Op for Shape {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![TensorType::new(
            DType::I64,
            vec![self.dims(&req(inputs, 0)?.ty.shape).len()],
        )])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let d = self.dims(&arg(inputs, 0)?.shape);
        Ok(vec![Tensor::i64(vec![d.len()], d)])
    }
    fn kernel_calls(&self, _: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        Err(op_err!(
            "internal: Shape is folded at import and never emitted"
        ))
    }
    fn static_value(&self, inputs: &[Option<&TensorType>]) -> Option<Tensor> {
        let d = self.dims(&inputs.first().copied().flatten()?.shape);
        Some(Tensor::i64(vec![d.len()], d))
    }
}
