//! Tensor values and types: the element types strata handles (f32 compute,
//! i64 labels/indices, bool flags, i32 metadata) and dense row-major storage;
//! float32 tensors may be held in f64 for the oracle ([`Data::F64`]), and
//! [`Real`] is what the reference kernels are generic over.

use std::fmt;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    I64,
    I32,
    Bool,
}

impl DType {
    /// Bytes per element in memory plans and emitted C.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// The C element type used in emitted code.
    pub fn c_type(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::I64 => "int64_t",
            DType::I32 => "int32_t",
            DType::Bool => "uint8_t",
        }
    }

    /// Map an ONNX `TensorProto.DataType` code.
    pub fn from_onnx(code: i32) -> Option<DType> {
        match code {
            1 => Some(DType::F32),
            6 => Some(DType::I32),
            7 => Some(DType::I64),
            9 => Some(DType::Bool),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::Bool => "bool",
        })
    }
}

/// Static type of a tensor: element type and a fully known shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorType {
    pub fn new(dtype: DType, shape: Vec<usize>) -> Self {
        TensorType { dtype, shape }
    }
    pub fn f32(shape: Vec<usize>) -> Self {
        TensorType::new(DType::F32, shape)
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn bytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}

/// Dense row-major element storage.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    /// A float32 tensor held in float64: the oracle's storage (`interp`
    /// run wide). Its type stays float32, so shape rules and checks see
    /// the graph's types; only the reference kernels compute in f64.
    F64(Vec<f64>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
}

/// A tensor value.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), v.len());
        Tensor {
            shape,
            data: Data::F32(v),
        }
    }
    pub fn i64(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor {
            shape,
            data: Data::I64(v),
        }
    }
    pub fn bool(shape: Vec<usize>, v: Vec<bool>) -> Tensor {
        Tensor {
            shape,
            data: Data::Bool(v),
        }
    }
    pub fn zeros(ty: &TensorType) -> Tensor {
        let n = ty.numel();
        let data = match ty.dtype {
            DType::F32 => Data::F32(vec![0.0; n]),
            DType::I64 => Data::I64(vec![0; n]),
            DType::I32 => Data::I32(vec![0; n]),
            DType::Bool => Data::Bool(vec![false; n]),
        };
        Tensor {
            shape: ty.shape.clone(),
            data,
        }
    }
    /// A placeholder for an output position the node does not produce.
    pub fn absent() -> Tensor {
        Tensor {
            shape: vec![0],
            data: Data::F32(Vec::new()),
        }
    }
    pub fn dtype(&self) -> DType {
        match self.data {
            Data::F32(_) | Data::F64(_) => DType::F32,
            Data::I64(_) => DType::I64,
            Data::I32(_) => DType::I32,
            Data::Bool(_) => DType::Bool,
        }
    }
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype(), self.shape.clone())
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// The f32 elements; panics on another dtype, which the shape rules exclude.
    pub fn as_f32(&self) -> &[f32] {
        match &self.data {
            Data::F32(v) => v,
            _ => panic!("tensor is {} where float32 was inferred", self.dtype()),
        }
    }
    pub fn as_f32_mut(&mut self) -> &mut [f32] {
        match &mut self.data {
            Data::F32(v) => v,
            other => panic!(
                "tensor is {:?} where float32 was inferred",
                std::mem::discriminant(other)
            ),
        }
    }
    /// The float elements as `R` (f32 tensors as f32, the oracle's wide
    /// tensors as f64); panics on another storage, which the shape rules
    /// and the interpreter's widening exclude.
    pub fn as_real<R: Real>(&self) -> &[R] {
        R::slice(&self.data).unwrap_or_else(|| {
            panic!(
                "tensor is {} where {} storage was expected",
                self.storage(),
                R::NAME
            )
        })
    }
    /// A float tensor from `R` values.
    pub fn real<R: Real>(shape: Vec<usize>, v: Vec<R>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), v.len());
        Tensor {
            shape,
            data: R::wrap(v),
        }
    }
    /// Whether the tensor is float32 held in f64 (the oracle's storage).
    pub fn is_wide(&self) -> bool {
        matches!(self.data, Data::F64(_))
    }
    /// The same tensor with float32 data held in f64; other types unchanged.
    pub fn widened(&self) -> Tensor {
        match &self.data {
            Data::F32(v) => Tensor::real(self.shape.clone(), v.iter().map(|&x| x as f64).collect()),
            _ => self.clone(),
        }
    }
    /// The float elements as f64 (exactly, for either storage).
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F64(v) => v.clone(),
            _ => self.to_i64().iter().map(|&x| x as f64).collect(),
        }
    }
    fn storage(&self) -> &'static str {
        match self.data {
            Data::F32(_) => "f32",
            Data::F64(_) => "f64",
            Data::I64(_) => "i64",
            Data::I32(_) => "i32",
            Data::Bool(_) => "bool",
        }
    }
    /// Integer view of an index-like tensor (i64, i32 or bool as 0/1).
    pub fn to_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::I64(v) => v.clone(),
            Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as i64).collect(),
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::F64(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }
    /// Little-endian bytes in the layout emitted C uses.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F64(v) => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        }
    }
    /// Reinterpret little-endian bytes as a tensor of type `ty`.
    pub fn from_le_bytes(ty: &TensorType, b: &[u8]) -> Option<Tensor> {
        if b.len() != ty.bytes() {
            return None;
        }
        let data = match ty.dtype {
            DType::F32 => Data::F32(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::I64 => Data::I64(
                b.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::I32 => Data::I32(
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Bool => Data::Bool(b.iter().map(|&x| x != 0).collect()),
        };
        Some(Tensor {
            shape: ty.shape.clone(),
            data,
        })
    }
}

/// The float type a reference kernel computes in: f32 (what the C does,
/// operation for operation) or f64 (the oracle). Kernels are written once,
/// generic over it; `eval` picks f64 when its inputs are wide.
pub trait Real:
    Copy
    + PartialOrd
    + fmt::Debug
    + fmt::Display
    + Default
    + Send
    + Sync
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::ops::DivAssign
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    /// The lowest finite value (MaxPool's starting maximum).
    const MIN: Self;
    const NAME: &'static str;
    fn from_f32(x: f32) -> Self;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn from_usize(n: usize) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn tanh(self) -> Self;
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
    fn slice(d: &Data) -> Option<&[Self]>;
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]>;
    fn wrap(v: Vec<Self>) -> Data;
}

macro_rules! real_impl {
    ($t:ty, $v:ident, $name:literal) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const MIN: Self = <$t>::MIN;
            const NAME: &'static str = $name;
            fn from_f32(x: f32) -> Self {
                x as $t
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_usize(n: usize) -> Self {
                n as $t
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
            fn min(self, o: Self) -> Self {
                <$t>::min(self, o)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> Data {
                Data::$v(v)
            }
        }
    };
}
real_impl!(f32, F32, "f32");
real_impl!(f64, F64, "f64");

/// Whether any present input is wide (the oracle runs the kernel in f64).
pub fn any_wide(inputs: &[Option<&Tensor>]) -> bool {
    inputs.iter().flatten().any(|t| t.is_wide())
}

/// Largest absolute elementwise difference between two f32 tensors of equal
/// size; equal values (equal infinities too) differ by 0, NaN counts as infinite.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(
            0.0,
            |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
        )
}
