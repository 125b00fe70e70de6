//! The memory plan on random programs: every plan passes the independent
//! checker, its peak is never below the lower bound, and the checker catches
//! plans that are wrong.

use std::path::Path;

use strata::ops::Registry;
use strata::plan;
use strata::program::Program;
use strata::testing::onnx_build::{f32_init, model, node, value};
use strata::testing::{attr_i, Rng};

/// A random DAG of Gemm / Relu / ReluGrad / Flatten over [4, w] activations.
fn random_program(seed: u64, n_nodes: usize) -> Program {
    let mut rng = Rng(seed | 1);
    let widths = [3usize, 8, 16, 5];
    let mut live: Vec<(String, usize)> = vec![("x".into(), 8)];
    let (mut nodes, mut inits) = (vec![], vec![]);
    for i in 0..n_nodes {
        let out = format!("t{i}");
        let (src, w) = live[rng.below(live.len())].clone();
        match rng.below(4) {
            0 => {
                let w2 = widths[rng.below(widths.len())];
                let wn = format!("w{i}");
                inits.push(f32_init(&wn, &[w2 as i64, w as i64], &vec![0.5; w2 * w]));
                nodes.push(node(
                    "Gemm",
                    "",
                    &[&src, &wn],
                    &[&out],
                    vec![attr_i("transB", 1)],
                ));
                live.push((out, w2));
            }
            1 => {
                nodes.push(node("Relu", "", &[&src], &[&out], vec![]));
                live.push((out, w));
            }
            2 => {
                let same: Vec<_> = live.iter().filter(|(_, x)| *x == w).cloned().collect();
                let (other, _) = &same[rng.below(same.len())];
                nodes.push(node(
                    "ReluGrad",
                    "com.microsoft",
                    &[&src, other],
                    &[&out],
                    vec![],
                ));
                live.push((out, w));
            }
            _ => {
                nodes.push(node(
                    "Flatten",
                    "",
                    &[&src],
                    &[&out],
                    vec![attr_i("axis", 1)],
                ));
                live.push((out, w));
            }
        }
    }
    let (last, w) = live.last().unwrap().clone();
    let bytes = model(
        nodes,
        vec![value("x", 1, &[4, 8])],
        vec![value(&last, 1, &[4, w as i64])],
        inits,
    );
    let m = strata::onnx::decode(&bytes, Path::new("random.onnx")).unwrap();
    Program::single(strata::onnx::import(&m, &Registry::standard()).unwrap()).unwrap()
}

/// A short backstop; the node budget ends the search first.
const TIME: std::time::Duration = std::time::Duration::from_millis(200);
const NODES: u64 = 20_000;

/// Plans `p` into a level large enough for anything.
fn plan_unbounded(p: &Program) -> plan::MemoryPlan {
    plan::plan(p, u64::MAX / 4, TIME, NODES).unwrap()
}

#[test]
fn random_programs_plan_and_check() {
    for seed in 0..60u64 {
        let p = random_program(seed * 7919 + 1, 5 + (seed as usize % 30));
        let pl = plan_unbounded(&p);
        plan::check(&p, &pl).unwrap();
        assert!(pl.arena_bytes >= pl.lower_bound);
        // Every group is aligned and inside the arena.
        for g in &pl.groups {
            assert_eq!(g.offset % plan::ALIGN, 0);
            assert!(g.offset + g.size <= pl.arena_bytes);
        }
    }
}

