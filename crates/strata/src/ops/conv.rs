//! Convolutions (NCHW, 2-D; a rank-3 `[N, C, L]` input is 2-D with H = 1):
//! Conv, ConvGrad (dX, dW, dB in one node) and its two halves ConvGradX /
//! ConvGradW as the Deeploy kernel tests spell them. Also the window
//! geometry ([`Geom`], [`Window`]) the pools share.
//!
//! Every kernel computes each output element on its own (gradients w.r.t. X
//! gather from the outputs whose windows cover the element), so the C
//! kernels split outputs over cores with no reductions across cores, and the
//! reference kernels below repeat their loops and f32 accumulation order.

use super::util::Psum;
use super::{
    arg, boxed, req, Arg, Arity, Attrs, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "Conv", Arity::range(2, 3), |a| {
        boxed(Conv {
            win: Window::parse(a)?,
            group: parse_group(a)?,
            no_bias: false,
        })
    });
    r.add(&[MS, ""], "ConvGrad", Arity::exactly(3), |a| {
        parse_grad(a, GradKind::Full)
    });
    r.add(&["", MS], "ConvGradX", Arity::exactly(2), |a| {
        parse_grad(a, GradKind::X)
    });
    r.add(&["", MS], "ConvGradW", Arity::exactly(2), |a| {
        parse_grad(a, GradKind::W)
    });
}

fn parse_group(a: &Attrs<'_>) -> Result<usize, OpError> {
    let g = a.int_or("group", 1);
    ensure!(g >= 1, "group must be >= 1, found {g}");
    Ok(g as usize)
}

fn parse_grad(a: &Attrs<'_>, kind: GradKind) -> Result<Box<dyn Op>, OpError> {
    boxed(ConvGrad {
        win: Window::parse(a)?,
        group: parse_group(a)?,
        kind,
    })
}

// ---------------------------------------------------------------- geometry

/// Window geometry of one conv or pool, in the C runtime's `st_geom` layout.
/// X is `[n, cin, h, w]`, Y is `[n, cout, oh, ow]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geom {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    pub pb: usize,
    pub pr: usize,
    pub group: usize,
    /// Spatial rank of the tensors (1 or 2).
    pub nsp: usize,
}

impl Geom {
    pub fn cig(&self) -> usize {
        self.cin / self.group
    }
    pub fn cog(&self) -> usize {
        self.cout / self.group
    }
    /// The runtime's `st_geom` record: the fields in its order.
    pub fn record(&self) -> Arg {
        Arg::dims(&[
            self.n, self.cin, self.h, self.w, self.cout, self.oh, self.ow, self.kh, self.kw,
            self.sh, self.sw, self.pt, self.pl, self.group,
        ])
    }
    fn shape(&self, c: usize, h: usize, w: usize) -> Vec<usize> {
        if self.nsp == 1 {
            vec![self.n, c, w]
        } else {
            vec![self.n, c, h, w]
        }
    }
    pub fn x_shape(&self) -> Vec<usize> {
        self.shape(self.cin, self.h, self.w)
    }
    pub fn y_shape(&self) -> Vec<usize> {
        self.shape(self.cout, self.oh, self.ow)
    }
    pub fn w_shape(&self) -> Vec<usize> {
        if self.nsp == 1 {
            vec![self.cout, self.cig(), self.kw]
        } else {
            vec![self.cout, self.cig(), self.kh, self.kw]
        }
    }
}

/// `[n, c, h, w]` of an NCHW or NCL shape (H = 1 for NCL).
pub fn nchw(shape: &[usize], what: &str) -> Result<[usize; 4], OpError> {
    match shape.len() {
        3 => Ok([shape[0], shape[1], 1, shape[2]]),
        4 => Ok([shape[0], shape[1], shape[2], shape[3]]),
        _ => Err(op_err!(
            "{what} must be [N, C, H, W] or [N, C, L], found {shape:?}"
        )),
    }
}

/// Per-axis window attributes (`kernel_shape`, `strides`, `pads`), resolved
/// against the spatial rank once the input shapes are known.
#[derive(Clone, Debug, Default)]
pub struct Window {
    pub kernel: Option<Vec<i64>>,
    pub strides: Option<Vec<i64>>,
    pub pads: Option<Vec<i64>>,
}

/// A window resolved to 2-D: (kh, kw), (sh, sw), (pt, pl, pb, pr).
#[derive(Clone, Copy, Debug)]
pub struct Win2 {
    pub k: (usize, usize),
    pub s: (usize, usize),
    pub p: (usize, usize, usize, usize),
}

