//! Element-wise arithmetic with numpy-style multidirectional broadcasting
//! (Add, Sub, Mul, Div, Pow), the unary float ops (Sqrt, Abs, Neg, Sign,
//! Exp, Log, Sigmoid, Tanh, LeakyRelu) and ONNX Runtime's SigmoidGrad,
//! TanhGrad and LeakyReluGrad.
//!
//! One C kernel serves every binary op: the output is walked in row-major
//! order and each operand is read through its broadcast strides (0 on a
//! broadcast dimension), rank <= 8. Int64 operands are accepted by the
//! reference kernel only, so shape arithmetic on constants folds at import;
//! describing C kernel calls for them is refused.

use super::util::{
    broadcast_shape, broadcast_strides, grad_pair_calls, grad_pair_eval, grad_pair_type,
};
use super::{
    arg, boxed, req, Arg, Arity, KernelCall, Op, OpError, OpInput, Operands, Registry, MS,
};
use crate::tensor::Real;
use crate::tensor::{DType, Data, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[""], "Add", Arity::exactly(2), |_| {
        boxed(Binary(BinKind::Add))
    });
    r.add(&[""], "Sub", Arity::exactly(2), |_| {
        boxed(Binary(BinKind::Sub))
    });
    r.add(&[""], "Mul", Arity::exactly(2), |_| {
        boxed(Binary(BinKind::Mul))
    });
    r.add(&[""], "Div", Arity::exactly(2), |_| {
        boxed(Binary(BinKind::Div))
    });
    r.add(&[""], "Pow", Arity::exactly(2), |_| {
        boxed(Binary(BinKind::Pow))
    });
    r.add(&[""], "Sqrt", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Sqrt))
    });
    r.add(&[""], "Abs", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Abs))
    });
    r.add(&[""], "Neg", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Neg))
    });
    r.add(&[""], "Sign", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Sign))
    });
    r.add(&[""], "Exp", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Exp))
    });
    r.add(&[""], "Log", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Log))
    });
    r.add(&[""], "Sigmoid", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Sigmoid))
    });
    r.add(&[""], "Tanh", Arity::exactly(1), |_| {
        boxed(Unary(UnKind::Tanh))
    });
    r.add(&[""], "LeakyRelu", Arity::exactly(1), |a| {
        boxed(Unary(UnKind::LeakyRelu(a.float_or("alpha", 0.01))))
    });
    r.add(&[MS], "SigmoidGrad", Arity::exactly(2), |_| {
        boxed(ActGrad::Sigmoid)
    });
    r.add(&[MS], "TanhGrad", Arity::exactly(2), |_| {
        boxed(ActGrad::Tanh)
    });
    r.add(&[MS], "LeakyReluGrad", Arity::exactly(2), |a| {
        boxed(ActGrad::LeakyRelu(a.float_or("alpha", 0.01)))
    });
}

/// Largest rank the C kernels index.
pub const MAX_RANK: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinKind {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

impl BinKind {
    /// The op code `st_binary` switches on.
    fn code(self) -> u8 {
        self as u8
    }
    fn name(self) -> &'static str {
        match self {
            BinKind::Add => "Add",
            BinKind::Sub => "Sub",
            BinKind::Mul => "Mul",
            BinKind::Div => "Div",
            BinKind::Pow => "Pow",
        }
    }
    /// The operation, as `st_binary` computes it (in f32; f64 for the oracle).
    pub fn apply<R: Real>(self, a: R, b: R) -> R {
        match self {
            BinKind::Add => a + b,
            BinKind::Sub => a - b,
            BinKind::Mul => a * b,
            BinKind::Div => a / b,
            BinKind::Pow => a.powf(b),
        }
    }
    fn apply_i64(self, a: i64, b: i64) -> Result<i64, OpError> {
        Ok(match self {
            BinKind::Add => a.wrapping_add(b),
            BinKind::Sub => a.wrapping_sub(b),
            BinKind::Mul => a.wrapping_mul(b),
            BinKind::Div => {
                ensure!(b != 0, "Div: integer division by zero");
                a / b
            }
            BinKind::Pow => {
                ensure!(b >= 0, "Pow: negative integer exponent {b}");
                a.wrapping_pow(b.min(u32::MAX as i64) as u32)
            }
        })
    }
}

/// A binary element-wise op with multidirectional broadcasting.
#[derive(Debug)]
pub struct Binary(pub BinKind);

