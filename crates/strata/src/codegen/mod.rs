//! The C emitter: writes a self-contained C project for a planned program.
//! Tensors live in one arena per level at their planned offsets, read-only
//! constants are C arrays, and every node is a kernel call into the
//! project's own runtime (copied into the project).
//!
//! The emitted model reaches the machine only through the runtime's target
//! API (`strata_rt.h`: arenas allocated by `st_init`, `st_fork`, `st_dma`,
//! `st_ram_read`/`st_ram_write`, `st_dma_wait`, the cycle counter), which
//! each [`CTarget`] implements in one file: `model.c` and `harness.c` are
//! the same for every target.
//!
//! Files: the runtime (`strata_rt.*`, `st_*.{h,c}`, `strata_<target>.c`),
//! `strata_kernels.h`, `model.h`/`model.c` (arena sizes, constants,
//! `st_model_open`, `st_model_init`, `st_train_step`, `st_optimizer_step`),
//! for the PULP target `pulp_host/` (strata's checked host PMSIS) and
//! `Makefile.sdk`, and when data is given, `harness.c` with the fixture's
//! mini-batches and references, which runs the training loop, prints
//! per-step losses beside the reference, and exits non-zero when a loss or
//! weight is off by more than the tolerance.

pub mod cwriter;
pub mod cx;
pub mod harness;
pub mod roll;

use std::fmt::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::ir::TensorId;
use crate::lir::{Base, Buffering, Level, Lir, Loc, Step};
use crate::plan::MemoryPlan;
use crate::program::Program;
use crate::tensor::{Data, Tensor};
use cwriter::CWriter;

include!(concat!(env!("OUT_DIR"), "/runtime_files.rs"));

/// The compiler flags the emitted project must build with.
pub const CFLAGS: &[&str] = &["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"];

/// The machine the C is emitted for. The model and harness are the same for
/// every target; the target API's implementation (one file), the Makefile
/// and how `check` builds the project differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CTarget {
    /// C99 for the build machine (`strata_host.c`).
    #[default]
    Host,
    /// The PULP SDK's PMSIS (`strata_pulp.c`); on the host it builds against
    /// strata's checked PMSIS (`pulp_host/`) with `ST_CHECKED`.
    Pulp,
}

impl CTarget {
    pub fn name(self) -> &'static str {
        match self {
            CTarget::Host => "host",
            CTarget::Pulp => "pulp",
        }
    }
    /// The target API's implementation for this target.
    pub fn runtime_file(self) -> &'static str {
        match self {
            CTarget::Host => "strata_host.c",
            CTarget::Pulp => "strata_pulp.c",
        }
    }
}

/// The flags and extra sources a host build of a `target` project needs
/// beyond [`CFLAGS`] and the project's own sources.
pub fn host_build(target: CTarget) -> (Vec<String>, Vec<String>) {
    match target {
        CTarget::Host => (vec![], vec![]),
        CTarget::Pulp => (
            vec!["-DST_CHECKED".into(), "-Ipulp_host".into()],
            vec!["pulp_host/pmsis_host.c".into()],
        ),
    }
}

/// The memory level a program tensor lives in between ops (its home): the
/// harness and the state initialisation reach tensors through this one
/// function. A read-only constant has none (L2 is returned: it is never
/// addressed through an arena).
pub fn level_of(plan: &MemoryPlan, t: TensorId) -> Level {
    plan.home(t).map_or(Level::L2, |(l, _)| l)
}

/// The runtime's name of a level (`ST_L1`, `ST_L2`, `ST_L3`).
pub fn level_c(l: Level) -> &'static str {
    match l {
        Level::L1 => "ST_L1",
        Level::L2 => "ST_L2",
        Level::L3 => "ST_L3",
    }
}

/// Where a program tensor lives: its level and byte offset in that level's
/// arena (`None`: a read-only constant outside the arenas).
pub fn home(plan: &MemoryPlan, t: TensorId) -> Option<(Level, u64)> {
    plan.home(t)
}

/// A C identifier for a tensor name.
pub fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

pub(crate) fn const_name(t: TensorId) -> String {
    format!("st_const_{}", t.0)
}

