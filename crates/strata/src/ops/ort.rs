//! Ops that ONNX Runtime's gradient builder emits in `generate_artifacts`
//! training graphs beyond the other families: `Expand` (ReduceMean /
//! GlobalAveragePool gradients), `com.microsoft Scale`, `Size`, `Sum`
//! (gradients of tensors with several consumers) and `com.microsoft
//! FusedMatMul` (MatMul gradients with transposed operands).

use super::util::f32_in;
use super::util::{broadcast_shape, broadcast_strides};
use super::{
    arg, boxed, req, Arg, Arity, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "Expand", Arity::exactly(2), |_| boxed(Expand));
    r.add(&[MS], "Scale", Arity::exactly(2), |a| {
        let d = a.int_or("scale_down", 0);
        a.reject_if(d != 0 && d != 1, "Scale scale_down other than 0 or 1")?;
        boxed(Scale { down: d == 1 })
    });
    r.add(&[""], "Size", Arity::exactly(1), |_| boxed(Size));
    r.add(&[""], "Sum", Arity::at_least(1), |_| boxed(Sum));
    r.add(&[MS], "FusedMatMul", Arity::exactly(2), |a| {
        a.reject_if(
            a.int_or("transBatchA", 0) != 0 || a.int_or("transBatchB", 0) != 0,
            "FusedMatMul transBatchA/transBatchB",
        )?;
        boxed(FusedMatMul {
            trans_a: a.int_or("transA", 0) != 0,
            trans_b: a.int_or("transB", 0) != 0,
            alpha: a.float_or("alpha", 1.0),
        })
    });
}

// ---------------------------------------------------------------- Expand

/// numpy-style broadcast of the input to `shape` (a compile-time constant).
#[derive(Debug)]
pub struct Expand;

impl Expand {
    fn out_shape(x: &[usize], shape: Option<&Tensor>) -> Result<Vec<usize>, OpError> {
        let s = shape
            .ok_or_else(|| op_err!("Expand: the shape input must be a compile-time constant"))?;
        let s: Vec<usize> = s
            .to_i64()
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| op_err!("Expand: negative dimension {d}")))
            .collect::<Result<_, _>>()?;
        let out = broadcast_shape(x, &s).map_err(|e| op_err!("Expand: {}", e.0))?;
        ensure!(out.len() <= 8, "Expand: rank {} exceeds 8", out.len());
        Ok(out)
    }
}

/// Walk the output in row-major order; `f(out_index, in_index)`.
fn for_each_broadcast(
    out: &[usize],
    xs: &[usize],
    lo: usize,
    hi: usize,
    mut f: impl FnMut(usize, usize),
) {
    for o in lo..hi {
        let (mut rem, mut xi) = (o, 0);
        for d in (0..out.len()).rev() {
            xi += (rem % out[d]) * xs[d];
            rem /= out[d];
        }
        f(o, xi);
    }
}

impl Op for Expand {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        let s = req(inputs, 1)?;
        Ok(vec![TensorType::new(
            x.dtype,
            Self::out_shape(&x.shape, s.value)?,
        )])
    }
    /// The output is the requested output type's shape when one is given
    /// (as the C kernel takes it): a tile of an Expand broadcasts its input
    /// tile to its output tile, while the `shape` input says the whole.
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let out = match outputs.first().copied().flatten() {
                Some(t) => {
                    let b = broadcast_shape(&x.shape, &t.shape)
                        .map_err(|e| op_err!("Expand: {}", e.0))?;
                    ensure!(
                        b == t.shape,
                        "Expand: input {:?} does not broadcast to the output {:?}",
                        x.shape,
                        t.shape
                    );
                    b
                }
                None => Self::out_shape(&x.shape, Some(arg(inputs, 1)?))?,
            };
            let xs = broadcast_strides(&x.shape, &out);
            let n: usize = out.iter().product();
            let xv = x.as_real::<R>();
            let mut y = vec![R::ZERO; n];
            for_each_broadcast(&out, &xs, 0, n, |o, i| y[o] = xv[i]);
            Ok(vec![Tensor::real::<R>(out, y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let x = k.input(0)?;
        ensure!(
            x.dtype == DType::F32,
            "Expand: only float32 is emitted, found {}",
            x
        );
        let y = k.output(0)?;
        let xs = broadcast_strides(&x.shape, &y.shape);
        Ok(vec![KernelCall::new(
            "st_expand",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("rank", Arg::int(y.shape.len())),
                ("dims", Arg::dims8(&y.shape, 1)),
                ("xs", Arg::dims8(&xs, 0)),
                ("n", Arg::int(y.numel())),
            ],
        )])
    }
}

