//! The `strata` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata::driver::{self, Engine};
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
        /// Target: `host` (C99 that runs on the build machine).
        #[arg(long, default_value = "host")]
        target: String,
        /// Capacity of memory level L2 in bytes.
        #[arg(long, default_value_t = driver::DEFAULT_L2)]
        l2: u64,
        /// Output directory for the C project.
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
        #[arg(long, value_enum, default_value = "interp")]
        engine: Engine,
        /// Capacity of memory level L2 in bytes.
        #[arg(long, default_value_t = driver::DEFAULT_L2)]
        l2: u64,
        /// Keep the generated C project here (engine c).
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
        input: PathBuf,
        /// Memory capacity in bytes; without it the peak is minimised.
        #[arg(long)]
        capacity: Option<u64>,
        /// Minimise the peak (below the capacity, if one is given).
        #[arg(long)]
        minimize: bool,
        /// Seconds the exact search may take.
        #[arg(long, default_value_t = 1.0)]
        time_limit: f64,
        /// Also stop the exact search after this many nodes. With it the search runs on one thread and, unless --time-limit ends it first, gives the same placement on every machine.
        #[arg(long)]
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
        dir: PathBuf,
        #[arg(long, default_value_t = driver::DEFAULT_L2)]
        l2: u64,
        /// Where the C project is written.
        #[arg(short, long, default_value = "out/example")]
        output: PathBuf,
        /// Node order: `memory` (chosen to lower the peak of live bytes, with in-place reuse) or `onnx` (the files' order).
        #[arg(long, value_enum, default_value = "memory")]
        schedule: Schedule,
    },
}

fn main() -> ExitCode {
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
            output,
            schedule,
        } => {
            if target != "host" {
                return Err(strata::Error::Usage(format!(
                    "unknown target `{target}` (supported: host)"
                )));
            }
            let (loaded, plan) =
                driver::compile_with(&input, optimizer.as_deref(), l2, schedule, &output, reg)?;
            let p = loaded.program();
            println!(
                "wrote {} ({} nodes: {} training, {} optimizer)",
                output.display(),
                p.nodes_total(),
                p.train_end,
                p.nodes_total() - p.train_end
            );
            println!(
                "L2 arena {} bytes, lower bound {} bytes, capacity {} bytes",
                plan.arena_bytes, plan.lower_bound, plan.capacity
            );
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
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Check {
            dir,
            engine,
            l2,
            workdir,
            json,
            schedule,
        } => {
            let r = driver::check_with(&dir, engine, l2, schedule, workdir.as_deref(), reg)?;
            if json {
                println!("{}", serde_json::to_string(&r).expect("report serializes"));
            } else {
                print!("{}", r.c_output);
                println!(
                    "{} ({:?}, engine {:?}): {}",
                    r.fixture,
                    r.kind,
                    r.engine,
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
                println!(
                    "  L2 arena {} bytes, lower bound {} bytes; read-only constants {} bytes",
                    r.arena_bytes["L2"], r.lower_bound_bytes["L2"], r.constant_bytes
                );
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
            l2,
            output,
            schedule,
        } => {
            let r = driver::check_with(&dir, Engine::C, l2, schedule, Some(&output), reg)?;
            print!("{}", r.c_output);
            println!(
                "C project in {}; L2 arena {} bytes (lower bound {} bytes); read-only constants {} bytes",
                output.display(),
                r.arena_bytes["L2"],
                r.lower_bound_bytes["L2"],
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
    let mut problem = memplan::csv::read(&text).map_err(|e| Error::data(input, e.to_string()))?;
    if capacity.is_some() {
        problem.capacity = capacity;
    }
    if !(time_limit.is_finite() && time_limit >= 0.0) {
        return Err(Error::Usage(format!(
            "--time-limit must be a non-negative number of seconds, found {time_limit}"
        )));
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
    let csv = memplan::csv::write(&problem, Some(&sol.offsets));
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
