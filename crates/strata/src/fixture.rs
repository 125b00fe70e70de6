//! Fixtures in the Deeploy / Onnx4Deeploy layout, and running them.
//!
//! - a training program: `<m>_train/{network.onnx,inputs.npz,outputs.npz}` with
//!   its sibling `<m>_optimizer/network.onnx` (the directory given may be the
//!   model directory holding both, or the `_train` directory);
//! - a kernel test: `network.onnx`, `inputs.npz` (inputs by position) and
//!   `outputs.npz` (outputs by name);
//! - ONNX Runtime training artifacts: `training_model.onnx` and
//!   `optimizer_model.onnx` as `generate_artifacts` writes them, with
//!   `data.npz` (initial parameters and the learning rate by name, mini-batch
//!   inputs `mb<k>_<input>`, `meta_n_batches`, `meta_n_accum`) and
//!   `reference.npz` (`loss` per mini-batch, final parameters by name).
//!
//! A fixture runs through an engine (the reference interpreter or the
//! compiled C) and its results are compared with the fixture's reference
//! (ONNX Runtime's, for the Deeploy fixtures).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::interp::{self, Env};
use crate::ir::TensorId;
use crate::ops::Registry;
use crate::program::{Program, Role, ACC_SUFFIX};
use crate::tensor::{max_abs_diff, DType, Data, Tensor};

/// How close a result must be: `|x - ref| <= max(abs, rel * |ref|)`.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Tolerance {
    pub abs: f32,
    pub rel: f32,
}

