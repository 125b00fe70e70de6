//! What an op asks of a back end: calls into the runtime's kernels,
//! described as data. An op names the kernel, and for each field of its
//! argument record says what goes there: one of the node's operands (by
//! input or output position), a scalar, or a fixed list of integers. It
//! knows nothing of how a back end spells them; the C back end
//! (`codegen::cx`) turns a [`KernelCall`] into the argument struct and
//! `st_fork` call of the runtime.

use super::{OpError, OpInput};
use crate::op_err;
use crate::tensor::{Tensor, TensorType};

/// One operand of a kernel call: the node's input or output at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Input(usize),
    Output(usize),
}

/// The value of one field of a kernel's argument record.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// The operand's elements (a pointer of its element type); the operand
    /// must be present.
    Ptr(Slot),
    /// The operand's elements, or no pointer when the operand is absent.
    OptPtr(Slot),
    /// No pointer.
    Null,
    /// The operand's bytes, untyped (read-only for an input): kernels that
    /// work on any element type (copies, gathers).
    Bytes(Slot),
    /// The elements of several inputs, as a list of pointers.
    Ptrs(Vec<usize>),
    /// The first element of a float input, read when the kernel is called
    /// (a run-time scalar such as a learning rate).
    First(usize),
    /// One over the first element of a float input, read when the kernel is called.
    InvFirst(usize),
    Int(i64),
    /// An int64 index, or none (the runtime's "no index" value).
    Index(Option<i64>),
    Float(f32),
    /// A fixed list of integers (dims, strides, a geometry record).
    Ints(Vec<i64>),
}

impl Arg {
    /// Input `i`'s elements (required).
    pub fn input(i: usize) -> Arg {
        Arg::Ptr(Slot::Input(i))
    }
    /// Output `i`'s elements (required).
    pub fn output(i: usize) -> Arg {
        Arg::Ptr(Slot::Output(i))
    }
    /// Input `i`'s elements, or none when it is absent.
    pub fn opt_input(i: usize) -> Arg {
        Arg::OptPtr(Slot::Input(i))
    }
    /// Output `i`'s elements, or none when it is not requested.
    pub fn opt_output(i: usize) -> Arg {
        Arg::OptPtr(Slot::Output(i))
    }
    /// An integer from a count, a size or a flag.
    pub fn int(v: impl TryInto<i64>) -> Arg {
        match v.try_into() {
            Ok(v) => Arg::Int(v),
            Err(_) => panic!("a kernel argument larger than i64"),
        }
    }
    /// A list of sizes.
    pub fn dims(v: &[usize]) -> Arg {
        Arg::Ints(v.iter().map(|&x| x as i64).collect())
    }
    /// A list of sizes padded with `fill` to the runtime's maximum rank, 8.
    pub fn dims8(v: &[usize], fill: usize) -> Arg {
        let mut v = v.to_vec();
        v.resize(8, fill);
        Arg::dims(&v)
    }
}

/// One call of a runtime kernel: its name and its argument record, field by
/// field in the record's order.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelCall {
    pub func: &'static str,
    pub args: Vec<(&'static str, Arg)>,
}

impl KernelCall {
    pub fn new(func: &'static str, args: Vec<(&'static str, Arg)>) -> KernelCall {
        KernelCall { func, args }
    }
}

/// What an op sees of its operands when it describes its kernel calls: for
/// a tile, the tile's own types.
#[derive(Clone, Debug, Default)]
pub struct Operands<'a> {
    /// Inputs by position (with their values when constant); `None` where absent.
    pub inputs: Vec<Option<OpInput<'a>>>,
    /// Outputs by position; `None` where not requested.
    pub outputs: Vec<Option<&'a TensorType>>,
}

impl<'a> Operands<'a> {
    /// Input `i`'s type; it must be present.
    pub fn input(&self, i: usize) -> Result<&'a TensorType, OpError> {
        self.opt_input(i)
            .ok_or_else(|| op_err!("missing required input {i}"))
    }
    pub fn opt_input(&self, i: usize) -> Option<&'a TensorType> {
        self.inputs.get(i).copied().flatten().map(|o| o.ty)
    }
    /// Input `i`'s value, when it is a compile-time constant.
    pub fn value(&self, i: usize) -> Option<&'a Tensor> {
        self.inputs.get(i).copied().flatten().and_then(|o| o.value)
    }
    /// Output `i`'s type; it must be requested.
    pub fn output(&self, i: usize) -> Result<&'a TensorType, OpError> {
        self.opt_output(i)
            .ok_or_else(|| op_err!("missing required output {i}"))
    }
    pub fn opt_output(&self, i: usize) -> Option<&'a TensorType> {
        self.outputs.get(i).copied().flatten()
    }
}