impl Window {
    /// Read the window attributes, rejecting what strata does not implement
    /// (dilations other than 1, auto_pad other than NOTSET).
    pub fn parse(a: &Attrs<'_>) -> Result<Window, OpError> {
        if let Some(d) = a.ints("dilations") {
            a.reject_if(
                d.iter().any(|&v| v != 1),
                &format!("dilations {d:?} (only 1 is implemented)"),
            )?;
        }
        let ap = a.string_or("auto_pad", "NOTSET");
        a.reject_if(
            !(ap == "NOTSET" || ap.is_empty()),
            &format!("auto_pad `{ap}` (only NOTSET with explicit pads is implemented)"),
        )?;
        let w = Window {
            kernel: a.ints("kernel_shape"),
            strides: a.ints("strides"),
            pads: a.ints("pads"),
        };
        for (name, v) in [("kernel_shape", &w.kernel), ("strides", &w.strides)] {
            if let Some(v) = v {
                ensure!(v.iter().all(|&x| x >= 1), "{name} {v:?} must be positive");
            }
        }
        if let Some(p) = &w.pads {
            ensure!(p.iter().all(|&x| x >= 0), "pads {p:?} must be non-negative");
        }
        Ok(w)
    }

    /// Resolve for `nsp` spatial axes; `kernel` is the kernel size implied
    /// by the weights, if any (checked against `kernel_shape`).
    pub fn resolve(&self, nsp: usize, kernel: Option<Vec<usize>>) -> Result<Win2, OpError> {
        let k: Vec<usize> = match (&self.kernel, kernel) {
            (Some(ks), Some(kw)) => {
                let ks: Vec<usize> = ks.iter().map(|&v| v as usize).collect();
                ensure!(
                    ks == kw,
                    "kernel_shape {ks:?} differs from the weights' kernel {kw:?}"
                );
                ks
            }
            (Some(ks), None) => ks.iter().map(|&v| v as usize).collect(),
            (None, Some(kw)) => kw,
            (None, None) => return Err(op_err!("missing attribute `kernel_shape`")),
        };
        ensure!(
            k.len() == nsp,
            "kernel_shape {k:?} has {} axes, the input {nsp} spatial axes",
            k.len()
        );
        let s: Vec<usize> = match &self.strides {
            Some(s) => s.iter().map(|&v| v as usize).collect(),
            None => vec![1; nsp],
        };
        ensure!(
            s.len() == nsp,
            "strides {s:?} has {} axes, the input {nsp} spatial axes",
            s.len()
        );
        let p: Vec<usize> = match &self.pads {
            Some(p) => p.iter().map(|&v| v as usize).collect(),
            None => vec![0; 2 * nsp],
        };
        ensure!(
            p.len() == 2 * nsp,
            "pads {p:?} must have {} entries for {nsp} spatial axes",
            2 * nsp
        );
        Ok(if nsp == 1 {
            Win2 {
                k: (1, k[0]),
                s: (1, s[0]),
                p: (0, p[0], 0, p[1]),
            }
        } else {
            Win2 {
                k: (k[0], k[1]),
                s: (s[0], s[1]),
                p: (p[0], p[1], p[2], p[3]),
            }
        })
    }
}

/// Output extent of one axis.
pub fn out_extent(i: usize, k: usize, s: usize, p0: usize, p1: usize) -> Result<usize, OpError> {
    let padded = i
        .checked_add(p0)
        .and_then(|v| v.checked_add(p1))
        .ok_or_else(|| op_err!("an input of {i} padded by {p0}+{p1} overflows"))?;
    ensure!(
        padded >= k,
        "window of {k} does not fit an input of {i} padded by {p0}+{p1}"
    );
    Ok((padded - k) / s + 1)
}