impl Tolerance {
    /// Training fixtures: every loss and weight within 1e-4 of ONNX Runtime's.
    pub const TRAINING: Tolerance = Tolerance {
        abs: 1e-4,
        rel: 0.0,
    };
    /// Kernel tests: 1e-4 absolute or 1e-5 relative, whichever is larger.
    pub const KERNEL: Tolerance = Tolerance {
        abs: 1e-4,
        rel: 1e-5,
    };
    pub fn ok(&self, x: f32, r: f32) -> bool {
        // Equal values match, infinities included (Pad with value -inf).
        x == r || (x - r).abs() <= self.abs.max(self.rel * r.abs())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Kind {
    Training,
    Kernel,
}

pub struct Fixture {
    pub dir: PathBuf,
    pub kind: Kind,
    pub program: Program,
    pub n_batches: usize,
    pub n_accum: usize,
    /// Initial values of inputs that persist (weights) and of data fed once (kernel tests).
    pub initial: BTreeMap<TensorId, Tensor>,
    /// Per mini-batch, a value for every data input (in `program.data` order).
    pub batches: Vec<Vec<Tensor>>,
    pub ref_losses: Option<Vec<f32>>,
    /// Reference tensors by name, compared after the run.
    pub ref_tensors: Vec<(String, TensorId, Tensor)>,
    pub tolerance: Tolerance,
}

/// What an engine produced: per-step losses and the compared tensors' final values.
#[derive(Clone, Debug)]
pub struct Results {
    pub losses: Vec<f32>,
    pub tensors: Vec<Tensor>,
}

fn read_npz(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    // The error names the file itself: say it once, not as a prefix again.
    let arrays = npz::read_npz_file(path).map_err(|e| match e {
        npz::NpzError::File { error, .. } => Error::data(path, error.to_string()),
        npz::NpzError::Io { error, .. } => Error::io(path, error),
        e => Error::data(path, e.to_string()),
    })?;
    let mut out = BTreeMap::new();
    for (k, a) in arrays {
        let t = match a {
            npz::Array::F32 { shape, data } => Tensor {
                shape,
                data: Data::F32(data),
            },
            npz::Array::F64 { shape, data } => Tensor {
                shape,
                data: Data::F32(data.iter().map(|&x| x as f32).collect()),
            },
            npz::Array::I64 { shape, data } => Tensor {
                shape,
                data: Data::I64(data),
            },
            npz::Array::I32 { shape, data } => Tensor {
                shape,
                data: Data::I32(data),
            },
            npz::Array::Bool { shape, data } => Tensor {
                shape,
                data: Data::Bool(data),
            },
            npz::Array::U8 { shape, data } => Tensor {
                shape,
                data: Data::Bool(data.iter().map(|&x| x != 0).collect()),
            },
        };
        out.insert(k, t);
    }
    Ok(out)
}

/// Convert an array from a `.npz` to the graph tensor's type, or explain the mismatch.
/// A reference that holds a NaN can never be met (a NaN equals nothing,
/// not even the NaN a program computes): refuse it where it is read,
/// naming the array and the first NaN, instead of failing every check
/// with an infinite error. Infinities are kept: equal ones compare equal.
fn no_nan(path: &Path, key: &str, v: &[f32]) -> Result<()> {
    match v.iter().position(|x| x.is_nan()) {
        Some(i) => Err(Error::data(
            path,
            format!(
                "reference `{key}` holds NaN at flat index {i} ({} of its {} values): nothing can match it",
                v.iter().filter(|x| x.is_nan()).count(),
                v.len()
            ),
        )),
        None => Ok(()),
    }
}

/// A conformed reference tensor, refused when it holds a NaN ([`no_nan`]).
fn reference(path: &Path, key: &str, t: Tensor) -> Result<Tensor> {
    if let Data::F32(x) = &t.data {
        no_nan(path, key, x)?;
    }
    Ok(t)
}

fn conform(
    v: &Tensor,
    want: &crate::tensor::TensorType,
    path: &Path,
    key: &str,
    tensor: &str,
) -> Result<Tensor> {
    // Shapes must agree up to size-1 dimensions (Deeploy stores a scalar
    // loss as [1], labels as [B] or [B, 1]); the element type must match.
    let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    let mismatch = || {
        Error::data(
            path,
            format!(
                "`{key}` is {} but graph tensor `{tensor}` is {want}",
                v.ty()
            ),
        )
    };
    if v.numel() != want.numel() || squeeze(&v.shape) != squeeze(&want.shape) {
        return Err(mismatch());
    }
    let data = match (&v.data, want.dtype) {
        (Data::F32(x), DType::F32) => Data::F32(x.clone()),
        (Data::I64(x), DType::I64) => Data::I64(x.clone()),
        (Data::I32(x), DType::I64) => Data::I64(x.iter().map(|&a| a as i64).collect()),
        (Data::I32(x), DType::I32) => Data::I32(x.clone()),
        (Data::Bool(x), DType::Bool) => Data::Bool(x.clone()),
        _ => return Err(mismatch()),
    };
    Ok(Tensor {
        shape: want.shape.clone(),
        data,
    })
}

/// A positive integer `key` (one element) from a `.npz`, `default` when absent.
fn meta(
    arrays: &BTreeMap<String, Tensor>,
    key: &str,
    default: usize,
    path: &Path,
) -> Result<usize> {
    let Some(t) = arrays.get(key) else {
        return Ok(default);
    };
    let v = match (&t.data, t.numel()) {
        (Data::I64(_) | Data::I32(_), 1) => t.to_i64()[0],
        _ => {
            return Err(Error::data(
                path,
                format!("`{key}` is {}, expected one integer", t.ty()),
            ))
        }
    };
    if v <= 0 {
        return Err(Error::data(
            path,
            format!("`{key}` is {v}, expected a positive count"),
        ));
    }
    Ok(v as usize)
}

/// Why array `k` is no mini-batch input of a file without
/// `meta_n_batches`: such a file holds one mini-batch, whose inputs are
/// `first`.
fn one_mini_batch(k: &str, first: &str) -> String {
    format!("`{k}` is no mini-batch input: the file has no `meta_n_batches`: one mini-batch, whose inputs are {first} (give `meta_n_batches` to train on more)")
}

/// `meta_n_batches` and `meta_n_accum`: positive, and the accumulation
/// count dividing the mini-batch count (every optimizer step sees a full
/// accumulation; a trailing partial one would never be applied).
fn batch_counts(arrays: &BTreeMap<String, Tensor>, path: &Path) -> Result<(usize, usize)> {
    let n_batches = meta(arrays, "meta_n_batches", 1, path)?;
    let n_accum = meta(arrays, "meta_n_accum", 1, path)?;
    if n_batches % n_accum != 0 {
        return Err(Error::data(
            path,
            format!(
                "`meta_n_accum` is {n_accum}, which does not divide `meta_n_batches` ({n_batches}): expected a divisor, so that every optimizer step sees a full accumulation"
            ),
        ));
    }
    Ok((n_batches, n_accum))
}

/// Locate the training and optimizer networks of a Deeploy training fixture.
fn training_paths(dir: &Path) -> Option<(PathBuf, Option<PathBuf>)> {
    let sub = |suffix: &str| -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.is_dir()
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().ends_with(suffix))
            })
            .collect();
        found.sort();
        found.into_iter().next()
    };
    if let Some(train) = sub("_train") {
        return Some((train.clone(), sub("_optimizer")));
    }
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let stem = name.strip_suffix("_train")?;
    let opt = dir.parent()?.join(format!("{stem}_optimizer"));
    Some((dir.to_path_buf(), opt.is_dir().then_some(opt)))
}

