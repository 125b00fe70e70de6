//! `memplan-bench` as a command: a reader that goes away (`| head`) ends
//! it by SIGPIPE, as any Unix filter, not by a panic in its printing.

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_benchmark_by_sigpipe() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memplan-bench"))
        .args(["--time-limit", "0.05", "--only", "somas"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte of its first line, then close while lines remain.
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    // SIGPIPE is 13 on Linux and the BSDs.
    assert_eq!(status.signal(), Some(13), "{status:?}: {err}");
}

/// `--windows K` runs K windows of each shared instance it runs, each
/// checked by the child (a placement that fails the checker panics it),
/// and sums them up per instance.
#[test]
fn windows_of_the_shared_instances_are_rows_and_a_summary() {
    if memplan::cli::shared_dir().is_none() {
        println!("skipped: ../shared not found");
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memplan-bench"))
        .args(["--minimize", "--no-capacity", "--time-limit", "0.2"])
        .args(["--only", "C.", "--windows", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("child failed"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("C[")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for r in &rows {
        // buffers, lower bound, peak, peak / lower bound.
        let f: Vec<&str> = r.split_whitespace().collect();
        let (lb, peak): (u64, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        assert!(peak >= lb && lb > 0, "{r}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("C.1048576.csv windows: ") && l.contains(" of 2 at the bound")),
        "{text}"
    );
}

/// `--dir` rows end with a summary of the directory, and with
/// `--threads 1 --node-limit N` two runs print the same rows: the
/// exact comparison of two builds on instances of one's own.
#[test]
fn a_directory_is_summed_up_and_a_node_limit_repeats_its_rows() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Neither reaches its bound within the budget (1.04 and 1.008 of it),
    // so the rows show where the budget cut the search.
    for (name, p) in [
        ("long.csv", memplan::cli::long_lived(400, 1)),
        ("random.csv", memplan::cli::random_instance(1500, 1)),
    ] {
        std::fs::write(dir.join(name), memplan::csv::write(&p, None)).unwrap();
    }
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memplan-bench"))
            .args(["--minimize", "--no-capacity", "--time-limit", "60"])
            .args(["--threads", "1", "--node-limit", "20000", "--only", "none"])
            .arg("--dir")
            .arg(&dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("child failed"), "{text}");
        assert!(
            text.contains("node limit 20000, 1 thread(s)"),
            "the mode line names the budget: {text}"
        );
        let rows: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("long.csv ") || l.starts_with("random.csv "))
            .map(|l| {
                // Drop the timing and memory columns (seconds, s/limit,
                // MB and the trailing seconds).
                let f: Vec<&str> = l.split_whitespace().collect();
                format!("{} {} {} {} {}", f[0], f[1], f[2], f[3], f[4])
            })
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        let summary = text
            .lines()
            .find(|l| l.contains(": 2 instances, "))
            .unwrap_or_else(|| panic!("no summary of the directory: {text}"))
            .to_string();
        (rows, summary)
    };
    let (rows, summary) = run();
    for r in &rows {
        let f: Vec<&str> = r.split_whitespace().collect();
        let (lb, peak): (u64, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        assert!(peak >= lb && lb > 0, "{r}");
    }
    let at = rows.iter().filter(|r| r.ends_with(" 1.0000")).count();
    assert!(
        summary.contains(&format!("{at} at the bound")),
        "{summary} against {rows:?}"
    );
    assert!(summary.contains("summed excess "), "{summary}");
    assert_eq!(run().0, rows, "a node-limited run on one thread repeats");
    // Only what this test wrote, in the directory it made.
    for name in ["long.csv", "random.csv"] {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    std::fs::remove_dir(&dir).unwrap();
}
