//! The transformer op set: MatMul, Softmax / SoftmaxGrad, Gelu / GeluGrad,
//! LayerNormalization / LayerNormalizationGrad.
//!
//! GELU needs erf, which neither C99 targets nor Rust's std guarantee to
//! agree on; both engines therefore compute the GELU maps with the same f64
//! series ([`erf64`]) and libm's f64 `exp`/`tanh`, rounding once to f32, so
//! the interpreter and the compiled C agree bit for bit on the host.

use super::util::{broadcast_shape, broadcast_strides, norm_axis};
use super::util::{f32_in, grad_pair_calls, grad_pair_eval, grad_pair_type};
use super::util::{psum, Psum};
use super::{
    arg, boxed, req, Arg, Arity, Attrs, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "MatMul", Arity::exactly(2), |_| boxed(MatMul));
    // Before opset 13 Softmax coerced its input to 2-D at `axis` (default 1).
    r.add(&[""], "Softmax", Arity::exactly(1), |a| {
        let old = a.opset < 13;
        boxed(Softmax {
            axis: a.int_or("axis", if old { 1 } else { -1 }),
            coerce: old,
        })
    });
    // ORT's SoftmaxGrad (opset < 13 softmax): the input is coerced to 2-D at
    // `axis` (default 1); SoftmaxGrad_13 normalises along the one axis (default -1).
    r.add(&[MS], "SoftmaxGrad", Arity::exactly(2), |a| {
        boxed(SoftmaxGrad(Softmax {
            axis: a.int_or("axis", 1),
            coerce: true,
        }))
    });
    r.add(&[MS], "SoftmaxGrad_13", Arity::exactly(2), |a| {
        boxed(SoftmaxGrad(Softmax {
            axis: a.int_or("axis", -1),
            coerce: false,
        }))
    });
    r.add(&[MS, ""], "Gelu", Arity::exactly(1), |a| {
        boxed(Gelu(parse_approx(a)?))
    });
    r.add(&[MS, ""], "GeluGrad", Arity::exactly(2), |a| {
        boxed(GeluGrad(parse_approx(a)?))
    });
    r.add(&["", MS], "LayerNormalization", Arity::range(2, 3), |a| {
        a.reject_if(
            a.int_or("stash_type", 1) != 1,
            "LayerNormalization stash_type other than 1 (float32)",
        )?;
        boxed(LayerNorm {
            axis: a.int_or("axis", -1),
            epsilon: a.float_or("epsilon", 1e-5),
        })
    });
    r.add(&[MS], "LayerNormalizationGrad", Arity::exactly(5), |a| {
        boxed(LayerNormGrad {
            axis: a.int_or("axis", -1),
        })
    });
}

/// Batch shape, then A's and B's element strides per batch dimension.
pub(crate) type BatchBroadcast = (Vec<usize>, Vec<usize>, Vec<usize>);

/// The broadcast batch shape of two batched matrix operands, and each
/// operand's element stride per batch dimension (0 where it broadcasts),
/// given the elements of one matrix of each. Shared by MatMul and FusedMatMul.
pub(crate) fn batch_broadcast(
    ab: &[usize],
    bb: &[usize],
    a_mat: usize,
    b_mat: usize,
    op: &str,
) -> Result<BatchBroadcast, OpError> {
    let batch = broadcast_shape(ab, bb).map_err(|e| op_err!("{op} batch dims: {}", e.0))?;
    ensure!(
        batch.len() <= 8,
        "{op}: batch rank {} exceeds 8",
        batch.len()
    );
    let sa = broadcast_strides(ab, &batch)
        .iter()
        .map(|s| s * a_mat)
        .collect();
    let sb = broadcast_strides(bb, &batch)
        .iter()
        .map(|s| s * b_mat)
        .collect();
    Ok((batch, sa, sb))
}

// ---------------------------------------------------------------- MatMul

/// numpy `matmul`: batched, batch dims broadcast, 1-D operands promoted.
#[derive(Debug)]
pub struct MatMul;

#[derive(Debug)]
struct MmPlan {
    out_shape: Vec<usize>,
    batch: Vec<usize>,
    /// Element strides of A's and B's matrices along the output batch dims.
    sa: Vec<usize>,
    sb: Vec<usize>,
    m: usize,
    n: usize,
    k: usize,
}

