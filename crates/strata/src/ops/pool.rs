//! Pooling (NCHW, 2-D; `[N, C, L]` as H = 1): MaxPool (with ONNX's flat
//! argmax indices), MaxPoolGrad, AveragePool, AveragePoolGrad,
//! GlobalAveragePool, GlobalAveragePoolGrad. Geometry is the convolutions'
//! ([`Geom`] with cout = cin = group).
//!
//! The gradient ops see only dY, so the input's spatial size is recovered
//! from the window attributes ([`in_extent`]); GlobalAveragePoolGrad takes
//! it from its `kernel_shape` attribute. Where the graph declares dX
//! completely and the recovered size differs, import fails (see
//! `onnx::import_into`).

use super::conv::{geom, in_extent, nchw, tap_out, Geom, Win2, Window};
use super::{
    arg, boxed, req, Arg, Arity, Attrs, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "MaxPool", Arity::exactly(1), |a| {
        a.reject_if(
            a.int_or("storage_order", 0) != 0,
            "MaxPool storage_order=1 (column-major indices)",
        )?;
        boxed(Pool {
            kind: PoolKind::Max,
            win: parse_pool_window(a)?,
            at: PlaneAt::default(),
        })
    });
    r.add(&[MS, ""], "MaxPoolGrad", Arity::exactly(2), |a| {
        boxed(PoolGrad {
            kind: PoolKind::Max,
            win: parse_pool_window(a)?,
            at: PlaneAt::default(),
        })
    });
    r.add(&[""], "AveragePool", Arity::exactly(1), |a| {
        boxed(Pool {
            kind: PoolKind::Avg {
                include_pad: a.int_or("count_include_pad", 0) != 0,
            },
            win: parse_pool_window(a)?,
            at: PlaneAt::default(),
        })
    });
    r.add(&[MS, ""], "AveragePoolGrad", Arity::exactly(1), |a| {
        boxed(PoolGrad {
            kind: PoolKind::Avg {
                include_pad: a.int_or("count_include_pad", 0) != 0,
            },
            win: parse_pool_window(a)?,
            at: PlaneAt::default(),
        })
    });
    r.add(&[""], "GlobalAveragePool", Arity::exactly(1), |_| {
        boxed(GlobalAvgPool)
    });
    r.add(&[MS, ""], "GlobalAveragePoolGrad", Arity::exactly(1), |a| {
        let k = a.ints("kernel_shape").ok_or_else(|| {
            op_err!("GlobalAveragePoolGrad needs `kernel_shape` (the input's spatial size)")
        })?;
        ensure!(
            !k.is_empty() && k.len() <= 2 && k.iter().all(|&v| v >= 1),
            "kernel_shape {k:?} must be 1 or 2 positive sizes"
        );
        // dX's plane: its size must be a number (the output's whole size
        // is checked when the node is imported).
        ensure!(
            k.iter()
                .try_fold(1i64, |p, &v| p.checked_mul(v))
                .is_some_and(|p| p <= 1 << 40),
            "kernel_shape {k:?} gives a plane of more than 2^40 elements"
        );
        boxed(GlobalAvgPoolGrad {
            spatial: k.iter().map(|&v| v as usize).collect(),
        })
    });
}

fn parse_pool_window(a: &Attrs<'_>) -> Result<Window, OpError> {
    a.reject_if(
        a.int_or("ceil_mode", 0) != 0,
        "ceil_mode=1 (only floor output sizes are implemented)",
    )?;
    let w = Window::parse(a)?;
    ensure!(w.kernel.is_some(), "missing attribute `kernel_shape`");
    Ok(w)
}

/// Where the (n, c) planes of a tile sit in the whole tensor: the tile's
/// plane `p` (of `cin` channels) is the tensor's plane
/// `(n0 + p / cin) * channels + c0 + p % cin`. MaxPool's indices are flat
/// over the whole input (ONNX), so a tile of planes writes, and MaxPoolGrad
/// reads, them through this map; `channels == 0` (the default): the kernel
/// runs on the whole tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlaneAt {
    pub n0: usize,
    pub c0: usize,
    pub channels: usize,
}

