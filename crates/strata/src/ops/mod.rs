//! Operators: for each op, a shape rule, a reference kernel, and the runtime
//! kernel calls that compute it. Ops are looked up in a [`Registry`]
//! keyed by (domain, op_type); the importer hands each node's attributes
//! over as neutral [`Attribute`]s (no protobuf types here) and gets a boxed
//! [`Op`] through it, so an unknown op or an unsupported attribute fails at
//! import with the node's name. Ops know nothing of any back end: they
//! describe their kernel calls as data ([`KernelCall`]).
//!
//! Conventions every op follows:
//! - `infer` gets every input's type and, when it is a compile-time constant,
//!   its value (shape and axes inputs); it returns one type per output
//!   position up to `n_outputs`.
//! - `eval` is the reference kernel: plain loops in a fixed accumulation
//!   order that the C kernel repeats exactly, so the interpreter and the
//!   compiled C agree to rounding. It is written once, generic over the
//!   float type (`by_real!`, [`crate::tensor::Real`]): f32, operation for
//!   operation what the C does, or f64 when its inputs are wide (the
//!   oracle). Sums that feed statistics and gradients are pairwise
//!   ([`util::Psum`], `st_psum`). It returns one tensor per output position
//!   (`Tensor::absent()` where the output is not requested).
//! - `kernel_calls` describes, as data ([`call::KernelCall`]), the runtime
//!   kernels that compute the node (or one tile of it) on its operands; the
//!   back ends spell them (the C back end: an argument struct and a fork).
//! - `aliases` names outputs that share storage with an input: views
//!   (Reshape and friends: no code at all) and in-place updates
//!   (accumulators, SGD, running statistics).

use std::collections::BTreeMap;
use std::fmt;

use crate::tensor::{Tensor, TensorType};

pub use attr::{Attr, Attribute, Attrs};
pub use call::{Arg, KernelCall, Operands, Slot};

pub mod attr;
pub mod basic;
pub mod call;
pub mod conv;
pub mod elementwise;
pub mod loss;
pub mod norm;
pub mod ort;
pub mod pool;
pub mod shape;
pub mod train;
pub mod transformer;
pub mod util;

/// An op-level failure; the caller adds the node's name and op type.
#[derive(Debug, Clone, PartialEq)]
pub struct OpError(pub String);

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Build an [`OpError`] from a format string.
#[macro_export]
macro_rules! op_err {
    ($($t:tt)*) => { $crate::ops::OpError(format!($($t)*)) };
}

/// `Err(op_err!(...))` unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($t:tt)*) => { if !$cond { return Err($crate::op_err!($($t)*)); } };
}

/// Run a reference kernel body with `R` the float type it computes in: f64
/// when any input is wide (the oracle), else f32. The body is written once
/// and compiled for both.
#[macro_export]
macro_rules! by_real {
    ($inputs:expr, $R:ident => $body:expr) => {
        if $crate::tensor::any_wide($inputs) {
            #[allow(dead_code)]
            type $R = f64;
            $body
        } else {
            #[allow(dead_code)]
            type $R = f32;
            $body
        }
    };
}

/// What a shape rule sees of one input.
#[derive(Clone, Copy, Debug)]
pub struct OpInput<'a> {
    pub ty: &'a TensorType,
    /// The value, when the input is a compile-time constant.
    pub value: Option<&'a Tensor>,
}

/// How an output shares storage with an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasKind {
    /// Same bytes, reinterpreted (Reshape, Flatten, Squeeze, Unsqueeze, Identity): no code.
    View,
    /// The kernel overwrites the input's buffer with the output (state updates).
    InPlace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    pub output: usize,
    pub input: usize,
    pub kind: AliasKind,
}

impl Alias {
    /// Output `output` is written over input `input`'s buffer.
    pub fn in_place(output: usize, input: usize) -> Alias {
        Alias {
            output,
            input,
            kind: AliasKind::InPlace,
        }
    }

    /// Output `output` is input `input`'s bytes, unchanged.
    pub fn view(output: usize, input: usize) -> Alias {
        Alias {
            output,
            input,
            kind: AliasKind::View,
        }
    }
}

