//! The `strata` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata::driver::{self, Engine};
use strata::ops::Registry;

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
    },
    /// Build the C for a training fixture, run it, and print losses next to the reference and the memory figures.
    Run {
        dir: PathBuf,
        #[arg(long, default_value_t = driver::DEFAULT_L2)]
        l2: u64,
        /// Where the C project is written.
        #[arg(short, long, default_value = "out/example")]
        output: PathBuf,
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
        } => {
            if target != "host" {
                return Err(strata::Error::Usage(format!(
                    "unknown target `{target}` (supported: host)"
                )));
            }
            let (p, plan) = driver::compile(&input, optimizer.as_deref(), l2, &output, reg)?;
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
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Check {
            dir,
            engine,
            l2,
            workdir,
            json,
        } => {
            let r = driver::check(&dir, engine, l2, workdir.as_deref(), reg)?;
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
                    "  L2 arena {} bytes, lower bound {} bytes",
                    r.arena_bytes["L2"], r.lower_bound_bytes["L2"]
                );
            }
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        Cmd::Run { dir, l2, output } => {
            let r = driver::check(&dir, Engine::C, l2, Some(&output), reg)?;
            print!("{}", r.c_output);
            println!(
                "C project in {}; L2 arena {} bytes (lower bound {} bytes)",
                output.display(),
                r.arena_bytes["L2"],
                r.lower_bound_bytes["L2"]
            );
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}