/// C initializer list for a tensor's elements.
pub fn c_values(t: &Tensor) -> String {
    let mut s = String::with_capacity(t.numel() * 12);
    let mut push = |i: usize, v: String| {
        if i > 0 {
            s.push_str(if i.is_multiple_of(8) { ",\n    " } else { ", " });
        }
        s.push_str(&v);
    };
    match &t.data {
        Data::F32(v) => v
            .iter()
            .enumerate()
            .for_each(|(i, x)| push(i, cx::c_float(*x))),
        Data::F64(v) => v
            .iter()
            .enumerate()
            .for_each(|(i, x)| push(i, cx::c_float(*x as f32))),
        Data::I64(v) => v
            .iter()
            .enumerate()
            .for_each(|(i, x)| push(i, format!("{x}LL"))),
        Data::I32(v) => v
            .iter()
            .enumerate()
            .for_each(|(i, x)| push(i, x.to_string())),
        Data::Bool(v) => v
            .iter()
            .enumerate()
            .for_each(|(i, x)| push(i, (*x as u8).to_string())),
    }
    if t.numel() == 0 {
        s.push('0');
    }
    s
}

/// The model: arena sizes, constants, the step functions.
pub fn emit_model(p: &Program, plan: &MemoryPlan, lir: &Lir) -> Result<(String, String)> {
    let g = &p.graph;
    let mut h = String::new();
    writeln!(h, "/* Generated by strata. Do not edit. */\n#ifndef STRATA_MODEL_H\n#define STRATA_MODEL_H\n#include \"strata_kernels.h\"\n").unwrap();
    for (l, bytes) in &lir.arenas {
        let what = match l {
            Level::L1 => format!(
                "{} buffering",
                match lir.buffering {
                    Some(Buffering::Double) => "double",
                    _ => "single",
                }
            ),
            _ => format!(
                "lower bound {}",
                lir.lower_bounds.get(l).copied().unwrap_or(0)
            ),
        };
        writeln!(
            h,
            "/* Memory level {l}: arena of {bytes} bytes ({what}). */\n#define ST_{l}_BYTES {}",
            bytes.max(&1)
        )
        .unwrap();
    }
    writeln!(h, "\n/* Open the machine and allocate the arenas above (st_init); 0, or -1\n * after printing what failed. st_close() frees them. */\nint st_model_open(void);").unwrap();
    writeln!(h, "/* Put persistent state that has a built-in initial value in place (inside\n * st_run, as the steps). */\nvoid st_model_init(void);").unwrap();
    writeln!(h, "/* One training step over the mini-batch in the data inputs. After a step,\n * st_fault_code != 0 means a kernel met run-time data it cannot process (an\n * index or label out of range; see strata_rt.h): that step's results are\n * unspecified. */\nvoid st_train_step(void);").unwrap();
    writeln!(h, "/* The optimizer: updates the weights in place from the accumulators. */\nvoid st_optimizer_step(void);\n").unwrap();
    writeln!(
        h,
        "/* Program tensors: level (for st_store / st_load) and byte offset in its arena. */"
    )
    .unwrap();
    let mut io: Vec<TensorId> = p
        .data
        .iter()
        .chain(p.flag.iter())
        .chain(p.persistent().iter())
        .chain(p.outputs.iter())
        .copied()
        .collect();
    io.dedup();
    for t in io {
        if let Some((level, off)) = home(plan, t) {
            writeln!(
                h,
                "#define ST_OFF_{0} {off} /* {1} {2} */\n#define ST_LEVEL_{0} {3}",
                ident(g.name(t)),
                g.name(t).replace("*/", "* /"),
                g.ty(t),
                level_c(level)
            )
            .unwrap();
        }
    }
    writeln!(h, "\n/* Read-only constants. */").unwrap();
    for (t, v) in &g.constants {
        if plan.offset(*t).is_none() || p.state_init.contains_key(t) {
            writeln!(
                h,
                "extern const {} {}[{}];",
                v.dtype().c_type(),
                const_name(*t),
                v.numel().max(1)
            )
            .unwrap();
        }
    }
    writeln!(h, "\n#endif").unwrap();

    let mut c = String::new();
    writeln!(
        c,
        "/* Generated by strata. Do not edit. */\n#include \"model.h\"\n"
    )
    .unwrap();
    let mut registered = Vec::new();
    for (t, v) in &g.constants {
        if plan.offset(*t).is_none() || p.state_init.contains_key(t) {
            writeln!(c, "/* {} {} */", g.name(*t).replace("*/", "* /"), v.ty()).unwrap();
            writeln!(
                c,
                "const {} {}[{}] = {{\n    {}\n}};",
                v.dtype().c_type(),
                const_name(*t),
                v.numel().max(1),
                c_values(v)
            )
            .unwrap();
            registered.push(const_name(*t));
        }
    }
    let size = |l: Level| {
        if lir.arenas.contains_key(&l) {
            format!("ST_{l}_BYTES")
        } else {
            "0".to_string()
        }
    };
    writeln!(
        c,
        "\nint st_model_open(void) {{\n    if (st_init({}, {}, {}) != 0) return -1;",
        size(Level::L1),
        size(Level::L2),
        size(Level::L3)
    )
    .unwrap();
    for name in &registered {
        writeln!(c, "    ST_CONST({name}, sizeof {name}, \"{name}\");").unwrap();
    }
    writeln!(c, "    return 0;\n}}").unwrap();
    let mut w = CWriter::new();
    w.blank().open("void st_model_init(void)");
    for t in p.state_init.keys() {
        let (level, off) = home(plan, *t).expect("state is in an arena");
        w.line(format!(
            "st_store({}, {off}, {}, {});",
            level_c(level),
            const_name(*t),
            g.ty(*t).bytes()
        ));
    }
    w.close();
    for (fname, step, range) in [
        ("st_train_step", "training", 0..p.train_end),
        (
            "st_optimizer_step",
            "optimizer",
            p.train_end..p.nodes_total(),
        ),
    ] {
        w.blank().open(format!("void {fname}(void)"));
        emit_steps(&mut w, p, lir, range)?;
        w.line(format!("ST_STEP_END(\"{step}\");"));
        w.close();
    }
    c.push_str(&w.finish());
    Ok((h, c))
}

