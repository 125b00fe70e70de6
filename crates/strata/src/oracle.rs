//! The float64 oracle: the reference interpreter with every float32 tensor
//! held and computed in f64 ([`crate::tensor::Real`]; the reference
//! kernels are written once, generic over f32 and f64). The inputs, initial
//! weights, constants and attributes are the fixture's float32 values,
//! widened exactly; only the arithmetic is wider. Its result is, to within
//! f64 rounding, the exact result of the float32 problem, so it says which
//! engine is closer to it: on deep networks with batch-1 BatchNorm a
//! float32 rounding can flip a ReLU whose input is a few 1e-5 from zero in
//! any engine, ONNX Runtime's included, and the references themselves are
//! then off by more than rounding.
//!
//! It does not own the comparison with a fixture's reference (that is
//! [`crate::fixture::compare`]); it reports distances from itself.

use crate::error::Result;
use crate::fixture::{Fixture, Results};
use crate::interp::{self, Env};
use crate::tensor::{DType, Tensor};

/// The oracle's run of a fixture: per-step losses and the compared tensors, in f64.
#[derive(Clone, Debug)]
pub struct OracleRun {
    pub losses: Vec<f64>,
    pub tensors: Vec<Tensor>,
}

impl OracleRun {
    /// The run rounded to float32, as an engine's [`Results`] (for
    /// `check --engine oracle`, which holds the oracle to the reference).
    pub fn to_results(&self) -> Results {
        Results {
            losses: self.losses.iter().map(|&l| l as f32).collect(),
            tensors: self.tensors.iter().map(narrowed).collect(),
        }
    }
}

fn narrowed(t: &Tensor) -> Tensor {
    if t.is_wide() {
        Tensor::f32(
            t.shape.clone(),
            t.to_f64().iter().map(|&x| x as f32).collect(),
        )
    } else {
        t.clone()
    }
}

/// Run the fixture's loop (the interpreter's, [`crate::fixture::run_interp`])
/// with every float32 value widened to f64.
pub fn run(f: &Fixture) -> Result<OracleRun> {
    let p = &f.program;
    let mut env: Env = Env::new();
    for (t, v) in &p.graph.constants {
        env.insert(*t, v.widened());
    }
    for (t, v) in &f.initial {
        env.insert(*t, v.widened());
    }
    for t in &p.accumulators {
        env.insert(*t, Tensor::zeros(p.graph.ty(*t)).widened());
    }
    for (t, v) in &p.state_init {
        env.insert(*t, v.widened());
    }
    let mut losses = Vec::new();
    for (b, batch) in f.batches.iter().enumerate() {
        for (t, v) in p.data.iter().zip(batch) {
            env.insert(*t, v.widened());
        }
        if let Some(flag) = p.flag {
            let ty = p.graph.ty(flag);
            env.insert(
                flag,
                Tensor::bool(ty.shape.clone(), vec![b % f.n_accum == 0; ty.numel()]),
            );
        }
        interp::run_nodes_wide(p, &mut env, 0..p.train_end)?;
        if let Some(l) = p.loss {
            losses.push(env[&l].to_f64()[0]);
        }
        if p.has_optimizer() && (b + 1) % f.n_accum == 0 {
            interp::run_nodes_wide(p, &mut env, p.train_end..p.nodes_total())?;
        }
    }
    let tensors = f
        .ref_tensors
        .iter()
        .map(|(_, t, _)| env.get(t).cloned().unwrap_or_else(Tensor::absent))
        .collect();
    Ok(OracleRun { losses, tensors })
}

/// How far a run (an engine's or the fixture's reference) is from the
/// oracle: the largest absolute difference over the per-step losses and
/// over every compared float tensor (trained weights, running statistics,
/// a kernel test's outputs), and the largest such difference relative to
/// the tensor's largest oracle magnitude.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Distance {
    pub max_abs_loss: Option<f64>,
    pub max_abs_tensor: Option<f64>,
    pub max_rel_tensor: Option<f64>,
}

/// The distances of an engine's results and of the fixture's reference from the oracle.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OracleReport {
    pub engine: Distance,
    pub reference: Distance,
}

/// Largest absolute difference; equal values (equal infinities too) differ
/// by 0, NaN counts as infinite.
fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(
            0.0,
            |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
        )
}

/// The distance of `losses` and `tensors` (in `f.ref_tensors` order) from the oracle.
pub fn distance(o: &OracleRun, losses: Option<&[f32]>, tensors: &[&Tensor]) -> Distance {
    let max_abs_loss = losses.filter(|_| !o.losses.is_empty()).map(|l| {
        if l.len() != o.losses.len() {
            return f64::INFINITY;
        }
        let l: Vec<f64> = l.iter().map(|&x| x as f64).collect();
        max_abs(&l, &o.losses)
    });
    let (mut abs, mut rel): (Option<f64>, Option<f64>) = (None, None);
    for (got, want) in tensors.iter().zip(&o.tensors) {
        if got.dtype() != DType::F32 || want.dtype() != DType::F32 {
            continue;
        }
        let (g, w) = (got.to_f64(), want.to_f64());
        let d = if g.len() == w.len() {
            max_abs(&g, &w)
        } else {
            f64::INFINITY
        };
        // Relative to the largest finite oracle value (padding may be infinite).
        let scale = w
            .iter()
            .filter(|x| x.is_finite())
            .fold(0f64, |m, x| m.max(x.abs()));
        abs = Some(abs.map_or(d, |a| a.max(d)));
        let r = if d == 0.0 || scale == 0.0 {
            d
        } else {
            d / scale
        };
        rel = Some(rel.map_or(r, |a| a.max(r)));
    }
    Distance {
        max_abs_loss,
        max_abs_tensor: abs,
        max_rel_tensor: rel,
    }
}

/// The oracle report of an engine's results against a fixture.
pub fn report(f: &Fixture, o: &OracleRun, r: &Results) -> OracleReport {
    let engine = distance(o, Some(&r.losses), &r.tensors.iter().collect::<Vec<_>>());
    let refs: Vec<&Tensor> = f.ref_tensors.iter().map(|(_, _, t)| t).collect();
    let reference = distance(o, f.ref_losses.as_deref(), &refs);
    OracleReport { engine, reference }
}
