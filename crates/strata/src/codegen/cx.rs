//! What an op sees while emitting C: its operands as C pointer expressions
//! with their types, and a writer for kernel calls. Every kernel call has the
//! PULP shape: an argument struct, then a fork over the cluster's cores.

use crate::ops::OpError;
use crate::tensor::TensorType;

/// A tensor as the emitted C refers to it.
#[derive(Clone, Debug)]
pub struct Operand {
    /// A typed pointer expression, e.g. `((float *)(st_l2 + 1024))`.
    pub expr: String,
    pub ty: TensorType,
    /// The value, when the tensor is a compile-time constant (shape and axes inputs).
    pub value: Option<crate::tensor::Tensor>,
}

pub struct EmitCx<'a> {
    pub node_name: &'a str,
    pub inputs: Vec<Option<Operand>>,
    pub outputs: Vec<Option<Operand>>,
    pub lines: Vec<String>,
}

impl<'a> EmitCx<'a> {
    pub fn new(
        node_name: &'a str,
        inputs: Vec<Option<Operand>>,
        outputs: Vec<Option<Operand>>,
    ) -> Self {
        EmitCx {
            node_name,
            inputs,
            outputs,
            lines: Vec::new(),
        }
    }
    pub fn input(&self, i: usize) -> Result<&Operand, OpError> {
        self.opt_input(i)
            .ok_or_else(|| crate::op_err!("missing required input {i}"))
    }
    pub fn opt_input(&self, i: usize) -> Option<&Operand> {
        self.inputs.get(i).and_then(|o| o.as_ref())
    }
    pub fn output(&self, i: usize) -> Result<&Operand, OpError> {
        self.opt_output(i)
            .ok_or_else(|| crate::op_err!("missing required output {i}"))
    }
    pub fn opt_output(&self, i: usize) -> Option<&Operand> {
        self.outputs.get(i).and_then(|o| o.as_ref())
    }
    /// Pointer expression of an optional operand, or `NULL`.
    pub fn ptr_or_null(op: Option<&Operand>) -> String {
        op.map(|o| o.expr.clone())
            .unwrap_or_else(|| "NULL".to_string())
    }
    /// Emit `{ <func>_args a = { .f = v, ... }; st_fork(<func>, &a); }`.
    pub fn kernel(&mut self, func: &str, fields: &[(&str, String)]) {
        let mut s = format!("{{ static {func}_args a; a = ({func}_args){{");
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(" .{k} = {v}"));
        }
        s.push_str(&format!(" }}; st_fork({func}, &a); }}"));
        self.lines.push(s);
    }
    /// Emit a raw C statement.
    pub fn line(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }
}

/// A C literal that reads back as exactly `x` (shortest round-trip form).
pub fn c_float(x: f32) -> String {
    if x.is_nan() {
        "NAN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "INFINITY" } else { "(-INFINITY)" }.to_string()
    } else {
        let s = format!("{x:?}");
        let s = if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        };
        format!("{s}f")
    }
}
