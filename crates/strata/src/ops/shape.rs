//! Data-movement ops: Transpose, Slice, Concat, Split, Gather and Pad.
//!
//! Transpose, Slice, Concat and Split are all one strided copy (`st_copy`):
//! every output element reads `src_off + Σ i_d·ss[d]` (signed strides, so
//! negative Slice steps need nothing special). Reference kernels compute the
//! same source index per output element and work on any element type, so
//! shape arithmetic on constants folds at import.

use super::util::{norm_axis, strides};
use super::{
    arg, boxed, replaced_by_attribute, req, Arg, Arity, Attrs, KernelCall, Op, OpError, OpInput,
    Operands, Registry, Slot,
};
use crate::tensor::{DType, Data, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "Transpose", Arity::exactly(1), |a| {
        boxed(Transpose {
            perm: a.ints("perm"),
        })
    });
    r.add(&[""], "Slice", Arity::range(1, 5), |a| {
        boxed(Slice {
            attr: match (a.ints("starts"), a.ints("ends")) {
                (Some(s), Some(e)) => Some((s, e, a.ints("axes"))),
                _ => None,
            },
        })
    });
    r.add(&[""], "Concat", Arity::at_least(1), |a| {
        boxed(Concat {
            axis: a
                .int("axis")
                .ok_or_else(|| op_err!("Concat needs an `axis` attribute"))?,
        })
    });
    r.add(&[""], "Split", Arity::range(1, 2), |a| {
        boxed(Split {
            axis: a.int_or("axis", 0),
            split: a.ints("split"),
            num_outputs: a.int("num_outputs"),
        })
    });
    r.add(&[""], "Gather", Arity::exactly(2), |a| {
        boxed(Gather {
            axis: a.int_or("axis", 0),
        })
    });
    r.add(&[""], "Pad", Arity::range(1, 4), parse_pad);
}

fn const_input(
    inputs: &[Option<OpInput<'_>>],
    i: usize,
    what: &str,
) -> Result<Option<Tensor>, OpError> {
    match inputs.get(i).copied().flatten() {
        None => Ok(None),
        Some(OpInput { value: Some(v), .. }) => Ok(Some(v.clone())),
        Some(_) => Err(op_err!(
            "{what} (input {i}) must be a constant: strata needs static shapes"
        )),
    }
}

/// The same view of constant inputs from a reference kernel's tensors.
fn as_inputs<'a>(
    ins: &'a [Option<&'a Tensor>],
    tys: &'a [Option<TensorType>],
) -> Vec<Option<OpInput<'a>>> {
    ins.iter()
        .zip(tys)
        .map(|(t, ty)| match (t, ty) {
            (Some(t), Some(ty)) => Some(OpInput {
                ty,
                value: Some(*t),
            }),
            _ => None,
        })
        .collect()
}

fn types_of(ins: &[Option<&Tensor>]) -> Vec<Option<TensorType>> {
    ins.iter().map(|t| t.map(|t| t.ty())).collect()
}

/// Elements of `d` at `idx` (None: `fill`).
fn pick(d: &Data, idx: &[Option<usize>], fill: f32) -> Data {
    match d {
        Data::F32(v) => Data::F32(idx.iter().map(|i| i.map_or(fill, |i| v[i])).collect()),
        Data::F64(v) => Data::F64(
            idx.iter()
                .map(|i| i.map_or(fill as f64, |i| v[i]))
                .collect(),
        ),
        Data::I64(v) => Data::I64(
            idx.iter()
                .map(|i| i.map_or(fill as i64, |i| v[i]))
                .collect(),
        ),
        Data::I32(v) => Data::I32(
            idx.iter()
                .map(|i| i.map_or(fill as i32, |i| v[i]))
                .collect(),
        ),
        Data::Bool(v) => Data::Bool(
            idx.iter()
                .map(|i| i.map_or(fill != 0.0, |i| v[i]))
                .collect(),
        ),
    }
}

