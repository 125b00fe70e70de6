//! NumPy `.npy` and `.npz` files: the tensors strata's fixtures and tests
//! exchange (`inputs.npz`, `outputs.npz` in the Deeploy/Onnx4Deeploy layout).
//!
//! This crate owns the byte format only: it decodes into a plain [`Array`]
//! (shape plus a typed `Vec` in C order) and encodes one back. It knows
//! nothing about graphs or strata's own tensor type; the caller converts.
//!
//! Supported element types are the ones training graphs use: `float32`,
//! `float64`, `int64`, `int32`, `bool` and `uint8`, little-endian. Fortran-order
//! arrays are transposed into C order on reading. Malformed input of any kind is
//! an [`NpzError`] that says which member, what was expected and what was found;
//! nothing here panics on bad bytes.

mod header;

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use header::Value;

/// A decoded array: its shape and its elements in C (row-major) order.
///
/// A scalar has the empty shape and one element.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    F32 { shape: Vec<usize>, data: Vec<f32> },
    F64 { shape: Vec<usize>, data: Vec<f64> },
    I64 { shape: Vec<usize>, data: Vec<i64> },
    I32 { shape: Vec<usize>, data: Vec<i32> },
    Bool { shape: Vec<usize>, data: Vec<bool> },
    U8 { shape: Vec<usize>, data: Vec<u8> },
}

impl Array {
    /// The dimensions, outermost first; empty for a scalar.
    pub fn shape(&self) -> &[usize] {
        match self {
            Array::F32 { shape, .. }
            | Array::F64 { shape, .. }
            | Array::I64 { shape, .. }
            | Array::I32 { shape, .. }
            | Array::Bool { shape, .. }
            | Array::U8 { shape, .. } => shape,
        }
    }

    /// NumPy's name for the element type (`"float32"`, `"int64"`, ...).
    pub fn dtype_name(&self) -> &'static str {
        self.dtype().name()
    }

    fn dtype(&self) -> Dtype {
        match self {
            Array::F32 { .. } => Dtype::F32,
            Array::F64 { .. } => Dtype::F64,
            Array::I64 { .. } => Dtype::I64,
            Array::I32 { .. } => Dtype::I32,
            Array::Bool { .. } => Dtype::Bool,
            Array::U8 { .. } => Dtype::U8,
        }
    }

    fn data_len(&self) -> usize {
        match self {
            Array::F32 { data, .. } => data.len(),
            Array::F64 { data, .. } => data.len(),
            Array::I64 { data, .. } => data.len(),
            Array::I32 { data, .. } => data.len(),
            Array::Bool { data, .. } => data.len(),
            Array::U8 { data, .. } => data.len(),
        }
    }
}

/// Everything that can go wrong reading or writing; messages are complete
/// sentences on their own (the wrapped error is part of the text, not a
/// separate `source`).
#[derive(Debug, thiserror::Error)]
pub enum NpzError {
    /// A file could not be read.
    #[error("cannot read `{}`: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Reading the `.npz` file at `path` failed.
    #[error("`{}`: {error}", path.display())]
    File { path: PathBuf, error: Box<NpzError> },
    /// One member of an archive is bad.
    #[error("member `{member}`: {error}")]
    Member {
        member: String,
        error: Box<NpzError>,
    },
    /// The zip container itself is malformed.
    #[error("not a readable zip archive: {0}")]
    Zip(String),
    /// Two members map to the same key (e.g. `a` and `a.npy`).
    #[error("archive has two members named `{0}`")]
    DuplicateMember(String),
    /// The first six bytes are not `\x93NUMPY`.
    #[error("bad magic: expected \\x93NUMPY, found {found}")]
    BadMagic { found: String },
    /// The input ends before the header does.
    #[error("truncated: the {what} needs {needed} bytes, only {found} present")]
    Truncated {
        what: &'static str,
        needed: usize,
        found: usize,
    },
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error("unsupported .npy format version {major}.{minor} (expected 1.0, 2.0 or 3.0)")]
    Version { major: u8, minor: u8 },
    /// The header dict is malformed or lacks a key.
    #[error("bad header: {0}")]
    Header(String),
    /// A `descr` this crate does not decode.
    #[error("unsupported dtype `{descr}`: {reason}")]
    Dtype { descr: String, reason: String },
    /// The data section does not hold exactly `shape`'s elements.
    #[error(
        "data is {found} bytes, shape {} {dtype} needs {needed}",
        fmt_shape(shape)
    )]
    DataLength {
        found: usize,
        needed: usize,
        shape: Vec<usize>,
        dtype: &'static str,
    },
    /// An array whose data length disagrees with its shape (writing).
    #[error(
        "array has {found} elements, shape {} needs {needed}",
        fmt_shape(shape)
    )]
    Inconsistent {
        found: usize,
        needed: usize,
        shape: Vec<usize>,
    },
}

