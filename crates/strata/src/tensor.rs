//! Tensor values and types: the element types strata handles (f32 compute,
//! i64 labels/indices, bool flags, i32 metadata) and dense row-major storage.

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
            Data::F32(_) => DType::F32,
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
    /// Integer view of an index-like tensor (i64, i32 or bool as 0/1).
    pub fn to_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::I64(v) => v.clone(),
            Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as i64).collect(),
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }
    /// Little-endian bytes in the layout emitted C uses.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
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
