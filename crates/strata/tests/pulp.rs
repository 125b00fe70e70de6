//! `--target pulp`: the same LIR emitted against the PULP SDK's PMSIS
//! (`strata_pulp.c`), built and run on the host against strata's checked
//! PMSIS (`pulp_host/`). Training programs pass within the tolerances of the
//! host C and agree with it; the checked PMSIS catches real violations (a
//! deleted wait, a DMA past its arena, an operand outside every arena, L3
//! offsets past the L3 arena, waits and ids out of turn); L3 transfers as
//! the emitter writes them move the right bytes on both targets.

use std::path::{Path, PathBuf};
use std::process::Command;

use strata::codegen::{self, CTarget, Sources};
use strata::driver::{self, Engine, Target};
use strata::lir::{Buffering, Dma, Level, Loc, Shape, Step};
use strata::ops::Registry;
use strata::schedule::{self, Schedule};
use strata::tensor::{max_abs_diff, Data};
use strata::testing::shared_dir;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Against the reference (ONNX Runtime or numpy float64), as the host C.
const REFERENCE: f32 = 1e-4;
/// Host and PULP C run the same kernels on the same tiles.
const HOST_AGREES_WITH_PULP: f32 = 1e-6;

fn target(l1: u64, b: Buffering, c: CTarget) -> Target {
    let mut t = Target::with_l2(driver::DEFAULT_L2);
    t.l1 = Some(l1);
    t.buffering = b;
    t.c_target = c;
    t
}

/// The PULP C of a program at one (L1, buffering) cell passes within
/// REFERENCE; with `vs_host`, the host C of the same cell agrees with it
/// within HOST_AGREES_WITH_PULP.
fn cell(dir: &Path, l1: u64, b: Buffering, vs_host: bool) {
    let reg = Registry::standard();
    let what = format!("{} at L1 {l1} {b:?}", dir.display());
    let p = driver::check_for(dir, Engine::C, &target(l1, b, CTarget::Pulp), None, &reg)
        .unwrap_or_else(|e| panic!("{what} (pulp): {e}"));
    assert!(p.ok, "{what} pulp: failures {:?}", p.failures);
    assert_eq!(p.target, CTarget::Pulp);
    assert!(p.max_abs_loss_error.unwrap_or(0.0) <= REFERENCE);
    assert!(p.max_abs_weight_error.unwrap_or(0.0) <= REFERENCE);
    assert!(
        p.c_output.contains("BENCH train_cycles="),
        "{what}: no cycle line:\n{}",
        p.c_output
    );
    if vs_host {
        let h = driver::check_for(dir, Engine::C, &target(l1, b, CTarget::Host), None, &reg)
            .unwrap_or_else(|e| panic!("{what} (host): {e}"));
        assert!(h.ok, "{what} host: failures {:?}", h.failures);
        let (rp, rh) = (p.results.unwrap(), h.results.unwrap());
        let d = max_abs_diff(&rp.losses, &rh.losses);
        assert!(
            d <= HOST_AGREES_WITH_PULP,
            "{what}: host and PULP losses differ by {d}"
        );
        assert_eq!(rp.tensors.len(), rh.tensors.len());
        for (a, b) in rp.tensors.iter().zip(&rh.tensors) {
            if let (Data::F32(x), Data::F32(y)) = (&a.data, &b.data) {
                let d = max_abs_diff(x, y);
                assert!(
                    d <= HOST_AGREES_WITH_PULP,
                    "{what}: host and PULP tensors differ by {d}"
                );
            }
        }
    }
}

const CELLS: [(u64, Buffering); 4] = [
    (64_000, Buffering::Single),
    (64_000, Buffering::Double),
    (128_000, Buffering::Single),
    (128_000, Buffering::Double),
];