impl MatMul {
    fn plan(a: &[usize], b: &[usize]) -> Result<MmPlan, OpError> {
        ensure!(
            !a.is_empty() && !b.is_empty(),
            "MatMul: operands must have rank >= 1, found {a:?} and {b:?}"
        );
        let a2: Vec<usize> = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2: Vec<usize> = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        let (m, ka) = (a2[a2.len() - 2], a2[a2.len() - 1]);
        let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
        ensure!(ka == kb, "MatMul: inner dimensions differ: {a:?} x {b:?}");
        let ab = &a2[..a2.len() - 2];
        let bb = &b2[..b2.len() - 2];
        let (batch, sa, sb) = batch_broadcast(ab, bb, m * ka, kb * n, "MatMul")?;
        let mut out_shape = batch.clone();
        if a.len() > 1 {
            out_shape.push(m);
        }
        if b.len() > 1 {
            out_shape.push(n);
        }
        Ok(MmPlan {
            out_shape,
            batch,
            sa,
            sb,
            m,
            n,
            k: ka,
        })
    }
}

impl Op for MatMul {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let a = f32_in(inputs, 0, "MatMul")?;
        let b = f32_in(inputs, 1, "MatMul")?;
        Ok(vec![TensorType::f32(
            Self::plan(&a.shape, &b.shape)?.out_shape,
        )])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let a = arg(inputs, 0)?;
            let b = arg(inputs, 1)?;
            let p = Self::plan(&a.shape, &b.shape)?;
            let (av, bv) = (a.as_real::<R>(), b.as_real::<R>());
            let nb: usize = p.batch.iter().product();
            let mut y = vec![R::ZERO; nb * p.m * p.n];
            for bi in 0..nb {
                let (oa, ob) = super::util::offsets2(bi, &p.batch, &p.sa, &p.sb);
                for i in 0..p.m {
                    for j in 0..p.n {
                        let mut acc = R::ZERO;
                        for q in 0..p.k {
                            acc += av[oa + i * p.k + q] * bv[ob + q * p.n + j];
                        }
                        y[(bi * p.m + i) * p.n + j] = acc;
                    }
                }
            }
            Ok(vec![Tensor::real::<R>(p.out_shape, y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let p = Self::plan(&k.input(0)?.shape, &k.input(1)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_matmul",
            vec![
                ("a", Arg::input(0)),
                ("b", Arg::input(1)),
                ("y", Arg::output(0)),
                ("nbd", Arg::int(p.batch.len())),
                ("bdims", Arg::dims8(&p.batch, 1)),
                ("sa", Arg::dims8(&p.sa, 0)),
                ("sb", Arg::dims8(&p.sb, 0)),
                ("m", Arg::int(p.m)),
                ("n", Arg::int(p.n)),
                ("k", Arg::int(p.k)),
            ],
        )])
    }
}

// ---------------------------------------------------------------- Softmax

/// Softmax along `axis` (opset >= 13), or over all dims from `axis` on when
/// `coerce` (the opset < 13 2-D coercion, used by ORT's `SoftmaxGrad`).
#[derive(Debug)]
pub struct Softmax {
    pub axis: i64,
    pub coerce: bool,
}

/// Rows of a softmax: `outer` blocks of `n` elements spaced `inner` apart.
#[derive(Debug, Clone, Copy)]
struct Rows {
    outer: usize,
    n: usize,
    inner: usize,
}

impl Rows {
    fn count(&self) -> usize {
        self.outer * self.inner
    }
    /// Offset of element 0 of row `r`; elements follow at stride `inner`.
    fn base(&self, r: usize) -> usize {
        (r / self.inner) * self.n * self.inner + r % self.inner
    }
}

impl Softmax {
    fn rows(&self, shape: &[usize]) -> Result<Rows, OpError> {
        let a = norm_axis(self.axis, shape.len())?;
        ensure!(!shape.is_empty(), "Softmax: input must have rank >= 1");
        let outer = shape[..a].iter().product();
        Ok(if self.coerce {
            Rows {
                outer,
                n: shape[a..].iter().product(),
                inner: 1,
            }
        } else {
            Rows {
                outer,
                n: shape[a],
                inner: shape[a + 1..].iter().product(),
            }
        })
    }
}

