//! Every numeric CLI argument is range-checked: an extreme or malformed
//! value is a clear error about that value (what was expected, what was
//! found), exit code non-zero, never a panic (issue 9, item 3).

use std::path::{Path, PathBuf};
use std::process::Command;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp")
}

fn strata(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "strata panicked: {err}");
    (
        out.status.code().expect("exited normally"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

/// `args` with `value` after `flag` fails, naming the flag and the value,
/// and saying what is expected.
fn rejects(cwd: &Path, args: &[&str], flag: &str, value: &str, expected: &str) {
    let mut a: Vec<&str> = args.to_vec();
    a.extend([flag, value]);
    let (code, _, err) = strata(cwd, &a);
    assert_ne!(code, 0, "{a:?} was accepted");
    assert!(
        err.contains(flag) && err.contains(value) && err.contains(expected),
        "{a:?}: {err}"
    );
    assert!(!err.contains("unexpected argument"), "{a:?}: {err}");
}

fn csv(dir: &Path) -> PathBuf {
    let p = dir.join("in.csv");
    std::fs::write(&p, "id,lower,upper,size\n0,0,2,64\n1,1,3,32\n2,2,4,64\n").unwrap();
    p
}

#[test]
fn l2_is_a_byte_count_from_1_to_2_pow_40() {
    let s = tempfile::tempdir().unwrap();
    let ex = example();
    let ex = ex.to_str().unwrap();
    for args in [
        vec!["compile", ex, "-o", "out"],
        vec!["check", ex],
        vec!["run", ex, "-o", "out"],
    ] {
        for v in [
            "-1",
            "0",
            "1099511627777",
            "18446744073709551616",
            "2MB",
            "1.5",
            "nan",
        ] {
            rejects(
                s.path(),
                &args,
                "--l2",
                v,
                "expected a whole number of bytes from 1 to",
            );
        }
    }
    // Nothing was written for any of them.
    assert_eq!(std::fs::read_dir(s.path()).unwrap().count(), 0);
    // In range: fine.
    let (code, _, err) = strata(s.path(), &["check", ex, "--l2", "1048576"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn time_limit_is_seconds_from_0_to_a_day() {
    let s = tempfile::tempdir().unwrap();
    let c = csv(s.path());
    let args = ["plan", c.to_str().unwrap()];
    for v in [
        "NaN", "nan", "-1", "-0.5", "inf", "-inf", "infinity", "1e20", "86401", "soon",
    ] {
        rejects(
            s.path(),
            &args,
            "--time-limit",
            v,
            "expected a number of seconds from 0 to 86400",
        );
    }
    let (code, out, err) = strata(
        s.path(),
        &["plan", c.to_str().unwrap(), "--time-limit", "0.5"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("offset"), "{out}");
}

#[test]
fn node_limit_and_capacity_are_range_checked() {
    let s = tempfile::tempdir().unwrap();
    let c = csv(s.path());
    let args = ["plan", c.to_str().unwrap()];
    for v in ["0", "-3", "1000000000001", "1e6", "many"] {
        rejects(
            s.path(),
            &args,
            "--node-limit",
            v,
            "expected a whole number of nodes from 1 to",
        );
    }
    for v in ["0", "-1", "4611686018427387905", "big"] {
        rejects(
            s.path(),
            &args,
            "--capacity",
            v,
            "expected a whole number of bytes from 1 to",
        );
    }
    let (code, _, err) = strata(
        s.path(),
        &[
            "plan",
            c.to_str().unwrap(),
            "--capacity",
            "128",
            "--node-limit",
            "1000",
        ],
    );
    assert_eq!(code, 0, "{err}");
}

/// Every argument shows its help line in `--help`.
#[test]
fn help_describes_every_argument() {
    let s = tempfile::tempdir().unwrap();
    for (cmd, wanted) in [
        (
            "compile",
            &["<INPUT>", "--optimizer", "--target", "--l2", "--output"][..],
        ),
        (
            "check",
            &["<DIR>", "--engine", "--l2", "--workdir", "--json"][..],
        ),
        (
            "plan",
            &[
                "<INPUT>",
                "--capacity",
                "--minimize",
                "--time-limit",
                "--node-limit",
                "--output",
                "--json",
            ][..],
        ),
        ("run", &["<DIR>", "--l2", "--output"][..]),
    ] {
        let (code, out, err) = strata(s.path(), &[cmd, "--help"]);
        assert_eq!(code, 0, "{err}");
        for w in wanted {
            // clap puts the help text on the argument's line or the next.
            let lines: Vec<&str> = out.lines().collect();
            let i = lines
                .iter()
                .position(|l| l.trim_start().starts_with(w) || l.contains(&format!(", {w}")))
                .unwrap_or_else(|| panic!("`strata {cmd} --help` does not list {w}:\n{out}"));
            let rest = lines[i].trim_start();
            let own = rest.split_once("  ").map(|(_, h)| h.trim()).unwrap_or("");
            let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            assert!(
                !own.is_empty()
                    || (!next.is_empty() && !next.starts_with('-') && !next.starts_with('<')),
                "`strata {cmd} --help`: {w} has no help line:\n{out}"
            );
        }
    }
}

/// A reader that stops reading (`strata plan ... | head -1`) ends strata
/// quietly by SIGPIPE, as any Unix filter, instead of a panic in println!.
#[cfg(unix)]
#[test]
fn a_closed_stdout_is_no_panic() {
    // A placement of 20,000 buffers: far more than a pipe holds, so strata is
    // still writing when the reader goes.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("big.csv");
    let mut text = String::from("id,lower,upper,size\n");
    for i in 0..20_000 {
        text.push_str(&format!("buffer_{i},{i},{},64\n", i + 2));
    }
    std::fs::write(&csv, text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.args(["plan", csv.to_str().unwrap(), "--minimize"]);
    ends_by_sigpipe(cmd);
}

/// The benchmarks, whose reader goes away after the first byte (`| head`),
/// end by SIGPIPE too, without a panic, and remove their scratch
/// directories on the way (they unwind first: `memplan::cli::outln!`).
#[cfg(unix)]
#[test]
fn benchmarks_end_quietly_on_a_closed_stdout() {
    for exe in [
        env!("CARGO_BIN_EXE_strata-bench"),
        env!("CARGO_BIN_EXE_strata-accuracy"),
        env!("CARGO_BIN_EXE_strata-tiling-bench"),
    ] {
        // Their temporary directories go here, to be seen.
        let tmp = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(exe);
        cmd.env("TMPDIR", tmp.path());
        ends_by_sigpipe(cmd);
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{exe} left {left:?} in its TMPDIR");
    }
}

/// Runs `cmd`, reads one byte of its stdout and closes it while the
/// program still has lines to print; it must end by SIGPIPE, not a panic.
#[cfg(unix)]
fn ends_by_sigpipe(mut cmd: Command) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
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
    assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    assert_eq!(
        status.signal(),
        Some(libc_sigpipe()),
        "{cmd:?}: {status:?}: {err}"
    );
}

/// SIGPIPE's number on Linux and the BSDs.
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}

/// The benchmark binaries take no arguments: `--help` says what they do
/// (exit 0) and anything else is refused (exit 2), neither starting a run.
#[test]
fn benchmarks_refuse_arguments_and_answer_help() {
    for exe in [
        env!("CARGO_BIN_EXE_strata-bench"),
        env!("CARGO_BIN_EXE_strata-accuracy"),
        env!("CARGO_BIN_EXE_strata-tiling-bench"),
    ] {
        let help = Command::new(exe).arg("--help").output().unwrap();
        let out = String::from_utf8_lossy(&help.stdout);
        assert_eq!(help.status.code(), Some(0), "{exe}: {out}");
        assert!(
            out.contains("Usage:") && out.lines().count() == 2,
            "{exe}: {out}"
        );
        let bad = Command::new(exe).arg("--l1").output().unwrap();
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{exe}: {err}");
        assert!(
            err.contains("unexpected argument `--l1`") && bad.stdout.is_empty(),
            "{exe}: {err}"
        );
    }
}