// ---------------------------------------------------------------- Scale

/// `y = x * s`, or `y = x * (1 / s)` when `scale_down`; `s` holds one
/// element, float or integer (ORT's ReduceMean gradient scales by an int64
/// element-count ratio), converted to float32 first.
#[derive(Debug)]
pub struct Scale {
    pub down: bool,
}

impl Scale {
    fn factor<R: Real>(&self, s: &Tensor) -> R {
        let s = match s.dtype() {
            DType::F32 => R::from_f64(s.to_f64()[0]),
            _ => R::from_f32(s.to_i64()[0] as f32),
        };
        if self.down {
            R::ONE / s
        } else {
            s
        }
    }
}

impl Op for Scale {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = f32_in(inputs, 0, "Scale")?;
        let s = req(inputs, 1)?;
        ensure!(
            s.ty.numel() == 1,
            "Scale: the scale must hold one element, found {}",
            s.ty
        );
        ensure!(
            s.ty.dtype == DType::F32 || s.value.is_some(),
            "Scale: a non-float scale ({}) must be a compile-time constant",
            s.ty
        );
        Ok(vec![x.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let f = self.factor::<R>(arg(inputs, 1)?);
            Ok(vec![Tensor::real::<R>(
                x.shape.clone(),
                x.as_real::<R>().iter().map(|&v| v * f).collect(),
            )])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        k.input(1)?;
        // A constant scale becomes the exact factor; a run-time one is read
        // (and inverted) when the kernel is called, as `factor` does.
        let f = match k.value(1) {
            Some(v) => Arg::Float(self.factor::<f32>(v)),
            None if self.down => Arg::InvFirst(1),
            None => Arg::First(1),
        };
        Ok(vec![KernelCall::new(
            "st_scale",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("n", Arg::int(n)),
                ("f", f),
            ],
        )])
    }
}

// ---------------------------------------------------------------- Size

/// The element count as an int64 scalar: always a compile-time constant.
#[derive(Debug)]
pub struct Size;

impl Op for Size {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        req(inputs, 0)?;
        Ok(vec![TensorType::new(DType::I64, vec![])])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        Ok(vec![Tensor::i64(
            vec![],
            vec![arg(inputs, 0)?.numel() as i64],
        )])
    }
    fn kernel_calls(&self, _: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        Err(op_err!("Size is folded at import; it emits no code"))
    }
    fn static_value(&self, inputs: &[Option<&TensorType>]) -> Option<Tensor> {
        let t = inputs.first().copied().flatten()?;
        Some(Tensor::i64(vec![], vec![t.numel() as i64]))
    }
}

// ---------------------------------------------------------------- Sum

/// Elementwise sum of 1..=8 float tensors of one shape, added left to right.
#[derive(Debug)]
pub struct Sum;