/// Softmax of every row, in the order `st_softmax` uses.
fn softmax_rows<R: Real>(x: &[R], rows: Rows, y: &mut [R]) {
    for r in 0..rows.count() {
        let b = rows.base(r);
        let s = rows.inner;
        let mut m = x[b];
        for j in 1..rows.n {
            if x[b + j * s] > m {
                m = x[b + j * s];
            }
        }
        let mut sum = R::ZERO;
        for j in 0..rows.n {
            let e = (x[b + j * s] - m).exp();
            y[b + j * s] = e;
            sum += e;
        }
        for j in 0..rows.n {
            y[b + j * s] /= sum;
        }
    }
}

impl Op for Softmax {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = f32_in(inputs, 0, "Softmax")?;
        self.rows(&x.shape)?;
        Ok(vec![x.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let rows = self.rows(&x.shape)?;
            let mut y = vec![R::ZERO; x.numel()];
            softmax_rows(x.as_real::<R>(), rows, &mut y);
            Ok(vec![Tensor::real::<R>(x.shape.clone(), y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let r = self.rows(&k.input(0)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_softmax",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("outer", Arg::int(r.outer)),
                ("n", Arg::int(r.n)),
                ("inner", Arg::int(r.inner)),
            ],
        )])
    }
}

/// (dY, Y) → dX = Y ⊙ (dY − Σ(dY ⊙ Y)) along the softmax rows.
#[derive(Debug)]
pub struct SoftmaxGrad(pub Softmax);

impl Op for SoftmaxGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let dy = f32_in(inputs, 0, "SoftmaxGrad")?;
        let y = f32_in(inputs, 1, "SoftmaxGrad")?;
        ensure!(
            dy.shape == y.shape,
            "SoftmaxGrad: dY {dy} and Y {y} differ in shape"
        );
        self.0.rows(&y.shape)?;
        Ok(vec![dy.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let dy = arg(inputs, 0)?.as_real::<R>();
            let yt = arg(inputs, 1)?;
            let y = yt.as_real::<R>();
            let rows = self.0.rows(&yt.shape)?;
            let mut dx = vec![R::ZERO; y.len()];
            for r in 0..rows.count() {
                let (b, s) = (rows.base(r), rows.inner);
                let mut dot = R::ZERO;
                for j in 0..rows.n {
                    dot += dy[b + j * s] * y[b + j * s];
                }
                for j in 0..rows.n {
                    dx[b + j * s] = y[b + j * s] * (dy[b + j * s] - dot);
                }
            }
            Ok(vec![Tensor::real::<R>(yt.shape.clone(), dx)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        k.input(0)?;
        let r = self.0.rows(&k.input(1)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_softmax_grad",
            vec![
                ("dy", Arg::input(0)),
                ("y", Arg::input(1)),
                ("dx", Arg::output(0)),
                ("outer", Arg::int(r.outer)),
                ("n", Arg::int(r.n)),
                ("inner", Arg::int(r.inner)),
            ],
        )])
    }
}

// ---------------------------------------------------------------- GELU

/// erf in f64: `2/√π · e^(−x²) · Σ x^(2n+1) 2^n / (2n+1)!!`, a series of
/// positive terms (no cancellation), relative error ~1e-15; ±1 beyond |x| = 6
/// where erfc < 2e-17. `st_erf64` in the runtime is the same loop.
pub fn erf64(x: f64) -> f64 {
    let ax = x.abs();
    if ax >= 6.0 {
        return if x < 0.0 { -1.0 } else { 1.0 };
    }
    let x2 = 2.0 * ax * ax;
    let mut t = ax;
    let mut sum = 0.0;
    let mut n = 0.0;
    while t > 1e-17 * sum || sum == 0.0 {
        sum += t;
        n += 1.0;
        t = t * x2 / (2.0 * n + 1.0);
        if t == 0.0 {
            break;
        }
    }
    let r = std::f64::consts::FRAC_2_SQRT_PI * (-ax * ax).exp() * sum;
    if x < 0.0 {
        -r
    } else {
        r
    }
}

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const INV_SQRT_2: f64 = 0.707_106_781_186_547_5;
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
const GELU_C: f64 = 0.044_715;

fn parse_approx(a: &Attrs<'_>) -> Result<bool, OpError> {
    match a.string_or("approximate", "none").as_str() {
        "none" => Ok(false),
        "tanh" => Ok(true),
        other => Err(op_err!("unsupported: Gelu approximate=`{other}`")),
    }
}

/// GELU of one value (exact erf form, or the tanh approximation).
pub fn gelu<R: Real>(x: R, tanh: bool) -> R {
    let x = x.to_f64();
    let v = if tanh {
        0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_C * x * x * x)).tanh())
    } else {
        0.5 * x * (1.0 + erf64(x * INV_SQRT_2))
    };
    R::from_f64(v)
}

