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
    arg, boxed, req, Alias, Arg, Arity, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::ensure;
use crate::tensor::{DType, Real, Tensor, TensorType};

pub fn register_batchnorm(r: &mut Registry) {
    r.add(&[MS], "BatchNormInternal", Arity::exactly(5), |a| {
        a.reject_if(
            a.int_or("training_mode", 1) == 0,
            "BatchNormInternal with training_mode=0",
        )?;
        boxed(BatchNormTrain {
            eps: a.float_or("epsilon", 1e-5),
            momentum: a.float_or("momentum", 0.9),
        })
    });
    r.add(
        &[MS, ""],
        "BatchNormalizationGrad",
        Arity::exactly(5),
        |_| boxed(BatchNormGrad),
    );
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
    let dims = (n, c, sp);
    let means: Vec<R> = channel_sums(dims, |_, i| x[i])
        .iter()
        .map(|&s| s / m)
        .collect();
    let sqs = channel_sums(dims, |ch, i| {
        let d = x[i] - means[ch];
        d * d
    });
    for ch in 0..c {
        let plane = |k: usize| (k * c + ch) * sp..(k * c + ch + 1) * sp;
        let mean = means[ch];
        let var = sqs[ch] / m;
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
    let dims = (n, c, sp);
    let sdb = channel_sums(dims, |_, i| dy[i]);
    let sdxm = channel_sums(dims, |ch, i| dy[i] * (x[i] - mean[ch]));
    for ch in 0..c {
        let plane = |k: usize| (k * c + ch) * sp..(k * c + ch + 1) * sp;
        let (mu, iv) = (mean[ch], inv[ch]);
        let (db, dxm) = (sdb[ch], sdxm[ch]);
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

// ---------------------------------------------------------------- split batch normalization

/// The stages a batch normalization node is split into where one channel
/// of it does not fit L1 (`crate::split`): the per-channel sums become
/// reductions whose tiles accumulate, the rest element-wise ops. Each
/// stage computes what `bn_train` or `bn_grad` computes at that point, in
/// the same order and f32 arithmetic; `count` is the whole node's number of
/// values per channel (a tile sees only its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BnStage {
    /// X → Σx per channel.
    Sum,
    /// (X, Σx) → Σ(x − mean)² per channel.
    SqDev,
    /// (Σx, Σ(x − mean)², running mean, running var) → (mean, inv_std,
    /// running mean, running var), the running statistics in place.
    Stats,
    /// (X, mean, inv_std, scale, B) → Y.
    Apply,
    /// (dY, X, mean) → (Σdy, Σdy(x − mean)) per channel.
    GradSum,
    /// (dY, X, scale, mean, inv_std, Σdy, Σdy(x − mean)) → dX.
    GradApply,
}

impl BnStage {
    pub fn op_type(self) -> &'static str {
        match self {
            BnStage::Sum => "BatchNormSum",
            BnStage::SqDev => "BatchNormSqDev",
            BnStage::Stats => "BatchNormStats",
            BnStage::Apply => "BatchNormApply",
            BnStage::GradSum => "BatchNormGradSum",
            BnStage::GradApply => "BatchNormGradApply",
        }
    }
    /// Whether the stage sums over N and the spatial axes (its outputs are `[C]`).
    pub fn reduces(self) -> bool {
        matches!(self, BnStage::Sum | BnStage::SqDev | BnStage::GradSum)
    }
}

#[derive(Debug)]
pub struct BnSplit {
    pub stage: BnStage,
    /// Values per channel in the whole node (N × spatial).
    pub count: usize,
    pub eps: f32,
    pub momentum: f32,
}

pub fn register_batchnorm_split(r: &mut Registry) {
    use super::STRATA;
    fn parse(stage: BnStage, a: &super::Attrs<'_>) -> Result<Box<dyn Op>, OpError> {
        let count = a.int_or("count", 0);
        ensure!(count > 0, "needs a positive `count`, found {count}");
        boxed(BnSplit {
            stage,
            count: count as usize,
            eps: a.float_or("epsilon", 1e-5),
            momentum: a.float_or("momentum", 0.9),
        })
    }
    r.add(&[STRATA], "BatchNormSum", Arity::exactly(1), |a| {
        parse(BnStage::Sum, a)
    });
    r.add(&[STRATA], "BatchNormSqDev", Arity::exactly(2), |a| {
        parse(BnStage::SqDev, a)
    });
    r.add(&[STRATA], "BatchNormStats", Arity::exactly(4), |a| {
        parse(BnStage::Stats, a)
    });
    r.add(&[STRATA], "BatchNormApply", Arity::exactly(5), |a| {
        parse(BnStage::Apply, a)
    });
    r.add(&[STRATA], "BatchNormGradSum", Arity::exactly(3), |a| {
        parse(BnStage::GradSum, a)
    });
    r.add(&[STRATA], "BatchNormGradApply", Arity::exactly(7), |a| {
        parse(BnStage::GradApply, a)
    });
}

/// Per channel, Σ f(k, i) over the values of the channel (batch, then
/// spatial), pairwise as `bn_train` sums.
fn channel_sums<R: Real>(
    (n, c, sp): (usize, usize, usize),
    mut f: impl FnMut(usize, usize) -> R,
) -> Vec<R> {
    (0..c)
        .map(|ch| {
            let mut s = Psum::new();
            for k in 0..n {
                for i in (k * c + ch) * sp..(k * c + ch + 1) * sp {
                    s.add(f(ch, i));
                }
            }
            s.total()
        })
        .collect()
}

/// The reference kernel of one stage (inputs by position, as the op's).
fn bn_stage<R: Real>(
    op: &BnSplit,
    ins: &[Option<&[R]>],
    dims: (usize, usize, usize),
) -> Result<Vec<Vec<R>>, OpError> {
    let get = |i: usize| -> Result<&[R], OpError> {
        ins.get(i)
            .copied()
            .flatten()
            .ok_or_else(|| crate::op_err!("missing required input {i}"))
    };
    let (n, c, sp) = dims;
    let m = R::from_usize(op.count);
    let plane = |i: usize| (i / sp) % c;
    Ok(match op.stage {
        BnStage::Sum => {
            let x = get(0)?;
            vec![channel_sums(dims, |_, i| x[i])]
        }
        BnStage::SqDev => {
            let (x, s) = (get(0)?, get(1)?);
            let mean: Vec<R> = s.iter().map(|&v| v / m).collect();
            vec![channel_sums(dims, |ch, i| {
                let d = x[i] - mean[ch];
                d * d
            })]
        }
        BnStage::Stats => {
            let (s, q, rm, rv) = (get(0)?, get(1)?, get(2)?, get(3)?);
            let (eps, mom) = (R::from_f32(op.eps), R::from_f32(op.momentum));
            let mut o = vec![vec![R::ZERO; c]; 4];
            for ch in 0..c {
                let mean = s[ch] / m;
                let var = q[ch] / m;
                o[0][ch] = mean;
                o[1][ch] = R::ONE / (var + eps).sqrt();
                o[2][ch] = mom * rm[ch] + (R::ONE - mom) * mean;
                o[3][ch] = mom * rv[ch] + (R::ONE - mom) * var;
            }
            o
        }
        BnStage::Apply => {
            let (x, mean, inv, scale, b) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?);
            let y = (0..n * c * sp)
                .map(|i| {
                    let ch = plane(i);
                    (x[i] - mean[ch]) * (scale[ch] * inv[ch]) + b[ch]
                })
                .collect();
            vec![y]
        }
        BnStage::GradSum => {
            let (dy, x, mean) = (get(0)?, get(1)?, get(2)?);
            vec![
                channel_sums(dims, |_, i| dy[i]),
                channel_sums(dims, |ch, i| dy[i] * (x[i] - mean[ch])),
            ]
        }
        BnStage::GradApply => {
            let (dy, x, scale, mean, inv, sdb, sdxm) = (
                get(0)?,
                get(1)?,
                get(2)?,
                get(3)?,
                get(4)?,
                get(5)?,
                get(6)?,
            );
            let dx = (0..n * c * sp)
                .map(|i| {
                    let ch = plane(i);
                    let (mu, iv) = (mean[ch], inv[ch]);
                    let (k1, k2, coef) = (sdb[ch] / m, sdxm[ch] * iv * iv / m, scale[ch] * iv);
                    coef * (dy[i] - k1 - (x[i] - mu) * k2)
                })
                .collect();
            vec![dx]
        }
    })
}

