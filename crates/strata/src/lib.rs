//! strata: a compiler for on-device training on microcontrollers with a
//! tiered memory. It reads ONNX training and optimizer graphs, plans the whole
//! training program as one static memory plan, and emits C.
//!
//! The pipeline, one visible step after another (see [`driver`]):
//! `import → verify → program (train + optimizer) → schedule → plan → check → tile and
//! lower → check → emit C / simulate`. This crate owns the IR, the op set
//! (shape rules, reference kernels, C kernels), the reference interpreter
//! and its f64 oracle,
//! the plan and its checker, the tiler, the lowered program (LIR) and its
//! checker, the simulator with its cycle model, and the C emitter (one
//! model over a small target API, implemented for the host and for PULP's
//! PMSIS, the latter checked on the host by strata's own PMSIS).
//! Placement itself is the `memplan` crate's job.
//!
//! The modules are layered in the order the data flows:
//!
//! 1. import: [`onnx`], the only module that knows protobuf. It converts
//!    each node's attributes into neutral [`ops::Attribute`]s.
//! 2. IR and ops: [`tensor`], [`ops`] (shape rules, reference kernels, and
//!    kernel calls described as data, [`ops::KernelCall`]), [`ir`], [`verify`].
//! 3. program: [`program`], [`schedule`]; the reference interpreter
//!    [`interp`] and the [`oracle`] run it.
//! 4. tiling and plans: [`plan`], [`tile`], with [`platform`]'s parameters.
//! 5. LIR: [`lir`].
//! 6. back ends: [`sim`], and [`codegen`], the only module that knows C.
//!
//! A module imports no later layer, except: [`lir`] is the representation
//! (it needs only IR and ops), which the planner and the tiler import to
//! write it; the tiler times candidate tilings with the simulator's clock
//! ([`sim::time`]) and the simulator reads an op's work from the tiler;
//! [`program`] loads its graphs through the importer; the engines' run
//! loops ([`sim`], [`oracle`]) take [`fixture`]'s fixture and result types.
//! [`driver`], [`fixture`], [`outdir`], [`testing`] and the binaries sit on top.

pub mod codegen;
pub mod driver;
pub mod error;
pub mod fixture;
pub mod interp;
pub mod ir;
pub mod lir;
pub mod onnx;
pub mod ops;
pub mod oracle;
pub mod outdir;
pub mod plan;
pub mod platform;
pub mod program;
pub mod schedule;
pub mod sim;
pub mod split;
pub mod tensor;
pub mod testing;
pub mod tile;
pub mod verify;

pub use error::{Error, Result};
