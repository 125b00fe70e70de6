//! Normalization ops.
//!
//! BatchNorm (training mode, ONNX Runtime's contrib ops): BatchNormInternal
//! computes per-channel batch statistics over `[N, C, spatial...]` (biased
//! variance), normalizes, and updates the running statistics in place
//! (outputs 1 and 2 alias inputs 3 and 4, so the program keeps them as
//! persistent state); BatchNormalizationGrad is its gradient from the saved
//! mean and inverse standard deviation. Both C kernels split channels over
//! cores; the reference kernels repeat their loops and f32 arithmetic.

use super::util::Psum;
use super::{
    arg, boxed, req, Alias, Arg, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::ensure;
use crate::tensor::{DType, Real, Tensor, TensorType};

pub fn register_batchnorm(r: &mut Registry) {
    r.add(&[MS], "BatchNormInternal", |a| {
        a.reject_if(
            a.int_or("training_mode", 1) == 0,
            "BatchNormInternal with training_mode=0",
        )?;
        boxed(BatchNormTrain {
            eps: a.float_or("epsilon", 1e-5),
            momentum: a.float_or("momentum", 0.9),
        })
    });
    r.add(&[MS, ""], "BatchNormalizationGrad", |_| {
        boxed(BatchNormGrad)
    });
}

/// (n, c, sp) of a `[N, C, spatial...]` shape.
fn bn_dims(shape: &[usize]) -> Result<(usize, usize, usize), OpError> {
    ensure!(shape.len() >= 2, "X must be [N, C, ...], found {shape:?}");
    Ok((shape[0], shape[1], shape[2..].iter().product()))
}

fn f32_ty<'a>(inputs: &[Option<OpInput<'a>>], i: usize) -> Result<&'a TensorType, OpError> {
    let t = req(inputs, i)?.ty;
    ensure!(
        t.dtype == DType::F32,
        "input {i} must be float32, found {t}"
    );
    Ok(t)
}

/// Check that the inputs at `idx` are float32 `[c]`.
fn per_channel(
    inputs: &[Option<OpInput<'_>>],
    idx: &[usize],
    c: usize,
    names: &[&str],
) -> Result<(), OpError> {
    for (&i, name) in idx.iter().zip(names) {
        let t = f32_ty(inputs, i)?;
        ensure!(t.shape == [c], "{name} must be [{c}], found {t}");
    }
    Ok(())
}

// ---------------------------------------------------------------- BatchNormInternal

#[derive(Debug)]
pub struct BatchNormTrain {
    pub eps: f32,
    pub momentum: f32,
}

/// Results of the training-mode forward pass.
pub struct BnOut<R> {
    pub y: Vec<R>,
    pub running_mean: Vec<R>,
    pub running_var: Vec<R>,
    pub mean: Vec<R>,
    pub inv_std: Vec<R>,
}

/// The loops of `st_bn_train`.
#[allow(clippy::too_many_arguments)]
pub fn bn_train<R: Real>(
    x: &[R],
    scale: &[R],
    b: &[R],
    rm: &[R],
    rv: &[R],
    (n, c, sp): (usize, usize, usize),
    eps: R,
    mom: R,
) -> BnOut<R> {
    let m = R::from_usize(n * sp);
    let mut o = BnOut {
        y: vec![R::ZERO; n * c * sp],
        running_mean: vec![R::ZERO; c],
        running_var: vec![R::ZERO; c],
        mean: vec![R::ZERO; c],
        inv_std: vec![R::ZERO; c],
    };
    for ch in 0..c {
        let plane = |k: usize| (k * c + ch) * sp..(k * c + ch + 1) * sp;
        let (mut sum, mut sq) = (Psum::new(), Psum::new());
        for k in 0..n {
            for v in &x[plane(k)] {
                sum.add(*v);
            }
        }
        let mean = sum.total() / m;
        for k in 0..n {
            for v in &x[plane(k)] {
                let d = *v - mean;
                sq.add(d * d);
            }
        }
        let var = sq.total() / m;
        let inv = R::ONE / (var + eps).sqrt();
        let (kf, bias) = (scale[ch] * inv, b[ch]);
        for k in 0..n {
            for i in plane(k) {
                o.y[i] = (x[i] - mean) * kf + bias;
            }
        }
        o.mean[ch] = mean;
        o.inv_std[ch] = inv;
        o.running_mean[ch] = mom * rm[ch] + (R::ONE - mom) * mean;
        o.running_var[ch] = mom * rv[ch] + (R::ONE - mom) * var;
    }
    o
}

impl Op for BatchNormTrain {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let x = f32_ty(inputs, 0)?;
        let (_, c, _) = bn_dims(&x.shape)?;
        per_channel(
            inputs,
            &[1, 2, 3, 4],
            c,
            &["scale", "B", "running_mean", "running_var"],
        )?;
        ensure!(n_outputs <= 5, "has at most 5 outputs");
        let mut out = vec![x.clone()];
        out.extend((1..n_outputs.max(1)).map(|_| TensorType::f32(vec![c])));
        Ok(out)
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 0)?;
            let dims = bn_dims(&x.shape)?;
            let f = |i: usize| arg(inputs, i).map(|t| t.as_real::<R>());
            let o = bn_train(
                x.as_real::<R>(),
                f(1)?,
                f(2)?,
                f(3)?,
                f(4)?,
                dims,
                R::from_f32(self.eps),
                R::from_f32(self.momentum),
            );
            let c = vec![dims.1];
            let all = [
                Tensor::real::<R>(x.shape.clone(), o.y),
                Tensor::real::<R>(c.clone(), o.running_mean),
                Tensor::real::<R>(c.clone(), o.running_var),
                Tensor::real::<R>(c.clone(), o.mean),
                Tensor::real::<R>(c, o.inv_std),
            ];
            Ok(all
                .into_iter()
                .zip(outputs.iter())
                .map(|(t, want)| if want.is_some() { t } else { Tensor::absent() })
                .collect())
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (n, c, sp) = bn_dims(&k.input(0)?.shape)?;
        for i in 1..5 {
            k.input(i)?;
        }
        Ok(vec![KernelCall::new(
            "st_bn_train",
            vec![
                ("x", Arg::input(0)),
                ("scale", Arg::input(1)),
                ("b", Arg::input(2)),
                ("rm", Arg::input(3)),
                ("rv", Arg::input(4)),
                ("y", Arg::opt_output(0)),
                ("rm_out", Arg::opt_output(1)),
                ("rv_out", Arg::opt_output(2)),
                ("smean", Arg::opt_output(3)),
                ("sinv", Arg::opt_output(4)),
                ("n", Arg::int(n)),
                ("c", Arg::int(c)),
                ("sp", Arg::int(sp)),
                ("eps", Arg::Float(self.eps)),
                ("mom", Arg::Float(self.momentum)),
            ],
        )])
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias::in_place(1, 3), Alias::in_place(2, 4)]
    }
}

