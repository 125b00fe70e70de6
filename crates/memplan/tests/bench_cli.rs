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