#[test]
fn pulp_c_trains_the_project_examples() {
    let ex = workspace().join("examples");
    // examples/mlp across the matrix, against the host C in two cells.
    for (k, (l1, b)) in CELLS.into_iter().enumerate() {
        cell(&ex.join("mlp"), l1, b, k == 0 || k == 3);
    }
    // The ORT artifacts one cell each, the cells taken in turn.
    for (k, m) in strata::testing::ORT_EXAMPLES.iter().enumerate() {
        let (l1, b) = CELLS[k % CELLS.len()];
        cell(&ex.join("ort").join(m), l1, b, *m == "cnn");
    }
}

#[test]
fn pulp_c_trains_the_deeploy_programs() {
    let Some(s) = shared_dir() else { return };
    let t = s.join("fixtures/deeploy/Training");
    if !t.is_dir() {
        eprintln!("skipped: {} not found", t.display());
        return;
    }
    for (k, (l1, b)) in CELLS.into_iter().enumerate() {
        cell(&t.join("SimpleMLP"), l1, b, k == 1);
    }
    cell(&t.join("Autoencoder"), 64_000, Buffering::Double, true);
    cell(&t.join("Autoencoder"), 128_000, Buffering::Single, false);
    cell(&t.join("DSCNN"), 64_000, Buffering::Single, false);
    cell(&t.join("DSCNN"), 128_000, Buffering::Double, true);
    // ResNet8's C is the slowest to build: one cell.
    cell(&t.join("ResNet8"), 128_000, Buffering::Double, false);
}

/// A PULP project of examples/mlp with its harness, written (not built)
/// into a fresh directory.
struct Project {
    dir: tempfile::TempDir,
    sources: Sources,
    l1: u64,
}

fn pulp_project(l1: u64) -> Project {
    let reg = Registry::standard();
    let mut f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    schedule::apply(&mut f.program, Schedule::Memory).unwrap();
    let plan = driver::plan_program(&f.program, driver::DEFAULT_L2).unwrap();
    let t = target(l1, Buffering::Double, CTarget::Pulp);
    let lir = driver::lower_program(&f.program, &plan, &t).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let harness = codegen::harness::emit(&f, &plan);
    let sources = codegen::write_project(
        dir.path(),
        &f.program,
        &plan,
        &lir,
        Some(&harness),
        CTarget::Pulp,
    )
    .unwrap();
    Project {
        dir,
        sources,
        l1: lir.arena(Level::L1),
    }
}