#[test]
fn checker_catches_overlapping_live_ranges() {
    let mut caught = 0;
    for seed in 0..40u64 {
        let p = random_program(seed * 104729 + 3, 12);
        let mut pl = plan_unbounded(&p);
        // Find two groups live at once and place them on the same bytes.
        let n = pl.groups.len();
        let pair = (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .find(|&(a, b)| {
                let (x, y) = (&pl.groups[a], &pl.groups[b]);
                a < b && x.lower < y.upper && y.lower < x.upper && x.size > 0 && y.size > 0
            });
        if let Some((a, b)) = pair {
            pl.groups[b].offset = pl.groups[a].offset;
            pl.arena_bytes = pl.arena_bytes.max(pl.groups[b].offset + pl.groups[b].size);
            assert!(
                plan::check(&p, &pl).is_err(),
                "seed {seed}: overlapping groups {a} and {b} passed the checker"
            );
            caught += 1;
        }
    }
    assert!(caught > 20, "too few corrupted plans exercised ({caught})");
}

#[test]
fn checker_catches_misalignment_and_overflow() {
    let p = random_program(99, 10);
    let mut pl = plan_unbounded(&p);
    pl.groups[0].offset += 4;
    pl.arena_bytes += 4;
    assert!(plan::check(&p, &pl)
        .unwrap_err()
        .to_string()
        .contains("aligned"));
    let mut pl = plan_unbounded(&p);
    pl.arena_bytes -= 16;
    assert!(plan::check(&p, &pl).is_err());
}

/// A chain x → relu → relu → relu: two activations live at a time, so the
/// lower bound is the input plus two buffers, and the plan reaches it.
#[test]
fn chain_reaches_hand_computed_bound() {
    let n = vec![
        node("Relu", "", &["x"], &["a"], vec![]),
        node("Relu", "", &["a"], &["b"], vec![]),
        node("Relu", "", &["b"], &["c"], vec![]),
    ];
    let bytes = model(
        n,
        vec![value("x", 1, &[4, 8])],
        vec![value("c", 1, &[4, 8])],
        vec![],
    );
    let m = strata::onnx::decode(&bytes, Path::new("chain.onnx")).unwrap();
    let p = Program::single(strata::onnx::import(&m, &Registry::standard()).unwrap()).unwrap();
    let pl = plan::plan(&p, 1 << 20, TIME, NODES).unwrap();
    // x lives [0,1), a [0,2), b [1,3), c [2,3) (an output): at most two of 128 bytes at once.
    assert_eq!(pl.lower_bound, 256);
    assert_eq!(pl.arena_bytes, 256);
}

/// Views and in-place updates share one home: the accumulator's output is
/// the accumulator, and a reshape of a tensor is that tensor.
#[test]
fn aliases_share_storage_in_the_example() {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp");
    let reg = Registry::standard();
    let loaded = strata::driver::load_program(&ex, None, &reg).unwrap();
    let p = loaded.program();
    let pl = strata::driver::plan_program(p, 1 << 20).unwrap();
    let g = &p.graph;
    for &acc in &p.accumulators {
        let out = g
            .find(&format!("{}.out", g.name(acc).trim_end_matches(".buffer")))
            .expect("accumulator output");
        assert_eq!(pl.offset(acc), pl.offset(out));
    }
    for &w in &p.weights {
        let upd = g
            .find(&format!("{}_updated", g.name(w)))
            .expect("sgd output");
        assert_eq!(
            pl.offset(w),
            pl.offset(upd),
            "SGD updates {} in place",
            g.name(w)
        );
    }
}

/// Random programs tiled into random L1 budgets, single- and double-buffered:
/// every lowered program passes the LIR checker (or the budget is refused
/// with an L1 error), and the simulator running it computes what the
/// reference interpreter computes on the untiled graph.
#[test]
fn random_programs_tile_check_and_simulate() {
    use strata::driver::{self, Target};
    use strata::lir::Buffering;
    let mut lowered = 0;
    for seed in 0..40u64 {
        let p = random_program(seed * 104_729 + 3, 4 + (seed as usize % 20));
        let pl = plan_unbounded(&p);
        let mut rng = Rng(seed * 31 + 7);
        let x_id = p.data[0];
        let x = rng.tensor(&p.graph.ty(x_id).shape);
        let mut env = strata::interp::Env::new();
        env.insert(x_id, x.clone());
        strata::interp::run_nodes(&p, &mut env, 0..p.nodes_total()).unwrap();
        for budget in [64 + 16 * rng.below(40) as u64, 512 + rng.below(4096) as u64] {
            for b in [Buffering::Single, Buffering::Double] {
                let mut t = Target::with_l2(u64::MAX / 4);
                t.l1 = Some(budget);
                t.buffering = b;
                let lir = match driver::lower_program(&p, &pl, &t) {
                    Ok(l) => l,
                    Err(e) => {
                        assert!(e.to_string().contains("L1"), "seed {seed}: {e}");
                        continue;
                    }
                };
                lowered += 1;
                let mut sim = strata::sim::Sim::new(&p, &pl, &lir, Default::default());
                sim.set(x_id, &x).unwrap();
                sim.run(0..lir.steps.len()).unwrap();
                for &o in &p.outputs {
                    let (a, r) = (sim.get(o).unwrap(), &env[&o]);
                    let d = strata::tensor::max_abs_diff(a.as_f32(), r.as_f32());
                    assert!(
                        d <= 1e-5,
                        "seed {seed} L1 {budget} {b:?}: output differs by {d}"
                    );
                }
            }
        }
    }
    assert!(
        lowered >= 60,
        "only {lowered} random programs fit their budgets"
    );
}