impl PlaneAt {
    /// The tensor's plane of the tile's plane `p` of `cin` channels.
    pub fn plane(&self, p: usize, cin: usize) -> usize {
        if self.channels == 0 {
            p
        } else {
            (self.n0 + p / cin) * self.channels + self.c0 + p % cin
        }
    }
    /// The fields of the kernels' arguments (none for the whole tensor).
    fn args(&self) -> Vec<(&'static str, Arg)> {
        if self.channels == 0 {
            return vec![];
        }
        vec![
            ("n0", Arg::Int(self.n0 as i64)),
            ("c0", Arg::Int(self.c0 as i64)),
            ("channels", Arg::Int(self.channels as i64)),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg { include_pad: bool },
}

fn f32_ty<'a>(inputs: &[Option<OpInput<'a>>], i: usize) -> Result<&'a TensorType, OpError> {
    let t = req(inputs, i)?.ty;
    ensure!(
        t.dtype == DType::F32,
        "input {i} must be float32, found {t}"
    );
    Ok(t)
}

fn pool_geom(win: &Window, xs: &[usize]) -> Result<Geom, OpError> {
    let x = nchw(xs, "X")?;
    let nsp = xs.len() - 2;
    geom(nsp, x, x[1], win.resolve(nsp, None)?, x[1].max(1))
}

/// The forward geometry seen from the gradient's dY.
fn grad_geom(win: &Window, dys: &[usize]) -> Result<Geom, OpError> {
    let dy = nchw(dys, "dY")?;
    let nsp = dys.len() - 2;
    let w: Win2 = win.resolve(nsp, None)?;
    let h = in_extent(dy[2], w.k.0, w.s.0, w.p.0, w.p.2)?;
    let wd = in_extent(dy[3], w.k.1, w.s.1, w.p.1, w.p.3)?;
    let g = geom(nsp, [dy[0], dy[1], h, wd], dy[1], w, dy[1].max(1))?;
    ensure!(
        g.y_shape() == dys,
        "internal: recovered pool input {:?} does not give dY {dys:?}",
        g.x_shape()
    );
    Ok(g)
}

// ---------------------------------------------------------------- reference kernels

/// Max pool with flat argmax indices, the loops of `st_maxpool`.
pub fn maxpool<R: Real>(g: &Geom, x: &[R]) -> (Vec<R>, Vec<i64>) {
    let n_out = g.n * g.cin * g.oh * g.ow;
    let (mut y, mut idx) = (vec![R::ZERO; n_out], vec![0i64; n_out]);
    for p in 0..g.n * g.cin {
        let base = p * g.h * g.w;
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let mut best = R::MIN;
                let mut at = -1i64;
                for ky in 0..g.kh {
                    let iy = (oy * g.sh + ky) as isize - g.pt as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    for kx in 0..g.kw {
                        let ix = (ox * g.sw + kx) as isize - g.pl as isize;
                        if ix < 0 || ix >= g.w as isize {
                            continue;
                        }
                        let off = base + iy as usize * g.w + ix as usize;
                        if x[off] > best {
                            best = x[off];
                            at = off as i64;
                        }
                    }
                }
                let o = (p * g.oh + oy) * g.ow + ox;
                y[o] = best;
                idx[o] = at;
            }
        }
    }
    (y, idx)
}

/// Scatter dY to the argmax positions, the loops of `st_maxpool_grad`.
pub fn maxpool_grad<R: Real>(g: &Geom, dy: &[R], idx: &[i64]) -> Vec<R> {
    let (inp, outp) = (g.h * g.w, g.oh * g.ow);
    let mut dx = vec![R::ZERO; g.n * g.cin * inp];
    for p in 0..g.n * g.cin {
        let (first, last) = (p * inp, (p + 1) * inp);
        for o in p * outp..(p + 1) * outp {
            let at = idx[o];
            if at < 0 || (at as usize) < first || at as usize >= last {
                continue;
            }
            dx[at as usize] += dy[o];
        }
    }
    dx
}

fn span(s: isize, k: usize, n: usize) -> usize {
    let b = s.max(0);
    let e = (s + k as isize).min(n as isize);
    (e - b).max(0) as usize
}

/// The divisor of window (oy, ox), as `st_pool_div`.
fn pool_div<R: Real>(g: &Geom, oy: usize, ox: usize, include_pad: bool) -> R {
    if include_pad {
        return R::from_usize(g.kh * g.kw);
    }
    let rows = span((oy * g.sh) as isize - g.pt as isize, g.kh, g.h);
    let cols = span((ox * g.sw) as isize - g.pl as isize, g.kw, g.w);
    R::from_usize(rows * cols)
}