/// A typed C pointer expression for a location in an addressable level
/// (L1, L2, a constant); see [`l3_offset`] for L3.
pub fn loc_expr(loc: &Loc, ty: &str) -> String {
    match loc.base {
        Base::Arena(Level::L3) => unreachable!("L3 is not addressable: callers use l3_offset"),
        Base::Arena(l) => format!(
            "(({ty} *)(st_{} + {}))",
            l.to_string().to_lowercase(),
            loc.offset
        ),
        Base::Const(t) if loc.offset == 0 => format!("(({ty} *){})", const_name(t)),
        Base::Const(t) => format!(
            "(({ty} *)((const uint8_t *){} + {}))",
            const_name(t),
            loc.offset
        ),
    }
}

/// An L3 location: a byte offset into the L3 arena (HyperRAM has no addresses).
pub fn l3_offset(loc: &Loc) -> String {
    loc.offset.to_string()
}

/// The C of a range of nodes' LIR steps, with a comment where each node begins.
fn emit_steps(
    w: &mut CWriter,
    p: &Program,
    lir: &Lir,
    nodes: std::ops::Range<usize>,
) -> Result<()> {
    let g = &p.graph;
    for n in nodes {
        let node = &g.nodes[n];
        let t = &lir.tilings[n];
        let what = match t.tiles {
            0 => "view, no code".to_string(),
            1 => t.how.clone(),
            k => format!("{k} tiles: {}", t.how),
        };
        w.comment(format!(
            "node {n}: {} ({}): {what}",
            node.name, node.op_type
        ));
        let mut out = Vec::new();
        for step in &lir.steps[lir.node_steps[n].clone()] {
            match step {
                Step::Loop(l) => out.extend(loop_lines(p, l, roll::Var::T)?),
                s => out.extend(statements(p, s)?),
            }
        }
        w.lines(out);
    }
    Ok(())
}

/// The statements of one step, unindented (`emit_step` indents each one
/// level; the writer owns the indentation, and loops indent their bodies
/// one more).
fn statements(p: &Program, step: &Step) -> Result<Vec<String>> {
    let mut lines = String::new();
    emit_step(&mut lines, p, step)?;
    Ok(lines
        .lines()
        .map(|l| l.strip_prefix(cwriter::INDENT).unwrap_or(l).to_string())
        .collect())
}