impl BnSplit {
    /// Input positions of the [N, C, spatial...] operands, and of the [C] ones.
    fn layout(&self) -> (&'static [usize], &'static [usize]) {
        match self.stage {
            BnStage::Sum => (&[0], &[]),
            BnStage::SqDev => (&[0], &[1]),
            BnStage::Stats => (&[], &[0, 1, 2, 3]),
            BnStage::Apply => (&[0], &[1, 2, 3, 4]),
            BnStage::GradSum => (&[0, 1], &[2]),
            BnStage::GradApply => (&[0, 1], &[2, 3, 4, 5, 6]),
        }
    }
    /// (n, c, sp) of the operands, checked.
    fn dims(&self, inputs: &[Option<&TensorType>]) -> Result<(usize, usize, usize), OpError> {
        let (big, small) = self.layout();
        let ty = |i: usize| -> Result<&TensorType, OpError> {
            let t = inputs
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| crate::op_err!("missing required input {i}"))?;
            ensure!(
                t.dtype == DType::F32,
                "input {i} must be float32, found {t}"
            );
            Ok(t)
        };
        let dims = match big.first() {
            Some(&b) => bn_dims(&ty(b)?.shape)?,
            None => (1, ty(small[0])?.numel(), 1),
        };
        for &b in big.iter().skip(1) {
            let (s, first) = (&ty(b)?.shape, &ty(big[0])?.shape);
            ensure!(
                s == first,
                "input {b} {s:?} differs from input {} {first:?} in shape",
                big[0]
            );
        }
        for &i in small {
            let t = ty(i)?;
            ensure!(
                t.shape == [dims.1],
                "input {i} must be [{}], found {t}",
                dims.1
            );
        }
        Ok(dims)
    }
    fn n_outputs(&self) -> usize {
        match self.stage {
            BnStage::Stats => 4,
            BnStage::GradSum => 2,
            _ => 1,
        }
    }
}