/// Average pool, the loops of `st_avgpool`.
pub fn avgpool<R: Real>(g: &Geom, x: &[R], include_pad: bool) -> Vec<R> {
    let mut y = vec![R::ZERO; g.n * g.cin * g.oh * g.ow];
    for p in 0..g.n * g.cin {
        let xp = &x[p * g.h * g.w..];
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let mut acc = R::ZERO;
                for ky in 0..g.kh {
                    let iy = (oy * g.sh + ky) as isize - g.pt as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    for kx in 0..g.kw {
                        let ix = (ox * g.sw + kx) as isize - g.pl as isize;
                        if ix < 0 || ix >= g.w as isize {
                            continue;
                        }
                        acc += xp[iy as usize * g.w + ix as usize];
                    }
                }
                y[(p * g.oh + oy) * g.ow + ox] = acc / pool_div(g, oy, ox, include_pad);
            }
        }
    }
    y
}

/// Average pool gradient, the loops of `st_avgpool_grad`.
pub fn avgpool_grad<R: Real>(g: &Geom, dy: &[R], include_pad: bool) -> Vec<R> {
    let mut dx = vec![R::ZERO; g.n * g.cin * g.h * g.w];
    for p in 0..g.n * g.cin {
        let dyp = &dy[p * g.oh * g.ow..];
        for iy in 0..g.h {
            for ix in 0..g.w {
                let mut acc = R::ZERO;
                for ky in 0..g.kh {
                    let Some(oy) = tap_out(iy, g.pt, ky, g.sh, g.oh) else {
                        continue;
                    };
                    for kx in 0..g.kw {
                        let Some(ox) = tap_out(ix, g.pl, kx, g.sw, g.ow) else {
                            continue;
                        };
                        acc += dyp[oy * g.ow + ox] / pool_div(g, oy, ox, include_pad);
                    }
                }
                dx[(p * g.h + iy) * g.w + ix] = acc;
            }
        }
    }
    dx
}

// ---------------------------------------------------------------- MaxPool / AveragePool

#[derive(Debug)]
pub struct Pool {
    pub kind: PoolKind,
    pub win: Window,
    /// Where the planes sit in the whole input, for the indices.
    pub at: PlaneAt,
}

impl Op for Pool {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let g = pool_geom(&self.win, &f32_ty(inputs, 0)?.shape)?;
        let mut out = vec![TensorType::f32(g.y_shape())];
        if n_outputs > 1 {
            ensure!(
                self.kind == PoolKind::Max && n_outputs == 2,
                "has at most {} outputs",
                if self.kind == PoolKind::Max { 2 } else { 1 }
            );
            out.push(TensorType::new(DType::I64, g.y_shape()));
        }
        Ok(out)
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let g = pool_geom(&self.win, &x.shape)?;
            Ok(match self.kind {
                PoolKind::Max => {
                    let (y, mut idx) = maxpool(&g, x.as_real::<R>());
                    if self.at.channels != 0 {
                        // Local flat index → the whole input's.
                        let (inp, outp) = (g.h * g.w, (g.oh * g.ow).max(1));
                        for (o, v) in idx.iter_mut().enumerate() {
                            if *v >= 0 {
                                let p = o / outp;
                                let gp = self.at.plane(p, g.cin);
                                *v = *v - (p * inp) as i64 + (gp * inp) as i64;
                            }
                        }
                    }
                    let mut out = vec![Tensor::real::<R>(g.y_shape(), y)];
                    if outputs.len() > 1 {
                        out.push(match outputs[1] {
                            Some(_) => Tensor::i64(g.y_shape(), idx),
                            None => Tensor::absent(),
                        });
                    }
                    out
                }
                PoolKind::Avg { include_pad } => {
                    vec![Tensor::real::<R>(
                        g.y_shape(),
                        avgpool(&g, x.as_real::<R>(), include_pad),
                    )]
                }
            })
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let g = pool_geom(&self.win, &k.input(0)?.shape)?;
        Ok(vec![match self.kind {
            PoolKind::Max => KernelCall::new(
                "st_maxpool",
                vec![
                    ("x", Arg::input(0)),
                    ("y", Arg::output(0)),
                    ("idx", Arg::opt_output(1)),
                    ("g", g.record()),
                ]
                .into_iter()
                .chain(self.at.args())
                .collect(),
            ),
            PoolKind::Avg { include_pad } => KernelCall::new(
                "st_avgpool",
                vec![
                    ("x", Arg::input(0)),
                    ("y", Arg::output(0)),
                    ("g", g.record()),
                    ("include_pad", Arg::int(include_pad as u8)),
                ],
            ),
        }])
    }
}