/// A tile loop as one `for` over `var` where its iterations' statements
/// follow the affine rule, else its iterations written out; a loop nested
/// in it is one `for` over `u` inside.
fn loop_lines(p: &Program, l: &crate::lir::Loop, var: roll::Var) -> Result<Vec<String>> {
    let mut iters = Vec::with_capacity(l.count as usize);
    for t in 0..l.count {
        let mut it = Vec::new();
        for s in l.iteration(t) {
            match &s {
                Step::Loop(inner) if var == roll::Var::T => {
                    it.extend(loop_lines(p, inner, roll::Var::U)?)
                }
                s => it.extend(statements(p, s)?),
            }
        }
        iters.push(it);
    }
    Ok(match roll::affine_loop(&iters, var) {
        Some(lines) => lines,
        None => iters.into_iter().flatten().collect(),
    })
}

/// The C of one LIR step. A transfer is dispatched on its (source,
/// destination) levels: L3 to L2 `st_ram_read`, L2 to L3 `st_ram_write`,
/// L2 and L1 `st_dma`. Before a kernel call every operand's byte range is
/// checked in a checked build (`ST_ACCESS`, a no-op otherwise).
pub fn emit_step(c: &mut String, p: &Program, step: &Step) -> Result<()> {
    let g = &p.graph;
    match step {
        Step::Dma(d) => {
            let sh = &d.shape;
            let shape = format!(
                "{}, {}, {}, {}, {}, {}, {}",
                sh.bytes,
                sh.counts[0],
                sh.src_strides[0],
                sh.dst_strides[0],
                sh.counts[1],
                sh.src_strides[1],
                sh.dst_strides[1]
            );
            let call = match (d.src.level(), d.dst.level()) {
                (Level::L3, Level::L2) => format!(
                    "st_ram_read({}, {}, {}, {shape});",
                    d.id,
                    loc_expr(&d.dst, "uint8_t"),
                    l3_offset(&d.src)
                ),
                (Level::L2, Level::L3) => format!(
                    "st_ram_write({}, {}, {}, {shape});",
                    d.id,
                    l3_offset(&d.dst),
                    loc_expr(&d.src, "const uint8_t")
                ),
                (s, t) if s == Level::L3 || t == Level::L3 => {
                    return Err(Error::Backend(format!(
                        "DMA {} moves data between {s} and {t}: L3 is reached from L2 only (stage through L2)",
                        d.id
                    )))
                }
                _ => format!(
                    "st_dma({}, {}, {}, {shape});",
                    d.id,
                    loc_expr(&d.dst, "uint8_t"),
                    loc_expr(&d.src, "const uint8_t")
                ),
            };
            writeln!(c, "    {call}").unwrap();
        }
        Step::Wait(id) => writeln!(c, "    st_dma_wait({id});").unwrap(),
        Step::Loop(l) => {
            for t in 0..l.count {
                for s in l.iteration(t) {
                    emit_step(c, p, &s)?;
                }
            }
        }
        Step::Kernel(k) => {
            let n = g.node(k.node);
            let mut checks = Vec::new();
            let mut position = 0;
            let mut ptr = |o: &Option<crate::lir::Operand>| -> Result<Option<String>> {
                position += 1;
                let Some(o) = o else { return Ok(None) };
                if o.shape_only {
                    // Read for its type only: no address.
                    return Ok(Some(format!("(({} *)0)", o.ty.dtype.c_type())));
                }
                if o.loc.level() == Level::L3 {
                    return Err(Error::Node {
                        node: n.name.clone(),
                        op_type: n.op_type.clone(),
                        msg: "a kernel operand lives in L3, which kernels cannot address (stage it through L2)".into(),
                    });
                }
                let expr = loc_expr(&o.loc, o.ty.dtype.c_type());
                if o.ty.bytes() > 0 {
                    checks.push(format!(
                        "ST_ACCESS({expr}, {}, {}, {});",
                        o.ty.bytes(),
                        k.node.0,
                        position - 1
                    ));
                }
                Ok(Some(expr))
            };
            let inputs = k.inputs.iter().map(&mut ptr).collect::<Result<_>>()?;
            let outputs = k.outputs.iter().map(&mut ptr).collect::<Result<_>>()?;
            let ptrs = cx::Pointers { inputs, outputs };
            let err = |e: crate::ops::OpError| Error::Node {
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                msg: e.0,
            };
            for l in &checks {
                writeln!(c, "    {l}").unwrap();
            }
            for call in k.calls(&*n.op).map_err(err)? {
                writeln!(c, "    {}", cx::kernel_call(&call, &ptrs).map_err(err)?).unwrap();
            }
        }
    }
    Ok(())
}