/// Input extent of one axis recovered from the output extent, for the
/// gradient ops that do not see their forward input. With stride s > 1,
/// s input sizes give the same output; strata takes `o * s` when it is one
/// of them (the input that a "same"-padded or halving window exactly
/// covers), else the smallest. A graph that declares another size for the
/// gradient's output is rejected at import, naming both.
pub fn in_extent(o: usize, k: usize, s: usize, p0: usize, p1: usize) -> Result<usize, OpError> {
    ensure!(o >= 1, "empty output axis");
    let bad = || {
        op_err!("cannot recover the input size: output {o}, kernel {k}, stride {s}, pads {p0}+{p1}")
    };
    // Window attributes reach 2^63: the sums are checked.
    let full = (o - 1)
        .checked_mul(s)
        .and_then(|v| v.checked_add(k))
        .ok_or_else(bad)?;
    let pads = p0.checked_add(p1).ok_or_else(bad)?;
    if full <= pads {
        return Err(bad());
    }
    let lo = full - pads;
    let hi = lo.saturating_add(s - 1);
    Ok(match o.checked_mul(s) {
        Some(os) if (lo..=hi).contains(&os) => os,
        _ => lo,
    })
}

/// Build the geometry of a window `w` over X `[n, cin, h, w]` with `cout`
/// output channels.
pub fn geom(
    nsp: usize,
    x: [usize; 4],
    cout: usize,
    w: Win2,
    group: usize,
) -> Result<Geom, OpError> {
    let [n, cin, h, wd] = x;
    let oh = out_extent(h, w.k.0, w.s.0, w.p.0, w.p.2)?;
    let ow = out_extent(wd, w.k.1, w.s.1, w.p.1, w.p.3)?;
    Ok(Geom {
        n,
        cin,
        h,
        w: wd,
        cout,
        oh,
        ow,
        kh: w.k.0,
        kw: w.k.1,
        sh: w.s.0,
        sw: w.s.1,
        pt: w.p.0,
        pl: w.p.1,
        pb: w.p.2,
        pr: w.p.3,
        group,
        nsp,
    })
}

fn f32_ty<'a>(inputs: &[Option<OpInput<'a>>], i: usize) -> Result<&'a TensorType, OpError> {
    let t = req(inputs, i)?.ty;
    ensure!(
        t.dtype == DType::F32,
        "input {i} must be float32, found {t}"
    );
    Ok(t)
}

/// Kernel size of a weight tensor `[cout, cig, (kh,) kw]`.
fn w_kernel(ws: &[usize], nsp: usize) -> Result<Vec<usize>, OpError> {
    ensure!(
        ws.len() == nsp + 2,
        "weights {ws:?} must have rank {} to match the input",
        nsp + 2
    );
    Ok(ws[2..].to_vec())
}

/// Geometry of a conv from X's and W's shapes.
fn conv_geom(win: &Window, group: usize, xs: &[usize], ws: &[usize]) -> Result<Geom, OpError> {
    let x = nchw(xs, "X")?;
    let nsp = xs.len() - 2;
    let k = w_kernel(ws, nsp)?;
    let cout = ws[0];
    ensure!(
        x[1].is_multiple_of(group) && cout.is_multiple_of(group),
        "group {group} does not divide the channels (in {}, out {cout})",
        x[1]
    );
    ensure!(
        ws[1] * group == x[1],
        "weights {ws:?} expect {} input channels, X {xs:?} has {}",
        ws[1] * group,
        x[1]
    );
    geom(nsp, x, cout, win.resolve(nsp, Some(k))?, group)
}

// ---------------------------------------------------------------- reference kernels

/// Y = conv(X, W) + B, the loops of `st_conv`.
pub fn conv_fwd<R: Real>(g: &Geom, x: &[R], w: &[R], b: Option<&[R]>) -> Vec<R> {
    let (cig, cog) = (g.cig(), g.cog());
    let (pt, pl) = (g.pt as isize, g.pl as isize);
    let mut y = vec![R::ZERO; g.n * g.cout * g.oh * g.ow];
    for n in 0..g.n {
        for co in 0..g.cout {
            let c0 = (co / cog) * cig;
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let mut acc = R::ZERO;
                    for ci in 0..cig {
                        let xp = &x[(n * g.cin + c0 + ci) * g.h * g.w..];
                        let wp = &w[(co * cig + ci) * g.kh * g.kw..];
                        for ky in 0..g.kh {
                            let iy = (oy * g.sh + ky) as isize - pt;
                            if iy < 0 || iy >= g.h as isize {
                                continue;
                            }
                            for kx in 0..g.kw {
                                let ix = (ox * g.sw + kx) as isize - pl;
                                if ix < 0 || ix >= g.w as isize {
                                    continue;
                                }
                                acc += xp[iy as usize * g.w + ix as usize] * wp[ky * g.kw + kx];
                            }
                        }
                    }
                    if let Some(b) = b {
                        acc += b[co];
                    }
                    y[((n * g.cout + co) * g.oh + oy) * g.ow + ox] = acc;
                }
            }
        }
    }
    y
}

