// Embeds every file of runtime/ so the emitter can write the C runtime into
// each generated project; adding a kernel family is adding its .h/.c pair.
use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("runtime/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".c") || n.ends_with(".h"))
        .collect();
    names.sort();
    let mut out = String::from("/// The C runtime's files: (name, contents), sorted by name.\npub const RUNTIME_FILES: &[(&str, &str)] = &[\n");
    for n in &names {
        println!("cargo:rerun-if-changed={}", dir.join(n).display());
        writeln!(
            out,
            "    ({n:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/runtime/{n}\"))),"
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("runtime_files.rs");
    std::fs::write(dest, out).unwrap();
}