/// `Any` lets passes that need an op's attributes (the tiler) read them
/// from its concrete type without every op growing a method for each pass.
pub trait Op: fmt::Debug + Send + Sync + std::any::Any {
    /// Output types from input types (and constant input values).
    fn infer(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
    ) -> Result<Vec<TensorType>, OpError>;
    /// Output types given also what the graph declares for each output
    /// (`None` where it declares nothing complete). Only ops whose outputs
    /// the inputs do not determine use it: a strided ConvGradX's dX size,
    /// which dY alone cannot say, comes from the declaration when it is one
    /// of the sizes that give dY. `eval` and `kernel_calls` then see that size in
    /// their output types.
    fn infer_declared(
        &self,
        inputs: &[Option<OpInput<'_>>],
        n_outputs: usize,
        _declared: &[Option<&TensorType>],
    ) -> Result<Vec<TensorType>, OpError> {
        self.infer(inputs, n_outputs)
    }
    /// Reference kernel. `outputs[i]` is `None` where output `i` is not requested.
    fn eval(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &[Option<&TensorType>],
    ) -> Result<Vec<Tensor>, OpError>;
    /// The runtime kernel calls that compute this node (or a tile of it:
    /// `k` holds the tile's operand types), in order.
    fn kernel_calls(&self, k: &Operands<'_>) -> Result<Vec<KernelCall>, OpError>;
    /// The output's value when it follows from the input types alone (`Shape`).
    fn static_value(&self, _inputs: &[Option<&TensorType>]) -> Option<Tensor> {
        None
    }
    /// Outputs that share an input's storage.
    fn aliases(&self) -> Vec<Alias> {
        Vec::new()
    }
    /// (output, input) pairs whose kernel may write the output over the
    /// input when the two have the same type: element-wise kernels that read
    /// element `i` of every input before they write element `i` of the
    /// output. The schedule uses this where the input dies at the node
    /// (`Program::reuse`); the op's meaning does not change.
    fn may_overwrite(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }
}

pub type ParseFn = fn(&Attrs<'_>) -> Result<Box<dyn Op>, OpError>;

/// How many inputs an op takes, by position: the first `min` are required,
/// the ones after them optional, up to `max` in all (`None`: any number,
/// the variadic ops). It is the highest position the op's shape rule,
/// reference kernel and kernel calls read, so the importer refuses a node
/// with an input the op would silently ignore; every op declares one when
/// it is registered ([`Registry::add`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    pub min: usize,
    pub max: Option<usize>,
}

impl Arity {
    /// Exactly `n` inputs, all required.
    pub const fn exactly(n: usize) -> Arity {
        Arity {
            min: n,
            max: Some(n),
        }
    }
    /// `min` required inputs, then optional ones up to `max` in all.
    pub const fn range(min: usize, max: usize) -> Arity {
        assert!(min <= max);
        Arity {
            min,
            max: Some(max),
        }
    }
    /// `min` or more inputs, all required (Sum, Concat).
    pub const fn at_least(min: usize) -> Arity {
        Arity { min, max: None }
    }

    /// Check a node's inputs by position (`true` where one is given; ONNX
    /// gives an optional input that is absent as an empty name). The inputs
    /// after the last one given are absent and do not count: the caller
    /// drops them. An error says how many the node has and how many
    /// `op_type` takes, or which required input is missing.
    pub fn check(&self, op_type: &str, given: &[bool]) -> Result<(), String> {
        let n = given.len();
        if self.max.is_some_and(|max| n > max) {
            let s = if n == 1 { "" } else { "s" };
            return Err(format!("has {n} input{s}; {op_type} takes {self}"));
        }
        match (0..self.min).find(|&i| !given.get(i).copied().unwrap_or(false)) {
            Some(i) => Err(format!(
                "missing required input {i}; {op_type} takes {self}"
            )),
            None => Ok(()),
        }
    }
}

/// "2", "2 to 3", "1 or more".
impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max {
            Some(max) if max == self.min => write!(f, "{max}"),
            Some(max) => write!(f, "{} to {max}", self.min),
            None => write!(f, "{} or more", self.min),
        }
    }
}

