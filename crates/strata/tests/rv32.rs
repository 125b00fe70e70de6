//! The emitted C on the target's ISA: strata's C projects (host target, and
//! the PULP target against strata's checked PMSIS) built for a 32-bit RISC-V
//! core (rv32imafc, ilp32f, picolibc) and run bare metal on QEMU
//! (`tools/rv32-run.sh`). Each run is held to the fixture's reference by its
//! own harness and to the simulator to 1e-6, like the host C: 32-bit
//! pointers and sizes, another C library and another compiler back end.
//!
//! Needs `riscv64-unknown-elf-gcc`, picolibc and `qemu-system-riscv32`
//! (`tools/install-rv32.sh`, run by `.ci/run`); says "skipped" without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use strata::driver::{self, CTarget, Engine, Target};
use strata::lir::{Buffering, Level};
use strata::ops::Registry;
use strata::tensor::{max_abs_diff, Data};
use strata::testing::{shared_dir as shared, SIM_AGREES_WITH_C};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn have_toolchain() -> bool {
    let found = |t: &str| {
        Command::new(t)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if found("riscv64-unknown-elf-gcc") && found("qemu-system-riscv32") {
        true
    } else {
        eprintln!(
            "skipped: riscv64-unknown-elf-gcc or qemu-system-riscv32 not found (tools/install-rv32.sh)"
        );
        false
    }
}

/// Compile `dir` for `target`, run it on rv32 under QEMU, and hold it to the
/// reference (its harness's verdict and strata's comparison) and to the simulator.
fn on_rv32(dir: &Path, target: &Target) {
    let reg = Registry::standard();
    let what = format!(
        "{} ({:?}, {:?})",
        dir.display(),
        target.c_target,
        target.default_level
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("project");
    driver::compile_for(dir, None, target, &out, &reg).unwrap_or_else(|e| panic!("{what}: {e}"));
    let run = Command::new(workspace().join("tools/rv32-run.sh"))
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{what}: the rv32 run failed ({:?}):\n{stdout}{}",
        run.status.code(),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("; OK"), "{what}: {stdout}");
    let f = strata::fixture::load(dir, &reg).unwrap();
    let mut f = f;
    strata::driver::prepare(&mut f.program, target).unwrap();
    let rv = strata::codegen::harness::read_results(&f, &out.join("results.bin"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let cmp = strata::fixture::compare(&f, &rv).unwrap();
    assert!(cmp.ok, "{what}: off the reference: {:?}", cmp.failures);
    let sim = driver::check_for(dir, Engine::Sim, target, None, &reg)
        .unwrap()
        .results
        .unwrap();
    let d = max_abs_diff(&sim.losses, &rv.losses);
    assert!(
        d <= SIM_AGREES_WITH_C,
        "{what}: rv32 and sim losses differ by {d}"
    );
    assert_eq!(sim.tensors.len(), rv.tensors.len());
    for (a, b) in sim.tensors.iter().zip(&rv.tensors) {
        if let (Data::F32(x), Data::F32(y)) = (&a.data, &b.data) {
            let d = max_abs_diff(x, y);
            assert!(
                d <= SIM_AGREES_WITH_C,
                "{what}: rv32 and sim tensors differ by {d}"
            );
        }
    }
}

fn target(level: Level, c: CTarget) -> Target {
    let mut t = Target::with_l2(2_000_000);
    t.default_level = level;
    t.buffering = Buffering::Double;
    t.c_target = c;
    t
}

#[test]
fn project_examples_train_on_rv32() {
    if !have_toolchain() {
        return;
    }
    let ex = workspace().join("examples");
    on_rv32(&ex.join("mlp"), &target(Level::L3, CTarget::Host));
    on_rv32(&ex.join("mlp"), &target(Level::L3, CTarget::Pulp));
    on_rv32(&ex.join("ort/cnn"), &target(Level::L2, CTarget::Pulp));
    on_rv32(&ex.join("ort/vit"), &target(Level::L3, CTarget::Pulp));
}

#[test]
fn deeploy_training_programs_train_on_rv32() {
    if !have_toolchain() {
        return;
    }
    let Some(s) = shared() else {
        eprintln!("skipped: ../shared not found");
        return;
    };
    let t = s.join("fixtures/deeploy/Training");
    on_rv32(&t.join("SimpleMLP"), &target(Level::L3, CTarget::Pulp));
    on_rv32(&t.join("DSCNN"), &target(Level::L3, CTarget::Pulp));
    on_rv32(&t.join("ResNet8"), &target(Level::L3, CTarget::Pulp));
}