/// The output position a tap `k` of input position `i` comes from, if any.
#[inline]
pub fn tap_out(i: usize, p: usize, k: usize, s: usize, o: usize) -> Option<usize> {
    let t = (i + p) as isize - k as isize;
    if t < 0 || !(t as usize).is_multiple_of(s) {
        return None;
    }
    let q = t as usize / s;
    (q < o).then_some(q)
}

/// dX from dY and W, the loops of `st_conv_grad_x`.
pub fn conv_grad_x<R: Real>(g: &Geom, dy: &[R], w: &[R]) -> Vec<R> {
    let (cig, cog) = (g.cig(), g.cog());
    let mut dx = vec![R::ZERO; g.n * g.cin * g.h * g.w];
    for n in 0..g.n {
        for c in 0..g.cin {
            let (gi, ci) = (c / cig, c % cig);
            for iy in 0..g.h {
                for ix in 0..g.w {
                    let mut acc = R::ZERO;
                    for j in 0..cog {
                        let co = gi * cog + j;
                        let dyp = &dy[(n * g.cout + co) * g.oh * g.ow..];
                        let wp = &w[(co * cig + ci) * g.kh * g.kw..];
                        for ky in 0..g.kh {
                            let Some(oy) = tap_out(iy, g.pt, ky, g.sh, g.oh) else {
                                continue;
                            };
                            for kx in 0..g.kw {
                                let Some(ox) = tap_out(ix, g.pl, kx, g.sw, g.ow) else {
                                    continue;
                                };
                                acc += dyp[oy * g.ow + ox] * wp[ky * g.kw + kx];
                            }
                        }
                    }
                    dx[((n * g.cin + c) * g.h + iy) * g.w + ix] = acc;
                }
            }
        }
    }
    dx
}

/// dW from dY and X, the loops of `st_conv_grad_w`.
pub fn conv_grad_w<R: Real>(g: &Geom, dy: &[R], x: &[R]) -> Vec<R> {
    let (cig, cog) = (g.cig(), g.cog());
    let (pt, pl) = (g.pt as isize, g.pl as isize);
    let mut dw = vec![R::ZERO; g.cout * cig * g.kh * g.kw];
    for co in 0..g.cout {
        for ci in 0..cig {
            let c = (co / cog) * cig + ci;
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    let mut acc = Psum::new();
                    for n in 0..g.n {
                        let dyp = &dy[(n * g.cout + co) * g.oh * g.ow..];
                        let xp = &x[(n * g.cin + c) * g.h * g.w..];
                        for oy in 0..g.oh {
                            let iy = (oy * g.sh + ky) as isize - pt;
                            if iy < 0 || iy >= g.h as isize {
                                continue;
                            }
                            for ox in 0..g.ow {
                                let ix = (ox * g.sw + kx) as isize - pl;
                                if ix < 0 || ix >= g.w as isize {
                                    continue;
                                }
                                acc.add(dyp[oy * g.ow + ox] * xp[iy as usize * g.w + ix as usize]);
                            }
                        }
                    }
                    dw[((co * cig + ci) * g.kh + ky) * g.kw + kx] = acc.total();
                }
            }
        }
    }
    dw
}

/// dB from dY, the loops of `st_conv_grad_b`.
pub fn conv_grad_b<R: Real>(g: &Geom, dy: &[R]) -> Vec<R> {
    let plane = g.oh * g.ow;
    (0..g.cout)
        .map(|co| {
            let mut acc = Psum::new();
            for n in 0..g.n {
                for v in &dy[(n * g.cout + co) * plane..][..plane] {
                    acc.add(*v);
                }
            }
            acc.total()
        })
        .collect()
}

// ---------------------------------------------------------------- Conv

#[derive(Debug)]
pub struct Conv {
    pub win: Window,
    pub group: usize,
    /// A tile of input channels after the first, where the channels are
    /// cut across tiles (`crate::tile`): its partial sum leaves the bias
    /// out, which the first tile has added.
    pub no_bias: bool,
}