/// The umbrella header over every kernel family of the runtime.
pub fn kernels_header() -> String {
    let mut s = String::from("/* Generated by strata. */\n#ifndef STRATA_KERNELS_H\n#define STRATA_KERNELS_H\n#include \"strata_rt.h\"\n");
    for (name, _) in RUNTIME_FILES {
        if name.starts_with("st_") && name.ends_with(".h") {
            writeln!(s, "#include \"{name}\"").unwrap();
        }
    }
    s.push_str("#endif\n");
    s
}

/// The project's README: what the files are and how to build and run them.
fn project_readme(
    p: &Program,
    plan: &MemoryPlan,
    lir: &Lir,
    harness: bool,
    target: CTarget,
) -> String {
    let mut s = String::from("# C project generated by strata\n\n");
    let arenas: Vec<String> = lir
        .arenas
        .iter()
        .map(|(l, b)| format!("{l} {b} bytes"))
        .collect();
    writeln!(
        s,
        "One training program ({} training nodes, {} optimizer nodes) planned into\none static arena per memory level ({}); read-only constants take {}\nbytes outside them. `plan.txt` lists every tensor's offset and lifetime;\n`plan.json` is the same plan for programs.\n",
        p.train_end,
        p.nodes_total() - p.train_end,
        arenas.join(", "),
        plan.constant_bytes
    )
    .unwrap();
    s.push_str("- `model.h`, `model.c`: the arena sizes, `st_model_open()`, `st_model_init()`,\n  `st_train_step()`, `st_optimizer_step()` and the tensors' levels and offsets.\n- `strata_rt.h`: the target API the model runs on; `strata_*.h`: the\n  runtime and the C kernels.\n");
    match target {
        CTarget::Host => s.push_str("- `strata_host.c`: the target API on this machine (the cores run one after\n  another, DMA is memcpy).\n"),
        CTarget::Pulp => s.push_str("- `strata_pulp.c`: the target API on PULP through the PULP SDK (PMSIS):\n  cluster task and team fork, L1/L2 arenas, cluster DMA, HyperRAM, cycle counters.\n- `pulp_host/`: strata's host implementation of that PMSIS subset, which\n  checks every transfer and access (`make run` builds with it and `-DST_CHECKED`).\n- `Makefile.sdk`: the build for the PULP SDK (`make -f Makefile.sdk all run`\n  in an SDK environment).\n"),
    }
    if harness {
        s.push_str("- `harness.c`: the fixture's training loop (mini-batches, initial weights,\n  reference losses and tensors) as a `main`.\n\n");
        s.push_str("Build and run with `make run` (C99 and a C compiler; `make` alone builds\n`./train`). It prints each step's loss beside the reference, the cycles of the\ntraining and optimizer steps (`BENCH train_cycles=.. opt_cycles=..`), and exits\nnon-zero when a loss or a trained tensor is off by more than the tolerance.\n");
    } else {
        s.push_str("\nThere is no harness (the input had no data): `make` builds `libmodel.a`\nfor a program of your own, which calls `st_model_open()`, then inside\n`st_run()` `st_model_init()` once, writes the data inputs with `st_store`\nat their levels and offsets (`ST_LEVEL_*`, `ST_OFF_*`), and calls\n`st_train_step()` per mini-batch and `st_optimizer_step()` per optimizer step.\n");
    }
    s.push_str("\nThe directory's `.strata-output` lists the files strata wrote: a later\n`strata compile` or `strata run` to the same directory replaces it only\nwhile it holds those files alone, unchanged (`make clean` removes what\n`make` built).\n");
    s
}

/// What a written project builds from: its C sources, plus the flags and
/// sources a host build adds (see [`host_build`]).
pub struct Sources {
    pub sources: Vec<String>,
    pub target: CTarget,
}

