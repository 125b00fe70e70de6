//! The training-state ops: gradient accumulation, the SGD and AdamW updates
//! and the optimizer's step count. Each writes its results into input
//! buffers; the program treats those inputs as persistent state, and the
//! memory plan gives output and input one home.

use super::{
    arg, boxed, req, Alias, Arg, Arity, Attrs, KernelCall, Op, OpError, OpInput, Operands,
    Registry, MS, STRATA,
};
use crate::tensor::{DType, Real, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[MS], "InPlaceAccumulatorV2", Arity::range(2, 3), |_| {
        boxed(Accumulate)
    });
    r.add(&[STRATA], "AdamW", Arity::exactly(6), |a| {
        boxed(AdamW::from_attrs(a)?)
    });
    r.add(&[STRATA], "StepCount", Arity::exactly(1), |_| {
        boxed(StepCount)
    });
    r.add(&["", MS], "SGD", Arity::exactly(2), |a| {
        if !a.has("lr") {
            return Err(op_err!("SGD needs the `lr` attribute"));
        }
        boxed(Sgd {
            lr: Some(a.float_or("lr", 0.0)),
        })
    });
}

/// `buffer = flag ? value : buffer + value`. Output 0 (and output 1, when
/// present) is the accumulator itself, whatever type the graph declares for it.
#[derive(Debug)]
pub struct Accumulate;

impl Op for Accumulate {
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError> {
        let buf = req(inputs, 0)?.ty;
        let val = req(inputs, 1)?.ty;
        ensure!(
            buf.dtype == DType::F32 && buf.shape == val.shape,
            "accumulator {buf} and gradient {val} differ"
        );
        if let Some(f) = inputs.get(2).copied().flatten() {
            ensure!(
                f.ty.numel() == 1,
                "the overwrite flag must hold one element, found {}",
                f.ty
            );
        }
        Ok(vec![buf.clone(); n_outputs.max(1)])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let buf = arg(inputs, 0)?;
            let val = arg(inputs, 1)?;
            let overwrite = inputs
                .get(2)
                .copied()
                .flatten()
                .map(|f| f.to_i64()[0] != 0)
                .unwrap_or(false);
            let v: Vec<R> = if overwrite {
                val.as_real::<R>().to_vec()
            } else {
                buf.as_real::<R>()
                    .iter()
                    .zip(val.as_real::<R>())
                    .map(|(a, b)| a + b)
                    .collect()
            };
            let t = Tensor::real::<R>(buf.shape.clone(), v);
            Ok(outputs.iter().map(|_| t.clone()).collect())
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        k.input(1)?;
        Ok(vec![KernelCall::new(
            "st_accumulate",
            vec![
                ("buf", Arg::input(0)),
                ("val", Arg::input(1)),
                ("flag", Arg::opt_input(2)),
                ("n", Arg::int(n)),
            ],
        )])
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias::in_place(0, 0), Alias::in_place(1, 0)]
    }
}

/// `param = param - lr * grad`, in place. The learning rate is the `lr`
/// attribute, or, when `lr` is `None`, read at run time from input 2 (a
/// one-element float tensor: ONNX Runtime's optimizer takes it as an input).
#[derive(Debug)]
pub struct Sgd {
    pub lr: Option<f32>,
}

impl Op for Sgd {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let p = req(inputs, 0)?.ty;
        let g = req(inputs, 1)?.ty;
        ensure!(
            p.dtype == DType::F32 && p == g,
            "parameter {p} and gradient {g} differ"
        );
        if self.lr.is_none() {
            let lr = req(inputs, 2)?.ty;
            ensure!(
                lr.dtype == DType::F32 && lr.numel() == 1,
                "the learning rate must be one float32 element, found {lr}"
            );
        }
        Ok(vec![p.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let p = arg(inputs, 0)?;
            let g = arg(inputs, 1)?.as_real::<R>();
            let lr = match self.lr {
                Some(lr) => R::from_f32(lr),
                None => arg(inputs, 2)?.as_real::<R>()[0],
            };
            let v = p.as_real::<R>().iter().zip(g).map(|(&w, &d)| w - lr * d).collect();
            Ok(vec![Tensor::real::<R>(p.shape.clone(), v)])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        k.input(1)?;
        let lr = match self.lr {
            Some(lr) => Arg::Float(lr),
            None => {
                k.input(2)?;
                Arg::First(2)
            }
        };
        Ok(vec![KernelCall::new(
            "st_sgd",
            vec![
                ("w", Arg::input(0)),
                ("g", Arg::input(1)),
                ("n", Arg::int(n)),
                ("lr", lr),
            ],
        )])
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias::in_place(0, 0)]
    }
}