impl Op for Conv {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = f32_ty(inputs, 0)?;
        let w = f32_ty(inputs, 1)?;
        let g = conv_geom(&self.win, self.group, &x.shape, &w.shape)?;
        if let Some(b) = inputs.get(2).copied().flatten() {
            ensure!(
                b.ty.dtype == DType::F32 && b.ty.shape == [g.cout],
                "bias must be float32 [{}], found {}",
                g.cout,
                b.ty
            );
        }
        Ok(vec![TensorType::f32(g.y_shape())])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let w = arg(inputs, 1)?;
            let b = inputs.get(2).copied().flatten().filter(|_| !self.no_bias);
            let g = conv_geom(&self.win, self.group, &x.shape, &w.shape)?;
            let y = conv_fwd(&g, x.as_real::<R>(), w.as_real::<R>(), b.map(|b| b.as_real::<R>()));
            Ok(vec![Tensor::real::<R>(g.y_shape(), y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let g = conv_geom(
            &self.win,
            self.group,
            &k.input(0)?.shape,
            &k.input(1)?.shape,
        )?;
        Ok(vec![KernelCall::new(
            "st_conv",
            vec![
                ("x", Arg::input(0)),
                ("w", Arg::input(1)),
                (
                    "b",
                    if self.no_bias {
                        Arg::Null
                    } else {
                        Arg::opt_input(2)
                    },
                ),
                ("y", Arg::output(0)),
                ("g", g.record()),
            ],
        )])
    }
}

// ---------------------------------------------------------------- ConvGrad

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradKind {
    /// ConvGrad: (dY, X, W) → (dX?, dW?, dB?).
    Full,
    /// ConvGradX: (dY, W) → dX.
    X,
    /// ConvGradW: (dY, X) → dW.
    W,
}

#[derive(Debug)]
pub struct ConvGrad {
    pub win: Window,
    pub group: usize,
    pub kind: GradKind,
}

/// Which of dX, dW, dB an output position is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wrt {
    X,
    W,
    B,
}

impl ConvGrad {
    /// The geometry from the input shapes (dY first, then X and/or W) and,
    /// for ConvGradX, dX's shape when the graph declares it.
    fn geom(&self, shapes: &[Option<&[usize]>], dx: Option<&[usize]>) -> Result<Geom, OpError> {
        let get = |i: usize| {
            shapes
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| op_err!("missing required input {i}"))
        };
        let dys = get(0)?;
        let dy = nchw(dys, "dY")?;
        let nsp = dys.len() - 2;
        let g = match self.kind {
            GradKind::Full => conv_geom(&self.win, self.group, get(1)?, get(2)?)?,
            GradKind::X => {
                let ws = get(1)?;
                let k = w_kernel(ws, nsp)?;
                let w = self.win.resolve(nsp, Some(k))?;
                let (h, wd) = match dx.filter(|d| d.len() == dys.len()) {
                    Some(d) => {
                        let d = nchw(d, "dX")?;
                        let g = geom(nsp, d, ws[0], w, self.group)?;
                        ensure!(
                            g.y_shape() == dys,
                            "the declared dX {:?} does not give dY {dys:?} under this window",
                            g.x_shape()
                        );
                        (d[2], d[3])
                    }
                    None => (
                        in_extent(dy[2], w.k.0, w.s.0, w.p.0, w.p.2)?,
                        in_extent(dy[3], w.k.1, w.s.1, w.p.1, w.p.3)?,
                    ),
                };
                ensure!(
                    ws[0] % self.group == 0,
                    "group {} does not divide the {} output channels",
                    self.group,
                    ws[0]
                );
                geom(
                    nsp,
                    [dy[0], ws[1] * self.group, h, wd],
                    ws[0],
                    w,
                    self.group,
                )?
            }
            GradKind::W => {
                let xs = get(1)?;
                let x = nchw(xs, "X")?;
                ensure!(
                    xs.len() == dys.len(),
                    "X {xs:?} and dY {dys:?} differ in rank"
                );
                ensure!(
                    x[1] % self.group == 0 && dy[1] % self.group == 0,
                    "group {} does not divide the channels (in {}, out {})",
                    self.group,
                    x[1],
                    dy[1]
                );
                let w = self.win.resolve(nsp, None)?;
                geom(nsp, x, dy[1], w, self.group)?
            }
        };
        ensure!(
            g.y_shape() == dys,
            "dY {dys:?} does not match the convolution's output {:?}",
            g.y_shape()
        );
        Ok(g)
    }

    fn wrt(&self, k: usize) -> Option<Wrt> {
        match self.kind {
            GradKind::Full => [Wrt::X, Wrt::W, Wrt::B].get(k).copied(),
            GradKind::X => (k == 0).then_some(Wrt::X),
            GradKind::W => (k == 0).then_some(Wrt::W),
        }
    }