/// Write the runtime, the model and (optionally) a harness into `dir`.
pub fn write_project(
    dir: &Path,
    p: &Program,
    plan: &MemoryPlan,
    lir: &Lir,
    harness: Option<&str>,
    target: CTarget,
) -> Result<Sources> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let (h, c) = emit_model(p, plan, lir)?;
    let mut files: Vec<(String, String)> = RUNTIME_FILES
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    let (name, text) = TARGET_FILES
        .iter()
        .find(|(n, _)| *n == target.runtime_file())
        .expect("every target has its runtime file");
    files.push((name.to_string(), text.to_string()));
    files.push(("strata_kernels.h".into(), kernels_header()));
    files.push(("model.h".into(), h));
    files.push(("model.c".into(), c));
    if let Some(hc) = harness {
        files.push(("harness.c".into(), hc.to_string()));
    }
    let sources: Vec<String> = files
        .iter()
        .filter(|(n, _)| n.ends_with(".c"))
        .map(|(n, _)| n.clone())
        .collect();
    if target == CTarget::Pulp {
        for (n, s) in PULP_HOST_FILES {
            files.push((format!("pulp_host/{n}"), s.to_string()));
        }
        let mut sdk = format!(
            "# Generated by strata: the build for the PULP SDK (source its environment, then\n# `make -f Makefile.sdk all run`).\nAPP = train\nAPP_SRCS = {}\nAPP_CFLAGS += -std=c99 -O2 -Wall -Wextra -DST_NUM_CORES=8 -DST_NO_FILES\n",
            sources.join(" ")
        );
        sdk.push_str("APP_LDFLAGS += -lm\n\ninclude $(RULES_DIR)/pmsis_rules.mk\n");
        files.push(("Makefile.sdk".into(), sdk));
    }
    let (flags, extra) = host_build(target);
    let all: Vec<String> = sources.iter().chain(&extra).cloned().collect();
    let mut mk = format!(
        "# Generated by strata (target {}).\nCC ?= cc\nCFLAGS ?= {}\nTARGET_FLAGS = {}\nSRCS = {}\n\n",
        target.name(),
        CFLAGS.join(" "),
        flags.join(" "),
        all.join(" ")
    );
    if target == CTarget::Pulp {
        mk.insert_str(
            mk.find('\n').unwrap() + 1,
            "# Builds and runs on this machine against strata's checked PMSIS (pulp_host/);\n# Makefile.sdk builds for the chip.\n",
        );
    }
    let headers = if target == CTarget::Pulp {
        "*.h pulp_host/*.h"
    } else {
        "*.h"
    };
    if harness.is_some() {
        writeln!(
            mk,
            "train: $(SRCS) {headers}\n\t$(CC) $(CFLAGS) $(TARGET_FLAGS) -o $@ $(SRCS) -lm\n"
        )
        .unwrap();
        mk.push_str(".PHONY: run clean\nrun: train\n\t./train\n\nclean:\n\trm -f train\n");
    } else {
        writeln!(mk, "libmodel.a: $(SRCS:.c=.o)\n\tar rcs $@ $^\n\n%.o: %.c {headers}\n\t$(CC) $(CFLAGS) $(TARGET_FLAGS) -c -o $@ $<\n").unwrap();
        mk.push_str(".PHONY: clean\nclean:\n\trm -f libmodel.a $(SRCS:.c=.o)\n");
    }
    files.push(("Makefile".into(), mk));
    files.push((
        "README.md".into(),
        project_readme(p, plan, lir, harness.is_some(), target),
    ));
    for (n, s) in &files {
        let path = dir.join(n);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&path, s).map_err(|e| Error::io(&path, e))?;
    }
    Ok(Sources { sources, target })
}

/// Compile the project in `dir` (with a harness) into `dir/train` with `cc`
/// (a PULP project against strata's checked host PMSIS).
pub fn build(dir: &Path, src: &Sources) -> Result<std::path::PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let exe = dir.join("train");
    let (flags, extra) = host_build(src.target);
    let out = std::process::Command::new(&cc)
        .current_dir(dir)
        .args(CFLAGS)
        .args(&flags)
        .arg("-o")
        .arg("train")
        .args(&src.sources)
        .args(&extra)
        .arg("-lm")
        .output()
        .map_err(|e| Error::Backend(format!("could not run the C compiler `{cc}`: {e}")))?;
    if !out.status.success() {
        return Err(Error::Backend(format!(
            "`{cc}` failed in {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(exe)
}
