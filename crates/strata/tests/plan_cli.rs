//! `strata plan`: the memory planner on MiniMalloc's CSV format from the CLI.

use std::process::Command;

fn strata(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!e.contains("panicked"), "{e}");
    (out.status.code().unwrap(), o, e)
}

/// A fresh scratch directory for one test, removed when it is dropped.
fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("strata-plan-")
        .tempdir()
        .unwrap()
}

/// Write `text` to `name` in the test's scratch directory.
fn scratch(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn plans_checks_and_writes_offsets() {
    let d = scratch_dir();
    // Three buffers: 0 and 1 overlap in time, 2 overlaps 1 only: the bound is 12.
    let input = scratch(
        &d,
        "ok.csv",
        "id,lower,upper,size\n0,0,3,4\n1,1,4,8\n2,3,5,4\n",
    );
    let out = input.with_extension("out.csv");
    let (code, stdout, err) = strata(&[
        "plan",
        input.to_str().unwrap(),
        "--minimize",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("peak 12 bytes") && stdout.contains("optimal"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,lower,upper,size,offset"));
    let solved = memplan::csv::read(&text).unwrap();
    let offsets: Vec<u64> = solved.buffers.iter().map(|b| b.offset.unwrap()).collect();
    let peak = memplan::check(&solved, &offsets).unwrap();
    assert_eq!(peak, 12);
    let (code, json, _) = strata(&["plan", input.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["buffers"], 3);
    assert_eq!(v["lower_bound"], 12);
    assert_eq!(v["peak"], 12);
    assert_eq!(v["optimal"], true);
    assert!(v["seconds"].as_f64().unwrap() >= 0.0);
}

/// idealloc's SOMAS traces start the tensors that exist before the first
/// step at -1: they plan, and the output keeps the file's own times.
#[test]
fn negative_times_plan_and_stay_as_written() {
    let d = scratch_dir();
    let text = "id,lower,upper,size\n0,-1,2,4\n1,0,3,8\n2,2,5,4\n";
    let input = scratch(&d, "negative-times.csv", text);
    let (code, out, err) = strata(&["plan", input.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("id,lower,upper,size,offset"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let times: Vec<(&str, &str)> = rows.iter().map(|r| (r[1], r[2])).collect();
    assert_eq!(times, [("-1", "2"), ("0", "3"), ("2", "5")]);
    // The placement read back (times shifted alike) passes the checker at
    // the bound: 0 and 1 overlap, 2 overlaps 1 only.
    let solved = memplan::csv::read(&out).unwrap();
    let offsets: Vec<u64> = solved.buffers.iter().map(|b| b.offset.unwrap()).collect();
    assert_eq!(memplan::check(&solved, &offsets).unwrap(), 12);
}

#[test]
fn capacity_too_small_and_malformed_csv_are_errors() {
    let d = scratch_dir();
    let input = scratch(&d, "small.csv", "id,lower,upper,size\n0,0,3,4\n1,1,4,8\n");
    let (code, _, err) = strata(&["plan", input.to_str().unwrap(), "--capacity", "10"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("does not fit") && err.contains("capacity 10"),
        "{err}"
    );
    for (name, text, needle) in [
        ("neg.csv", "id,lower,upper,size\n0,0,3,-4\n", "line 2"),
        (
            "order.csv",
            "id,lower,upper,size\n0,0,3,4\n1,5,5,4\n",
            "line 3",
        ),
        ("col.csv", "id,lower,size\n0,0,4\n", "upper"),
        ("nan.csv", "id,lower,upper,size\n0,zero,3,4\n", "line 2"),
        (
            "huge.csv",
            "id,lower,upper,size\na,0,10,18446744073709551615\nb,5,10,2\n",
            "too large: the highest fixed end plus every other buffer's size and alignment - 1 add up to 18446744073709551617 bytes",
        ),
    ] {
        let p = scratch(&d, name, text);
        let (code, _, err) = strata(&["plan", p.to_str().unwrap()]);
        assert_ne!(code, 0, "{name}");
        assert!(err.contains(needle), "{name}: {err}");
    }
}

#[test]
fn node_limit_gives_the_same_placement_every_time() {
    let d = scratch_dir();
    // A random instance whose optimum the search cannot prove in 500 nodes:
    // the budget, not the (long) time limit, ends it, at the same point.
    let p = memplan::cli::random_instance(300, 11);
    let input = scratch(&d, "budget.csv", &memplan::csv::write(&p, None));
    let budgeted = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            input.to_str().unwrap(),
            "--time-limit",
            "600",
            "--node-limit",
            "500",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, err) = strata(&args);
        assert_eq!(code, 0, "{err}");
        stdout
    };
    let written = |k: u32| {
        let out = input.with_extension(format!("{k}.out.csv"));
        budgeted(&["-o", out.to_str().unwrap()]);
        std::fs::read_to_string(&out).unwrap()
    };
    let (a, b) = (written(1), written(2));
    assert_eq!(a, b);
    let solved = memplan::csv::read(&a).unwrap();
    let offsets: Vec<u64> = solved.buffers.iter().map(|b| b.offset.unwrap()).collect();
    memplan::check(&solved, &offsets).unwrap();
    let v: serde_json::Value = serde_json::from_str(budgeted(&["--json"]).trim()).unwrap();
    assert_eq!(v["optimal"], false, "the budget ended the search: {v}");
}