/// Load a fixture directory (training program or kernel test).
pub fn load(dir: &Path, reg: &Registry) -> Result<Fixture> {
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: not a fixture directory",
            dir.display()
        )));
    }
    if dir.join(ORT_TRAIN).is_file() && dir.join(ORT_OPT).is_file() {
        return load_ort(dir, reg);
    }
    if let Some((train_dir, opt_dir)) = training_paths(dir) {
        return load_training(&train_dir, opt_dir.as_deref(), reg);
    }
    let net = dir.join("network.onnx");
    if !net.is_file() {
        return Err(Error::Usage(format!(
            "{}: neither a `<m>_train` training fixture nor a kernel test (no network.onnx)",
            dir.display()
        )));
    }
    // A network with accumulators and no optimizer beside it is still a training step.
    let model = crate::onnx::load(&net)?;
    let gp = model.proto.graph.as_ref().unwrap();
    if gp.input.iter().any(|i| i.name.ends_with(ACC_SUFFIX)) {
        return load_training(dir, None, reg);
    }
    load_kernel(dir, reg)
}

/// The ONNX Runtime artifact names `strata` reads.
pub const ORT_TRAIN: &str = "training_model.onnx";
pub const ORT_OPT: &str = "optimizer_model.onnx";

/// ONNX Runtime artifacts with `data.npz` and `reference.npz`.
fn load_ort(dir: &Path, reg: &Registry) -> Result<Fixture> {
    let mut program = Program::training(&dir.join(ORT_TRAIN), Some(&dir.join(ORT_OPT)), reg)?;
    let in_path = dir.join("data.npz");
    let data = read_npz(&in_path)?;
    let (n_batches, n_accum) = batch_counts(&data, &in_path)?;
    let mut initial = BTreeMap::new();
    let mut known: Vec<String> = vec!["meta_n_batches".into(), "meta_n_accum".into()];
    let inputs = program.graph.inputs.clone();
    for t in inputs {
        let name = program.graph.name(t).to_string();
        let ty = program.graph.ty(t).clone();
        match program.role(t) {
            Role::Accumulator | Role::Flag => continue,
            Role::Data if data.contains_key(&format!("mb0_{name}")) => {
                for b in 0..n_batches {
                    known.push(format!("mb{b}_{name}"));
                }
                continue;
            }
            Role::Data if data.contains_key(&name) => program.make_state(t),
            _ => {}
        }
        let v = data.get(&name).ok_or_else(|| {
            Error::data(
                &in_path,
                format!(
                    "no initial value `{name}` for input `{name}` of the training model{}",
                    if program.role(t) == Role::Data {
                        format!(" (nor mini-batch values `mb<k>_{name}`)")
                    } else {
                        String::new()
                    }
                ),
            )
        })?;
        initial.insert(t, conform(v, &ty, &in_path, &name, &name)?);
        known.push(name);
    }
    if let Some(extra) = data.keys().find(|k| !known.contains(k)) {
        return Err(Error::data(
            &in_path,
            if extra.starts_with("mb") && !data.contains_key("meta_n_batches") {
                one_mini_batch(extra, "the `mb0_<input>`")
            } else {
                format!("`{extra}` names no input of the training model (nor a mini-batch `mb<k>_<input>` within meta_n_batches)")
            },
        ));
    }
    let g = &program.graph;
    let mut batches = Vec::with_capacity(n_batches);
    for b in 0..n_batches {
        let mut row = Vec::new();
        for &t in &program.data {
            let key = format!("mb{b}_{}", g.name(t));
            let v = data
                .get(&key)
                .ok_or_else(|| Error::data(&in_path, format!("missing `{key}`")))?;
            row.push(conform(v, g.ty(t), &in_path, &key, g.name(t))?);
        }
        batches.push(row);
    }
    let out_path = dir.join("reference.npz");
    let (ref_losses, ref_tensors) = if out_path.is_file() {
        read_references(&out_path, &program, n_batches)?
    } else {
        (None, Vec::new())
    };
    Ok(Fixture {
        dir: dir.to_path_buf(),
        kind: Kind::Training,
        program,
        n_batches,
        n_accum,
        initial,
        batches,
        ref_losses,
        ref_tensors,
        tolerance: Tolerance::TRAINING,
    })
}