/// ONNX Runtime's AdamW update of one parameter, in place on the
/// parameter and its two moments (the per-parameter form of
/// `com.microsoft AdamWOptimizer`, which strata lowers from the sequence
/// op). Inputs: parameter, gradient, first moment, second moment, learning
/// rate (one float), step (one int64, 1-based: ONNX Runtime feeds its step
/// count plus one). Outputs: parameter, first moment, second moment.
///
/// The arithmetic follows ONNX Runtime's CPU kernel operation by operation
/// (f32 throughout; the bias corrections are `1 - pow(beta, step)` in f64
/// rounded to f32):
/// * `m1 = alpha * m1 + (1 - alpha) * g`, `m2 = beta * m2 + (1 - beta) * g * g`;
/// * mode 0 (PyTorch): first `w = w - w * lr * wd`, then
///   `w = w - lr * m1 / (ac * (sqrt(m2 / bc) + eps))`;
/// * mode 1 (Hugging Face): `w = w - lrc * m1 / (sqrt(m2) + eps)` with
///   `lrc = lr * (sqrt(bc) / ac)`, then `w = w - lr * wd * w`;
///
/// with `ac = 1 - alpha^step`, `bc = 1 - beta^step` when `correct_bias`,
/// else 1.
#[derive(Debug, Clone)]
pub struct AdamW {
    pub alpha: f32,
    pub beta: f32,
    pub epsilon: f32,
    pub weight_decay: f32,
    /// 0: PyTorch, 1: Hugging Face.
    pub mode: i64,
    pub correct_bias: bool,
}

impl AdamW {
    /// From `AdamWOptimizer`'s attributes, with ONNX Runtime's defaults.
    pub fn from_attrs(a: &Attrs<'_>) -> Result<AdamW, OpError> {
        let mode = a.int_or("adam_mode", 0);
        let correct_bias = a.int_or("correct_bias", 1);
        ensure!(
            mode == 0 || mode == 1,
            "adam_mode {mode}: ONNX Runtime defines 0 (PyTorch) and 1 (Hugging Face)"
        );
        ensure!(
            correct_bias == 0 || correct_bias == 1,
            "correct_bias {correct_bias}: expected 0 or 1"
        );
        ensure!(
            mode == 1 || correct_bias == 1,
            "adam_mode 0 (PyTorch) needs correct_bias 1"
        );
        Ok(AdamW {
            alpha: a.float_or("alpha", 0.9),
            beta: a.float_or("beta", 0.999),
            epsilon: a.float_or("epsilon", 1e-8),
            weight_decay: a.float_or("weight_decay", 0.0),
            mode,
            correct_bias: correct_bias == 1,
        })
    }

    /// `(ac, bc)`: the bias corrections at `step`.
    fn corrections<R: Real>(&self, step: i64) -> (R, R) {
        if !self.correct_bias {
            return (R::ONE, R::ONE);
        }
        (
            R::ONE - R::from_f64((self.alpha as f64).powf(step as f64)),
            R::ONE - R::from_f64((self.beta as f64).powf(step as f64)),
        )
    }
}