/// Python's tuple spelling: `()`, `(3,)`, `(2, 3)`.
fn fmt_shape(shape: &[usize]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F32,
    F64,
    I64,
    I32,
    Bool,
    U8,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::I64 => "int64",
            Dtype::I32 => "int32",
            Dtype::Bool => "bool",
            Dtype::U8 => "uint8",
        }
    }

    fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::Bool | Dtype::U8 => 1,
        }
    }

    /// The `descr` NumPy writes on a little-endian machine.
    fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I64 => "<i8",
            Dtype::I32 => "<i4",
            Dtype::Bool => "|b1",
            Dtype::U8 => "|u1",
        }
    }

    /// Decodes a `descr` such as `<f4`. Multi-byte types must be
    /// little-endian (`<`, or `=` on a little-endian host); for one-byte
    /// types every byte-order mark means the same thing.
    fn from_descr(descr: &str) -> Result<Dtype, NpzError> {
        let err = |reason: &str| NpzError::Dtype {
            descr: descr.to_string(),
            reason: reason.to_string(),
        };
        let mut chars = descr.chars();
        let (order, code) = match chars.next() {
            Some(c @ ('<' | '>' | '=' | '|')) => (c, chars.as_str()),
            _ => ('=', descr),
        };
        let dtype = match code {
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "i8" => Dtype::I64,
            "i4" => Dtype::I32,
            "b1" | "?" => Dtype::Bool,
            "u1" | "B" => Dtype::U8,
            _ => {
                return Err(err(
                    "expected one of <f4, <f8, <i8, <i4, |b1, |u1 (float32, float64, int64, int32, bool, uint8)",
                ))
            }
        };
        if dtype.size() > 1 {
            match order {
                '<' => {}
                '=' if cfg!(target_endian = "little") => {}
                '>' => {
                    return Err(err(
                        "big-endian data is not supported; save it little-endian (`<`)",
                    ))
                }
                '=' => {
                    return Err(err(
                        "native byte order on a big-endian host is not supported",
                    ))
                }
                _ => {
                    return Err(err(
                        "byte-order mark `|` is ambiguous for a multi-byte type",
                    ))
                }
            }
        }
        Ok(dtype)
    }
}

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Decodes one `.npy` file.
pub fn read_npy(bytes: &[u8]) -> Result<Array, NpzError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        let head = &bytes[..bytes.len().min(MAGIC.len())];
        let found = if head.is_empty() {
            "an empty input".to_string()
        } else {
            format!("{:?}", String::from_utf8_lossy(head))
        };
        return Err(NpzError::BadMagic { found });
    }
    if bytes.len() < 8 {
        return Err(NpzError::Truncated {
            what: "version",
            needed: 8,
            found: bytes.len(),
        });
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let len_size = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return Err(NpzError::Version { major, minor }),
    };
    let prefix = 8 + len_size;
    if bytes.len() < prefix {
        return Err(NpzError::Truncated {
            what: "header length",
            needed: prefix,
            found: bytes.len(),
        });
    }
    let header_len = if len_size == 2 {
        usize::from(u16::from_le_bytes([bytes[8], bytes[9]]))
    } else {
        let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        usize::try_from(n).map_err(|_| NpzError::Header("header length overflows".into()))?
    };
    let data_start = prefix
        .checked_add(header_len)
        .ok_or_else(|| NpzError::Header("header length overflows".into()))?;
    if bytes.len() < data_start {
        return Err(NpzError::Truncated {
            what: "header",
            needed: data_start,
            found: bytes.len(),
        });
    }
    let raw_header = &bytes[prefix..data_start];
    // Versions 1 and 2 are latin-1, version 3 is UTF-8.
    let text: String = if major == 3 {
        std::str::from_utf8(raw_header)
            .map_err(|e| NpzError::Header(format!("header is not UTF-8: {e}")))?
            .to_string()
    } else {
        raw_header.iter().map(|&b| char::from(b)).collect()
    };
    let (dtype, fortran, shape) = interpret_header(&text)?;
    let data = &bytes[data_start..];
    let count = element_count(&shape)?;
    let needed = count
        .checked_mul(dtype.size())
        .ok_or_else(|| NpzError::Header(format!("shape {} is too large", fmt_shape(&shape))))?;
    if data.len() != needed {
        return Err(NpzError::DataLength {
            found: data.len(),
            needed,
            shape,
            dtype: dtype.name(),
        });
    }
    let array = decode(dtype, shape, data);
    Ok(if fortran { fortran_to_c(array) } else { array })
}