/// dY · GELU'(x).
pub fn gelu_grad<R: Real>(dy: R, x: R, tanh: bool) -> R {
    let x = x.to_f64();
    let d = if tanh {
        let u = SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
        let t = u.tanh();
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)
    } else {
        0.5 * (1.0 + erf64(x * INV_SQRT_2)) + x * INV_SQRT_2PI * (-0.5 * x * x).exp()
    };
    R::from_f64(dy.to_f64() * d)
}

#[derive(Debug)]
pub struct Gelu(pub bool);

impl Op for Gelu {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![f32_in(inputs, 0, "Gelu")?.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let y = x.as_real::<R>().iter().map(|&v| gelu(v, self.0)).collect();
            Ok(vec![Tensor::real::<R>(x.shape.clone(), y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        Ok(vec![KernelCall::new(
            "st_gelu",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("n", Arg::int(n)),
                ("approx", Arg::int(self.0 as u8)),
            ],
        )])
    }
}

/// (dY, X) → dX = dY · GELU'(X).
#[derive(Debug)]
pub struct GeluGrad(pub bool);

impl Op for GeluGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![grad_pair_type(inputs, "GeluGrad", "X")?])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => grad_pair_eval::<R>(inputs, |g, x| gelu_grad(g, x, self.0)))
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        grad_pair_calls(
            k,
            "st_gelu_grad",
            "x",
            vec![("approx", Arg::int(self.0 as u8))],
        )
    }
}

// ---------------------------------------------------------------- LayerNorm

/// LayerNormalization (opset 17): normalise over dims `axis..`, then scale
/// and shift; optional outputs Mean and InvStdDev shaped `X.shape[..axis] + 1s`.
#[derive(Debug)]
pub struct LayerNorm {
    pub axis: i64,
    pub epsilon: f32,
}

/// Rows and row length of a layer norm over `shape` from `axis`.
fn ln_dims(shape: &[usize], axis: i64) -> Result<(usize, usize, usize), OpError> {
    let a = norm_axis(axis, shape.len())?;
    Ok((a, shape[..a].iter().product(), shape[a..].iter().product()))
}

/// Stride (1 or 0) of a scale/bias over the normalised dims `norm`.
fn param_stride(p: &TensorType, norm: &[usize], what: &str) -> Result<usize, OpError> {
    ensure!(p.dtype == DType::F32, "{what} must be float32, found {p}");
    let d: usize = norm.iter().product();
    if p.numel() == 1 {
        return Ok(0);
    }
    let ok = p.numel() == d && broadcast_shape(&p.shape, norm).ok().as_deref() == Some(norm);
    ensure!(
        ok,
        "{what} {p} must have the normalised shape {norm:?} (other broadcasts are unsupported)"
    );
    Ok(1)
}

fn stat_shape(shape: &[usize], a: usize) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < a { d } else { 1 })
        .collect()
}

