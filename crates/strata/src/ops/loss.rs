//! Losses and their gradients: softmax cross-entropy (ONNX forward, ORT and
//! Onnx4Deeploy gradient spellings) and the fused mean-squared error.

use super::{
    arg, boxed, req, Arg, Arity, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(
        &["", MS],
        "SoftmaxCrossEntropyLoss",
        Arity::range(2, 3),
        |a| boxed(Sce::parse(a)?),
    );
    r.add(
        &[MS, ""],
        "SoftmaxCrossEntropyLossGrad",
        Arity::range(2, 4),
        |a| boxed(SceGrad(Sce::parse(a)?, None)),
    );
    r.add(&["", MS], "MSELoss", Arity::exactly(2), |a| {
        a.reject_if(
            a.string_or("reduction", "mean") != "mean",
            "MSELoss reduction other than mean",
        )?;
        boxed(Mse { count: None })
    });
    r.add(&["", MS], "MSELossGrad", Arity::exactly(2), |a| {
        a.reject_if(
            a.string_or("reduction", "mean") != "mean",
            "MSELossGrad reduction other than mean",
        )?;
        boxed(MseGrad { count: None })
    });
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reduction {
    None,
    Sum,
    Mean,
}

impl Reduction {
    fn code(self) -> u8 {
        match self {
            Reduction::None => 0,
            Reduction::Sum => 1,
            Reduction::Mean => 2,
        }
    }
}

/// SoftmaxCrossEntropyLoss over scores `[B, C]` and int64 labels `[B]`.
#[derive(Debug, Clone, Copy)]
pub struct Sce {
    pub reduction: Reduction,
    pub ignore_index: Option<i64>,
}

impl Sce {
    fn parse(a: &super::Attrs<'_>) -> Result<Sce, OpError> {
        let reduction = match a.string_or("reduction", "mean").as_str() {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            "none" => Reduction::None,
            other => return Err(op_err!("unsupported: reduction `{other}`")),
        };
        Ok(Sce {
            reduction,
            ignore_index: a.int("ignore_index"),
        })
    }

    fn check(
        &self,
        scores: &TensorType,
        labels: &TensorType,
        weight: Option<&TensorType>,
    ) -> Result<(usize, usize), OpError> {
        ensure!(
            scores.dtype == DType::F32,
            "scores must be float32, found {scores}"
        );
        ensure!(
            scores.shape.len() == 2,
            "scores must be [batch, classes]; found {scores} (spatial dims are unsupported)"
        );
        ensure!(
            matches!(labels.dtype, DType::I64 | DType::I32),
            "labels must be int64, found {labels}"
        );
        ensure!(
            labels.shape == scores.shape[..1],
            "labels {labels} do not match scores {scores}"
        );
        if let Some(w) = weight {
            ensure!(
                w.dtype == DType::F32 && w.shape == [scores.shape[1]],
                "class weights must be float32[{}], found {w}",
                scores.shape[1]
            );
        }
        Ok((scores.shape[0], scores.shape[1]))
    }

    /// The labels' fields of a cross-entropy kernel's arguments: the
    /// operand and whether it is int32.
    fn label_args(labels: Arg, dtype: DType) -> [(&'static str, Arg); 2] {
        [
            ("labels", labels),
            ("label_i32", Arg::int((dtype == DType::I32) as u8)),
        ]
    }

    /// The fields every cross-entropy kernel's arguments end with (the
    /// runtime's `st_sce_*_args`): batch and class counts, reduction and
    /// ignored label.
    fn count_args(&self, b: usize, c: usize) -> [(&'static str, Arg); 4] {
        [
            ("b", Arg::int(b)),
            ("c", Arg::int(c)),
            ("reduction", Arg::int(self.reduction.code())),
            ("ignore_index", Arg::Index(self.ignore_index)),
        ]
    }

    /// Per-row weight (0 for ignored rows) and the mean's denominator.
    fn row_weights<R: Real>(
        &self,
        labels: &[i64],
        c: usize,
        weight: Option<&[R]>,
    ) -> Result<(Vec<R>, R), OpError> {
        let mut w = Vec::with_capacity(labels.len());
        let mut total = R::ZERO;
        for &l in labels {
            if Some(l) == self.ignore_index {
                w.push(R::ZERO);
                continue;
            }
            ensure!(
                l >= 0 && (l as usize) < c,
                "label {l} out of range for {c} classes"
            );
            let wi = weight.map(|w| w[l as usize]).unwrap_or(R::ONE);
            total += wi;
            w.push(wi);
        }
        Ok((w, total))
    }
}

/// log-softmax of one row, in the order the C kernel uses.
fn log_softmax_row<R: Real>(x: &[R], out: &mut [R]) {
    let mut m = x[0];
    for &v in &x[1..] {
        if v > m {
            m = v;
        }
    }
    let mut s = R::ZERO;
    for &v in x {
        s += (v - m).exp();
    }
    let ls = s.ln();
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v - m - ls;
    }
}

impl Op for Sce {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let s = req(inputs, 0)?.ty;
        let (b, _) = self.check(
            s,
            req(inputs, 1)?.ty,
            inputs.get(2).copied().flatten().map(|w| w.ty),
        )?;
        let loss = if self.reduction == Reduction::None {
            vec![b]
        } else {
            vec![]
        };
        Ok(vec![TensorType::f32(loss), s.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let s = arg(inputs, 0)?;
            let labels = arg(inputs, 1)?.to_i64();
            let weight = inputs.get(2).copied().flatten();
            let (b, c) = self.check(
                &s.ty(),
                &arg(inputs, 1)?.ty(),
                weight.map(|w| w.ty()).as_ref(),
            )?;
            let (w, total) = self.row_weights(&labels, c, weight.map(|w| w.as_real::<R>()))?;
            let mut logp = vec![R::ZERO; b * c];
            let sv = s.as_real::<R>();
            for i in 0..b {
                log_softmax_row(&sv[i * c..(i + 1) * c], &mut logp[i * c..(i + 1) * c]);
            }
            let per: Vec<R> = (0..b)
                .map(|i| {
                    if w[i] == R::ZERO {
                        R::ZERO
                    } else {
                        -w[i] * logp[i * c + labels[i] as usize]
                    }
                })
                .collect();
            let loss = match self.reduction {
                Reduction::None => Tensor::real::<R>(vec![b], per),
                Reduction::Sum | Reduction::Mean => {
                    let mut acc = super::util::psum(per.iter().copied());
                    if self.reduction == Reduction::Mean {
                        acc /= total;
                    }
                    Tensor::real::<R>(vec![], vec![acc])
                }
            };
            Ok(vec![loss, Tensor::real::<R>(vec![b, c], logp)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let s = k.input(0)?;
        let (b, c) = (s.shape[0], s.shape[1]);
        let labels = k.input(1)?;
        let mut args = vec![("x", Arg::input(0))];
        args.extend(Sce::label_args(Arg::input(1), labels.dtype));
        args.extend([
            ("weight", Arg::opt_input(2)),
            ("loss", Arg::opt_output(0)),
            ("logp", Arg::opt_output(1)),
        ]);
        args.extend(self.count_args(b, c));
        Ok(vec![KernelCall::new("st_sce_loss", args)])
    }
}

/// SoftmaxCrossEntropyLossGrad: ORT's `(dY, log_prob, label, weight?)` or
/// Onnx4Deeploy's `(log_prob, label)` with dY = 1.
///
/// The second field is `Some(row0)` for a tile of rows (`crate::tile`):
/// dY (reduction `none`), log_prob and dX hold rows `row0..` of the node's
/// batch, the labels the whole batch, so that a mean still divides by the
/// whole batch's weight and each row reads its own label.
#[derive(Debug)]
pub struct SceGrad(pub Sce, pub Option<usize>);

/// The labels of rows `row0..row0 + b` of `labels` (the whole batch's, of a
/// tile of [`SceGrad`]), as the type [`Sce::check`] expects beside a tile's
/// `[b, C]`.
fn tile_labels(labels: &TensorType, row0: usize, b: usize) -> Result<TensorType, OpError> {
    ensure!(
        labels.shape.len() == 1 && labels.shape[0] >= row0 + b,
        "labels {labels} do not hold rows {row0}..{} of a tile",
        row0 + b
    );
    Ok(TensorType::new(labels.dtype, vec![b]))
}

/// Input positions after telling the two spellings apart.
pub(crate) struct GradArgs {
    pub dy: Option<usize>,
    pub logp: usize,
    pub label: usize,
    pub weight: Option<usize>,
}

/// The input positions of a [`SceGrad`] node with inputs of `types`.
pub(crate) fn grad_args(types: &[Option<&TensorType>]) -> Result<GradArgs, OpError> {
    let t = |i: usize| types.get(i).copied().flatten();
    let int = |i: usize| {
        t(i).map(|t| matches!(t.dtype, DType::I64 | DType::I32))
            .unwrap_or(false)
    };
    if int(1) {
        ensure!(
            t(3).is_none(),
            "the (log_prob, label[, weight]) form takes 3 inputs, found input 3"
        );
        Ok(GradArgs {
            dy: None,
            logp: 0,
            label: 1,
            weight: t(2).map(|_| 2),
        })
    } else if int(2) {
        Ok(GradArgs {
            dy: Some(0),
            logp: 1,
            label: 2,
            weight: t(3).map(|_| 3),
        })
    } else {
        Err(op_err!("expected (dY, log_prob, label[, weight]) or (log_prob, label): no int64 label at position 1 or 2"))
    }
}

impl Op for SceGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let types: Vec<_> = inputs.iter().map(|i| i.map(|i| i.ty)).collect();
        let g = grad_args(&types)?;
        let logp = req(inputs, g.logp)?.ty;
        let labels = req(inputs, g.label)?.ty;
        let labels = match self.1 {
            Some(row0) => tile_labels(labels, row0, logp.shape.first().copied().unwrap_or(0))?,
            None => labels.clone(),
        };
        self.0
            .check(logp, &labels, g.weight.map(|w| types[w].unwrap()))?;
        if let Some(d) = g.dy {
            let dy = req(inputs, d)?.ty;
            let want = if self.0.reduction == Reduction::None {
                vec![logp.shape[0]]
            } else {
                vec![]
            };
            ensure!(
                dy.numel() == want.iter().product::<usize>(),
                "dY {dy} does not match the loss shape {want:?}"
            );
        }
        Ok(vec![logp.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let types: Vec<_> = inputs.iter().map(|i| i.map(|t| t.ty())).collect();
            let refs: Vec<_> = types.iter().map(|t| t.as_ref()).collect();
            let g = grad_args(&refs)?;
            let logp = arg(inputs, g.logp)?;
            let labels = arg(inputs, g.label)?.to_i64();
            let (b, c) = (logp.shape[0], logp.shape[1]);
            tile_labels(&arg(inputs, g.label)?.ty(), self.1.unwrap_or(0), b)?;
            let weight = g.weight.map(|w| arg(inputs, w)).transpose()?;
            let (w, total) = self.0.row_weights(&labels, c, weight.map(|w| w.as_real::<R>()))?;
            let dy =
                g.dy.map(|d| arg(inputs, d))
                    .transpose()?
                    .map(|t| t.as_real::<R>().to_vec());
            let lp = logp.as_real::<R>();
            // A tile's rows are rows `row0..` of the labels (the batch's).
            let row0 = self.1.unwrap_or(0);
            let mut out = vec![R::ZERO; b * c];
            for i in 0..b {
                let d = match &dy {
                    Some(v) if self.0.reduction == Reduction::None => v[i],
                    Some(v) => v[0],
                    None => 1.0,
                };
                let wi = w[row0 + i];
                let scale = if self.0.reduction == Reduction::Mean {
                    d * wi / total
                } else {
                    d * wi
                };
                for j in 0..c {
                    let onehot = if j as i64 == labels[row0 + i] { 1.0 } else { 0.0 };
                    out[i * c + j] = (lp[i * c + j].exp() - onehot) * scale;
                }
            }
            Ok(vec![Tensor::real::<R>(vec![b, c], out)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let types: Vec<_> = k.inputs.iter().map(|o| o.map(|o| o.ty)).collect();
        let g = grad_args(&types)?;
        let logp = k.input(g.logp)?;
        let labels = k.input(g.label)?;
        let present = |i: Option<usize>| -> Result<Arg, OpError> {
            Ok(match i {
                Some(i) => {
                    k.input(i)?;
                    Arg::input(i)
                }
                None => Arg::Null,
            })
        };
        let mut args = vec![("dy", present(g.dy)?), ("logp", Arg::input(g.logp))];
        args.extend(Sce::label_args(Arg::input(g.label), labels.dtype));
        args.extend([("weight", present(g.weight)?), ("dx", Arg::output(0))]);
        args.extend(self.0.count_args(logp.shape[0], logp.shape[1]));
        let mut call = KernelCall::new("st_sce_loss_grad", args);
        if let Some(row0) = self.1 {
            call.args.push(("row0", Arg::int(row0)));
            call.args.push(("labels_n", Arg::int(labels.numel())));
        }
        Ok(vec![call])
    }
}

/// The loss of a split SoftmaxCrossEntropyLoss (`crate::split`), from the
/// per-row losses `[B]` of a `reduction="none"` loss over the same labels
/// and weights: their sum, divided by the batch's total weight for a mean.
/// The same per-row values summed in the same order as the unsplit node,
/// so the same loss bit for bit. Inputs `(per_row, labels, weight?)`.
#[derive(Debug)]
pub struct SceReduce {
    pub sce: Sce,
    /// The scores' class count (a label's range).
    pub classes: usize,
}

impl SceReduce {
    fn check(
        &self,
        per: &TensorType,
        labels: &TensorType,
        weight: Option<&TensorType>,
    ) -> Result<usize, OpError> {
        ensure!(
            per.dtype == DType::F32 && per.shape.len() == 1,
            "per-row losses must be float32[batch], found {per}"
        );
        let scores = TensorType::f32(vec![per.shape[0], self.classes]);
        Ok(self.sce.check(&scores, labels, weight)?.0)
    }
}

impl Op for SceReduce {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        self.check(
            req(inputs, 0)?.ty,
            req(inputs, 1)?.ty,
            inputs.get(2).copied().flatten().map(|w| w.ty),
        )?;
        Ok(vec![TensorType::f32(vec![])])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let per = arg(inputs, 0)?;
            let weight = inputs.get(2).copied().flatten();
            self.check(&per.ty(), &arg(inputs, 1)?.ty(), weight.map(|w| w.ty()).as_ref())?;
            let labels = arg(inputs, 1)?.to_i64();
            let (_, total) =
                self.sce
                    .row_weights(&labels, self.classes, weight.map(|w| w.as_real::<R>()))?;
            let mut acc = super::util::psum(per.as_real::<R>().iter().copied());
            if self.sce.reduction == Reduction::Mean {
                acc /= total;
            }
            Ok(vec![Tensor::real::<R>(vec![], vec![acc])])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let per = k.input(0)?;
        let labels = k.input(1)?;
        let mut args = vec![("per", Arg::input(0))];
        args.extend(Sce::label_args(Arg::input(1), labels.dtype));
        args.extend([("weight", Arg::opt_input(2)), ("loss", Arg::output(0))]);
        args.extend(self.sce.count_args(per.shape[0], self.classes));
        Ok(vec![KernelCall::new("st_sce_loss_reduce", args)])
    }
}

/// Mean squared error over all elements: `mean((p - t)^2)`.
#[derive(Debug)]
pub struct Mse {
    /// What the sum divides by, when not the element count of its inputs:
    /// a tile of a loss cut across tiles divides by the whole node's
    /// count, so the tiles' partial means add up to the loss.
    pub count: Option<usize>,
}

fn mse_check(inputs: &[Option<OpInput<'_>>]) -> Result<TensorType, OpError> {
    let p = req(inputs, 0)?.ty;
    let t = req(inputs, 1)?.ty;
    ensure!(
        p.dtype == DType::F32 && t.dtype == DType::F32,
        "prediction and target must be float32, found {p} and {t}"
    );
    ensure!(
        p.shape == t.shape,
        "prediction {p} and target {t} differ in shape"
    );
    Ok(p.clone())
}

impl Op for Mse {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        mse_check(inputs)?;
        Ok(vec![TensorType::f32(vec![])])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let p = arg(inputs, 0)?.as_real::<R>();
            let t = arg(inputs, 1)?.as_real::<R>();
            let acc = super::util::psum(p.iter().zip(t).map(|(&a, &b)| (a - b) * (a - b)));
            let count = R::from_usize(self.count.unwrap_or(p.len()));
            Ok(vec![Tensor::real::<R>(vec![], vec![acc / count])])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        k.input(1)?;
        let mut call = KernelCall::new(
            "st_mse_loss",
            vec![
                ("p", Arg::input(0)),
                ("t", Arg::input(1)),
                ("loss", Arg::output(0)),
                ("n", Arg::int(n)),
            ],
        );
        if let Some(c) = self.count {
            call.args.push(("div", Arg::int(c)));
        }
        Ok(vec![call])
    }
}

/// Gradient of [`Mse`] with respect to the prediction: `2 (p - t) / N`.
#[derive(Debug)]
pub struct MseGrad {
    /// `N`, when not the element count of its inputs: a tile of the
    /// gradient scales by the whole node's count.
    pub count: Option<usize>,
}

impl Op for MseGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![mse_check(inputs)?])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let p = arg(inputs, 0)?;
            let t = arg(inputs, 1)?.as_real::<R>();
            let scale = R::from_f32(2.0) / R::from_usize(self.count.unwrap_or(p.numel()));
            let v = p
                .as_real::<R>()
                .iter()
                .zip(t)
                .map(|(&a, &b)| (a - b) * scale)
                .collect();
            Ok(vec![Tensor::real::<R>(p.shape.clone(), v)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        k.input(1)?;
        Ok(vec![KernelCall::new(
            "st_mse_loss_grad",
            vec![
                ("p", Arg::input(0)),
                ("t", Arg::input(1)),
                ("dp", Arg::output(0)),
                ("n", Arg::int(n)),
                ("scale", Arg::Float(2.0 / self.count.unwrap_or(n) as f32)),
            ],
        )])
    }
}