// ---------------------------------------------------------------- MaxPoolGrad / AveragePoolGrad

/// MaxPoolGrad: (dY, Indices) → dX as ONNX Runtime, or (dY, X) → dX as the
/// peer's graphs spell it (the second input float32: the argmax is
/// recomputed from X exactly as MaxPool finds it, and X gives the input size
/// that dY alone cannot); AveragePoolGrad: (dY) → dX.
#[derive(Debug)]
pub struct PoolGrad {
    pub kind: PoolKind,
    pub win: Window,
    /// Where the planes sit in the whole dX, for the indices.
    pub at: PlaneAt,
}

impl PoolGrad {
    /// The forward geometry when the second input is MaxPool's X.
    fn x_geom(&self, dy: &[usize], x: &[usize]) -> Result<Geom, OpError> {
        let g = pool_geom(&self.win, x)?;
        ensure!(
            g.y_shape() == dy,
            "dY {dy:?} is not the pooled shape {:?} of X {x:?}",
            g.y_shape()
        );
        Ok(g)
    }
}

impl Op for PoolGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let dy = f32_ty(inputs, 0)?;
        if self.kind == PoolKind::Max && req(inputs, 1)?.ty.dtype == DType::F32 {
            let x = req(inputs, 1)?.ty;
            return Ok(vec![TensorType::f32(
                self.x_geom(&dy.shape, &x.shape)?.x_shape(),
            )]);
        }
        if self.kind == PoolKind::Max {
            let idx = req(inputs, 1)?.ty;
            ensure!(
                idx.dtype == DType::I64 && idx.shape == dy.shape,
                "Indices {idx} must be int64 shaped like dY {dy}"
            );
        }
        Ok(vec![TensorType::f32(
            grad_geom(&self.win, &dy.shape)?.x_shape(),
        )])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let dy = arg(inputs, 0)?;
            if self.kind == PoolKind::Max && arg(inputs, 1)?.dtype() == DType::F32 {
                let x = arg(inputs, 1)?;
                let g = self.x_geom(&dy.shape, &x.shape)?;
                let (_, idx) = maxpool(&g, x.as_real::<R>());
                return Ok(vec![Tensor::real::<R>(
                    g.x_shape(),
                    maxpool_grad(&g, dy.as_real::<R>(), &idx),
                )]);
            }
            let g = grad_geom(&self.win, &dy.shape)?;
            let dx = match self.kind {
                PoolKind::Max => {
                    let mut idx = arg(inputs, 1)?.to_i64();
                    // MaxPool's indices point into their own (n, c) plane
                    // of the whole tensor; a tile's, into the tile's.
                    let (inp, outp) = (g.h * g.w, g.oh * g.ow);
                    for (o, at) in idx.iter_mut().enumerate() {
                        let p = o / outp.max(1);
                        let gp = self.at.plane(p, g.cin);
                        ensure!(
                            *at >= 0 && (gp * inp..(gp + 1) * inp).contains(&(*at as usize)),
                            "MaxPoolGrad: index {at} at position {o} is out of range of its plane [{}, {})",
                            gp * inp,
                            (gp + 1) * inp
                        );
                        *at = *at - (gp * inp) as i64 + (p * inp) as i64;
                    }
                    maxpool_grad(&g, dy.as_real::<R>(), &idx)
                }
                PoolKind::Avg { include_pad } => avgpool_grad(&g, dy.as_real::<R>(), include_pad),
            };
            Ok(vec![Tensor::real::<R>(g.x_shape(), dx)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let dy = k.input(0)?;
        if self.kind == PoolKind::Max && k.input(1)?.dtype == DType::F32 {
            let g = self.x_geom(&dy.shape, &k.input(1)?.shape)?;
            return Ok(vec![KernelCall::new(
                "st_maxpool_grad_x",
                vec![
                    ("dy", Arg::input(0)),
                    ("x", Arg::input(1)),
                    ("dx", Arg::output(0)),
                    ("g", g.record()),
                ],
            )]);
        }
        let g = grad_geom(&self.win, &dy.shape)?;
        Ok(vec![match self.kind {
            PoolKind::Max => KernelCall::new(
                "st_maxpool_grad",
                vec![
                    ("dy", Arg::input(0)),
                    ("idx", Arg::input(1)),
                    ("dx", Arg::output(0)),
                    ("g", g.record()),
                ]
                .into_iter()
                .chain(self.at.args())
                .collect(),
            ),
            PoolKind::Avg { include_pad } => KernelCall::new(
                "st_avgpool_grad",
                vec![
                    ("dy", Arg::input(0)),
                    ("dx", Arg::output(0)),
                    ("g", g.record()),
                    ("include_pad", Arg::int(include_pad as u8)),
                ],
            ),
        }])
    }
}