// ---------------------------------------------------------------- BatchNormalizationGrad

/// (dY, X, scale, saved_mean, saved_inv_std) → (dX, dScale, dBias).
#[derive(Debug)]
pub struct BatchNormGrad;

/// The loops of `st_bn_grad`: (dx, dscale, dbias).
pub fn bn_grad<R: Real>(
    dy: &[R],
    x: &[R],
    scale: &[R],
    mean: &[R],
    inv: &[R],
    (n, c, sp): (usize, usize, usize),
) -> (Vec<R>, Vec<R>, Vec<R>) {
    let m = R::from_usize(n * sp);
    let mut dx = vec![R::ZERO; n * c * sp];
    let (mut ds, mut dbv) = (vec![R::ZERO; c], vec![R::ZERO; c]);
    for ch in 0..c {
        let plane = |k: usize| (k * c + ch) * sp..(k * c + ch + 1) * sp;
        let (mu, iv) = (mean[ch], inv[ch]);
        let (mut sdb, mut sdxm) = (Psum::new(), Psum::new());
        for k in 0..n {
            for i in plane(k) {
                sdb.add(dy[i]);
                sdxm.add(dy[i] * (x[i] - mu));
            }
        }
        let (db, dxm) = (sdb.total(), sdxm.total());
        dbv[ch] = db;
        ds[ch] = dxm * iv;
        let (k1, k2, coef) = (db / m, dxm * iv * iv / m, scale[ch] * iv);
        for k in 0..n {
            for i in plane(k) {
                dx[i] = coef * (dy[i] - k1 - (x[i] - mu) * k2);
            }
        }
    }
    (dx, ds, dbv)
}

impl Op for BatchNormGrad {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let dy = f32_ty(inputs, 0)?;
        let x = f32_ty(inputs, 1)?;
        ensure!(dy.shape == x.shape, "dY {dy} and X {x} differ in shape");
        let (_, c, _) = bn_dims(&x.shape)?;
        per_channel(
            inputs,
            &[2, 3, 4],
            c,
            &["scale", "saved_mean", "saved_inv_std"],
        )?;
        ensure!(n_outputs <= 3, "has at most 3 outputs");
        let mut out = vec![x.clone()];
        out.extend((1..n_outputs.max(1)).map(|_| TensorType::f32(vec![c])));
        Ok(out)
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let x = arg(inputs, 1)?;
            let dims = bn_dims(&x.shape)?;
            let f = |i: usize| arg(inputs, i).map(|t| t.as_real::<R>());
            let (dx, ds, db) = bn_grad(f(0)?, x.as_real::<R>(), f(2)?, f(3)?, f(4)?, dims);
            let all = [
                Tensor::real::<R>(x.shape.clone(), dx),
                Tensor::real::<R>(vec![dims.1], ds),
                Tensor::real::<R>(vec![dims.1], db),
            ];
            Ok(all
                .into_iter()
                .zip(outputs.iter())
                .map(|(t, want)| if want.is_some() { t } else { Tensor::absent() })
                .collect())
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (n, c, sp) = bn_dims(&k.input(1)?.shape)?;
        for i in [0, 2, 3, 4] {
            k.input(i)?;
        }
        Ok(vec![KernelCall::new(
            "st_bn_grad",
            vec![
                ("dy", Arg::input(0)),
                ("x", Arg::input(1)),
                ("scale", Arg::input(2)),
                ("mean", Arg::input(3)),
                ("inv", Arg::input(4)),
                ("dx", Arg::opt_output(0)),
                ("dscale", Arg::opt_output(1)),
                ("dbias", Arg::opt_output(2)),
                ("n", Arg::int(n)),
                ("c", Arg::int(c)),
                ("sp", Arg::int(sp)),
            ],
        )])
    }
}
