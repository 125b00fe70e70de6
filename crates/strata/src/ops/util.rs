//! Shape helpers shared by the op families.

use super::OpError;
use crate::op_err;

/// Normalise a possibly negative axis against `rank`: `[-rank, rank)`, so
/// a scalar (rank 0) has no axis (callers index per-axis arrays with it).
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(op_err!("axis {axis} out of range for rank {rank}"));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Numpy-style multidirectional broadcast of two shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, OpError> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(op_err!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides for reading a tensor of `shape` broadcast to `out` (0 on broadcast dims).
/// The element offsets in two operands of the row-major `index` into a box
/// of `dims`, given each operand's (broadcast) strides along those dims.
pub fn offsets2(index: usize, dims: &[usize], sa: &[usize], sb: &[usize]) -> (usize, usize) {
    let (mut oa, mut ob, mut rem) = (0, 0, index);
    for d in (0..dims.len()).rev() {
        let i = rem % dims[d];
        rem /= dims[d];
        oa += i * sa[d];
        ob += i * sb[d];
    }
    (oa, ob)
}

pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < off || shape[i - off] == 1 {
                0
            } else {
                st[i - off]
            }
        })
        .collect()
}

/// The constant value of an axes-like input or attribute.
pub fn int_list(t: &crate::tensor::Tensor) -> Vec<i64> {
    t.to_i64()
}

/// Input `i`, which must be present and float32; `op` names the op in the error.
pub fn f32_in<'a>(
    inputs: &[Option<super::OpInput<'a>>],
    i: usize,
    op: &str,
) -> Result<&'a crate::tensor::TensorType, OpError> {
    let t = super::req(inputs, i)?.ty;
    if t.dtype != crate::tensor::DType::F32 {
        return Err(op_err!("{op}: input {i} must be float32, found {t}"));
    }
    Ok(t)
}

/// The element-wise gradient ops `(dY, T) -> dX` (ReluGrad, GeluGrad,
/// SigmoidGrad, TanhGrad; `T` the forward input or output, named `t`):
/// both float32 of one shape, the result shaped like dY.
pub fn grad_pair_type(
    inputs: &[Option<super::OpInput<'_>>],
    op: &str,
    t: &str,
) -> Result<crate::tensor::TensorType, OpError> {
    let dy = f32_in(inputs, 0, op)?;
    let x = f32_in(inputs, 1, op)?;
    if dy.shape != x.shape {
        return Err(op_err!("{op}: dY {dy} and {t} {x} differ in shape"));
    }
    Ok(dy.clone())
}

/// The reference kernel of such an op: `f(dy, t)` per element.
pub fn grad_pair_eval<R: crate::tensor::Real>(
    inputs: &[Option<&crate::tensor::Tensor>],
    f: impl Fn(R, R) -> R,
) -> Result<Vec<crate::tensor::Tensor>, OpError> {
    let dy = super::arg(inputs, 0)?;
    let t = super::arg(inputs, 1)?;
    let v = dy
        .as_real::<R>()
        .iter()
        .zip(t.as_real::<R>())
        .map(|(&d, &x)| f(d, x))
        .collect();
    Ok(vec![crate::tensor::Tensor::real(dy.shape.clone(), v)])
}

/// The kernel call of such an op: `func` with fields `dy`, `t` (its name in
/// the kernel's argument record), `dx`, `n`, then `extra`.
pub fn grad_pair_calls(
    k: &super::Operands<'_>,
    func: &'static str,
    t: &'static str,
    extra: Vec<(&'static str, super::Arg)>,
) -> Result<Vec<super::KernelCall>, OpError> {
    use super::Arg;
    let n = k.input(0)?.numel();
    k.input(1)?;
    let mut args = vec![
        ("dy", Arg::input(0)),
        (t, Arg::input(1)),
        ("dx", Arg::output(0)),
        ("n", Arg::int(n)),
    ];
    args.extend(extra);
    Ok(vec![super::KernelCall::new(func, args)])
}

/// Pairwise summation of a stream (`st_psum` in the C runtime, addition
/// for addition): `s[i]` holds the sum of a block of 2^i terms, the set
/// bits of `n` say which are full; adding a term merges equal blocks
/// (older + newer) like a binary carry, and the total adds the blocks from
/// the smallest up. Its rounding error grows with log2 of the length where
/// a running sum's grows linearly; the sums that feed statistics and
/// gradients use it.
#[derive(Clone, Copy, Debug)]
pub struct Psum<R> {
    s: [R; 32],
    n: u32,
}

impl<R: crate::tensor::Real> Default for Psum<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: crate::tensor::Real> Psum<R> {
    pub fn new() -> Self {
        Psum {
            s: [R::ZERO; 32],
            n: 0,
        }
    }
    pub fn add(&mut self, v: R) {
        let mut v = v;
        let mut i = 0;
        while (self.n >> i) & 1 == 1 {
            v = self.s[i] + v;
            i += 1;
        }
        self.s[i] = v;
        self.n += 1;
    }
    pub fn total(&self) -> R {
        let mut t = R::ZERO;
        let mut first = true;
        for i in 0..32 {
            if (self.n >> i) & 1 == 1 {
                t = if first { self.s[i] } else { self.s[i] + t };
                first = false;
            }
        }
        t
    }
}

/// The pairwise sum of `v` (as [`Psum`]).
pub fn psum<R: crate::tensor::Real>(v: impl IntoIterator<Item = R>) -> R {
    let mut p = Psum::new();
    v.into_iter().for_each(|x| p.add(x));
    p.total()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axes are `[-rank, rank)`; a scalar has none (axis 0 of a scalar
    /// used to pass and index an empty per-axis array).
    #[test]
    fn axes_are_within_the_rank() {
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert_eq!(norm_axis(2, 3).unwrap(), 2);
        assert_eq!(norm_axis(-3, 3).unwrap(), 0);
        for (axis, rank) in [(3, 3), (-4, 3), (0, 0), (-1, 0)] {
            let e = norm_axis(axis, rank).unwrap_err();
            assert!(
                e.0.contains(&format!("axis {axis} out of range for rank {rank}")),
                "{}",
                e.0
            );
        }
    }
}
