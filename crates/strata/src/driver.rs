//! The compiler's passes as explicit steps, and the two jobs the CLI runs:
//! `compile` (program → schedule → plan → C project) and `check` (fixture →
//! schedule → engine → comparison with the reference).

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fixture::{self, Comparison, Fixture, Results};
use crate::lir::{self, Buffering, Level, Lir};
use crate::ops::Registry;
use crate::outdir;
use crate::plan::{self, MemoryPlan};
use crate::platform::Platform;
use crate::program::Program;
use crate::schedule::{self, Schedule};
use crate::sim;
use crate::tile;

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
    /// The reference interpreter on the Graph IR (the golden model).
    Interp,
    /// The emitted C, compiled and run on the host.
    C,
    /// The simulator on the lowered program, with the cycle model.
    Sim,
    /// The reference interpreter in f64 ([`crate::oracle`]), rounded to f32 for the comparison.
    Oracle,
}

pub use crate::codegen::CTarget;

/// Default L1 budget: training runs on Siracusa use 64–128 KB of its 256 KiB.
pub const DEFAULT_L1: u64 = 128_000;

/// Default L3 budget: the 64 MB of HyperRAM the peer assumes.
pub const DEFAULT_L3: u64 = 64 * 1024 * 1024;

/// The memory budgets and the machine a program is compiled for.
#[derive(Clone, Debug)]
pub struct Target {
    pub l2: u64,
    /// The L3 budget, for tensors that do not live in L2.
    pub l3: u64,
    /// Where tensors live by default: L2 (L3 only for what does not fit)
    /// or L3 (everything; L2 only stages tiles).
    pub default_level: Level,
    /// `None`: kernels read their operands in L2 (no L1, no DMA).
    pub l1: Option<u64>,
    pub buffering: Buffering,
    pub platform: Platform,
    /// The node order: chosen for memory, or the files' own.
    pub schedule: Schedule,
    /// The machine the C is emitted for (`--target`): the host, or PULP
    /// through the PMSIS API (checked on the host by `check --engine c`).
    pub c_target: CTarget,
}

impl Target {
    /// Tiled into the default L1, double-buffered, with `l2` bytes of L2.
    pub fn with_l2(l2: u64) -> Target {
        Target {
            l2,
            l3: DEFAULT_L3,
            default_level: Level::L2,
            l1: Some(DEFAULT_L1),
            buffering: Buffering::Double,
            platform: Platform::default(),
            schedule: Schedule::Memory,
            c_target: CTarget::Host,
        }
    }
    fn lowering(&self) -> tile::Options {
        tile::Options {
            l1: self.l1,
            buffering: self.buffering,
            platform: self.platform.clone(),
        }
    }
}

/// Make a loaded program ready to plan for `target`: split the nodes whose
/// smallest tile does not fit its L1 ([`crate::split`]), then choose the
/// node order ([`schedule::apply`]). Both leave a program already prepared
/// as it is.
pub fn prepare(p: &mut Program, target: &Target) -> Result<()> {
    if let (Some(l1), None) = (target.l1, &p.schedule) {
        crate::split::apply(p, l1)?;
    }
    schedule::apply(p, target.schedule)
}

/// Lower a planned program and check the lowered program independently.
pub fn lower_program(p: &Program, plan: &MemoryPlan, target: &Target) -> Result<Lir> {
    let lir = tile::lower(p, plan, &target.lowering())?;
    lir::check(&lir, &tile::const_sizes(p))?;
    Ok(lir)
}