/// Row-major offsets of `n` output elements in two broadcast operands.
fn for_each_offset(out: &[usize], sa: &[usize], sb: &[usize], mut f: impl FnMut(usize, usize)) {
    let n: usize = out.iter().product();
    for o in 0..n {
        let (oa, ob) = super::util::offsets2(o, out, sa, sb);
        f(oa, ob);
    }
}

impl Op for Binary {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let a = req(inputs, 0)?.ty;
        let b = req(inputs, 1)?.ty;
        let k = self.0.name();
        ensure!(
            matches!(a.dtype, DType::F32 | DType::I64),
            "{k}: input 0 must be float32 (or int64 shape arithmetic), found {a}"
        );
        ensure!(
            a.dtype == b.dtype,
            "{k}: operands differ in element type: {a} and {b}"
        );
        let shape = broadcast_shape(&a.shape, &b.shape).map_err(|e| op_err!("{k}: {}", e.0))?;
        ensure!(
            shape.len() <= MAX_RANK,
            "{k}: rank {} exceeds {MAX_RANK}",
            shape.len()
        );
        Ok(vec![TensorType::new(a.dtype, shape)])
    }

    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let a = arg(inputs, 0)?;
        let b = arg(inputs, 1)?;
        let out = broadcast_shape(&a.shape, &b.shape)?;
        let sa = broadcast_strides(&a.shape, &out);
        let sb = broadcast_strides(&b.shape, &out);
        let n: usize = out.iter().product();
        let data = match (&a.data, &b.data) {
            (Data::F32(av), Data::F32(bv)) => {
                let mut y = Vec::with_capacity(n);
                for_each_offset(&out, &sa, &sb, |i, j| y.push(self.0.apply(av[i], bv[j])));
                Data::F32(y)
            }
            (Data::F64(_), _) | (_, Data::F64(_)) => {
                let (av, bv) = (a.to_f64(), b.to_f64());
                let mut y = Vec::with_capacity(n);
                for_each_offset(&out, &sa, &sb, |i, j| y.push(self.0.apply(av[i], bv[j])));
                Data::F64(y)
            }
            (Data::I64(av), Data::I64(bv)) => {
                let mut y = Vec::with_capacity(n);
                let mut err = None;
                for_each_offset(&out, &sa, &sb, |i, j| {
                    match self.0.apply_i64(av[i], bv[j]) {
                        Ok(v) => y.push(v),
                        Err(e) => err = Some(e),
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
                Data::I64(y)
            }
            _ => {
                return Err(op_err!(
                    "{}: unsupported operand types {} and {}",
                    self.0.name(),
                    a.ty(),
                    b.ty()
                ))
            }
        };
        Ok(vec![Tensor { shape: out, data }])
    }

    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (a, b) = (k.input(0)?, k.input(1)?);
        ensure!(
            a.dtype == DType::F32,
            "{}: C kernels are float32 only; {} would have to fold at import",
            self.0.name(),
            a
        );
        let out = &k.output(0)?.shape;
        let sa = broadcast_strides(&a.shape, out);
        let sb = broadcast_strides(&b.shape, out);
        Ok(vec![KernelCall::new(
            "st_binary",
            vec![
                ("a", Arg::input(0)),
                ("b", Arg::input(1)),
                ("y", Arg::output(0)),
                ("op", Arg::int(self.0.code())),
                ("rank", Arg::int(out.len())),
                ("dims", Arg::dims8(out, 1)),
                ("sa", Arg::dims8(&sa, 0)),
                ("sb", Arg::dims8(&sb, 0)),
            ],
        )])
    }
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        vec![(0, 0), (0, 1)]
    }
}

/// The unary float ops, each as `st_unary` computes it (op code:
/// `UnKind::code`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnKind {
    Sqrt,
    Abs,
    Neg,
    Sign,
    Exp,
    Log,
    Sigmoid,
    Tanh,
    /// `alpha * x` below 0, `x` from 0 (ONNX `LeakyRelu`).
    LeakyRelu(f32),
}