// ---------------------------------------------------------------- global average pool

/// `[N, C, ...]` → `[N, C, 1, ...]`: the mean of each (n, c) plane.
#[derive(Debug)]
pub struct GlobalAvgPool;

fn planes(shape: &[usize]) -> Result<(usize, usize), OpError> {
    ensure!(
        shape.len() >= 3,
        "input must be [N, C, spatial...], found {shape:?}"
    );
    Ok((shape[0] * shape[1], shape[2..].iter().product()))
}

/// Plane means, the loops of `st_gap`.
pub fn gap<R: Real>(x: &[R], planes: usize, hw: usize) -> Vec<R> {
    (0..planes)
        .map(|p| super::util::psum(x[p * hw..(p + 1) * hw].iter().copied()) / R::from_usize(hw))
        .collect()
}

impl Op for GlobalAvgPool {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = f32_ty(inputs, 0)?;
        planes(&x.shape)?;
        let mut s = x.shape.clone();
        s[2..].iter_mut().for_each(|d| *d = 1);
        Ok(vec![TensorType::f32(s)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let (p, hw) = planes(&x.shape)?;
            let ty = outputs[0].ok_or_else(|| op_err!("missing output 0"))?;
            Ok(vec![Tensor::real::<R>(ty.shape.clone(), gap(x.as_real::<R>(), p, hw))])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (p, hw) = planes(&k.input(0)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_gap",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("planes", Arg::int(p)),
                ("hw", Arg::int(hw)),
            ],
        )])
    }
}

/// (dY `[N, C, 1, ...]`) → dX `[N, C, kernel_shape...]`, `dY / (H·W)` everywhere.
#[derive(Debug)]
pub struct GlobalAvgPoolGrad {
    pub spatial: Vec<usize>,
}

impl GlobalAvgPoolGrad {
    fn dims(&self, dys: &[usize]) -> Result<(Vec<usize>, usize, usize), OpError> {
        ensure!(
            dys.len() == self.spatial.len() + 2 && dys[2..].iter().all(|&d| d == 1),
            "dY {dys:?} must be [N, C{}] for kernel_shape {:?}",
            ", 1".repeat(self.spatial.len()),
            self.spatial
        );
        let mut s = dys[..2].to_vec();
        s.extend(&self.spatial);
        Ok((s, dys[0] * dys[1], self.spatial.iter().product()))
    }
}

/// The loops of `st_gap_grad`.
pub fn gap_grad<R: Real>(dy: &[R], planes: usize, hw: usize) -> Vec<R> {
    (0..planes * hw)
        .map(|i| dy[i / hw] / R::from_usize(hw))
        .collect()
}

impl Op for GlobalAvgPoolGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![TensorType::f32(
            self.dims(&f32_ty(inputs, 0)?.shape)?.0,
        )])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let dy = arg(inputs, 0)?;
            let (s, p, hw) = self.dims(&dy.shape)?;
            Ok(vec![Tensor::real::<R>(s, gap_grad(dy.as_real::<R>(), p, hw))])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (_, p, hw) = self.dims(&k.input(0)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_gap_grad",
            vec![
                ("dy", Arg::input(0)),
                ("dx", Arg::output(0)),
                ("planes", Arg::int(p)),
                ("hw", Arg::int(hw)),
            ],
        )])
    }
}
