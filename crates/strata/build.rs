// Embeds the C runtime so the emitter can write it into each generated
// project: runtime/*.{c,h} (the kernels and the common runtime, in every
// project; adding a kernel family is adding its .h/.c pair), runtime/targets/
// (one implementation of the target API per target) and runtime/pulp_host/
// (strata's host implementation of the PMSIS subset, for checked PULP builds).
use std::fmt::Write;
use std::path::Path;

/// The .c/.h files under `dir` (recursively), as paths relative to it, sorted.
fn files(dir: &Path, rel: &str, out: &mut Vec<String>, recurse: bool) {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(rel))
        .expect("runtime directory exists")
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if e.path().is_dir() {
            if recurse {
                files(dir, &path, out, true);
            }
        } else if name.ends_with(".c") || name.ends_with(".h") {
            out.push(path);
        }
    }
}

fn table(out: &mut String, name: &str, doc: &str, dir: &Path, rel: &str, recurse: bool) {
    let mut names = Vec::new();
    files(dir, rel, &mut names, recurse);
    writeln!(
        out,
        "/// {doc}: (path, contents), sorted by path.\npub const {name}: &[(&str, &str)] = &["
    )
    .unwrap();
    for n in &names {
        let full = dir.join(n);
        println!("cargo:rerun-if-changed={}", full.display());
        let inner = n.strip_prefix(rel).unwrap_or(n).trim_start_matches('/');
        writeln!(
            out,
            "    ({inner:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/runtime/{n}\"))),"
        )
        .unwrap();
    }
    out.push_str("];\n");
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime");
    println!("cargo:rerun-if-changed={}", dir.display());
    for sub in ["targets", "pulp_host", "pulp_host/bsp", "pulp_host/bsp/ram"] {
        println!("cargo:rerun-if-changed={}", dir.join(sub).display());
    }
    let mut out = String::new();
    table(
        &mut out,
        "RUNTIME_FILES",
        "The C runtime's files in every project",
        &dir,
        "",
        false,
    );
    table(
        &mut out,
        "TARGET_FILES",
        "One implementation of the target API per target (`strata_<target>.c`)",
        &dir,
        "targets",
        false,
    );
    table(
        &mut out,
        "PULP_HOST_FILES",
        "strata's host PMSIS, written into `pulp_host/` of a PULP project",
        &dir,
        "pulp_host",
        true,
    );
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("runtime_files.rs");
    std::fs::write(dest, out).unwrap();
}