impl UnKind {
    pub fn name(self) -> &'static str {
        match self {
            UnKind::Sqrt => "Sqrt",
            UnKind::Abs => "Abs",
            UnKind::Neg => "Neg",
            UnKind::Sign => "Sign",
            UnKind::Exp => "Exp",
            UnKind::Log => "Log",
            UnKind::Sigmoid => "Sigmoid",
            UnKind::Tanh => "Tanh",
            UnKind::LeakyRelu(_) => "LeakyRelu",
        }
    }
    /// The op code of `st_unary`.
    fn code(self) -> u8 {
        match self {
            UnKind::Sqrt => 0,
            UnKind::Abs => 1,
            UnKind::Neg => 2,
            UnKind::Sign => 3,
            UnKind::Exp => 4,
            UnKind::Log => 5,
            UnKind::Sigmoid => 6,
            UnKind::Tanh => 7,
            UnKind::LeakyRelu(_) => 8,
        }
    }
    /// The attribute `st_unary` reads (LeakyRelu's slope), else 0.
    fn alpha(self) -> f32 {
        match self {
            UnKind::LeakyRelu(a) => a,
            _ => 0.0,
        }
    }
    /// The operation, as `st_unary` computes it (the same libm
    /// functions on the host; `Sign` keeps NaN).
    pub fn apply<R: Real>(self, x: R) -> R {
        match self {
            UnKind::Sqrt => x.sqrt(),
            UnKind::Abs => x.abs(),
            UnKind::Neg => -x,
            UnKind::Sign => {
                if x > R::ZERO {
                    R::ONE
                } else if x < R::ZERO {
                    -R::ONE
                } else {
                    x
                }
            }
            UnKind::Exp => x.exp(),
            UnKind::Log => x.ln(),
            UnKind::Sigmoid => R::ONE / (R::ONE + (-x).exp()),
            UnKind::Tanh => x.tanh(),
            UnKind::LeakyRelu(a) => {
                if x < R::ZERO {
                    R::from_f32(a) * x
                } else {
                    x
                }
            }
        }
    }
}

/// A unary float op, element by element.
#[derive(Debug)]
pub struct Unary(pub UnKind);

impl Op for Unary {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        let x = req(inputs, 0)?.ty;
        ensure!(
            x.dtype == DType::F32,
            "{}: input must be float32, found {x}",
            self.0.name()
        );
        Ok(vec![x.clone()])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        let x = arg(inputs, 0)?;
        Ok(vec![crate::by_real!(inputs, R => {
            let y = x.as_real::<R>().iter().map(|&v| self.0.apply(v)).collect();
            Tensor::real::<R>(x.shape.clone(), y)
        })])
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let n = k.input(0)?.numel();
        Ok(vec![KernelCall::new(
            "st_unary",
            vec![
                ("x", Arg::input(0)),
                ("y", Arg::output(0)),
                ("op", Arg::int(self.0.code())),
                ("n", Arg::int(n)),
                ("alpha", Arg::Float(self.0.alpha())),
            ],
        )])
    }
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        vec![(0, 0)]
    }
}

/// ONNX Runtime's activation gradients from the forward output `Y`:
/// `SigmoidGrad(dY, Y) = dY * Y * (1 - Y)`, `TanhGrad(dY, Y) = dY * (1 -
/// Y * Y)`, evaluated left to right as ORT's CPU kernels do, and
/// `LeakyReluGrad(dY, Y) = Y > 0 ? dY : alpha * dY`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ActGrad {
    Sigmoid,
    Tanh,
    LeakyRelu(f32),
}

impl ActGrad {
    fn name(self) -> &'static str {
        match self {
            ActGrad::Sigmoid => "SigmoidGrad",
            ActGrad::Tanh => "TanhGrad",
            ActGrad::LeakyRelu(_) => "LeakyReluGrad",
        }
    }
    /// The op code of `st_act_grad`, and its `alpha`.
    fn code(self) -> (u8, f32) {
        match self {
            ActGrad::Sigmoid => (0, 0.0),
            ActGrad::Tanh => (1, 0.0),
            ActGrad::LeakyRelu(a) => (2, a),
        }
    }
    pub fn apply<R: Real>(self, dy: R, y: R) -> R {
        match self {
            ActGrad::Sigmoid => dy * y * (R::ONE - y),
            ActGrad::Tanh => dy * (R::ONE - y * y),
            ActGrad::LeakyRelu(a) => {
                if y > R::ZERO {
                    dy
                } else {
                    R::from_f32(a) * dy
                }
            }
        }
    }
}

impl Op for ActGrad {
    fn infer(&self, inputs: &[Option<OpInput<'_>>], _: usize) -> Result<Vec<TensorType>, OpError> {
        Ok(vec![grad_pair_type(inputs, self.name(), "Y")?])
    }
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        _: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError> {
        crate::by_real!(inputs, R => grad_pair_eval::<R>(inputs, |d, y| self.apply(d, y)))
    }
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError> {
        let (op, alpha) = self.code();
        grad_pair_calls(
            k,
            "st_act_grad",
            "y",
            vec![("op", Arg::int(op)), ("alpha", Arg::Float(alpha))],
        )
    }
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        vec![(0, 0), (0, 1)]
    }
}