type References = (Option<Vec<f32>>, Vec<(String, TensorId, Tensor)>);

/// `loss` (one per mini-batch) and tensors by name. A training reference
/// must hold the loss (when the program has one) and every trained weight
/// and running statistic: a reference that leaves one out would let a
/// check pass without comparing it.
fn read_references(out_path: &Path, p: &Program, n_batches: usize) -> Result<References> {
    let g = &p.graph;
    let outputs = read_npz(out_path)?;
    match (p.loss, outputs.contains_key("loss")) {
        (Some(l), false) => {
            return Err(Error::data(
                out_path,
                format!(
                    "no `loss`: the program's loss `{}` would go uncompared",
                    g.name(l)
                ),
            ))
        }
        (None, true) => {
            return Err(Error::data(
                out_path,
                "holds `loss`, but the program has no loss output to compare it with",
            ))
        }
        _ => {}
    }
    let stats = p.running_statistics();
    let missing: Vec<String> = (p.weights.iter().map(|t| (*t, "trained weight")))
        .chain(stats.iter().map(|t| (*t, "running statistic")))
        .filter(|(t, _)| !outputs.contains_key(g.name(*t)))
        .map(|(t, what)| format!("{what} `{}`", g.name(t)))
        .collect();
    if !missing.is_empty() {
        return Err(Error::data(
            out_path,
            format!(
                "has no reference for {} ({} missing): it would go uncompared",
                missing.join(", "),
                missing.len()
            ),
        ));
    }
    let ref_losses = outputs
        .get("loss")
        .map(|l| l.as_f32_checked(out_path))
        .transpose()?;
    if let Some(l) = &ref_losses {
        no_nan(out_path, "loss", l)?;
        if l.len() != n_batches {
            return Err(Error::data(
                out_path,
                format!(
                    "`loss` holds {} values for {n_batches} mini-batches",
                    l.len()
                ),
            ));
        }
    }
    let mut ref_tensors = Vec::new();
    for (k, v) in &outputs {
        if k == "loss" {
            continue;
        }
        let t = g.find(k).ok_or_else(|| {
            Error::data(
                out_path,
                format!("reference `{k}` names no tensor of the program"),
            )
        })?;
        let v = reference(out_path, k, conform(v, g.ty(t), out_path, k, k)?)?;
        ref_tensors.push((k.clone(), t, v));
    }
    Ok((ref_losses, ref_tensors))
}