impl Op for LayerNorm {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let x = f32_in(inputs, 0, "LayerNormalization")?;
        let (a, _, _) = ln_dims(&x.shape, self.axis)?;
        param_stride(req(inputs, 1)?.ty, &x.shape[a..], "Scale")?;
        if let Some(b) = inputs.get(2).copied().flatten() {
            param_stride(b.ty, &x.shape[a..], "B")?;
        }
        ensure!(n_outputs <= 3, "LayerNormalization has at most 3 outputs");
        let st = TensorType::f32(stat_shape(&x.shape, a));
        Ok(vec![x.clone(), st.clone(), st])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let scale = arg(inputs, 1)?;
            let bias = inputs.get(2).copied().flatten();
            let (a, rows, d) = ln_dims(&x.shape, self.axis)?;
            let norm = &x.shape[a..];
            let ss = param_stride(&scale.ty(), norm, "Scale")?;
            let sb = match bias {
                Some(b) => param_stride(&b.ty(), norm, "B")?,
                None => 0,
            };
            let (xv, sv) = (x.as_real::<R>(), scale.as_real::<R>());
            let mut y = vec![R::ZERO; xv.len()];
            let mut means = vec![R::ZERO; rows];
            let mut invs = vec![R::ZERO; rows];
            for r in 0..rows {
                let row = &xv[r * d..(r + 1) * d];
                let mean = psum(row.iter().copied()) / R::from_usize(d);
                let sq = psum(row.iter().map(|&v| (v - mean) * (v - mean)));
                let inv = R::ONE / (sq / R::from_usize(d) + R::from_f32(self.epsilon)).sqrt();
                for j in 0..d {
                    let mut v = (row[j] - mean) * inv * sv[j * ss];
                    if let Some(b) = bias {
                        v += b.as_real::<R>()[j * sb];
                    }
                    y[r * d + j] = v;
                }
                means[r] = mean;
                invs[r] = inv;
            }
            let st = stat_shape(&x.shape, a);
            let want = |k: usize| outputs.get(k).copied().flatten().is_some();
            Ok(vec![
                Tensor::real::<R>(x.shape.clone(), y),
                if want(1) {
                    Tensor::real::<R>(st.clone(), means)
                } else {
                    Tensor::absent()
                },
                if want(2) {
                    Tensor::real::<R>(st, invs)
                } else {
                    Tensor::absent()
                },
            ])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let x = k.input(0)?;
        let scale = k.input(1)?;
        let (a, rows, d) = ln_dims(&x.shape, self.axis)?;
        let norm = &x.shape[a..];
        let ss = param_stride(scale, norm, "Scale")?;
        let sb = match k.opt_input(2) {
            Some(b) => param_stride(b, norm, "B")?,
            None => 0,
        };
        Ok(vec![KernelCall::new(
            "st_layernorm",
            vec![
                ("x", Arg::input(0)),
                ("scale", Arg::input(1)),
                ("bias", Arg::opt_input(2)),
                ("y", Arg::output(0)),
                ("mean", Arg::opt_output(1)),
                ("inv_std", Arg::opt_output(2)),
                ("rows", Arg::int(rows)),
                ("d", Arg::int(d)),
                ("ss", Arg::int(ss)),
                ("sb", Arg::int(sb)),
                ("eps", Arg::Float(self.epsilon)),
            ],
        )])
    }
}

/// (dY, X, scale, mean, inv_std_dev) → (dX, dScale, dBias), each optional.
/// dX = inv·(g − mean(g) − x̂·mean(g·x̂)) with g = dY·scale, x̂ = (X − mean)·inv;
/// dScale = Σ_rows dY·x̂, dBias = Σ_rows dY. Two kernels: rows, then columns.
#[derive(Debug)]
pub struct LayerNormGrad {
    pub axis: i64,
}

impl LayerNormGrad {
    fn check(&self, t: [&TensorType; 5]) -> Result<(usize, usize, usize), OpError> {
        let [dy, x, scale, mean, inv] = t;
        for (i, ty) in t.iter().enumerate() {
            ensure!(
                ty.dtype == DType::F32,
                "LayerNormalizationGrad: input {i} must be float32, found {ty}"
            );
        }
        ensure!(
            dy.shape == x.shape,
            "LayerNormalizationGrad: dY {dy} and X {x} differ in shape"
        );
        let (a, rows, d) = ln_dims(&x.shape, self.axis)?;
        ensure!(
            param_stride(scale, &x.shape[a..], "scale")? == 1 || d == 1,
            "LayerNormalizationGrad: scale {scale} must have the normalised shape"
        );
        ensure!(
            mean.numel() == rows && inv.numel() == rows,
            "LayerNormalizationGrad: mean {mean} / inv_std_dev {inv} must hold {rows} values"
        );
        Ok((a, rows, d))
    }
}