    /// Index of the X and W inputs, when the op has them.
    fn x_w_inputs(&self) -> (Option<usize>, Option<usize>) {
        match self.kind {
            GradKind::Full => (Some(1), Some(2)),
            GradKind::X => (None, Some(1)),
            GradKind::W => (Some(1), None),
        }
    }
}

impl Op for ConvGrad {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        self.infer_declared(inputs, n_outputs, &[])
    }
    fn infer_declared(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
        declared: &[Option<&TensorType>],
    ) -> Result<Vec<TensorType>, OpError> {
        let n_in = if self.kind == GradKind::Full { 3 } else { 2 };
        let mut shapes = Vec::new();
        for i in 0..n_in {
            shapes.push(Some(f32_ty(inputs, i)?.shape.as_slice()));
        }
        let dx = (self.kind == GradKind::X)
            .then(|| declared.first().copied().flatten())
            .flatten()
            .map(|t| t.shape.as_slice());
        let g = self.geom(&shapes, dx)?;
        (0..n_outputs.max(1))
            .map(|k| match self.wrt(k) {
                Some(Wrt::X) => Ok(TensorType::f32(g.x_shape())),
                Some(Wrt::W) => Ok(TensorType::f32(g.w_shape())),
                Some(Wrt::B) => Ok(TensorType::f32(vec![g.cout])),
                None => Err(op_err!("has no output {k}")),
            })
            .collect()
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let shapes: Vec<Option<&[usize]>> = inputs
                .iter()
                .map(|t| t.map(|t| t.shape.as_slice()))
                .collect();
            let dx = outputs
                .first()
                .copied()
                .flatten()
                .map(|t| t.shape.as_slice());
            let g = self.geom(&shapes, dx)?;
            let dy = arg(inputs, 0)?.as_real::<R>();
            let (xi, wi) = self.x_w_inputs();
            let mut out = Vec::new();
            for (k, want) in outputs.iter().enumerate() {
                if want.is_none() {
                    out.push(Tensor::absent());
                    continue;
                }
                out.push(match self.wrt(k) {
                    Some(Wrt::X) => {
                        let w = arg(inputs, wi.unwrap())?.as_real::<R>();
                        Tensor::real::<R>(g.x_shape(), conv_grad_x(&g, dy, w))
                    }
                    Some(Wrt::W) => {
                        let x = arg(inputs, xi.unwrap())?.as_real::<R>();
                        Tensor::real::<R>(g.w_shape(), conv_grad_w(&g, dy, x))
                    }
                    Some(Wrt::B) => Tensor::real::<R>(vec![g.cout], conv_grad_b(&g, dy)),
                    None => return Err(op_err!("has no output {k}")),
                });
            }
            Ok(out)
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let shapes: Vec<Option<&[usize]>> = k
            .inputs
            .iter()
            .map(|o| o.map(|o| o.ty.shape.as_slice()))
            .collect();
        let g = self.geom(&shapes, k.opt_output(0).map(|o| o.shape.as_slice()))?;
        k.input(0)?;
        let (xi, wi) = self.x_w_inputs();
        let mut calls = Vec::new();
        for o in 0..k.outputs.len() {
            if k.opt_output(o).is_none() {
                continue;
            }
            calls.push(match self.wrt(o) {
                Some(Wrt::X) => {
                    let w = wi.unwrap();
                    k.input(w)?;
                    KernelCall::new(
                        "st_conv_grad_x",
                        vec![
                            ("dy", Arg::input(0)),
                            ("w", Arg::input(w)),
                            ("dx", Arg::output(o)),
                            ("g", g.record()),
                        ],
                    )
                }
                Some(Wrt::W) => {
                    let x = xi.unwrap();
                    k.input(x)?;
                    KernelCall::new(
                        "st_conv_grad_w",
                        vec![
                            ("dy", Arg::input(0)),
                            ("x", Arg::input(x)),
                            ("dw", Arg::output(o)),
                            ("g", g.record()),
                        ],
                    )
                }
                Some(Wrt::B) => KernelCall::new(
                    "st_conv_grad_b",
                    vec![
                        ("dy", Arg::input(0)),
                        ("db", Arg::output(o)),
                        ("g", g.record()),
                    ],
                ),
                None => return Err(op_err!("has no output {o}")),
            });
        }
        Ok(calls)
    }
}