fn load_training(train_dir: &Path, opt_dir: Option<&Path>, reg: &Registry) -> Result<Fixture> {
    let opt_net = opt_dir.map(|d| d.join("network.onnx"));
    let program = Program::training(&train_dir.join("network.onnx"), opt_net.as_deref(), reg)?;
    let in_path = train_dir.join("inputs.npz");
    let inputs = read_npz(&in_path)?;
    let g = &program.graph;
    // arr_i: the graph inputs in order, without the accumulators (which start at zero).
    let fed: Vec<TensorId> = g
        .inputs
        .iter()
        .copied()
        .filter(|t| program.role(*t) != Role::Accumulator)
        .collect();
    let n_arr = inputs.keys().filter(|k| k.starts_with("arr_")).count();
    if n_arr != fed.len() {
        let names: Vec<&str> = fed.iter().map(|t| g.name(*t)).collect();
        return Err(Error::data(&in_path, format!("holds {n_arr} arrays `arr_*`; the training graph has {} inputs besides its accumulators: {}", fed.len(), names.join(", "))));
    }
    let (n_batches, n_accum) = batch_counts(&inputs, &in_path)?;
    // Mini-batches after the first are `mb<k>_arr_<i>`, 1 <= k < n_batches,
    // one per data input: a missing one is an error naming it (never the
    // first mini-batch again), and so is one no mini-batch reads.
    let mut expected = Vec::new();
    for b in 1..n_batches {
        for (i, &t) in fed.iter().enumerate() {
            if program.role(t) == Role::Data {
                expected.push(format!("mb{b}_arr_{i:04}"));
            }
        }
    }
    if let Some(k) = expected.iter().find(|k| !inputs.contains_key(*k)) {
        return Err(Error::data(
            &in_path,
            format!("missing `{k}`, a mini-batch input (`meta_n_batches` is {n_batches})"),
        ));
    }
    if let Some(k) = inputs
        .keys()
        .find(|k| k.starts_with("mb") && !expected.contains(k))
    {
        return Err(Error::data(
            &in_path,
            if inputs.contains_key("meta_n_batches") {
                format!("`{k}` is no mini-batch input: expected `mb<k>_arr_<i>` for 1 <= k < {n_batches} and a data input i")
            } else {
                one_mini_batch(k, "the `arr_*`")
            },
        ));
    }
    let mut initial = BTreeMap::new();
    let mut batch0 = BTreeMap::new();
    for (i, &t) in fed.iter().enumerate() {
        let key = format!("arr_{i:04}");
        let v = inputs.get(&key).ok_or_else(|| {
            Error::data(
                &in_path,
                format!("missing `{key}` for graph input `{}`", g.name(t)),
            )
        })?;
        let v = conform(v, g.ty(t), &in_path, &key, g.name(t))?;
        match program.role(t) {
            Role::Data => {
                batch0.insert(t, (i, v));
            }
            Role::Flag => {}
            _ => {
                initial.insert(t, v);
            }
        }
    }
    let mut batches = Vec::with_capacity(n_batches);
    for b in 0..n_batches {
        let mut row = Vec::new();
        for &t in &program.data {
            let (i, v0) = &batch0[&t];
            let key = format!("mb{b}_arr_{i:04}");
            row.push(if b == 0 {
                v0.clone()
            } else {
                conform(&inputs[&key], g.ty(t), &in_path, &key, g.name(t))?
            });
        }
        batches.push(row);
    }
    let out_path = train_dir.join("outputs.npz");
    let (ref_losses, ref_tensors) = read_references(&out_path, &program, n_batches)?;
    Ok(Fixture {
        dir: train_dir.to_path_buf(),
        kind: Kind::Training,
        program,
        n_batches,
        n_accum,
        initial,
        batches,
        ref_losses,
        ref_tensors,
        tolerance: Tolerance::TRAINING,
    })
}

