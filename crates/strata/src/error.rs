//! The errors strata reports. Each names what it is about (file, node,
//! tensor, memory level) and says what was expected and what was found.

use std::path::PathBuf;

/// `n` bytes, in words: "1 byte", "2 bytes".
fn bytes(n: u64) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bytes are not a well-formed ONNX model.
    #[error("{path}: not a valid ONNX model: {msg}")]
    Decode { path: PathBuf, msg: String },
    /// A node uses an op strata does not implement.
    #[error(
        "node `{node}`: unknown op `{op_type}` in domain `{domain}` (strata implements: {known})"
    )]
    UnknownOp {
        node: String,
        domain: String,
        op_type: String,
        known: String,
    },
    /// A node's attributes, inputs or shapes are not what its op accepts.
    #[error("node `{node}` ({op_type}): {msg}")]
    Node {
        node: String,
        op_type: String,
        msg: String,
    },
    /// The graph's structure is inconsistent (names, inputs, outputs).
    #[error("graph `{graph}`: {msg}")]
    Graph { graph: String, msg: String },
    /// A `.npz` or `.npy` file is malformed or does not match the graph.
    #[error("{path}: {msg}")]
    Data { path: PathBuf, msg: String },
    /// The program does not fit a memory level.
    /// `proven`: no plan can do better than `needed`; otherwise `needed` is
    /// the best plan the planner found in its time limit and `lower_bound`
    /// (which fits) is what is proven.
    #[error(
        "memory level {level}: {} {} but the level holds {capacity}: {} short{}",
        if *proven { "the program needs at least" } else { "the best plan found needs" },
        bytes(*needed),
        bytes(*missing),
        if *proven { String::new() } else { format!(" (the proven lower bound, {}, fits: a longer planning time limit may find a plan)", bytes(*lower_bound)) }
    )]
    DoesNotFit {
        level: String,
        needed: u64,
        capacity: u64,
        missing: u64,
        proven: bool,
        lower_bound: u64,
    },
    /// The memory plan failed its independent check (a strata bug).
    #[error("memory plan check failed: {0}")]
    PlanCheck(String),
    /// Building or running the emitted C failed.
    #[error("C backend: {0}")]
    Backend(String),
    /// An output directory strata may not write or replace (see `outdir`).
    #[error("output {path}: {msg}")]
    Output { path: PathBuf, msg: String },
    /// Anything else the user asked for that cannot be done.
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn data(path: impl Into<PathBuf>, msg: impl Into<String>) -> Error {
        Error::Data {
            path: path.into(),
            msg: msg.into(),
        }
    }
}
