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