/// Prepare a program for the target ([`prepare`]), plan it over the
/// target's levels and lower it; both checked independently. With the
/// default level L2 the program lives in L2 when it fits; otherwise (or
/// with default level L3) the groups chosen by [`choose_homes`] live in L3
/// and their tiles pass through an L2 staging area as large as the largest
/// staging need of any node.
///
/// `p` comes as loaded and leaves prepared: for the target's L1, or, where
/// L2 cannot stage the tiles chosen for it, for the smaller budget the tiles
/// are chosen for (below), split as a compile with that `--l1` splits it.
/// A program prepared before it comes here keeps the nodes it has.
pub fn plan_and_lower(p: &mut Program, target: &Target) -> Result<(MemoryPlan, Lir)> {
    // The program as loaded, to prepare again for a smaller L1 budget.
    let loaded = match (target.l1, &p.schedule) {
        (Some(_), None) => Some(p.clone()),
        _ => None,
    };
    prepare(p, target)?;
    if target.default_level == Level::L2 {
        match plan_program(p, target.l2) {
            Ok(plan) => {
                let lir = lower_program(p, &plan, target)?;
                return Ok((plan, lir));
            }
            Err(Error::DoesNotFit { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    // The tiles come from a lowering with everything at the default level
    // (each node's tiling timed with its transfers from there); the same
    // choices tile the final program, so its staging is what was reserved.
    // Tiles of L3 tensors are staged in L2, so the L1 budget the tiles are
    // chosen for sets the staging: where L2 cannot hold it (or the rest
    // beside it), the tiles are chosen again for half the budget, and so
    // on down to the least budget that holds every node's smallest tile;
    // the error, when none fits, is the one of the smallest tiles. At each
    // budget the program is the one prepared for it: a BatchNorm whose
    // channel fits the target's L1 but not the budget is split there, so
    // that its channel does not stop the halving.
    let mut opt = target.lowering();
    let mut short: Option<Error> = None;
    // The largest budget known not to hold some node's smallest tile.
    let mut too_small = 0u64;
    // `p` is split as for this budget.
    let mut split_for = opt.l1;
    let mut flat = plan::flat(p, target.default_level);
    loop {
        if let (Some(l), Some(b), Some(had)) = (&loaded, opt.l1, split_for) {
            if b != had {
                if crate::split::unfit(l, b) != crate::split::unfit(l, had) {
                    *p = l.clone();
                    prepare(
                        p,
                        &Target {
                            l1: Some(b),
                            ..target.clone()
                        },
                    )?;
                    flat = plan::flat(p, target.default_level);
                }
                split_for = Some(b);
            }
        }
        let mut choices = tile::Choices::default();
        let dry = match tile::lower_with(p, &flat, &opt, &mut choices) {
            Ok(dry) => dry,
            Err(Error::DoesNotFit { needed, .. })
                if short.is_some() && opt.l1.is_some_and(|l1| l1 < needed) =>
            {
                // Halved below a node's smallest tile: try that tile's size.
                too_small = opt.l1.unwrap_or(0);
                opt.l1 = Some(needed);
                continue;
            }
            Err(e) => return Err(short.unwrap_or(e)),
        };
        let budget = Target {
            l1: opt.l1,
            ..target.clone()
        };
        match choose_homes(p, &dry, &budget) {
            Ok(mut plan) => {
                if short.is_some() {
                    plan.tile_l1 = opt.l1;
                }
                let lir = tile::lower_with(p, &plan, &opt, &mut choices)?;
                lir::check(&lir, &tile::const_sizes(p))?;
                return Ok((plan, lir));
            }
            Err(mut e @ Error::DoesNotFit { .. })
                if opt.l1.is_some()
                    && matches!(&e, Error::DoesNotFit { level, .. } if level.starts_with("L2")) =>
            {
                let l1 = opt.l1.unwrap_or(0);
                let least = l1 / 2 <= too_small;
                if let Error::DoesNotFit { level, .. } = &mut e {
                    if let Some(l) = level.strip_suffix(')') {
                        *level = format!(
                            "{l}; its tiles chosen for {l1} bytes of L1{})",
                            if least {
                                ", the least that holds every node's smallest tile"
                            } else {
                                ""
                            }
                        );
                    }
                }
                if least {
                    return Err(e);
                }
                short = Some(e);
                opt.l1 = Some(l1 / 2);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Choose which storage groups live in L3 and plan both levels.
///
/// Default level L3: all of them. Default level L2: one at a time, until
/// L2 holds the rest plus the staging area, the group live at L2's peak
/// (the position with the most bytes live) whose L2 residency buys least
/// per byte moved: the longest lifetime per node that touches it (each
/// touch moves its bytes through L3 once). Weights and accumulators
/// (touched a few times over the whole step) and activations saved for
/// the backward pass (long idle gaps) go first; a group a run of nodes
/// keeps using stays in L2. The staging area is the largest, over nodes,
/// of the staging bytes of that node's operands in L3.
pub fn choose_homes(p: &Program, dry: &Lir, target: &Target) -> Result<MemoryPlan> {
    let (group_of, gs) = plan::lifetimes(p);
    let ng = gs.len();
    // Per node and phase: (group, staging bytes) of its operands.
    let need: Vec<Vec<Vec<(usize, u64)>>> = dry
        .tilings
        .iter()
        .map(|t| {
            t.stage_need
                .iter()
                .map(|phase| {
                    let mut v: Vec<(usize, u64)> = Vec::new();
                    for (tensor, b) in phase {
                        if let Some(gi) = group_of[tensor.idx()] {
                            match v.iter_mut().find(|(g, _)| *g == gi) {
                                Some((_, nb)) => *nb += b,
                                None => v.push((gi, *b)),
                            }
                        }
                    }
                    v
                })
                .collect()
        })
        .collect();
    let staging_of = |in_l3: &[bool]| -> u64 {
        need.iter()
            .flatten()
            .map(|v| {
                v.iter()
                    .filter(|(g, _)| in_l3[*g])
                    .map(|(_, b)| b)
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0)
    };
    let mut touches = vec![0u64; ng];
    for node in &need {
        let mut gs_of: Vec<usize> = node.iter().flatten().map(|(g, _)| *g).collect();
        gs_of.sort_unstable();
        gs_of.dedup();
        for g in gs_of {
            touches[g] += 1;
        }
    }
    let homes = |in_l3: &[bool]| plan::Homes {
        l3: in_l3.to_vec(),
        l3_capacity: target.l3,
        staging: staging_of(in_l3),
    };
    let plan_with = |h: &plan::Homes| {
        if h.staging > target.l2 {
            // Name the node that needs the most staging.
            let (n, _) = need
                .iter()
                .enumerate()
                .flat_map(|(n, phases)| phases.iter().map(move |v| (n, v)))
                .map(|(n, v)| {
                    (
                        n,
                        v.iter()
                            .filter(|(g, _)| h.l3[*g])
                            .map(|(_, b)| b)
                            .sum::<u64>(),
                    )
                })
                .max_by_key(|&(n, b)| (b, std::cmp::Reverse(n)))
                .unwrap_or((0, 0));
            let node = &p.graph.nodes[n];
            return Err(Error::DoesNotFit {
                level: format!(
                    "L2 (node `{}`, {}: the L2 staging of its tiles in L3)",
                    node.name, node.op_type
                ),
                needed: h.staging,
                capacity: target.l2,
                missing: h.staging - target.l2,
                proven: true,
                lower_bound: h.staging,
            });
        }
        plan::plan_homes(p, target.l2, Some(h), PLAN_TIME, PLAN_NODES)
    };
    if target.default_level == Level::L3 {
        return plan_with(&homes(&vec![true; ng]));
    }
    let end = p.nodes_total().max(1);
    let mut in_l3 = vec![false; ng];
    loop {
        let staging = staging_of(&in_l3);
        // Bytes live in L2 per position, by differences.
        let mut live = vec![0i64; end + 1];
        for (gi, grp) in gs.iter().enumerate() {
            if !in_l3[gi] {
                live[grp.lower as usize] += grp.size as i64;
                live[grp.upper as usize] -= grp.size as i64;
            }
        }
        let (mut peak, mut at, mut run) = (0u64, 0usize, 0i64);
        for (x, d) in live.iter().enumerate().take(end) {
            run += d;
            if run as u64 > peak {
                (peak, at) = (run as u64, x);
            }
        }
        let mut fits_lb = false;
        if peak + staging <= target.l2 {
            fits_lb = true;
            match plan_with(&homes(&in_l3)) {
                Ok(plan) => return Ok(plan),
                Err(Error::DoesNotFit { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let score = |gi: usize| (gs[gi].upper - gs[gi].lower) as f64 / (touches[gi] + 1) as f64;
        let pick = (0..ng)
            .filter(|&gi| {
                !in_l3[gi]
                    && (fits_lb || (gs[gi].lower as usize <= at && at < gs[gi].upper as usize))
            })
            .max_by(|&a, &b| {
                score(a)
                    .total_cmp(&score(b))
                    .then(gs[a].size.cmp(&gs[b].size))
                    .then(b.cmp(&a))
            });
        match pick {
            Some(gi) => in_l3[gi] = true,
            None => return plan_with(&homes(&in_l3)),
        }
    }
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
    if plan.staging > 0 {
        writeln!(
            s,
            "level L2: staging for tiles of L3 tensors: {} bytes at offset {}",
            plan.staging,
            plan.staging_base()
        )
        .unwrap();
    }
    if let Some(l1) = plan.tile_l1 {
        writeln!(
            s,
            "level L1: tiles chosen for {l1} bytes of it, and nodes split as for it: L2 cannot stage the tiles of a larger budget"
        )
        .unwrap();
    }
    if let Some(a) = &plan.l3 {
        writeln!(
            s,
            "level L3: arena {} bytes, lower bound {} bytes, capacity {} bytes",
            a.arena_bytes, a.lower_bound, a.capacity
        )
        .unwrap();
    }
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
        "{:>5} {:>10} {:>10} {:>6} {:>6}  tensors",
        "level", "offset", "bytes", "from", "to"
    )
    .unwrap();
    let mut order: Vec<usize> = (0..plan.groups.len()).collect();
    order.sort_by_key(|&i| {
        let g = &plan.groups[i];
        (g.level, g.offset, g.lower, i)
    });
    for i in order {
        let grp = &plan.groups[i];
        let names: Vec<String> = grp
            .tensors
            .iter()
            .map(|t| format!("{} ({:?})", g.name(*t), p.role(*t)))
            .collect();
        writeln!(
            s,
            "{:>5} {:>10} {:>10} {:>6} {:>6}  {}",
            grp.level.to_string(),
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

/// What the lowering did, per node (deterministic).
pub fn lir_summary(lir: &Lir) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for (l, b) in &lir.arenas {
        if *l != lir::Level::L2 {
            writeln!(
                s,
                "level {l}: arena {b} bytes, lower bound {} bytes",
                lir.lower_bounds.get(l).copied().unwrap_or(0)
            )
            .unwrap();
        }
    }
    writeln!(
        s,
        "lowered: {} steps ({} as written, tile loops rolled), {} DMA commands per training step, {} per optimizer step{}",
        lir.flat_len(0..lir.steps.len()),
        lir.steps.len(),
        lir.dma_commands(0..lir.train_end),
        lir.dma_commands(lir.train_end..lir.steps.len()),
        match lir.buffering {
            Some(Buffering::Double) => ", double-buffered",
            Some(Buffering::Single) => ", single-buffered",
            None => ", kernels read L2 (no L1)",
        }
    )
    .unwrap();
    writeln!(
        s,
        "{:>6} {:>10} {:>10}  node (op): tiling",
        "tiles",
        if lir.buffering.is_some() {
            "L1 bytes"
        } else {
            "L1 needed"
        },
        "L2 staging"
    )
    .unwrap();
    for t in &lir.tilings {
        writeln!(
            s,
            "{:>6} {:>10} {:>10}  {} ({}): {}",
            t.tiles, t.l1_bytes, t.staging_bytes, t.node, t.op_type, t.how
        )
        .unwrap();
    }
    s
}

/// `plan.json`: the plan with every group's tensors by id, name, role and
/// size, so the file can be read without the program at hand.
pub fn plan_json(p: &Program, plan: &MemoryPlan) -> String {
    use serde_json::json;
    let g = &p.graph;
    let groups: Vec<_> = plan
        .groups
        .iter()
        .map(|grp| {
            let tensors: Vec<_> = grp
                .tensors
                .iter()
                .map(|t| {
                    json!({
                        "id": t.0,
                        "name": g.name(*t),
                        "role": format!("{:?}", p.role(*t)),
                        "type": g.ty(*t).to_string(),
                        "bytes": g.ty(*t).bytes(),
                    })
                })
                .collect();
            json!({
                "level": grp.level,
                "offset": grp.offset,
                "size": grp.size,
                "lower": grp.lower,
                "upper": grp.upper,
                "tensors": tensors,
            })
        })
        .collect();
    let v = json!({
        "level": plan.level,
        "capacity": plan.capacity,
        "arena_bytes": plan.arena_bytes,
        "lower_bound": plan.lower_bound,
        "constant_bytes": plan.constant_bytes,
        "optimal": plan.optimal,
        "l2_staging_bytes": plan.staging,
        "l3": plan.l3,
        "schedule": plan.schedule,
        "reuse": plan.reuse,
        "groups": groups,
    });
    serde_json::to_string_pretty(&v).expect("plan serializes")
}

/// Write a planned program's C project for `c_target` (with a harness when
/// given), its `plan.txt` and `plan.json` into `dir`; returns the C sources.
pub fn write_output(
    dir: &Path,
    p: &Program,
    plan: &MemoryPlan,
    lir: &Lir,
    harness: Option<&str>,
    c_target: CTarget,
) -> Result<crate::codegen::Sources> {
    let sources = crate::codegen::write_project(dir, p, plan, lir, harness, c_target)?;
    write_output_plan(dir, p, plan, lir)?;
    Ok(sources)
}

/// Compile: plan and write the C project (with a harness when the input has
/// data) into `out`, by the rules of [`crate::outdir`]: the work happens in
/// a fresh directory beside `out`, which replaces `out` only when everything
/// succeeded and `out` is absent, empty, or a previous strata output.
pub fn compile(
    input: &Path,
    optimizer: Option<&Path>,
    l2: u64,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan)> {
    compile_for(input, optimizer, &Target::with_l2(l2), out, reg).map(|(l, p, _)| (l, p))
}

/// Compile in the schedule `sched` (see [`compile_for`]).
pub fn compile_with(
    input: &Path,
    optimizer: Option<&Path>,
    l2: u64,
    sched: Schedule,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan)> {
    let mut t = Target::with_l2(l2);
    t.schedule = sched;
    compile_for(input, optimizer, &t, out, reg).map(|(l, p, _)| (l, p))
}

/// Compile for a target: schedule, plan, lower and write the C project into
/// `out` by the rules of [`crate::outdir`], as [`compile`].
pub fn compile_for(
    input: &Path,
    optimizer: Option<&Path>,
    target: &Target,
    out: &Path,
    reg: &Registry,
) -> Result<(Loaded, MemoryPlan, Lir)> {
    outdir::produce(out, |dir| {
        let mut loaded = load_program(input, optimizer, reg)?;
        let (plan, lir) = plan_and_lower(loaded.program_mut(), target)?;
        let p = loaded.program();
        let harness = match &loaded {
            Loaded::Fixture(f) => Some(crate::codegen::harness::emit(f, &plan)),
            Loaded::Program(_) => None,
        };
        write_output(dir, p, &plan, &lir, harness.as_deref(), target.c_target)?;
        Ok((loaded, plan, lir))
    })
}

/// The outcome of `strata check`.
#[derive(Debug, serde::Serialize)]
pub struct CheckReport {
    pub fixture: String,
    pub kind: fixture::Kind,
    pub engine: Engine,
    /// The machine the C was built for (engine `c`).
    pub target: CTarget,
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
    /// The simulator's cycle counts (engine `sim`), summed over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<sim::Cycles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<sim::Bounds>,
    /// The simulator's full report (engine `sim`): per step and per op.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<sim::SimReport>,
    /// How each node was lowered.
    #[serde(skip)]
    pub tilings: Vec<lir::NodeTiling>,
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

/// Check with the memory-aware schedule (see [`check_with`]).
pub fn check(
    dir: &Path,
    engine: Engine,
    l2: u64,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    check_for(dir, engine, &Target::with_l2(l2), workdir, reg)
}

/// Run a fixture through an engine, in the schedule `sched`, and compare it
/// with its reference (see [`check_for`]).
pub fn check_with(
    dir: &Path,
    engine: Engine,
    l2: u64,
    sched: Schedule,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    let mut t = Target::with_l2(l2);
    t.schedule = sched;
    check_for(dir, engine, &t, workdir, reg)
}

/// Run a fixture through an engine for a target and compare it with its reference.
pub fn check_for(
    dir: &Path,
    engine: Engine,
    target: &Target,
    workdir: Option<&Path>,
    reg: &Registry,
) -> Result<CheckReport> {
    if let Some(w) = workdir {
        // The path check first, before anything is read.
        outdir::refuse(w, &outdir::Env::current()?)?;
    }
    let mut f = fixture::load(dir, reg)?;
    if f.ref_losses.is_none() && f.ref_tensors.is_empty() {
        return Err(Error::Usage(format!(
            "{}: nothing to compare: the fixture has no reference losses or tensors",
            dir.display()
        )));
    }
    // Splitting adds tensors after the loaded ones: the fixture's ids
    // (weights, data, references) name the same tensors in the program
    // prepared here.
    let (plan, lir) = plan_and_lower(&mut f.program, target)?;
    let mut sim_report = None;
    let oracle = crate::oracle::run(&f);
    let (results, c_output, c_ok) = match engine {
        Engine::Interp => (fixture::run_interp(&f)?, String::new(), None),
        Engine::Oracle => match &oracle {
            Ok(o) => (o.to_results(), String::new(), None),
            Err(e) => return Err(Error::Backend(format!("the f64 oracle failed: {e}"))),
        },
        Engine::Sim => {
            let (r, rep) = sim::run_fixture(&f, &plan, &lir, &target.platform)?;
            sim_report = Some(rep);
            (r, String::new(), None)
        }
        Engine::C => {
            let run = |wd: &Path| -> Result<_> {
                let r = crate::codegen::harness::run(&f, &plan, &lir, wd, target.c_target)?;
                write_output_plan(wd, &f.program, &plan, &lir)?;
                Ok(r)
            };
            let (r, out, ok) = match workdir {
                Some(w) => outdir::produce(w, run)?,
                None => {
                    let scratch = outdir::Scratch::new("strata-check-")?;
                    let r = run(scratch.path());
                    let closed = scratch.close();
                    let r = r?;
                    closed?;
                    r
                }
            };
            (r, out, Some(ok))
        }
    };
    let cmp: Comparison = fixture::compare(&f, &results)?;
    if let Some(c_ok) = c_ok {
        if c_ok != cmp.ok {
            return Err(Error::Backend(format!(
                "the C harness judged the run {} but strata's comparison says {}:\n{c_output}",
                if c_ok { "ok" } else { "off" },
                if cmp.ok { "ok" } else { "off" }
            )));
        }
    }
    let level = |m: &std::collections::BTreeMap<lir::Level, u64>| {
        m.iter().map(|(l, v)| (l.to_string(), *v)).collect()
    };
    Ok(CheckReport {
        fixture: dir.display().to_string(),
        kind: f.kind,
        engine,
        target: target.c_target,
        ok: cmp.ok,
        losses: results.losses.clone(),
        reference_losses: f.ref_losses.clone(),
        max_abs_loss_error: cmp.max_abs_loss_error,
        max_abs_weight_error: cmp.max_abs_weight_error,
        failures: cmp.failures,
        arena_bytes: level(&lir.arenas),
        lower_bound_bytes: level(&lir.lower_bounds),
        constant_bytes: plan.constant_bytes,
        schedule: target.schedule,
        onnx_order_peak_bytes: f.program.schedule.as_ref().map_or(0, |r| r.onnx_peak),
        chosen_order_peak_bytes: f.program.schedule.as_ref().map_or(0, |r| r.chosen_peak),
        tolerance: f.tolerance,
        cycles: sim_report.as_ref().map(|r| r.cycles.clone()),
        bounds: sim_report.as_ref().map(|r| r.bounds.clone()),
        sim: sim_report,
        tilings: lir.tilings.clone(),
        oracle: oracle
            .as_ref()
            .ok()
            .map(|o| crate::oracle::report(&f, o, &results)),
        oracle_error: oracle.as_ref().err().map(|e| e.to_string()),
        results: Some(results),
        c_output,
    })
}

/// `plan.txt` and `plan.json` beside a project the harness wrote.
fn write_output_plan(dir: &Path, p: &Program, plan: &MemoryPlan, lir: &Lir) -> Result<()> {
    let txt = dir.join("plan.txt");
    std::fs::write(&txt, plan_summary(p, plan) + &lir_summary(lir))
        .map_err(|e| Error::io(&txt, e))?;
    let json = dir.join("plan.json");
    std::fs::write(&json, plan_json(p, plan)).map_err(|e| Error::io(&json, e))
}