impl Op for AdamW {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let w = req(inputs, 0)?.ty;
        ensure!(w.dtype == DType::F32, "parameter {w} is not float32");
        for (k, what) in [(1, "gradient"), (2, "first moment"), (3, "second moment")] {
            let t = req(inputs, k)?.ty;
            ensure!(t == w, "{what} {t} differs from the parameter {w}");
        }
        let lr = req(inputs, 4)?.ty;
        ensure!(
            lr.dtype == DType::F32 && lr.numel() == 1,
            "the learning rate must be one float32 element, found {lr}"
        );
        let step = req(inputs, 5)?.ty;
        ensure!(
            step.dtype == DType::I64 && step.numel() == 1,
            "the step must be one int64 element, found {step}"
        );
        Ok(vec![w.clone(); 3])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => {
            let wt = arg(inputs, 0)?;
            let g = arg(inputs, 1)?.as_real::<R>();
            let mut w = wt.as_real::<R>().to_vec();
            let mut m1 = arg(inputs, 2)?.as_real::<R>().to_vec();
            let mut m2 = arg(inputs, 3)?.as_real::<R>().to_vec();
            let lr = arg(inputs, 4)?.as_real::<R>()[0];
            let step = arg(inputs, 5)?.to_i64()[0];
            ensure!(step >= 1, "AdamW step {step}: the step count starts at 1");
            let (a, b) = (R::from_f32(self.alpha), R::from_f32(self.beta));
            let (eps, wd) = (R::from_f32(self.epsilon), R::from_f32(self.weight_decay));
            let (ac, bc) = self.corrections::<R>(step);
            let lrc = lr * (bc.sqrt() / ac);
            for i in 0..w.len() {
                if self.mode == 0 {
                    w[i] = w[i] - w[i] * lr * wd;
                }
                m1[i] = a * m1[i] + (R::ONE - a) * g[i];
                m2[i] = b * m2[i] + (R::ONE - b) * g[i] * g[i];
                if self.mode == 0 {
                    let denom = (m2[i] / bc).sqrt() + eps;
                    w[i] -= (lr * m1[i]) / (ac * denom);
                } else {
                    let denom = m2[i].sqrt() + eps;
                    w[i] -= lrc * m1[i] / denom;
                    w[i] -= lr * wd * w[i];
                }
            }
            let s = wt.shape.clone();
            Ok(vec![
                Tensor::real::<R>(s.clone(), w),
                Tensor::real::<R>(s.clone(), m1),
                Tensor::real::<R>(s, m2),
            ])
        })
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        for i in 1..6 {
            k.input(i)?;
        }
        Ok(vec![KernelCall::new(
            "st_adamw",
            vec![
                ("w", Arg::input(0)),
                ("g", Arg::input(1)),
                ("m1", Arg::input(2)),
                ("m2", Arg::input(3)),
                ("lr", Arg::input(4)),
                ("step", Arg::input(5)),
                ("n", Arg::int(n)),
                ("alpha", Arg::Float(self.alpha)),
                ("beta", Arg::Float(self.beta)),
                ("epsilon", Arg::Float(self.epsilon)),
                ("weight_decay", Arg::Float(self.weight_decay)),
                ("mode", Arg::Int(self.mode)),
                ("correct_bias", Arg::int(self.correct_bias as i32)),
            ],
        )])
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![
            Alias::in_place(0, 0),
            Alias::in_place(1, 2),
            Alias::in_place(2, 3),
        ]
    }
}

/// `step = step + 1` on one int64, in place: the optimizer's step count,
/// persistent state that starts at 0 (ONNX Runtime feeds its optimizer the
/// count plus one; strata counts on the device).
#[derive(Debug)]
pub struct StepCount;

impl Op for StepCount {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let s = req(inputs, 0)?.ty;
        ensure!(
            s.dtype == DType::I64 && s.numel() == 1,
            "the step count must be one int64 element, found {s}"
        );
        Ok(vec![s.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let s = arg(inputs, 0)?;
        Ok(vec![Tensor::i64(s.shape.clone(), vec![s.to_i64()[0] + 1])])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        k.input(0)?;
        Ok(vec![KernelCall::new(
            "st_step_count",
            vec![("step", Arg::input(0))],
        )])
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias::in_place(0, 0)]
    }
}