impl Op for BnSplit {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let tys: Vec<Option<&TensorType>> = inputs.iter().map(|i| i.map(|i| i.ty)).collect();
        let (_, c, _) = self.dims(&tys)?;
        ensure!(
            n_outputs <= self.n_outputs(),
            "has at most {} outputs",
            self.n_outputs()
        );
        Ok((0..n_outputs.max(1))
            .map(|_| match self.stage {
                BnStage::Apply | BnStage::GradApply => tys[0].unwrap().clone(),
                _ => TensorType::f32(vec![c]),
            })
            .collect())
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let tys: Vec<Option<TensorType>> = inputs.iter().map(|t| t.map(|t| t.ty())).collect();
            let refs: Vec<Option<&TensorType>> = tys.iter().map(|t| t.as_ref()).collect();
            let dims = self.dims(&refs)?;
            let ins: Vec<Option<&[R]>> = inputs.iter().map(|t| t.map(|t| t.as_real::<R>())).collect();
            let outs = bn_stage::<R>(self, &ins, dims)?;
            Ok(outs
                .into_iter()
                .zip(outputs.iter())
                .map(|(v, want)| match want {
                    Some(t) => Tensor::real::<R>(t.shape.clone(), v),
                    None => Tensor::absent(),
                })
                .collect())
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let tys: Vec<Option<&TensorType>> = k.inputs.iter().map(|i| i.map(|i| i.ty)).collect();
        let (n, c, sp) = self.dims(&tys)?;
        let size = [("n", Arg::int(n)), ("c", Arg::int(c)), ("sp", Arg::int(sp))];
        let m = ("m", Arg::Float(self.count as f32));
        let mut args: Vec<(&'static str, Arg)> = match self.stage {
            BnStage::Sum => vec![("x", Arg::input(0)), ("s", Arg::output(0))],
            BnStage::SqDev => vec![
                ("x", Arg::input(0)),
                ("s", Arg::input(1)),
                ("q", Arg::output(0)),
                m,
            ],
            BnStage::Stats => vec![
                ("s", Arg::input(0)),
                ("q", Arg::input(1)),
                ("rm", Arg::input(2)),
                ("rv", Arg::input(3)),
                ("mean", Arg::opt_output(0)),
                ("inv", Arg::opt_output(1)),
                ("rm_out", Arg::opt_output(2)),
                ("rv_out", Arg::opt_output(3)),
                m,
                ("eps", Arg::Float(self.eps)),
                ("mom", Arg::Float(self.momentum)),
            ],
            BnStage::Apply => vec![
                ("x", Arg::input(0)),
                ("mean", Arg::input(1)),
                ("inv", Arg::input(2)),
                ("scale", Arg::input(3)),
                ("b", Arg::input(4)),
                ("y", Arg::output(0)),
            ],
            BnStage::GradSum => vec![
                ("dy", Arg::input(0)),
                ("x", Arg::input(1)),
                ("mean", Arg::input(2)),
                ("sdb", Arg::opt_output(0)),
                ("sdxm", Arg::opt_output(1)),
            ],
            BnStage::GradApply => vec![
                ("dy", Arg::input(0)),
                ("x", Arg::input(1)),
                ("scale", Arg::input(2)),
                ("mean", Arg::input(3)),
                ("inv", Arg::input(4)),
                ("sdb", Arg::input(5)),
                ("sdxm", Arg::input(6)),
                ("dx", Arg::output(0)),
                m,
            ],
        };
        args.extend(size);
        let func = match self.stage {
            BnStage::Sum => "st_bn_sum",
            BnStage::SqDev => "st_bn_sqdev",
            BnStage::Stats => "st_bn_stats",
            BnStage::Apply => "st_bn_apply",
            BnStage::GradSum => "st_bn_grad_sum",
            BnStage::GradApply => "st_bn_grad_apply",
        };
        Ok(vec![KernelCall::new(func, args)])
    }
    fn aliases(&self) -> Vec<Alias> {
        match self.stage {
            BnStage::Stats => vec![Alias::in_place(2, 2), Alias::in_place(3, 3)],
            _ => vec![],
        }
    }
}
