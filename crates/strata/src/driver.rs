//! The compiler's passes as explicit steps, and the two jobs the CLI runs:
//! `compile` (program → schedule → plan → C project) and `check` (fixture →
//! schedule → engine → comparison with the reference).

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fixture::{self, Comparison, Fixture, Results};
use crate::ops::Registry;
use crate::plan::{self, MemoryPlan};
use crate::program::Program;
use crate::schedule::{self, Schedule};

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
    pub fn program_mut(&mut self) -> &mut Program {
        match self {
            Loaded::Fixture(f) => &mut f.program,
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
    if let Some(r) = &p.schedule {
        writeln!(
            s,
            "schedule {}: peak live bytes {} in the ONNX order, {} in the chosen order ({} nodes moved, {} outputs written over a dying input)",
            match r.schedule {
                Schedule::Onnx => "onnx",
                Schedule::Memory => "memory",
            },
            r.onnx_peak,
            r.chosen_peak,
            r.moved,
            r.reused
        )
        .unwrap();
    }
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
    writeln!(
        s,
        "\nnode order: position, position in the ONNX order, node (op)"
    )
    .unwrap();
    for (k, n) in g.nodes.iter().enumerate() {
        let onnx = p.schedule.as_ref().map_or(k, |r| r.onnx_position[k]);
        let over: Vec<String> = p
            .reuse
            .iter()
            .filter(|r| r.node.idx() == k)
            .filter_map(|r| {
                let (o, i) = (
                    n.outputs.get(r.output)?.as_ref()?,
                    n.inputs.get(r.input)?.as_ref()?,
                );
                Some(format!("`{}` over `{}`", g.name(*o), g.name(*i)))
            })
            .collect();
        writeln!(
            s,
            "{}{:>6} {:>6}  {} ({}){}",
            if k == p.train_end {
                "  optimizer:\n"
            } else {
                ""
            },
            k,
            onnx,
            n.name,
            n.op_type,
            if over.is_empty() {
                String::new()
            } else {
                format!(": writes {}", over.join(", "))
            }
        )
        .unwrap();
    }
    s
}

/// Compile with the memory-aware schedule (see [`compile_with`]).
pub fn compile(
    input: &Path,
    optimizer: Option<&Path>,
    l2: u64,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan)> {
    compile_with(input, optimizer, l2, Schedule::Memory, out, reg)
}

/// Compile: schedule, plan and write the C project (with a harness when the input has data).
pub fn compile_with(
    input: &Path,
    optimizer: Option<&Path>,
    l2: u64,
    sched: Schedule,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan)> {
    let mut loaded = load_program(input, optimizer, reg)?;
    schedule::apply(loaded.program_mut(), sched)?;
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
    /// The schedule run, and the planner's lower bound (peak live bytes) in
    /// the ONNX order and in the order run.
    pub schedule: Schedule,
    pub onnx_order_peak_bytes: u64,
    pub chosen_order_peak_bytes: u64,
    pub tolerance: fixture::Tolerance,
    #[serde(skip)]
    pub results: Option<Results>,
    #[serde(skip)]
    pub c_output: String,
}

/// Check with the memory-aware schedule (see [`check_with`]).
pub fn check(
    dir: &Path,
    engine: Engine,
    l2: u64,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    check_with(dir, engine, l2, Schedule::Memory, workdir, reg)
}

/// Run a fixture through an engine, in the schedule `sched`, and compare it
/// with its reference.
pub fn check_with(
    dir: &Path,
    engine: Engine,
    l2: u64,
    sched: Schedule,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    let mut f = fixture::load(dir, reg)?;
    schedule::apply(&mut f.program, sched)?;
    let plan = plan_program(&f.program, l2)?;
    let (results, c_output, c_ok) = match engine {
        Engine::Interp => (fixture::run_interp(&f)?, String::new(), None),
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
        schedule: sched,
        onnx_order_peak_bytes: f.program.schedule.as_ref().map_or(0, |r| r.onnx_peak),
        chosen_order_peak_bytes: f.program.schedule.as_ref().map_or(0, |r| r.chosen_peak),
        tolerance: f.tolerance,
        results: Some(results),
        c_output,
    })
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
