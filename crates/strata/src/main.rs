//! The `strata` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata::driver::{self, CTarget, Engine};
use strata::ops::Registry;
use strata::schedule::Schedule;

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "Compile on-device training programs for microcontrollers with a tiered memory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Plan a training program (or a single graph) and write its C project and plan summary.
    Compile {
        /// A training directory (`<m>_train`, or the model directory holding it) or an .onnx file.
        input: PathBuf,
        /// The optimizer graph, when INPUT is a single training .onnx file.
        #[arg(long)]
        optimizer: Option<PathBuf>,
        /// Target: `host` (C99 for the build machine) or `pulp` (the PULP SDK's PMSIS; `make run` checks it on the host).
        #[arg(long, value_enum, default_value = "host")]
        target: CTarget,
        /// Capacity of memory level L2 in bytes (1 to 2^40).
        #[arg(long, default_value_t = driver::DEFAULT_L2, value_parser = parse_l2, allow_hyphen_values = true)]
        l2: u64,
        #[command(flatten)]
        tiling: TilingArgs,
        /// Output directory for the C project: created, or replaced when it is empty or a previous strata output; anything else is refused.
        #[arg(short, long)]
        output: PathBuf,
        /// Node order: `memory` (chosen to lower the peak of live bytes, with in-place reuse) or `onnx` (the files' order).
        #[arg(long, value_enum, default_value = "memory")]
        schedule: Schedule,
    },
    /// Run a fixture (training program or kernel test) through an engine and compare with its reference.
    Check {
        /// The fixture directory.
        dir: PathBuf,
        /// The engine: `interp` (the reference interpreter), `sim` (the simulator, with cycles), `c` (the compiled C) or `oracle` (the interpreter in f64).
        #[arg(long, value_enum, default_value = "interp")]
        engine: Engine,
        /// With `--engine c`: `host`, or `pulp` (the PMSIS C, built and run on this machine against strata's checked PMSIS).
        #[arg(long, value_enum, default_value = "host")]
        target: CTarget,
        /// Capacity of memory level L2 in bytes (1 to 2^40).
        #[arg(long, default_value_t = driver::DEFAULT_L2, value_parser = parse_l2, allow_hyphen_values = true)]
        l2: u64,
        #[command(flatten)]
        tiling: TilingArgs,
        /// Keep the generated C project here (engine c), by the same rules as `compile -o`.
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Node order: `memory` (chosen to lower the peak of live bytes, with in-place reuse) or `onnx` (the files' order).
        #[arg(long, value_enum, default_value = "memory")]
        schedule: Schedule,
    },
    /// Solve a memory-planning instance in MiniMalloc's CSV format (id,lower,upper,size[,alignment][,offset]).
    Plan {
        /// The instance: a CSV file with a header `id,lower,upper,size[,alignment][,offset]`.
        input: PathBuf,
        /// Memory capacity in bytes (1 to 2^62); without it the peak is minimised.
        #[arg(long, value_parser = parse_capacity, allow_hyphen_values = true)]
        capacity: Option<u64>,
        /// Minimise the peak (below the capacity, if one is given).
        #[arg(long)]
        minimize: bool,
        /// Seconds the exact search may take (0 to 86400).
        #[arg(long, default_value_t = 1.0, value_parser = parse_seconds, allow_hyphen_values = true)]
        time_limit: f64,
        /// Also stop the exact search after this many nodes (1 to 10^12). With it the search runs on one thread and, unless --time-limit ends it first, gives the same placement on every machine.
        #[arg(long, value_parser = parse_nodes, allow_hyphen_values = true)]
        node_limit: Option<u64>,
        /// Write the solution (the input plus an `offset` column) here; stdout when absent and not --json.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print a JSON summary (buffers, lower bound, peak, proven optimal, seconds).
        #[arg(long)]
        json: bool,
    },
    /// Build the C for a training fixture, run it, and print losses next to the reference and the memory figures.
    Run {
        /// The training fixture directory.
        dir: PathBuf,
        /// `host`, or `pulp` (the PMSIS C, built and run on this machine against strata's checked PMSIS).
        #[arg(long, value_enum, default_value = "host")]
        target: CTarget,
        /// Capacity of memory level L2 in bytes (1 to 2^40).
        #[arg(long, default_value_t = driver::DEFAULT_L2, value_parser = parse_l2, allow_hyphen_values = true)]
        l2: u64,
        #[command(flatten)]
        tiling: TilingArgs,
        /// Where the C project, plan.txt and plan.json are written, by the same rules as `compile -o`; default `strata-out/<program>-<hash of its path>` in the current directory.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Node order: `memory` (chosen to lower the peak of live bytes, with in-place reuse) or `onnx` (the files' order).
        #[arg(long, value_enum, default_value = "memory")]
        schedule: Schedule,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DefaultLevel {
    L2,
    L3,
}

/// How ops run out of L1.
#[derive(clap::Args)]
struct TilingArgs {
    /// Capacity of memory level L1 in bytes (1 to 2^40): every op runs tile by tile out of it.
    #[arg(long, default_value_t = driver::DEFAULT_L1, value_parser = parse_l2, allow_hyphen_values = true)]
    l1: u64,
    /// How tiles are pipelined: `double` overlaps the next tile's loads and the last one's stores with compute.
    #[arg(long, value_enum, default_value = "double")]
    buffering: strata::lir::Buffering,
    /// The untiled baseline: every op one tile of whole tensors, computed out of L2 (tensors in L3 still staged through L2); plan.txt reports the L1 each op would need.
    #[arg(long)]
    untiled: bool,
    /// Capacity of memory level L3 in bytes (1 to 2^40), for the tensors that do not live in L2.
    #[arg(long, default_value_t = driver::DEFAULT_L3, value_parser = parse_l2, allow_hyphen_values = true)]
    l3: u64,
    /// Where tensors live: `l2` (L3 only for what does not fit L2) or `l3` (every tensor in L3, L2 only stages tiles).
    #[arg(long, value_enum, default_value = "l2")]
    default_level: DefaultLevel,
    /// Override a cycle-model parameter, `name=value` (repeatable; see `platform.rs`).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
}

impl TilingArgs {
    fn target(&self, l2: u64, schedule: Schedule, c: CTarget) -> strata::Result<driver::Target> {
        let mut t = driver::Target::with_l2(l2);
        t.c_target = c;
        t.schedule = schedule;
        t.l1 = (!self.untiled).then_some(self.l1);
        t.buffering = self.buffering;
        t.l3 = self.l3;
        t.default_level = match self.default_level {
            DefaultLevel::L2 => strata::lir::Level::L2,
            DefaultLevel::L3 => strata::lir::Level::L3,
        };
        for a in &self.params {
            t.platform.set(a)?;
        }
        Ok(t)
    }
}

fn main() -> ExitCode {
    // Like any Unix filter: when the reader of stdout goes away (`| head`),
    // end quietly on SIGPIPE instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restores the signal's default action before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let reg = Registry::standard();
    match run(cli.cmd, &reg) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cmd: Cmd, reg: &Registry) -> strata::Result<ExitCode> {
    match cmd {
        Cmd::Compile {
            input,
            optimizer,
            target,
            l2,
            tiling,
            output,
            schedule,
        } => {
            let (loaded, plan, lir) = driver::compile_for(
                &input,
                optimizer.as_deref(),
                &tiling.target(l2, schedule, target)?,
                &output,
                reg,
            )?;
            let p = loaded.program();
            println!(
                "wrote {} for target {} ({} nodes: {} training, {} optimizer)",
                output.display(),
                target.name(),
                p.nodes_total(),
                p.train_end,
                p.nodes_total() - p.train_end
            );
            for (level, bytes) in &lir.arenas {
                let cap = match level {
                    strata::lir::Level::L3 => plan.l3.as_ref().map_or(0, |a| a.capacity),
                    strata::lir::Level::L2 => plan.capacity,
                    strata::lir::Level::L1 => tiling.l1,
                };
                println!(
                    "{level} arena {bytes} bytes, lower bound {} bytes, capacity {cap} bytes{}",
                    lir.lower_bounds.get(level).copied().unwrap_or(0),
                    match (level, plan.tile_l1) {
                        (strata::lir::Level::L2, _) if plan.staging > 0 => {
                            format!(" ({} of them staging tiles of L3 tensors)", plan.staging)
                        }
                        (strata::lir::Level::L1, Some(l1)) =>
                            format!(" (tiles chosen for {l1} of them, nodes split as for them: L2 cannot stage larger ones)"),
                        _ => String::new(),
                    }
                );
            }
            if let Some(s) = &p.schedule {
                println!(
                    "peak live bytes {} in the ONNX order, {} in the chosen order (--schedule {})",
                    s.onnx_peak,
                    s.chosen_peak,
                    if schedule == Schedule::Memory {
                        "memory"
                    } else {
                        "onnx"
                    }
                );
            }
            if lir.buffering.is_some() {
                println!(
                    "{} DMA commands per training step",
                    lir.dma_commands(0..lir.train_end)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Check {
            dir,
            engine,
            target,
            l2,
            tiling,
            workdir,
            json,
            schedule,
        } => {
            if target != CTarget::Host && engine != Engine::C {
                return Err(strata::Error::Usage(format!(
                    "--target {} builds C: it goes with --engine c",
                    target.name()
                )));
            }
            let r = driver::check_for(
                &dir,
                engine,
                &tiling.target(l2, schedule, target)?,
                workdir.as_deref(),
                reg,
            )?;
            if json {
                println!("{}", serde_json::to_string(&r).expect("report serializes"));
            } else {
                print!("{}", r.c_output);
                println!(
                    "{} ({:?}, engine {:?}{}): {}",
                    r.fixture,
                    r.kind,
                    r.engine,
                    if r.engine == Engine::C {
                        format!(", target {}", r.target.name())
                    } else {
                        String::new()
                    },
                    if r.ok { "OK" } else { "FAILED" }
                );
                if let (Some(e), Some(_)) = (r.max_abs_loss_error, &r.reference_losses) {
                    println!(
                        "  max abs loss error   {e:.3e} (tolerance {:e})",
                        r.tolerance.abs
                    );
                }
                if let Some(e) = r.max_abs_weight_error {
                    println!("  max abs tensor error {e:.3e}");
                }
                for (name, e) in &r.failures {
                    println!("  off: {name} (max abs error {e:.3e})");
                }
                match (&r.oracle, &r.oracle_error) {
                    (Some(o), _) => {
                        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3e}"));
                        for (who, d) in [("strata", &o.engine), ("reference", &o.reference)] {
                            println!(
                                "  f64 oracle distance, {who:<9}: loss {}, tensors {} (relative {})",
                                f(d.max_abs_loss),
                                f(d.max_abs_tensor),
                                f(d.max_rel_tensor)
                            );
                        }
                    }
                    (None, Some(e)) => println!("  f64 oracle: not run ({e})"),
                    (None, None) => {}
                }
                for (level, bytes) in &r.arena_bytes {
                    println!(
                        "  {level} arena {bytes} bytes, lower bound {} bytes",
                        r.lower_bound_bytes[level]
                    );
                }
                println!("  read-only constants {} bytes", r.constant_bytes);
                if let (Some(c), Some(b), Some(sim)) = (&r.cycles, &r.bounds, &r.sim) {
                    println!(
                        "  cycles: training {} ({} steps), optimizer {} ({} steps), total {}",
                        c.train, sim.train_steps, c.optimizer, sim.optimizer_steps, c.total
                    );
                    let bound = b.compute.max(b.transfer).max(1);
                    println!(
                        "  bounds: compute {}, transfer {}; cycles / max(bounds) = {:.2}",
                        b.compute,
                        b.transfer,
                        c.total as f64 / bound as f64
                    );
                    let mut ops: Vec<&strata::sim::OpCycles> = sim.ops.iter().collect();
                    ops.sort_by_key(|o| std::cmp::Reverse(o.compute + o.stall));
                    println!("  ops by cycles (compute + stall, over the run; DMA is the engine's busy time):");
                    for o in ops.iter().take(8) {
                        println!(
                            "    compute {:>10}  stall {:>10}  DMA {:>10}  {} ({})",
                            o.compute, o.stall, o.dma, o.node, o.op_type
                        );
                    }
                }
                println!(
                    "  peak live bytes {} in the ONNX order, {} in the order run (--schedule {})",
                    r.onnx_order_peak_bytes,
                    r.chosen_order_peak_bytes,
                    if schedule == Schedule::Memory {
                        "memory"
                    } else {
                        "onnx"
                    }
                );
            }
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        Cmd::Plan {
            input,
            capacity,
            minimize,
            time_limit,
            node_limit,
            output,
            json,
        } => plan_csv(
            &input,
            capacity,
            minimize,
            (time_limit, node_limit),
            output.as_deref(),
            json,
        ),
        Cmd::Run {
            dir,
            target,
            l2,
            tiling,
            output,
            schedule,
        } => {
            let output = match output {
                Some(o) => o,
                None => default_run_dir(&dir)?,
            };
            let r = driver::check_for(
                &dir,
                Engine::C,
                &tiling.target(l2, schedule, target)?,
                Some(&output),
                reg,
            )?;
            print!("{}", r.c_output);
            let arenas: Vec<String> = r
                .arena_bytes
                .iter()
                .map(|(level, bytes)| {
                    format!(
                        "{level} arena {bytes} bytes (lower bound {} bytes)",
                        r.lower_bound_bytes[level]
                    )
                })
                .collect();
            println!(
                "C project in {}; {}; read-only constants {} bytes",
                output.display(),
                arenas.join(", "),
                r.constant_bytes
            );
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}

/// The largest `--l2`: 1 TiB, far beyond any microcontroller's memory level.
const MAX_L2: u64 = 1 << 40;
/// The largest `--capacity` for `strata plan`: room for the planner's sums.
const MAX_CAPACITY: u64 = 1 << 62;
/// The longest `--time-limit`: one day.
const MAX_SECONDS: f64 = 86_400.0;
/// The largest `--node-limit`.
const MAX_NODES: u64 = 1_000_000_000_000;

/// A whole number in `lo..=hi`, or a message about the value.
fn parse_whole(s: &str, what: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number of {what} from {lo} to {hi}, found `{s}`"))?;
    if v < lo || v > hi {
        return Err(format!(
            "expected a whole number of {what} from {lo} to {hi}, found {v}"
        ));
    }
    Ok(v)
}

fn parse_l2(s: &str) -> Result<u64, String> {
    parse_whole(s, "bytes", 1, MAX_L2)
}

fn parse_capacity(s: &str) -> Result<u64, String> {
    parse_whole(s, "bytes", 1, MAX_CAPACITY)
}

fn parse_nodes(s: &str) -> Result<u64, String> {
    parse_whole(s, "nodes", 1, MAX_NODES)
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| {
        format!("expected a number of seconds from 0 to {MAX_SECONDS}, found `{s}`")
    })?;
    if !(0.0..=MAX_SECONDS).contains(&v) {
        return Err(format!(
            "expected a number of seconds from 0 to {MAX_SECONDS}, found {s}"
        ));
    }
    Ok(v)
}

/// `run` without `-o`: `strata-out/<name>-<hash>` in the current directory,
/// one directory per program (the hash is of the fixture's real path), in a
/// `strata-out` strata creates when it is missing.
fn default_run_dir(dir: &std::path::Path) -> strata::Result<PathBuf> {
    let real = std::fs::canonicalize(dir).map_err(|e| strata::Error::io(dir, e))?;
    let name: String = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in real.to_string_lossy().bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let base = PathBuf::from("strata-out");
    match std::fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && base.is_dir() => {}
        Err(e) => return Err(strata::Error::io(&base, e)),
    }
    Ok(base.join(format!("{name}-{:08x}", h as u32)))
}

fn plan_csv(
    input: &std::path::Path,
    capacity: Option<u64>,
    minimize: bool,
    (time_limit, node_limit): (f64, Option<u64>),
    output: Option<&std::path::Path>,
    json: bool,
) -> strata::Result<ExitCode> {
    use strata::Error;
    let text = std::fs::read_to_string(input).map_err(|e| Error::io(input, e))?;
    let (mut problem, origin) =
        memplan::csv::read_timed(&text).map_err(|e| Error::data(input, e.to_string()))?;
    if capacity.is_some() {
        problem.capacity = capacity;
    }
    let mut opts = memplan::Options {
        time_limit: std::time::Duration::from_secs_f64(time_limit),
        minimize: minimize || problem.capacity.is_none(),
        node_limit,
        ..Default::default()
    };
    if node_limit.is_some() {
        // A node budget is there for reproducible placements: one thread.
        opts.threads = 1;
    }
    let start = std::time::Instant::now();
    let sol = memplan::solve(&problem, &opts)
        .map_err(|e| Error::Usage(format!("{}: {e}", input.display())))?;
    let seconds = start.elapsed().as_secs_f64();
    memplan::check(&problem, &sol.offsets).map_err(|e| Error::PlanCheck(e.to_string()))?;
    let csv = memplan::csv::write_timed(&problem, Some(&sol.offsets), origin);
    if let Some(out) = output {
        std::fs::write(out, &csv).map_err(|e| Error::io(out, e))?;
    }
    if json {
        let s = memplan::cli::Summary {
            buffers: problem.buffers.len(),
            lower_bound: sol.lower_bound,
            peak: sol.peak,
            optimal: sol.optimal,
            seconds,
        };
        println!("{}", s.to_json());
    } else if output.is_none() {
        print!("{csv}");
    } else {
        println!(
            "{} buffers: peak {} bytes, lower bound {} bytes{}, {seconds:.3} s",
            problem.buffers.len(),
            sol.peak,
            sol.lower_bound,
            if sol.optimal { " (optimal)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument of every command says what it is in `--help`.
    #[test]
    fn every_argument_has_a_help_line() {
        let cli = Cli::command();
        let mut seen = 0;
        for sub in cli.get_subcommands() {
            for a in sub.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                seen += 1;
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(
                    !help.trim().is_empty(),
                    "`strata {}` argument `{id}` has no help line",
                    sub.get_name()
                );
            }
        }
        assert!(seen >= 17, "only {seen} arguments seen");
    }

    #[test]
    fn numeric_arguments_are_range_checked() {
        assert_eq!(parse_l2("4096"), Ok(4096));
        for bad in ["-1", "0", "1099511627777", "1e3", "abc", "", "nan"] {
            let e = parse_l2(bad).unwrap_err();
            assert!(e.contains("bytes") && e.contains(bad), "{bad}: {e}");
        }
        assert_eq!(parse_seconds("0"), Ok(0.0));
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        for bad in [
            "NaN", "nan", "-1", "-0.5", "inf", "-inf", "infinity", "1e20", "86401", "x",
        ] {
            let e = parse_seconds(bad).unwrap_err();
            assert!(e.contains("seconds") && e.contains(bad), "{bad}: {e}");
        }
        assert_eq!(parse_nodes("1"), Ok(1));
        for bad in ["0", "-5", "1000000000001", "18446744073709551616"] {
            assert!(parse_nodes(bad).unwrap_err().contains("nodes"), "{bad}");
        }
        assert_eq!(parse_capacity("4611686018427387904"), Ok(1 << 62));
        assert!(parse_capacity("4611686018427387905").is_err());
        assert!(parse_capacity("-1").is_err());
    }
}