/// A strided copy: `dims` walked row-major, source `off + Σ i·ss`, destination `doff + Σ i·ds`.
#[derive(Debug, Clone)]
struct Strided {
    dims: Vec<usize>,
    ss: Vec<i64>,
    off: i64,
    ds: Vec<i64>,
    doff: i64,
}

impl Strided {
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let n: usize = self.dims.iter().product();
        for o in 0..n {
            let (mut s, mut d, mut rem) = (self.off, self.doff, o);
            for k in (0..self.dims.len()).rev() {
                let i = (rem % self.dims[k]) as i64;
                rem /= self.dims[k];
                s += i * self.ss[k];
                d += i * self.ds[k];
            }
            f(s as usize, d as usize);
        }
    }
    /// The `st_copy` call of this copy from `src` into `dst`, elements of `dtype`.
    fn call(&self, src: Slot, dst: Slot, dtype: DType) -> Result<KernelCall, OpError> {
        ensure!(self.dims.len() <= 8, "rank {} exceeds 8", self.dims.len());
        let pad = |v: &[i64]| {
            let mut v = v.to_vec();
            v.resize(8, 0);
            Arg::Ints(v)
        };
        Ok(KernelCall::new(
            "st_copy",
            vec![
                ("src", Arg::Bytes(src)),
                ("dst", Arg::Bytes(dst)),
                ("esize", Arg::int(dtype.size())),
                ("rank", Arg::int(self.dims.len())),
                ("dims", Arg::dims8(&self.dims, 1)),
                ("ss", pad(&self.ss)),
                ("off", Arg::Int(self.off)),
                ("ds", pad(&self.ds)),
                ("doff", Arg::Int(self.doff)),
            ],
        ))
    }
}

fn istrides(shape: &[usize]) -> Vec<i64> {
    strides(shape).iter().map(|&s| s as i64).collect()
}

/// Run strided copies from `x` into a new tensor of `out` shape.
fn run_copies(x: &Tensor, copies: &[(usize, Strided)], srcs: &[&Tensor], out: &[usize]) -> Tensor {
    let n: usize = out.iter().product();
    let mut idx: Vec<(usize, usize)> = vec![(0, 0); n];
    for (which, c) in copies {
        c.for_each(|s, d| idx[d] = (*which, s));
    }
    // All sources share a dtype; gather per source then merge.
    let mut data = pick(&x.data, &vec![None; n], 0.0);
    for (w, src) in srcs.iter().enumerate() {
        let sel: Vec<Option<usize>> = idx.iter().map(|&(k, s)| (k == w).then_some(s)).collect();
        let part = pick(&src.data, &sel, 0.0);
        merge(&mut data, &part, &sel);
    }
    Tensor {
        shape: out.to_vec(),
        data,
    }
}

fn merge(into: &mut Data, part: &Data, sel: &[Option<usize>]) {
    macro_rules! m {
        ($a:expr, $b:expr) => {
            for (i, s) in sel.iter().enumerate() {
                if s.is_some() {
                    $a[i] = $b[i];
                }
            }
        };
    }
    match (into, part) {
        (Data::F32(a), Data::F32(b)) => m!(a, b),
        (Data::F64(a), Data::F64(b)) => m!(a, b),
        (Data::I64(a), Data::I64(b)) => m!(a, b),
        (Data::I32(a), Data::I32(b)) => m!(a, b),
        (Data::Bool(a), Data::Bool(b)) => m!(a, b),
        _ => {}
    }
}

// ---------------------------------------------------------------- Transpose

#[derive(Debug)]
pub struct Transpose {
    pub perm: Option<Vec<i64>>,
}

impl Transpose {
    fn plan(&self, shape: &[usize]) -> Result<Strided, OpError> {
        let r = shape.len();
        let perm: Vec<usize> = match &self.perm {
            None => (0..r).rev().collect(),
            Some(p) => {
                ensure!(
                    p.len() == r,
                    "Transpose: perm {p:?} does not match rank {r}"
                );
                let mut seen = vec![false; r];
                let mut v = Vec::new();
                for &a in p {
                    let a = norm_axis(a, r)?;
                    ensure!(!seen[a], "Transpose: perm {p:?} repeats axis {a}");
                    seen[a] = true;
                    v.push(a);
                }
                v
            }
        };
        let st = istrides(shape);
        let dims: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        Ok(Strided {
            ss: perm.iter().map(|&p| st[p]).collect(),
            ds: istrides(&dims),
            dims,
            off: 0,
            doff: 0,
        })
    }
}

