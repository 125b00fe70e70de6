//! The training-state ops: gradient accumulation and the SGD update. Both
//! write their result into an input's buffer; the program treats that input
//! as persistent state, and the memory plan gives output and input one home.

use super::{
    arg, boxed, c_float, req, Alias, AliasKind, EmitCx, Op, OpError, OpInput, Registry, MS,
};
use crate::tensor::{DType, Tensor, TensorType};
use crate::{ensure, op_err};

pub fn register(r: &mut Registry) {
    r.add(&[MS], "InPlaceAccumulatorV2", |_| boxed(Accumulate));
    r.add(&["", MS], "SGD", |a| {
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
        let buf = arg(inputs, 0)?;
        let val = arg(inputs, 1)?;
        let overwrite = inputs
            .get(2)
            .copied()
            .flatten()
            .map(|f| f.to_i64()[0] != 0)
            .unwrap_or(false);
        let v: Vec<f32> = if overwrite {
            val.as_f32().to_vec()
        } else {
            buf.as_f32()
                .iter()
                .zip(val.as_f32())
                .map(|(a, b)| a + b)
                .collect()
        };
        let t = Tensor::f32(buf.shape.clone(), v);
        Ok(outputs.iter().map(|_| t.clone()).collect())
    }
    fn emit(&self, cx: &mut EmitCx<'_>) -> Result<(), OpError> {
        let buf = cx.input(0)?.clone();
        let fields = [
            ("buf", buf.expr),
            ("val", cx.input(1)?.expr.clone()),
            ("flag", EmitCx::ptr_or_null(cx.opt_input(2))),
            ("n", buf.ty.numel().to_string()),
        ];
        cx.kernel("st_accumulate", &fields);
        Ok(())
    }
    fn aliases(&self) -> Vec<Alias> {
        (0..2)
            .map(|o| Alias {
                output: o,
                input: 0,
                kind: AliasKind::InPlace,
            })
            .collect()
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
        let p = arg(inputs, 0)?;
        let g = arg(inputs, 1)?.as_f32();
        let lr = match self.lr {
            Some(lr) => lr,
            None => arg(inputs, 2)?.as_f32()[0],
        };
        let v = p.as_f32().iter().zip(g).map(|(w, d)| w - lr * d).collect();
        Ok(vec![Tensor::f32(p.shape.clone(), v)])
    }
    fn emit(&self, cx: &mut EmitCx<'_>) -> Result<(), OpError> {
        let p = cx.input(0)?.clone();
        let fields = [
            ("w", p.expr),
            ("g", cx.input(1)?.expr.clone()),
            ("n", p.ty.numel().to_string()),
            (
                "lr",
                match self.lr {
                    Some(lr) => c_float(lr),
                    None => format!("{}[0]", cx.input(2)?.expr),
                },
            ),
        ];
        cx.kernel("st_sgd", &fields);
        Ok(())
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![Alias {
            output: 0,
            input: 0,
            kind: AliasKind::InPlace,
        }]
    }
}