/// A registered op: the inputs it takes and its attribute parser.
#[derive(Clone, Copy)]
pub struct OpDef {
    pub arity: Arity,
    pub parse: ParseFn,
}

/// The op table: (domain, op_type) → the op's arity and attribute parser.
pub struct Registry {
    map: BTreeMap<(String, String), OpDef>,
}

/// The ONNX default domain has two spellings.
pub fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        ""
    } else {
        domain
    }
}

pub const MS: &str = "com.microsoft";
/// strata's own ops: what it lowers other forms into (e.g. ONNX Runtime's
/// sequence optimizers into per-parameter updates).
pub const STRATA: &str = "ai.strata";

impl Registry {
    pub fn empty() -> Registry {
        Registry {
            map: BTreeMap::new(),
        }
    }

    /// Every op strata implements.
    pub fn standard() -> Registry {
        let mut r = Registry::empty();
        basic::register(&mut r);
        elementwise::register(&mut r);
        conv::register(&mut r);
        pool::register(&mut r);
        norm::register_batchnorm(&mut r);
        norm::register_batchnorm_split(&mut r);
        loss::register(&mut r);
        shape::register(&mut r);
        train::register(&mut r);
        transformer::register(&mut r);
        ort::register(&mut r);
        r
    }

    /// Register `op_type` in each of `domains`: the inputs it takes (the
    /// highest position its shape rule, reference kernel and kernel calls
    /// read) and its attribute parser.
    pub fn add(&mut self, domains: &[&str], op_type: &str, arity: Arity, parse: ParseFn) {
        for d in domains {
            self.map
                .insert((d.to_string(), op_type.to_string()), OpDef { arity, parse });
        }
    }

    /// The op registered under (domain, op_type) exactly.
    pub fn get(&self, domain: &str, op_type: &str) -> Option<ParseFn> {
        self.def(domain, op_type).map(|d| d.parse)
    }

    /// The arity and parser registered under (domain, op_type) exactly.
    pub fn def(&self, domain: &str, op_type: &str) -> Option<OpDef> {
        self.map
            .get(&(canonical_domain(domain).to_string(), op_type.to_string()))
            .copied()
    }

    /// The op for a node: (domain, op_type) when registered, else the same
    /// op_type in the other of the two domains the peer's tooling mixes
    /// (the default domain and `com.microsoft`: its training graphs and
    /// kernel tests spell ConvGrad, Gelu, LayerNormalizationGrad, MSELoss, ...
    /// in one or the other with the same meaning). The domain is a hint,
    /// never a reason to reject an op strata knows.
    pub fn lookup(&self, domain: &str, op_type: &str) -> Option<OpDef> {
        let d = canonical_domain(domain);
        self.def(d, op_type).or_else(|| match d {
            "" => self.def(MS, op_type),
            MS => self.def("", op_type),
            _ => None,
        })
    }

    /// (domain, op_type) pairs, sorted.
    pub fn names(&self) -> impl Iterator<Item = &(String, String)> {
        self.map.keys()
    }
}

/// Box an op value as a parse result.
pub fn boxed<T: Op + 'static>(op: T) -> Result<Box<dyn Op>, OpError> {
    Ok(Box::new(op))
}

/// The input at `i`, which must be present.
pub fn req<'a>(inputs: &[Option<OpInput<'a>>], i: usize) -> Result<OpInput<'a>, OpError> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| op_err!("missing required input {i}"))
}

/// Refuse the inputs at `positions` when the attribute `attr` gives what
/// they would (the form of the opsets before those inputs): the op reads
/// the attribute and would ignore them.
pub fn replaced_by_attribute(
    inputs: &[Option<OpInput<'_>>],
    positions: std::ops::Range<usize>,
    attr: &str,
) -> Result<(), OpError> {
    match positions
        .into_iter()
        .find(|&i| inputs.get(i).copied().flatten().is_some())
    {
        Some(i) => Err(op_err!(
            "input {i} is given as well as the `{attr}` attribute, which takes its place (the form of older opsets): give one or the other"
        )),
        None => Ok(()),
    }
}

/// The tensor at `i` in a reference kernel, which must be present.
pub fn arg<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor, OpError> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| op_err!("missing required input {i}"))
}