impl Project {
    fn model(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("model.c")).unwrap()
    }
    fn set_model(&self, text: &str) {
        std::fs::write(self.dir.path().join("model.c"), text).unwrap();
    }
    /// Build and run: (exit status, stdout).
    fn run(&self) -> (i32, String) {
        let exe = codegen::build(self.dir.path(), &self.sources).unwrap();
        let out = Command::new(exe).output().unwrap();
        (
            out.status.code().expect("not killed by a signal"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

#[test]
fn an_unpatched_project_runs_clean() {
    let p = pulp_project(2048);
    let (code, out) = p.run();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK") && !out.contains("pmsis-host"), "{out}");
}

/// Deleting one wait: the data lands late or never, which the run must not
/// survive (a transfer still in flight at the end of the step, or poison
/// read by a kernel).
#[test]
fn a_deleted_wait_fails_the_run() {
    let p = pulp_project(2048);
    let model = p.model();
    let waits: Vec<usize> = model
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("st_dma_wait("))
        .map(|(i, _)| i)
        .collect();
    assert!(waits.len() > 4, "{} waits", waits.len());
    // The first wait, one in the middle, the last: each alone.
    for &w in [waits[0], waits[waits.len() / 2], *waits.last().unwrap()].iter() {
        let patched: Vec<&str> = model
            .lines()
            .enumerate()
            .filter(|(i, _)| *i != w)
            .map(|(_, l)| l)
            .collect();
        p.set_model(&(patched.join("\n") + "\n"));
        let (code, out) = p.run();
        assert_ne!(code, 0, "without line {w} the run passed:\n{out}");
        assert!(
            out.contains("in flight") || out.contains("MISMATCH") || out.contains("FAILED"),
            "without line {w}: {out}"
        );
        if code == 6 {
            assert!(out.contains("pmsis-host: step "), "{out}");
        }
    }
}

/// Replace the offset of the first `st_l1 + <n>` destination of an `st_dma`.
fn patch_first_l1_dma(model: &str, new_offset: u64) -> String {
    let mut done = false;
    model
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if !done && t.starts_with("st_dma(") {
                let key = "((uint8_t *)(st_l1 + ";
                if let Some(at) = l.find(key) {
                    let start = at + key.len();
                    let end = start + l[start..].find(')').unwrap();
                    if l[start..end].bytes().all(|b| b.is_ascii_digit()) {
                        done = true;
                        return format!("{}{new_offset}{}", &l[..start], &l[end..]);
                    }
                }
            }
            l.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn a_dma_past_its_arena_is_reported_with_the_step_and_the_arena() {
    let p = pulp_project(2048);
    let patched = patch_first_l1_dma(&p.model(), p.l1 - 8);
    assert_ne!(patched, p.model());
    p.set_model(&patched);
    let (code, out) = p.run();
    assert_eq!(code, 6, "{out}");
    let msg = out.lines().find(|l| l.starts_with("pmsis-host")).unwrap();
    assert!(
        msg.contains("pmsis-host: step ") && msg.contains("runs past the L1 arena"),
        "{msg}"
    );
}

#[test]
fn a_kernel_operand_outside_the_arenas_is_reported() {
    let p = pulp_project(2048);
    let model = p.model();
    let key = "ST_ACCESS(((float *)(st_l1 + ";
    let at = model.find(key).expect("a checked L1 operand") + key.len();
    let end = at + model[at..].find(')').unwrap();
    let patched = format!("{}{}{}", &model[..at], p.l1 + 4096, &model[end..]);
    p.set_model(&patched);
    let (code, out) = p.run();
    assert_eq!(code, 6, "{out}");
    assert!(
        out.contains("pmsis-host: step ") && out.contains("kernel of node"),
        "{out}"
    );
}

/// Runtime files for a C program of its own on `target`: returns the
/// sources and the flags to build it with.
fn runtime_only(dir: &Path, target: CTarget) -> Vec<String> {
    for (n, s) in codegen::RUNTIME_FILES {
        if n.starts_with("strata_rt") {
            std::fs::write(dir.join(n), s).unwrap();
        }
    }
    let (n, s) = codegen::TARGET_FILES
        .iter()
        .find(|(n, _)| *n == target.runtime_file())
        .unwrap();
    std::fs::write(dir.join(n), s).unwrap();
    if target == CTarget::Pulp {
        for (n, s) in codegen::PULP_HOST_FILES {
            let p = dir.join("pulp_host").join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        }
    }
    vec!["strata_rt.c".into(), n.to_string(), "main.c".into()]
}

/// Build `main` against the runtime of `target` with `defines`; run it with
/// `args`: (exit status, stdout).
fn run_c(main: &str, target: CTarget, defines: &[&str], args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let sources = runtime_only(dir.path(), target);
    std::fs::write(dir.path().join("main.c"), main).unwrap();
    let (flags, extra) = codegen::host_build(target);
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .current_dir(dir.path())
        .args(codegen::CFLAGS)
        .args(&flags)
        .args(defines)
        .arg("-o")
        .arg("t")
        .args(&sources)
        .args(&extra)
        .arg("-lm")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.path().join("t"))
        .args(args)
        .output()
        .unwrap();
    (
        run.status.code().expect("not killed by a signal"),
        String::from_utf8_lossy(&run.stdout).into_owned(),
    )
}

/// The C the emitter writes for one transfer step.
fn emitted(step: &Step) -> String {
    let reg = Registry::standard();
    let f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    let mut c = String::new();
    codegen::emit_step(&mut c, &f.program, step).unwrap();
    c.trim().to_string()
}

fn dma(id: u32, src: Loc, dst: Loc, shape: Shape) -> Step {
    Step::Dma(Dma {
        id,
        src,
        dst,
        shape,
    })
}

/// L3 transfers as the emitter writes them (a 1D, a 2D dense on the L2
/// side, a 3D strided on both sides) move exactly the bytes of their
/// shapes, complete at their wait (poison before it under the checked
/// PMSIS), and st_l3_store / st_l3_load round-trip, on both targets; an
/// L1<->L3 step is an error.
#[test]
fn l3_transfers_move_their_bytes_on_both_targets() {
    let shapes = [
        Shape::contiguous(300),
        Shape {
            bytes: 16,
            counts: [5, 1],
            src_strides: [16, 0],
            dst_strides: [40, 0],
        },
        Shape {
            bytes: 8,
            counts: [3, 4],
            src_strides: [24, 200],
            dst_strides: [12, 72],
        },
    ];
    let mut body = String::new();
    for (k, sh) in shapes.iter().enumerate() {
        let id = 10 + k as u32;
        // L2 [0, ..) -> L3 [64 + 1024 k, ..) by the shape, then back into L2 [2048, ..) by the reverse shape.
        let l3 = 64 + 1024 * k as u64;
        let write = emitted(&dma(
            id,
            Loc::arena(Level::L2, 0),
            Loc::arena(Level::L3, l3),
            *sh,
        ));
        assert!(
            write.starts_with(&format!("st_ram_write({id}, {l3}, ")),
            "{write}"
        );
        let back = Shape {
            src_strides: sh.dst_strides,
            dst_strides: sh.src_strides,
            ..*sh
        };
        let read = emitted(&dma(
            id + 100,
            Loc::arena(Level::L3, l3),
            Loc::arena(Level::L2, 2048),
            back,
        ));
        assert!(
            read.starts_with(&format!(
                "st_ram_read({}, ((uint8_t *)(st_l2 + 2048)), {l3}, ",
                id + 100
            )),
            "{read}"
        );
        body.push_str(&format!(
            "    memset(st_l2 + 2048, 0, 2048);\n    {write}\n    st_dma_wait({id});\n    {read}\n    POISONED({}, {}, {}, {});\n    st_dma_wait({});\n    expect_copy(st_l2, st_l2 + 2048, {}, {}, {}, {}, {}, {});\n",
            sh.bytes, sh.counts[0], sh.src_strides[0], sh.counts[1], id + 100,
            sh.bytes, sh.counts[0], sh.src_strides[0], sh.counts[1], sh.src_strides[1], 0
        ));
    }
    let main = format!(
        r#"#include <stdio.h>
#include <stdlib.h>
#include "strata_rt.h"
static int fails;
/* Every run of the shape read back lands where it came from. */
static void expect_copy(const uint8_t *a, const uint8_t *b, uint32_t bytes, uint32_t c0, uint32_t s0, uint32_t c1, uint32_t s1, int unused) {{
    uint32_t i, j;
    (void)unused;
    for (j = 0; j < c1; j++)
        for (i = 0; i < c0; i++)
            if (memcmp(a + j * s1 + i * s0, b + j * s1 + i * s0, bytes) != 0) {{ printf("MISMATCH run (%u, %u)\n", j, i); fails++; }}
}}
#ifdef EXPECT_POISON
#define POISONED(bytes, c0, s0, c1) do {{ if (st_l2[2048] != 0xFF) {{ printf("NOT POISONED\n"); fails++; }} }} while (0)
#else
#define POISONED(bytes, c0, s0, c1) ((void)0)
#endif
static void body(void *arg) {{
    uint32_t i;
    uint8_t back[3000], src[3000];
    (void)arg;
    for (i = 0; i < 2048; i++) st_l2[i] = (uint8_t)(i * 7 + 3);
{body}
    for (i = 0; i < 3000; i++) src[i] = (uint8_t)(i * 13 + 1);
    st_l3_store(5000, src, 3000);
    st_l3_load(back, 5000, 3000);
    if (memcmp(src, back, 3000) != 0) {{ printf("MISMATCH st_l3_store/st_l3_load\n"); fails++; }}
    st_fill(ST_L3, 5000, 0, 3000);
    st_load(back, ST_L3, 5000, 3000);
    for (i = 0; i < 3000; i++) if (back[i]) {{ printf("MISMATCH st_fill\n"); fails++; break; }}
}}
int main(void) {{
    if (st_init(0, 4096, 8192) != 0) return 4;
    if (st_l1 != NULL) {{ printf("an L1 arena without L1\n"); return 1; }}
    if (st_run(body, NULL) != 0) return 4;
    st_close();
    printf("%s\n", fails ? "FAILED" : "OK");
    return fails ? 1 : 0;
}}
"#
    );
    for (t, defs) in [
        (CTarget::Host, &[][..]),
        (CTarget::Pulp, &["-DEXPECT_POISON"][..]),
    ] {
        let (code, out) = run_c(&main, t, defs, &[]);
        assert_eq!(code, 0, "{t:?}: {out}");
        assert!(out.contains("OK"), "{t:?}: {out}");
    }
    // L1 and L3 do not talk.
    let reg = Registry::standard();
    let f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    let mut c = String::new();
    let e = codegen::emit_step(
        &mut c,
        &f.program,
        &dma(
            1,
            Loc::arena(Level::L3, 0),
            Loc::arena(Level::L1, 0),
            Shape::contiguous(4),
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("L3") && e.contains("L1") && e.contains("through L2"),
        "{e}"
    );
}

/// L2<->L1 transfers through PMSIS commands: 3D strided with a dense L1
/// side (2D commands), with a strided L1 side (1D commands), and one of
/// 100,000 bytes (more than one 16-bit command) land exactly.
#[test]
fn cluster_dma_splits_into_pmsis_commands_and_lands_exactly() {
    let main = r#"#include <stdio.h>
#include "strata_rt.h"
static int fails;
static void body(void *arg) {
    uint32_t i, j, k;
    (void)arg;
    for (i = 0; i < 200000; i++) st_l2[i] = (uint8_t)(i * 31 + 7);
    /* 3D: 4 x 6 runs of 10 bytes, L2 strides 64/1000, L1 dense. */
    st_dma(1, st_l1, st_l2 + 100, 10, 6, 64, 10, 4, 1000, 60);
    /* strided on both sides */
    st_dma(2, st_l1 + 1000, st_l2 + 5000, 8, 5, 40, 16, 1, 0, 0);
    /* 100,000 contiguous bytes */
    st_dma(3, st_l1 + 2000, st_l2 + 90000, 100000, 1, 0, 0, 1, 0, 0);
    st_dma_wait(2);
    st_dma_wait(1);
    st_dma_wait(3);
    for (j = 0; j < 4; j++) for (i = 0; i < 6; i++) for (k = 0; k < 10; k++)
        if (st_l1[j * 60 + i * 10 + k] != st_l2[100 + j * 1000 + i * 64 + k]) { fails++; }
    for (i = 0; i < 5; i++) for (k = 0; k < 8; k++)
        if (st_l1[1000 + i * 16 + k] != st_l2[5000 + i * 40 + k]) fails++;
    if (memcmp(st_l1 + 2000, st_l2 + 90000, 100000) != 0) fails++;
    /* and back, L1 -> L2, the 3D shape reversed */
    memset(st_l2 + 100, 0, 4000);
    st_dma(4, st_l2 + 100, st_l1, 10, 6, 10, 64, 4, 60, 1000);
    st_dma_wait(4);
    for (j = 0; j < 4; j++) for (i = 0; i < 6; i++) for (k = 0; k < 10; k++)
        if (st_l1[j * 60 + i * 10 + k] != st_l2[100 + j * 1000 + i * 64 + k]) fails++;
    ST_STEP_END("test");
}
int main(void) {
    if (st_init(120000, 200000, 0) != 0) return 4;
    if (st_run(body, NULL) != 0) return 4;
    st_close();
    printf("%s %d\n", fails ? "FAILED" : "OK", fails);
    return fails ? 1 : 0;
}
"#;
    for t in [CTarget::Host, CTarget::Pulp] {
        let (code, out) = run_c(main, t, &[], &[]);
        assert_eq!(code, 0, "{t:?}: {out}");
    }
}

/// The checked PMSIS stops the run, naming the step and the buffer, on each
/// kind of misuse of the target API.
#[test]
fn the_checked_pmsis_catches_misuse() {
    let main = r#"#include <stdio.h>
#include <stdlib.h>
#include "strata_rt.h"
static void body(void *arg) {
    int which = *(int *)arg;
    switch (which) {
    case 0: /* an L3 range past the L3 arena */
        st_ram_read(1, st_l2, 8192 - 8, 16, 1, 0, 0, 1, 0, 0);
        st_dma_wait(1);
        break;
    case 1: /* an L2 range past the L2 arena */
        st_ram_write(1, 0, st_l2 + 4096 - 8, 16, 1, 0, 0, 1, 0, 0);
        st_dma_wait(1);
        break;
    case 2: /* a wait on an id not in flight */
        st_dma(1, st_l1, st_l2, 16, 1, 0, 0, 1, 0, 0);
        st_dma_wait(1);
        st_dma_wait(1);
        break;
    case 3: /* an id reused while in flight */
        st_dma(1, st_l1, st_l2, 16, 1, 0, 0, 1, 0, 0);
        st_dma(1, st_l1 + 64, st_l2 + 64, 16, 1, 0, 0, 1, 0, 0);
        break;
    case 4: /* a step ends with a transfer in flight */
        st_dma(7, st_l1, st_l2, 16, 1, 0, 0, 1, 0, 0);
        ST_STEP_END("training");
        break;
    case 5: /* the cluster task ends with a command in flight */
        st_dma(7, st_l1, st_l2, 16, 1, 0, 0, 1, 0, 0);
        break;
    }
}
int main(int argc, char **argv) {
    int which = argc > 1 ? atoi(argv[1]) : -1;
    if (st_init(1024, 4096, 8192) != 0) return 4;
    st_run(body, &which);
    st_close();
    printf("no violation seen\n");
    return 0;
}
"#;
    let expect = [
        "runs past the L3 arena (8192 bytes) by 8 bytes",
        "runs past the L2 arena (4096 bytes) by 8 bytes",
        "st_dma_wait(1): transfer id 1 is not in flight",
        "transfer id 1 reused while in flight",
        "the training step ends with transfer id 7 in flight",
        "the cluster task ends with 1 copies in flight",
    ];
    for (k, want) in expect.iter().enumerate() {
        let (code, out) = run_c(main, CTarget::Pulp, &[], &[&k.to_string()]);
        assert_eq!(code, 6, "case {k}: {out}");
        assert!(
            out.starts_with("pmsis-host: step ") && out.contains(want),
            "case {k}: expected `{want}`, got: {out}"
        );
    }
}

/// The same inputs give byte-identical projects; a PULP project carries the
/// PMSIS runtime, the checked host PMSIS and the SDK Makefile, and no level
/// without an arena is declared or allocated.
#[test]
fn pulp_projects_are_deterministic_and_complete() {
    let a = pulp_project(4096);
    let b = pulp_project(4096);
    let list = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = Vec::new();
        fn walk(root: &Path, d: &Path, v: &mut Vec<(String, Vec<u8>)>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(root, &p, v);
                } else {
                    let rel = p.strip_prefix(root).unwrap().display().to_string();
                    v.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        walk(d, d, &mut v);
        v.sort();
        v
    };
    let (la, lb) = (list(a.dir.path()), list(b.dir.path()));
    assert_eq!(
        la.iter().map(|x| &x.0).collect::<Vec<_>>(),
        lb.iter().map(|x| &x.0).collect::<Vec<_>>()
    );
    for ((n, x), (_, y)) in la.iter().zip(&lb) {
        assert!(x == y, "{n} differs between two compiles");
    }
    for f in [
        "strata_pulp.c",
        "pulp_host/pmsis.h",
        "pulp_host/pmsis_host.c",
        "pulp_host/bsp/ram.h",
        "pulp_host/bsp/ram/hyperram.h",
        "Makefile.sdk",
    ] {
        assert!(la.iter().any(|x| x.0 == f), "no {f}");
    }
    assert!(!la.iter().any(|x| x.0 == "strata_host.c"));
    let h = std::fs::read_to_string(a.dir.path().join("model.h")).unwrap();
    let c = a.model();
    assert!(h.contains("#define ST_L1_BYTES") && h.contains("#define ST_L2_BYTES"));
    assert!(!h.contains("ST_L3_BYTES"), "an L3 arena nothing uses");
    assert!(
        c.contains("st_init(ST_L1_BYTES, ST_L2_BYTES, 0)"),
        "{}",
        &c[..c.len().min(2000)]
    );
    // Untiled: no L1 arena either.
    let reg = Registry::standard();
    let mut f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    schedule::apply(&mut f.program, Schedule::Memory).unwrap();
    let plan = driver::plan_program(&f.program, driver::DEFAULT_L2).unwrap();
    let mut t = target(4096, Buffering::Double, CTarget::Pulp);
    t.l1 = None;
    let lir = driver::lower_program(&f.program, &plan, &t).unwrap();
    let (h, c) = codegen::emit_model(&f.program, &plan, &lir).unwrap();
    assert!(!h.contains("ST_L1_BYTES") && !h.contains("ST_L3_BYTES"));
    assert!(c.contains("st_init(0, ST_L2_BYTES, 0)"));
}

/// `--target` on the command line: `pulp` builds C, so it goes with
/// `--engine c`; `compile --target pulp` writes the PULP project.
#[test]
fn the_target_flag() {
    let exe = env!("CARGO_BIN_EXE_strata");
    let mlp = workspace().join("examples/mlp");
    let out = Command::new(exe)
        .args([
            "check",
            mlp.to_str().unwrap(),
            "--engine",
            "sim",
            "--target",
            "pulp",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine c"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("p");
    let out = Command::new(exe)
        .args([
            "compile",
            mlp.to_str().unwrap(),
            "--target",
            "pulp",
            "-o",
            o.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(o.join("strata_pulp.c").is_file() && o.join("pulp_host/pmsis_host.c").is_file());
    let mk = std::fs::read_to_string(o.join("Makefile")).unwrap();
    assert!(
        mk.contains("-DST_CHECKED") && mk.contains("pulp_host/pmsis_host.c"),
        "{mk}"
    );
}

/// An L3 arena in the lowered program is declared and allocated at init
/// (a HyperRAM allocation under PMSIS), and the program still trains.
#[test]
fn an_l3_arena_is_declared_and_allocated() {
    let reg = Registry::standard();
    let mut f = strata::fixture::load(&workspace().join("examples/mlp"), &reg).unwrap();
    schedule::apply(&mut f.program, Schedule::Memory).unwrap();
    let plan = driver::plan_program(&f.program, driver::DEFAULT_L2).unwrap();
    let t = target(4096, Buffering::Double, CTarget::Pulp);
    let mut lir = driver::lower_program(&f.program, &plan, &t).unwrap();
    lir.arenas.insert(Level::L3, 12_345);
    let (h, c) = codegen::emit_model(&f.program, &plan, &lir).unwrap();
    assert!(h.contains("#define ST_L3_BYTES 12345"), "{h}");
    assert!(c.contains("st_init(ST_L1_BYTES, ST_L2_BYTES, ST_L3_BYTES)"));
    for target in [CTarget::Host, CTarget::Pulp] {
        let dir = tempfile::tempdir().unwrap();
        let (r, out, ok) = codegen::harness::run(&f, &plan, &lir, dir.path(), target).unwrap();
        assert!(ok, "{target:?}: {out}");
        assert_eq!(r.losses.len(), f.n_batches);
    }
}