impl Op for Sum {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        ensure!(
            !inputs.is_empty() && inputs.len() <= 8,
            "Sum: takes 1 to 8 inputs, found {}",
            inputs.len()
        );
        let t0 = f32_in(inputs, 0, "Sum")?;
        for i in 1..inputs.len() {
            let t = f32_in(inputs, i, "Sum")?;
            ensure!(
                t.shape == t0.shape,
                "Sum: input {i} is {t}, input 0 is {t0}; broadcasting Sum is not supported"
            );
        }
        Ok(vec![t0.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x0 = arg(inputs, 0)?;
            let mut y = x0.as_real::<R>().to_vec();
            for i in 1..inputs.len() {
                for (a, b) in y.iter_mut().zip(arg(inputs, i)?.as_real::<R>()) {
                    *a += b;
                }
            }
            Ok(vec![Tensor::real::<R>(x0.shape.clone(), y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n_in = k.inputs.len();
        for i in 0..n_in {
            k.input(i)?;
        }
        let y = k.output(0)?;
        Ok(vec![KernelCall::new(
            "st_sum",
            vec![
                ("x", Arg::Ptrs((0..n_in).collect())),
                ("k", Arg::int(n_in)),
                ("y", Arg::output(0)),
                ("n", Arg::int(y.numel())),
            ],
        )])
    }
}

// ---------------------------------------------------------------- FusedMatMul

/// `y = alpha * op(A) @ op(B)`, op transposing the last two dims when
/// `transA`/`transB`; batch dims broadcast as in MatMul. Operands rank >= 2.
#[derive(Debug)]
pub struct FusedMatMul {
    pub trans_a: bool,
    pub trans_b: bool,
    pub alpha: f32,
}

#[derive(Debug)]
struct FmmPlan {
    out_shape: Vec<usize>,
    batch: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
    m: usize,
    n: usize,
    k: usize,
    /// Element strides of A along (m, k) and of B along (k, n).
    am: usize,
    ak: usize,
    bk: usize,
    bn: usize,
}

impl FusedMatMul {
    fn plan(&self, a: &[usize], b: &[usize]) -> Result<FmmPlan, OpError> {
        ensure!(
            a.len() >= 2 && b.len() >= 2,
            "FusedMatMul: operands of rank >= 2 only, found {a:?} and {b:?}"
        );
        let (ra, ca) = (a[a.len() - 2], a[a.len() - 1]);
        let (rb, cb) = (b[b.len() - 2], b[b.len() - 1]);
        let (m, ka, am, ak) = if self.trans_a {
            (ca, ra, 1, ca)
        } else {
            (ra, ca, ca, 1)
        };
        let (kb, n, bk, bn) = if self.trans_b {
            (cb, rb, 1, cb)
        } else {
            (rb, cb, cb, 1)
        };
        ensure!(
            ka == kb,
            "FusedMatMul: inner dimensions differ: {a:?} x {b:?} (transA {}, transB {})",
            self.trans_a,
            self.trans_b
        );
        let (ab, bb) = (&a[..a.len() - 2], &b[..b.len() - 2]);
        let (batch, sa, sb) =
            super::transformer::batch_broadcast(ab, bb, ra * ca, rb * cb, "FusedMatMul")?;
        let mut out_shape = batch.clone();
        out_shape.extend([m, n]);
        Ok(FmmPlan {
            out_shape,
            batch,
            sa,
            sb,
            m,
            n,
            k: ka,
            am,
            ak,
            bk,
            bn,
        })
    }
}

impl Op for FusedMatMul {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let a = f32_in(inputs, 0, "FusedMatMul")?;
        let b = f32_in(inputs, 1, "FusedMatMul")?;
        Ok(vec![TensorType::f32(
            self.plan(&a.shape, &b.shape)?.out_shape,
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
            let p = self.plan(&a.shape, &b.shape)?;
            let (av, bv) = (a.as_real::<R>(), b.as_real::<R>());
            let nb: usize = p.batch.iter().product();
            let mut y = vec![R::ZERO; nb * p.m * p.n];
            // The C kernel splits the rows (bi, i) over cores; same loop order.
            for r in 0..nb * p.m {
                let (bi, i) = (r / p.m, r % p.m);
                let (oa, ob) = super::util::offsets2(bi, &p.batch, &p.sa, &p.sb);
                for j in 0..p.n {
                    let mut acc = R::ZERO;
                    for q in 0..p.k {
                        acc += av[oa + i * p.am + q * p.ak] * bv[ob + q * p.bk + j * p.bn];
                    }
                    y[r * p.n + j] = R::from_f32(self.alpha) * acc;
                }
            }
            Ok(vec![Tensor::real::<R>(p.out_shape, y)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let p = self.plan(&k.input(0)?.shape, &k.input(1)?.shape)?;
        Ok(vec![KernelCall::new(
            "st_fused_matmul",
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
                ("am", Arg::int(p.am)),
                ("ak", Arg::int(p.ak)),
                ("bk", Arg::int(p.bk)),
                ("bn", Arg::int(p.bn)),
                ("alpha", Arg::Float(self.alpha)),
            ],
        )])
    }
}