fn load_kernel(dir: &Path, reg: &Registry) -> Result<Fixture> {
    let model = crate::onnx::load(&dir.join("network.onnx"))?;
    let graph = crate::onnx::import(&model, reg)?;
    let program = Program::single(graph)?;
    let g = &program.graph;
    let in_path = dir.join("inputs.npz");
    let inputs = read_npz(&in_path)?;
    // Inputs by name when every graph input is named in the file, else by
    // position (`arr_0`, `arr_1`, ...). Some generators also store the
    // initializers after the inputs: such extra arrays are accepted only when
    // they equal a constant of the graph.
    let by_name = g.inputs.iter().all(|&t| inputs.contains_key(g.name(t)));
    let mut keys: Vec<&String> = if by_name {
        g.inputs
            .iter()
            .map(|&t| inputs.get_key_value(g.name(t)).unwrap().0)
            .collect()
    } else {
        Vec::new()
    };
    let mut rest: Vec<&String> = inputs.keys().filter(|k| !keys.contains(k)).collect();
    rest.sort_by_key(|k| (k.len(), k.as_str()));
    keys.extend(rest);
    let extra_ok = keys.len() >= g.inputs.len()
        && keys[g.inputs.len()..]
            .iter()
            .all(|k| g.constants.values().any(|c| *c == inputs[*k]));
    if !extra_ok {
        return Err(Error::data(
            &in_path,
            format!(
                "holds {} arrays; the graph has {} inputs",
                keys.len(),
                g.inputs.len()
            ),
        ));
    }
    let mut row = Vec::new();
    for (k, &t) in keys.iter().zip(&g.inputs) {
        row.push(conform(&inputs[*k], g.ty(t), &in_path, k, g.name(t))?);
    }
    let out_path = dir.join("outputs.npz");
    let outputs = read_npz(&out_path)?;
    let mut ref_tensors = Vec::new();
    // References match graph outputs by name. Some Deeploy files name their
    // references after something else (`input`, `arr_0`): when a key names no
    // graph output and the counts agree, they match by position (numeric order).
    let named = outputs
        .keys()
        .all(|k| g.outputs.iter().any(|&o| g.name(o) == k));
    if !named && outputs.len() == g.outputs.len() {
        let mut keys: Vec<&String> = outputs.keys().collect();
        keys.sort_by_key(|k| (k.len(), k.as_str()));
        for (k, &t) in keys.iter().zip(&g.outputs) {
            let name = g.name(t).to_string();
            ref_tensors.push((
                name.clone(),
                t,
                reference(
                    &out_path,
                    k,
                    conform(&outputs[*k], g.ty(t), &out_path, k, &name)?,
                )?,
            ));
        }
    } else {
        for (k, v) in &outputs {
            let t = g.find(k).ok_or_else(|| {
                Error::data(
                    &out_path,
                    format!("reference `{k}` names no tensor of the graph"),
                )
            })?;
            ref_tensors.push((
                k.clone(),
                t,
                reference(&out_path, k, conform(v, g.ty(t), &out_path, k, k)?)?,
            ));
        }
    }
    Ok(Fixture {
        dir: dir.to_path_buf(),
        kind: Kind::Kernel,
        program,
        n_batches: 1,
        n_accum: 1,
        initial: BTreeMap::new(),
        batches: vec![row],
        ref_losses: None,
        ref_tensors,
        tolerance: Tolerance::KERNEL,
    })
}

impl Tensor {
    fn as_f32_checked(&self, path: &Path) -> Result<Vec<f32>> {
        match &self.data {
            Data::F32(v) => Ok(v.clone()),
            _ => Err(Error::data(
                path,
                format!("`loss` is {}, expected float32", self.ty()),
            )),
        }
    }
}