impl Op for LayerNormGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let t: Vec<&TensorType> = (0..5)
            .map(|i| req(inputs, i).map(|o| o.ty))
            .collect::<Result<_, _>>()?;
        let (a, _, _) = self.check([t[0], t[1], t[2], t[3], t[4]])?;
        let p = TensorType::f32(t[1].shape[a..].to_vec());
        Ok(vec![t[1].clone(), p.clone(), p])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let ts: Vec<&Tensor> = (0..5).map(|i| arg(inputs, i)).collect::<Result<_, _>>()?;
            let tys: Vec<TensorType> = ts.iter().map(|t| t.ty()).collect();
            let (a, rows, d) = self.check([&tys[0], &tys[1], &tys[2], &tys[3], &tys[4]])?;
            let (dy, x, sc, mean, inv) = (
                ts[0].as_real::<R>(),
                ts[1].as_real::<R>(),
                ts[2].as_real::<R>(),
                ts[3].as_real::<R>(),
                ts[4].as_real::<R>(),
            );
            let mut dx = vec![R::ZERO; x.len()];
            for r in 0..rows {
                let (m, iv) = (mean[r], inv[r]);
                let (mut sg, mut sgx) = (Psum::new(), Psum::new());
                for j in 0..d {
                    let g = dy[r * d + j] * sc[j];
                    sg.add(g);
                    sgx.add(g * ((x[r * d + j] - m) * iv));
                }
                let mg = sg.total() / R::from_usize(d);
                let mgx = sgx.total() / R::from_usize(d);
                for j in 0..d {
                    let g = dy[r * d + j] * sc[j];
                    let xh = (x[r * d + j] - m) * iv;
                    dx[r * d + j] = iv * (g - mg - xh * mgx);
                }
            }
            let mut ds = vec![R::ZERO; d];
            let mut db = vec![R::ZERO; d];
            for j in 0..d {
                let (mut s, mut b) = (Psum::new(), Psum::new());
                for r in 0..rows {
                    let g = dy[r * d + j];
                    s.add(g * ((x[r * d + j] - mean[r]) * inv[r]));
                    b.add(g);
                }
                ds[j] = s.total();
                db[j] = b.total();
            }
            let ps = tys[1].shape[a..].to_vec();
            let want = |k: usize| outputs.get(k).copied().flatten().is_some();
            Ok(vec![
                if want(0) {
                    Tensor::real::<R>(tys[1].shape.clone(), dx)
                } else {
                    Tensor::absent()
                },
                if want(1) {
                    Tensor::real::<R>(ps.clone(), ds)
                } else {
                    Tensor::absent()
                },
                if want(2) {
                    Tensor::real::<R>(ps, db)
                } else {
                    Tensor::absent()
                },
            ])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let ins: Vec<&TensorType> = (0..5).map(|i| k.input(i)).collect::<Result<_, _>>()?;
        let (_, rows, d) = self.check([ins[0], ins[1], ins[2], ins[3], ins[4]])?;
        let common = vec![
            ("dy", Arg::input(0)),
            ("x", Arg::input(1)),
            ("mean", Arg::input(3)),
            ("inv_std", Arg::input(4)),
            ("rows", Arg::int(rows)),
            ("d", Arg::int(d)),
        ];
        let mut calls = Vec::new();
        if k.opt_output(0).is_some() {
            let mut f = common.clone();
            f.push(("scale", Arg::input(2)));
            f.push(("dx", Arg::output(0)));
            calls.push(KernelCall::new("st_layernorm_grad_x", f));
        }
        if k.opt_output(1).is_some() || k.opt_output(2).is_some() {
            let mut f = common;
            f.push(("dscale", Arg::opt_output(1)));
            f.push(("dbias", Arg::opt_output(2)));
            calls.push(KernelCall::new("st_layernorm_grad_w", f));
        }
        Ok(calls)
    }
}
