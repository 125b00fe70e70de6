//! The compiler's passes as explicit steps, and the two jobs the CLI runs:
//! `compile` (program → plan → C project) and `check` (fixture → engine →
//! comparison with the reference).

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fixture::{self, Comparison, Fixture, Results};
use crate::ops::Registry;
use crate::plan::{self, MemoryPlan};
use crate::program::Program;

/// Default L2 budget: Siracusa's ~2 MB of L2, as the peer uses for data.
pub const DEFAULT_L2: u64 = 2 * 1024 * 1024;
/// Exact-search nodes the placement of one level may take. A node budget,
/// not a time limit, ends the search, so that a plan cut short is cut at the
/// same point on every machine and compiles stay byte-identical.
pub const PLAN_NODES: u64 = 200_000;
/// A backstop only: far beyond what `PLAN_NODES` takes on any instance seen
/// (about a second on the largest); a plan cut by it may differ by machine.
pub const PLAN_TIME: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Interp,
    C,
    /// The reference interpreter in f64 ([`crate::oracle`]), rounded to f32 for the comparison.
    Oracle,
}

/// What `compile` reads: a fixture directory (program plus data and
/// references) or a bare program from `.onnx` files.
pub enum Loaded {
    Fixture(Box<Fixture>),
    Program(Box<Program>),
}

impl Loaded {
    pub fn program(&self) -> &Program {
        match self {
            Loaded::Fixture(f) => &f.program,
            Loaded::Program(p) => p,
        }
    }
}

/// Load a program: a training directory (`<m>_train`, or the model directory
/// holding it) or kernel test, or an `.onnx` file with an optional optimizer.
pub fn load_program(input: &Path, optimizer: Option<&Path>, reg: &Registry) -> Result<Loaded> {
    if input.is_dir() {
        if optimizer.is_some() {
            return Err(Error::Usage(
                "--optimizer is only for a single .onnx file; a training directory brings its own"
                    .into(),
            ));
        }
        return Ok(Loaded::Fixture(Box::new(fixture::load(input, reg)?)));
    }
    let model = crate::onnx::load(input)?;
    let gp = model.proto.graph.as_ref().expect("decode checks the graph");
    let training = gp
        .input
        .iter()
        .any(|i| i.name.ends_with(crate::program::ACC_SUFFIX))
        || optimizer.is_some();
    let p = if training {
        Program::training(input, optimizer, reg)?
    } else {
        Program::single(crate::onnx::import(&model, reg)?)?
    };
    Ok(Loaded::Program(Box::new(p)))
}

/// Plan a program into L2 and check the plan independently.
pub fn plan_program(p: &Program, l2: u64) -> Result<MemoryPlan> {
    let plan = plan::plan(p, l2, PLAN_TIME, PLAN_NODES)?;
    plan::check(p, &plan)?;
    Ok(plan)
}

/// A human-readable plan summary (deterministic).
pub fn plan_summary(p: &Program, plan: &MemoryPlan) -> String {
    use std::fmt::Write;
    let g = &p.graph;
    let mut s = String::new();
    writeln!(
        s,
        "level {}: arena {} bytes, lower bound {} bytes, capacity {} bytes{}",
        plan.level,
        plan.arena_bytes,
        plan.lower_bound,
        plan.capacity,
        if plan.arena_bytes == plan.lower_bound {
            " (at the lower bound)"
        } else {
            ""
        }
    )
    .unwrap();
    writeln!(
        s,
        "read-only constants outside the arena: {} bytes",
        plan.constant_bytes
    )
    .unwrap();
    writeln!(
        s,
        "schedule: {} training nodes, {} optimizer nodes",
        p.train_end,
        p.nodes_total() - p.train_end
    )
    .unwrap();
    writeln!(
        s,
        "{:>10} {:>10} {:>6} {:>6}  tensors",
        "offset", "bytes", "from", "to"
    )
    .unwrap();
    let mut order: Vec<usize> = (0..plan.groups.len()).collect();
    order.sort_by_key(|&i| (plan.groups[i].offset, plan.groups[i].lower, i));
    for i in order {
        let grp = &plan.groups[i];
        let names: Vec<String> = grp
            .tensors
            .iter()
            .map(|t| format!("{} ({:?})", g.name(*t), p.role(*t)))
            .collect();
        writeln!(
            s,
            "{:>10} {:>10} {:>6} {:>6}  {}",
            grp.offset,
            grp.size,
            grp.lower,
            grp.upper,
            names.join(", ")
        )
        .unwrap();
    }
    s
}