/// Run the fixture through the reference interpreter.
pub fn run_interp(f: &Fixture) -> Result<Results> {
    let p = &f.program;
    let mut env: Env = f.initial.clone();
    for t in &p.accumulators {
        env.insert(*t, Tensor::zeros(p.graph.ty(*t)));
    }
    for (t, v) in &p.state_init {
        env.insert(*t, v.clone());
    }
    let mut losses = Vec::new();
    for (b, batch) in f.batches.iter().enumerate() {
        for (t, v) in p.data.iter().zip(batch) {
            env.insert(*t, v.clone());
        }
        if let Some(flag) = p.flag {
            env.insert(
                flag,
                Tensor::bool(
                    p.graph.ty(flag).shape.clone(),
                    vec![b % f.n_accum == 0; p.graph.ty(flag).numel()],
                ),
            );
        }
        interp::train_step(p, &mut env)?;
        if let Some(l) = p.loss {
            losses.push(env[&l].as_f32()[0]);
        }
        if p.has_optimizer() && (b + 1) % f.n_accum == 0 {
            interp::optimizer_step(p, &mut env)?;
        }
    }
    let tensors = f
        .ref_tensors
        .iter()
        .map(|(_, t, _)| {
            env.get(t)
                .or_else(|| p.graph.constants.get(t))
                .cloned()
                .unwrap_or_else(Tensor::absent)
        })
        .collect();
    Ok(Results { losses, tensors })
}

/// How a run compares with the reference.
#[derive(Debug, serde::Serialize)]
pub struct Comparison {
    pub ok: bool,
    pub max_abs_loss_error: Option<f32>,
    pub max_abs_weight_error: Option<f32>,
    /// Names of compared tensors outside the tolerance, with their largest error.
    pub failures: Vec<(String, f32)>,
}

fn tensor_error(a: &Tensor, r: &Tensor, tol: &Tolerance) -> (f32, bool) {
    match (&a.data, &r.data) {
        (Data::F32(x), Data::F32(y)) if x.len() == y.len() => (
            max_abs_diff(x, y),
            x.iter().zip(y).all(|(a, b)| tol.ok(*a, *b)),
        ),
        _ => {
            let same = a.to_i64() == r.to_i64() && a.numel() == r.numel();
            (if same { 0.0 } else { f32::INFINITY }, same)
        }
    }
}

/// Compare a run with the fixture's reference. A run that produced a
/// different number of losses or tensors than the reference holds is an
/// error, not a comparison of the part that lines up.
pub fn compare(f: &Fixture, r: &Results) -> Result<Comparison> {
    let tol = &f.tolerance;
    let mut failures = Vec::new();
    let mut ok = true;
    if let Some(refl) = &f.ref_losses {
        if refl.len() != r.losses.len() {
            return Err(Error::Usage(format!(
                "{}: the run produced {} losses but the reference holds {} (one per mini-batch)",
                f.dir.display(),
                r.losses.len(),
                refl.len()
            )));
        }
    }
    if r.tensors.len() != f.ref_tensors.len() {
        return Err(Error::Usage(format!(
            "{}: the run produced {} tensors for {} references",
            f.dir.display(),
            r.tensors.len(),
            f.ref_tensors.len()
        )));
    }
    let max_abs_loss_error = f.ref_losses.as_ref().map(|refl| {
        let err = max_abs_diff(&r.losses, refl);
        if !r.losses.iter().zip(refl).all(|(a, b)| tol.ok(*a, *b)) {
            ok = false;
            failures.push(("loss".to_string(), err));
        }
        err
    });
    let mut worst: Option<f32> = None;
    for ((name, _, reference), got) in f.ref_tensors.iter().zip(&r.tensors) {
        let (err, good) = tensor_error(got, reference, tol);
        worst = Some(worst.map_or(err, |w: f32| w.max(err)));
        if !good {
            ok = false;
            failures.push((name.clone(), err));
        }
    }
    Ok(Comparison {
        ok,
        max_abs_loss_error,
        max_abs_weight_error: worst,
        failures,
    })
}