/// Extracts (dtype, fortran_order, shape) from the header dict text.
fn interpret_header(text: &str) -> Result<(Dtype, bool, Vec<usize>), NpzError> {
    let dict = header::parse_dict(text).map_err(NpzError::Header)?;
    let get = |key: &str| {
        dict.get(key)
            .ok_or_else(|| NpzError::Header(format!("header lacks the key '{key}'")))
    };
    let dtype = match get("descr")? {
        Value::Str(s) => Dtype::from_descr(s)?,
        other => {
            return Err(NpzError::Dtype {
                descr: other.describe(),
                reason: "structured and sub-array dtypes are not supported".into(),
            })
        }
    };
    let fortran = match get("fortran_order")? {
        Value::Bool(b) => *b,
        other => {
            return Err(NpzError::Header(format!(
                "'fortran_order' should be True or False, found {}",
                other.describe()
            )))
        }
    };
    let shape = match get("shape")? {
        Value::Seq(dims) => dims
            .iter()
            .map(|d| match d {
                Value::Int(n) => usize::try_from(*n).map_err(|_| {
                    NpzError::Header(format!("shape dimension {n} is not a valid size"))
                }),
                other => Err(NpzError::Header(format!(
                    "shape dimension should be an integer, found {}",
                    other.describe()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(NpzError::Header(format!(
                "'shape' should be a tuple, found {}",
                other.describe()
            )))
        }
    };
    Ok((dtype, fortran, shape))
}

/// Number of elements; an overflowing product is an error, not a wrap.
fn element_count(shape: &[usize]) -> Result<usize, NpzError> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| NpzError::Header(format!("shape {} is too large", fmt_shape(shape))))
}

/// Decodes little-endian elements; `data.len()` is already checked.
fn decode(dtype: Dtype, shape: Vec<usize>, data: &[u8]) -> Array {
    fn le<const N: usize, T>(data: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        data.chunks_exact(N)
            .map(|c| {
                let mut b = [0u8; N];
                b.copy_from_slice(c);
                f(b)
            })
            .collect()
    }
    match dtype {
        Dtype::F32 => Array::F32 {
            shape,
            data: le(data, f32::from_le_bytes),
        },
        Dtype::F64 => Array::F64 {
            shape,
            data: le(data, f64::from_le_bytes),
        },
        Dtype::I64 => Array::I64 {
            shape,
            data: le(data, i64::from_le_bytes),
        },
        Dtype::I32 => Array::I32 {
            shape,
            data: le(data, i32::from_le_bytes),
        },
        // NumPy reads any non-zero byte as True; so do we.
        Dtype::Bool => Array::Bool {
            shape,
            data: data.iter().map(|&b| b != 0).collect(),
        },
        Dtype::U8 => Array::U8 {
            shape,
            data: data.to_vec(),
        },
    }
}

/// Reorders Fortran-order (column-major) elements into C order.
fn fortran_to_c(array: Array) -> Array {
    fn reorder<T: Copy>(shape: &[usize], data: Vec<T>) -> Vec<T> {
        if shape.len() < 2 || data.is_empty() {
            return data;
        }
        // Column-major strides: the first index varies fastest.
        let mut strides = vec![1usize; shape.len()];
        for k in 1..shape.len() {
            strides[k] = strides[k - 1] * shape[k - 1];
        }
        let mut index = vec![0usize; shape.len()];
        let mut out = Vec::with_capacity(data.len());
        for _ in 0..data.len() {
            let offset: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            out.push(data[offset]);
            // Advance the C-order multi-index: the last index varies fastest.
            for k in (0..shape.len()).rev() {
                index[k] += 1;
                if index[k] < shape[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        out
    }
    match array {
        Array::F32 { shape, data } => Array::F32 {
            data: reorder(&shape, data),
            shape,
        },
        Array::F64 { shape, data } => Array::F64 {
            data: reorder(&shape, data),
            shape,
        },
        Array::I64 { shape, data } => Array::I64 {
            data: reorder(&shape, data),
            shape,
        },
        Array::I32 { shape, data } => Array::I32 {
            data: reorder(&shape, data),
            shape,
        },
        Array::Bool { shape, data } => Array::Bool {
            data: reorder(&shape, data),
            shape,
        },
        Array::U8 { shape, data } => Array::U8 {
            data: reorder(&shape, data),
            shape,
        },
    }
}

/// Encodes one array as a `.npy` file (C order, little-endian), laid out as
/// NumPy does: format 1.0 unless the header needs more than 65535 bytes, and
/// the data starting at a multiple of 64 bytes.
///
/// An array whose data length disagrees with its shape is written as is, so
/// the result will not read back; [`write_npz`] checks this first.
pub fn write_npy(a: &Array) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        a.dtype().descr(),
        fmt_shape(a.shape())
    );
    // Header text plus padding plus '\n' brings the data to a 64-byte boundary.
    let padded = |prefix: usize| {
        let unpadded = prefix + dict.len() + 1;
        dict.len() + 1 + (64 - unpadded % 64) % 64
    };
    let (version, header_len) = if padded(10) <= usize::from(u16::MAX) {
        (1u8, padded(10))
    } else {
        (2u8, padded(12))
    };
    let mut out = Vec::with_capacity(12 + header_len + a.data_len() * a.dtype().size());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + header_len - dict.len() - 1, b' ');
    out.push(b'\n');
    match a {
        Array::F32 { data, .. } => data.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Array::F64 { data, .. } => data.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Array::I64 { data, .. } => data.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Array::I32 { data, .. } => data.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Array::Bool { data, .. } => out.extend(data.iter().map(|&b| u8::from(b))),
        Array::U8 { data, .. } => out.extend_from_slice(data),
    }
    out
}

/// Decodes every member of an `.npz` archive (stored or deflated), keyed by
/// member name without the `.npy` suffix, as `np.load` does.
pub fn read_npz(bytes: &[u8]) -> Result<BTreeMap<String, Array>, NpzError> {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| NpzError::Zip(e.to_string()))?;
    let mut arrays = BTreeMap::new();
    for i in 0..archive.len() {
        let mut file = archive
            .by_index(i)
            .map_err(|e| NpzError::Zip(format!("member #{i}: {e}")))?;
        if file.is_dir() {
            continue;
        }
        let member = file.name().to_string();
        let in_member = |error: NpzError| NpzError::Member {
            member: member.clone(),
            error: Box::new(error),
        };
        let mut contents = Vec::new();
        file.read_to_end(&mut contents)
            .map_err(|e| in_member(NpzError::Zip(e.to_string())))?;
        let array = read_npy(&contents).map_err(in_member)?;
        let key = member.strip_suffix(".npy").unwrap_or(&member).to_string();
        if arrays.insert(key.clone(), array).is_some() {
            return Err(NpzError::DuplicateMember(key));
        }
    }
    Ok(arrays)
}

/// [`read_npz`] on a file; every error names the file.
pub fn read_npz_file(path: &Path) -> Result<BTreeMap<String, Array>, NpzError> {
    let bytes = std::fs::read(path).map_err(|error| NpzError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    read_npz(&bytes).map_err(|error| NpzError::File {
        path: path.to_path_buf(),
        error: Box::new(error),
    })
}

/// Encodes arrays as an `.npz` archive, as `np.savez` does (members
/// `<key>.npy`, stored uncompressed). The output depends only on the input:
/// members come in key order and carry a fixed timestamp (1980-01-01).
pub fn write_npz(arrays: &BTreeMap<String, Array>) -> Result<Vec<u8>, NpzError> {
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (key, array) in arrays {
        let member = format!("{key}.npy");
        let needed = element_count(array.shape()).map_err(|error| NpzError::Member {
            member: member.clone(),
            error: Box::new(error),
        })?;
        if needed != array.data_len() {
            return Err(NpzError::Member {
                member,
                error: Box::new(NpzError::Inconsistent {
                    found: array.data_len(),
                    needed,
                    shape: array.shape().to_vec(),
                }),
            });
        }
        let bytes = write_npy(array);
        // Members over 4 GiB need zip64 extensions.
        let options = options.large_file(bytes.len() >= u32::MAX as usize);
        writer
            .start_file(member.as_str(), options)
            .map_err(|e| NpzError::Zip(format!("writing `{member}`: {e}")))?;
        writer
            .write_all(&bytes)
            .map_err(|e| NpzError::Zip(format!("writing `{member}`: {e}")))?;
    }
    let cursor = writer
        .finish()
        .map_err(|e| NpzError::Zip(format!("finishing the archive: {e}")))?;
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests;