/// Compile: plan and write the C project (with a harness when the input has data).
pub fn compile(
    input: &Path,
    optimizer: Option<&Path>,
    l2: u64,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan)> {
    let loaded = load_program(input, optimizer, reg)?;
    let p = loaded.program();
    let plan = plan_program(p, l2)?;
    let harness = match &loaded {
        Loaded::Fixture(f) => Some(crate::codegen::harness::emit(f, &plan)),
        Loaded::Program(_) => None,
    };
    // Write into a fresh directory first so a failure leaves no partial project behind.
    let tmp = out.with_extension("strata-partial");
    let _ = std::fs::remove_dir_all(&tmp);
    crate::codegen::write_project(&tmp, p, &plan, harness.as_deref())?;
    let summary = plan_summary(p, &plan);
    std::fs::write(tmp.join("plan.txt"), &summary)
        .map_err(|e| Error::io(tmp.join("plan.txt"), e))?;
    let json = serde_json::to_string_pretty(&plan).expect("plan serializes");
    std::fs::write(tmp.join("plan.json"), json).map_err(|e| Error::io(tmp.join("plan.json"), e))?;
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| Error::io(out, e))?;
    }
    std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
    Ok((loaded, plan))
}

/// The outcome of `strata check`.
#[derive(Debug, serde::Serialize)]
pub struct CheckReport {
    pub fixture: String,
    pub kind: fixture::Kind,
    pub engine: Engine,
    pub ok: bool,
    pub losses: Vec<f32>,
    pub reference_losses: Option<Vec<f32>>,
    pub max_abs_loss_error: Option<f32>,
    pub max_abs_weight_error: Option<f32>,
    pub failures: Vec<(String, f32)>,
    pub arena_bytes: std::collections::BTreeMap<String, u64>,
    pub lower_bound_bytes: std::collections::BTreeMap<String, u64>,
    /// Read-only constants outside the arena (bytes).
    pub constant_bytes: u64,
    pub tolerance: fixture::Tolerance,
    /// Distances from the f64 oracle of this engine's results and of the
    /// fixture's reference (`None` when the oracle could not run; see `oracle_error`).
    pub oracle: Option<crate::oracle::OracleReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle_error: Option<String>,
    #[serde(skip)]
    pub results: Option<Results>,
    #[serde(skip)]
    pub c_output: String,
}

/// Run a fixture through an engine and compare it with its reference.
pub fn check(
    dir: &Path,
    engine: Engine,
    l2: u64,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    let f = fixture::load(dir, reg)?;
    let plan = plan_program(&f.program, l2)?;
    let oracle = crate::oracle::run(&f);
    let (results, c_output, c_ok) = match engine {
        Engine::Interp => (fixture::run_interp(&f)?, String::new(), None),
        Engine::Oracle => match &oracle {
            Ok(o) => (o.to_results(), String::new(), None),
            Err(e) => return Err(Error::Backend(format!("the f64 oracle failed: {e}"))),
        },
        Engine::C => {
            let tmp;
            let wd = match workdir {
                Some(w) => w.to_path_buf(),
                None => {
                    tmp = std::env::temp_dir().join(format!(
                        "strata-check-{}-{}",
                        std::process::id(),
                        unique()
                    ));
                    tmp
                }
            };
            let (r, out, ok) = crate::codegen::harness::run(&f, &plan, &wd)?;
            if workdir.is_none() {
                let _ = std::fs::remove_dir_all(&wd);
            }
            (r, out, Some(ok))
        }
    };
    let cmp: Comparison = fixture::compare(&f, &results);
    if let Some(c_ok) = c_ok {
        if c_ok != cmp.ok {
            return Err(Error::Backend(format!(
                "the C harness judged the run {} but strata's comparison says {}:\n{c_output}",
                if c_ok { "ok" } else { "off" },
                if cmp.ok { "ok" } else { "off" }
            )));
        }
    }
    let level = |v: u64| std::iter::once((plan.level.to_string(), v)).collect();
    Ok(CheckReport {
        fixture: dir.display().to_string(),
        kind: f.kind,
        engine,
        ok: cmp.ok,
        losses: results.losses.clone(),
        reference_losses: f.ref_losses.clone(),
        max_abs_loss_error: cmp.max_abs_loss_error,
        max_abs_weight_error: cmp.max_abs_weight_error,
        failures: cmp.failures,
        arena_bytes: level(plan.arena_bytes),
        lower_bound_bytes: level(plan.lower_bound),
        constant_bytes: plan.constant_bytes,
        tolerance: f.tolerance,
        oracle: oracle
            .as_ref()
            .ok()
            .map(|o| crate::oracle::report(&f, o, &results)),
        oracle_error: oracle.as_ref().err().map(|e| e.to_string()),
        results: Some(results),
        c_output,
    })
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