impl Op for Transpose {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        Ok(vec![TensorType::new(x.dtype, self.plan(&x.shape)?.dims)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let p = self.plan(&x.shape)?;
        Ok(vec![run_copies(x, &[(0, p.clone())], &[x], &p.dims)])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let x = k.input(0)?;
        let call = self.plan(&x.shape)?;
        Ok(vec![call.call(Slot::Input(0), Slot::Output(0), x.dtype)?])
    }
}

// ---------------------------------------------------------------- Slice

/// Slice with starts/ends/axes/steps from constant inputs (opset >= 10) or
/// attributes (opset 1).
/// Opset-1 attributes: starts, ends and optional axes.
type SliceAttrs = (Vec<i64>, Vec<i64>, Option<Vec<i64>>);

#[derive(Debug)]
pub struct Slice {
    pub attr: Option<SliceAttrs>,
}

/// Slice's starts, ends, axes (as given, before normalising) and steps.
type SliceParams = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

impl Slice {
    /// The parameters from the attributes (opset 1) or the constant inputs,
    /// axes and steps defaulted, all of one length.
    fn params(&self, inputs: &[Option<OpInput<'_>>]) -> Result<SliceParams, OpError> {
        let get = |i: usize, w: &str| -> Result<Option<Vec<i64>>, OpError> {
            Ok(const_input(inputs, i, w)?.map(|t| t.to_i64()))
        };
        let (starts, ends, axes, steps) = match &self.attr {
            Some((s, e, a)) => {
                replaced_by_attribute(inputs, 1..5, "starts")?;
                (s.clone(), e.clone(), a.clone(), None)
            }
            None => (
                get(1, "Slice starts")?.ok_or_else(|| op_err!("Slice needs starts"))?,
                get(2, "Slice ends")?.ok_or_else(|| op_err!("Slice needs ends"))?,
                get(3, "Slice axes")?,
                get(4, "Slice steps")?,
            ),
        };
        let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
        ensure!(
            ends.len() == starts.len() && axes.len() == starts.len() && steps.len() == starts.len(),
            "Slice: starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
        );
        Ok((starts, ends, axes, steps))
    }

    /// The axes of X that the node slices, normalised (the tiler keeps
    /// them whole in every tile).
    pub fn sliced_axes(&self, inputs: &[Option<OpInput<'_>>]) -> Result<Vec<usize>, OpError> {
        let r = req(inputs, 0)?.ty.shape.len();
        let (_, _, axes, _) = self.params(inputs)?;
        axes.into_iter().map(|a| norm_axis(a, r)).collect()
    }

    fn plan(&self, inputs: &[Option<OpInput<'_>>]) -> Result<Strided, OpError> {
        let x = req(inputs, 0)?.ty;
        let r = x.shape.len();
        let (starts, ends, axes, steps) = self.params(inputs)?;
        let st = istrides(&x.shape);
        let mut p = Strided {
            dims: x.shape.clone(),
            ss: st.clone(),
            off: 0,
            ds: vec![],
            doff: 0,
        };
        let mut seen = vec![false; r];
        for k in 0..starts.len() {
            let a = norm_axis(axes[k], r)?;
            ensure!(!seen[a], "Slice: axis {a} repeated");
            seen[a] = true;
            let (d, step) = (x.shape[a] as i64, steps[k]);
            ensure!(step != 0, "Slice: step 0 on axis {a}");
            let adj = |v: i64| if v < 0 { v + d } else { v };
            let (s, e) = if step > 0 {
                (adj(starts[k]).clamp(0, d), adj(ends[k]).clamp(0, d))
            } else {
                (
                    adj(starts[k]).clamp(0, d - 1),
                    adj(ends[k]).clamp(-1, d - 1),
                )
            };
            let len = if step > 0 {
                if e > s {
                    (e - s + step - 1) / step
                } else {
                    0
                }
            } else if s > e {
                (s - e + (-step) - 1) / (-step)
            } else {
                0
            };
            p.dims[a] = len as usize;
            if len > 0 {
                p.off += s * st[a];
            }
            p.ss[a] = step * st[a];
        }
        p.ds = istrides(&p.dims);
        Ok(p)
    }
}

impl Op for Slice {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        Ok(vec![TensorType::new(x.dtype, self.plan(inputs)?.dims)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let tys = types_of(inputs);
        let p = self.plan(&as_inputs(inputs, &tys))?;
        Ok(vec![run_copies(x, &[(0, p.clone())], &[x], &p.dims)])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let p = self.plan(&k.inputs)?;
        let x = k.input(0)?;
        Ok(vec![p.call(Slot::Input(0), Slot::Output(0), x.dtype)?])
    }
}

// ---------------------------------------------------------------- Concat / Split

#[derive(Debug)]
pub struct Concat {
    pub axis: i64,
}

impl Concat {
    /// Output shape and one copy per input.
    fn plan(&self, shapes: &[&[usize]]) -> Result<(Vec<usize>, Vec<Strided>), OpError> {
        ensure!(!shapes.is_empty(), "Concat needs at least one input");
        let r = shapes[0].len();
        let a = norm_axis(self.axis, r)?;
        let mut out = shapes[0].to_vec();
        out[a] = 0;
        for s in shapes {
            ensure!(
                s.len() == r
                    && s.iter()
                        .enumerate()
                        .all(|(i, &d)| i == a || d == shapes[0][i]),
                "Concat: shapes {shapes:?} differ outside axis {a}"
            );
            out[a] += s[a];
        }
        let ost = istrides(&out);
        let mut at = 0;
        let mut copies = Vec::new();
        for s in shapes {
            copies.push(Strided {
                dims: s.to_vec(),
                ss: istrides(s),
                off: 0,
                ds: ost.clone(),
                doff: at as i64 * ost[a],
            });
            at += s[a];
        }
        Ok((out, copies))
    }
}

impl Op for Concat {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let tys: Vec<&TensorType> = (0..inputs.len())
            .map(|i| req(inputs, i).map(|o| o.ty))
            .collect::<Result<_, _>>()?;
        ensure!(
            tys.iter().all(|t| t.dtype == tys[0].dtype),
            "Concat: inputs differ in element type"
        );
        let shapes: Vec<&[usize]> = tys.iter().map(|t| t.shape.as_slice()).collect();
        Ok(vec![TensorType::new(tys[0].dtype, self.plan(&shapes)?.0)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let ts: Vec<&Tensor> = (0..inputs.len())
            .map(|i| arg(inputs, i))
            .collect::<Result<_, _>>()?;
        let shapes: Vec<&[usize]> = ts.iter().map(|t| t.shape.as_slice()).collect();
        let (out, copies) = self.plan(&shapes)?;
        let c: Vec<(usize, Strided)> = copies.into_iter().enumerate().collect();
        Ok(vec![run_copies(ts[0], &c, &ts, &out)])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let ins: Vec<&TensorType> = (0..k.inputs.len())
            .map(|i| k.input(i))
            .collect::<Result<_, _>>()?;
        let shapes: Vec<&[usize]> = ins.iter().map(|t| t.shape.as_slice()).collect();
        let (_, copies) = self.plan(&shapes)?;
        let mut calls = Vec::new();
        for (i, (c, x)) in copies.iter().zip(&ins).enumerate() {
            if c.dims.iter().product::<usize>() > 0 {
                calls.push(c.call(Slot::Input(i), Slot::Output(0), x.dtype)?);
            }
        }
        Ok(calls)
    }
}

#[derive(Debug)]
pub struct Split {
    pub axis: i64,
    pub split: Option<Vec<i64>>,
    pub num_outputs: Option<i64>,
}

impl Split {
    fn plan(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_out: usize,
    ) -> Result<Vec<(Vec<usize>, Strided)>, OpError> {
        let x = req(inputs, 0)?.ty;
        let a = norm_axis(self.axis, x.shape.len())?;
        let d = x.shape[a];
        let sizes: Vec<usize> = match (&self.split, const_input(inputs, 1, "Split sizes")?) {
            (Some(s), _) => {
                replaced_by_attribute(inputs, 1..2, "split")?;
                s.iter().map(|&v| v as usize).collect()
            }
            (None, Some(t)) => t.to_i64().iter().map(|&v| v as usize).collect(),
            (None, None) => {
                let n = self.num_outputs.map(|v| v as usize).unwrap_or(n_out);
                ensure!(n > 0, "Split: zero outputs");
                let chunk = d.div_ceil(n);
                (0..n)
                    .map(|i| chunk.min(d.saturating_sub(i * chunk)))
                    .collect()
            }
        };
        ensure!(
            sizes.iter().sum::<usize>() == d,
            "Split: sizes {sizes:?} do not sum to dimension {d} of axis {a}"
        );
        ensure!(
            sizes.len() == n_out,
            "Split: {} parts but {n_out} outputs",
            sizes.len()
        );
        let st = istrides(&x.shape);
        let mut at = 0;
        let mut v = Vec::new();
        for s in sizes {
            let mut shape = x.shape.clone();
            shape[a] = s;
            v.push((
                shape.clone(),
                Strided {
                    ds: istrides(&shape),
                    dims: shape,
                    ss: st.clone(),
                    off: at as i64 * st[a],
                    doff: 0,
                },
            ));
            at += s;
        }
        Ok(v)
    }
}

impl Op for Split {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_out: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        Ok(self
            .plan(inputs, n_out)?
            .into_iter()
            .map(|(s, _)| TensorType::new(x.dtype, s))
            .collect())
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let tys = types_of(inputs);
        let parts = self.plan(&as_inputs(inputs, &tys), outputs.len())?;
        Ok(parts
            .into_iter()
            .zip(outputs)
            .map(|((s, c), o)| {
                if o.is_some() {
                    run_copies(x, &[(0, c)], &[x], &s)
                } else {
                    Tensor::absent()
                }
            })
            .collect())
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let parts = self.plan(&k.inputs, k.outputs.len())?;
        let x = k.input(0)?;
        let mut calls = Vec::new();
        for (o, (s, c)) in parts.iter().enumerate() {
            if k.opt_output(o).is_some() && s.iter().product::<usize>() > 0 {
                calls.push(c.call(Slot::Input(0), Slot::Output(o), x.dtype)?);
            }
        }
        Ok(calls)
    }
}

// ---------------------------------------------------------------- Gather

/// Gather along `axis`; indices int64 (constant or runtime; negative count
/// from the end). The reference kernel reports an out-of-range index; the C
/// kernel writes 0 there, reads nothing out of bounds and raises
/// `ST_FAULT_INDEX` (see `runtime/strata_rt.h`).
#[derive(Debug)]
pub struct Gather {
    pub axis: i64,
}

impl Gather {
    fn dims(
        &self,
        x: &[usize],
        idx: &[usize],
    ) -> Result<(usize, usize, usize, usize, Vec<usize>), OpError> {
        let a = norm_axis(self.axis, x.len())?;
        let outer = x[..a].iter().product();
        let inner = x[a + 1..].iter().product();
        let mut out = x[..a].to_vec();
        out.extend_from_slice(idx);
        out.extend_from_slice(&x[a + 1..]);
        Ok((outer, x[a], inner, idx.iter().product(), out))
    }
}

impl Op for Gather {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        let i = req(inputs, 1)?.ty;
        ensure!(
            matches!(i.dtype, DType::I64 | DType::I32),
            "Gather: indices must be int64 or int32, found {i}"
        );
        Ok(vec![TensorType::new(
            x.dtype,
            self.dims(&x.shape, &i.shape)?.4,
        )])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let it = arg(inputs, 1)?;
        let (outer, d, inner, ni, out) = self.dims(&x.shape, &it.shape)?;
        let idx = it.to_i64();
        let mut sel = Vec::with_capacity(outer * ni * inner);
        for o in 0..outer {
            for &v in &idx {
                let j = if v < 0 { v + d as i64 } else { v };
                ensure!(
                    j >= 0 && j < d as i64,
                    "Gather: index {v} out of range for dimension {d}"
                );
                for i in 0..inner {
                    sel.push(Some((o * d + j as usize) * inner + i));
                }
            }
        }
        Ok(vec![Tensor {
            shape: out,
            data: pick(&x.data, &sel, 0.0),
        }])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let x = k.input(0)?;
        let i = k.input(1)?;
        ensure!(
            i.dtype == DType::I64,
            "Gather: C kernel takes int64 indices, found {}",
            i
        );
        let (outer, d, inner, ni, _) = self.dims(&x.shape, &i.shape)?;
        Ok(vec![KernelCall::new(
            "st_gather",
            vec![
                ("x", Arg::Bytes(Slot::Input(0))),
                ("idx", Arg::input(1)),
                ("y", Arg::Bytes(Slot::Output(0))),
                ("esize", Arg::int(x.dtype.size())),
                ("outer", Arg::int(outer)),
                ("d", Arg::int(d)),
                ("nidx", Arg::int(ni)),
                ("inner", Arg::int(inner)),
            ],
        )])
    }
}

// ---------------------------------------------------------------- Pad

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
}

#[derive(Debug)]
pub struct Pad {
    pub mode: PadMode,
    /// Pads and value from attributes (opset < 11).
    pub pads_attr: Option<Vec<i64>>,
    pub value_attr: f32,
    /// The op of one tile (`tile::Retile::Pad`): `pads_attr` and
    /// `value_attr` hold the tile's own pads over every axis and the value,
    /// and the inputs after X (given for their shapes only) are not read.
    pub tile: bool,
}

fn parse_pad(a: &Attrs<'_>) -> Result<Box<dyn Op>, OpError> {
    let mode = match a.string_or("mode", "constant").as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        other => return Err(op_err!("unsupported: Pad mode `{other}`")),
    };
    boxed(Pad {
        mode,
        pads_attr: a.ints("pads"),
        value_attr: a.float_or("value", 0.0),
        tile: false,
    })
}

#[derive(Debug)]
struct PadPlan {
    out: Vec<usize>,
    begin: Vec<i64>,
    value: f32,
}

impl Pad {
    /// The pads before and after every axis of X (negative: cropped) and
    /// the constant value, from the inputs' types and constant values.
    pub fn pads(
        &self,
        inputs: &[Option<OpInput<'_>>],
    ) -> Result<(Vec<i64>, Vec<i64>, f32), OpError> {
        let x = req(inputs, 0)?.ty;
        let p = self.plan(inputs)?;
        let end = (0..p.out.len())
            .map(|i| p.out[i] as i64 - x.shape[i] as i64 - p.begin[i])
            .collect();
        Ok((p.begin, end, p.value))
    }
    fn plan(&self, inputs: &[Option<OpInput<'_>>]) -> Result<PadPlan, OpError> {
        let x = req(inputs, 0)?.ty;
        let r = x.shape.len();
        let (pads, value, axes) = match &self.pads_attr {
            Some(p) => {
                if !self.tile {
                    replaced_by_attribute(inputs, 1..4, "pads")?;
                }
                (p.clone(), self.value_attr, None)
            }
            None => {
                let p = const_input(inputs, 1, "Pad pads")?
                    .ok_or_else(|| op_err!("Pad needs pads"))?
                    .to_i64();
                let v = match const_input(inputs, 2, "Pad constant_value")? {
                    None => 0.0,
                    Some(t) => match &t.data {
                        Data::F32(v) if v.len() == 1 => v[0],
                        Data::F64(v) if v.len() == 1 => v[0] as f32,
                        _ => t.to_i64().first().copied().unwrap_or(0) as f32,
                    },
                };
                let axes = const_input(inputs, 3, "Pad axes")?.map(|t| t.to_i64());
                (p, v, axes)
            }
        };
        let axes: Vec<usize> = match axes {
            None => (0..r).collect(),
            Some(a) => a
                .iter()
                .map(|&v| norm_axis(v, r))
                .collect::<Result<_, _>>()?,
        };
        ensure!(
            pads.len() == 2 * axes.len(),
            "Pad: {} pads for {} axes",
            pads.len(),
            axes.len()
        );
        let mut begin = vec![0i64; r];
        let mut end = vec![0i64; r];
        for (k, &a) in axes.iter().enumerate() {
            begin[a] = pads[k];
            end[a] = pads[k + axes.len()];
        }
        let mut out = Vec::new();
        for i in 0..r {
            // Pads come from the file: near i64::MAX their sum overflows.
            let d = (x.shape[i] as i64)
                .checked_add(begin[i])
                .and_then(|v| v.checked_add(end[i]))
                .ok_or_else(|| {
                    op_err!(
                        "Pad: axis {i} of {} padded by {}+{} overflows",
                        x.shape[i],
                        begin[i],
                        end[i]
                    )
                })?;
            ensure!(d >= 0, "Pad: pads {pads:?} crop axis {i} below zero");
            ensure!(
                self.mode == PadMode::Constant || x.shape[i] > 0 || (begin[i] == 0 && end[i] == 0),
                "Pad: {:?} padding of an empty axis {i}",
                self.mode
            );
            out.push(d as usize);
        }
        Ok(PadPlan { out, begin, value })
    }
}

/// Source coordinate of output coordinate `c` (already shifted by the begin pad).
fn pad_src(c: i64, n: i64, mode: PadMode) -> Option<i64> {
    if (0..n).contains(&c) {
        return Some(c);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(c.clamp(0, n - 1)),
        PadMode::Reflect => {
            if n == 1 {
                return Some(0);
            }
            let period = 2 * (n - 1);
            let m = c.rem_euclid(period);
            Some(if m < n { m } else { period - m })
        }
    }
}

impl Op for Pad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        Ok(vec![TensorType::new(x.dtype, self.plan(inputs)?.out)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        let tys = types_of(inputs);
        let p = self.plan(&as_inputs(inputs, &tys))?;
        let st = strides(&x.shape);
        let n: usize = p.out.iter().product();
        let mut sel = Vec::with_capacity(n);
        for o in 0..n {
            let mut rem = o;
            let mut off = Some(0usize);
            for k in (0..p.out.len()).rev() {
                let c = (rem % p.out[k]) as i64 - p.begin[k];
                rem /= p.out[k];
                off = match (off, pad_src(c, x.shape[k] as i64, self.mode)) {
                    (Some(a), Some(s)) => Some(a + s as usize * st[k]),
                    _ => None,
                };
            }
            sel.push(off);
        }
        Ok(vec![Tensor {
            shape: p.out,
            data: pick(&x.data, &sel, p.value),
        }])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let p = self.plan(&k.inputs)?;
        let x = k.input(0)?;
        ensure!(
            x.dtype == DType::F32,
            "Pad: C kernel is float32 only, found {}",
            x
        );
        ensure!(p.out.len() <= 8, "Pad: rank exceeds 8");
        let mut pb = p.begin.clone();
        pb.resize(8, 0);
        Ok(vec![KernelCall::new(
            "st_pad",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("rank", Arg::int(p.out.len())),
                ("odims", Arg::dims8(&p.out, 1)),
                ("idims", Arg::dims8(&x.shape, 1)),
                ("istr", Arg::dims8(&strides(&x.shape), 0)),
                ("pb", Arg::Ints(pb)),
                ("mode", Arg::int(p_mode(self.mode))),
                ("value", Arg::Float(p.value)),
            ],
        )])
    }
}

fn p_mode(m: PadMode) -> u8 {
    match m {
        PadMode::Constant => 0,
        PadMode::Reflect => 1,
        PadMode::Edge => 2,
    }
}
