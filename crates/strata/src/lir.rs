//! The lowered program (LIR): what every back end reads. A flat list of
//! steps over one arena per memory level with fixed offsets: DMA transfers
//! (1D/2D/3D, strided), waits on them, and kernel calls whose operands are
//! (level, offset, type) triples. The training step and the optimizer are
//! two ranges of one list, over the same arenas.
//!
//! The LIR owns no numerics: a kernel step names the graph node whose op it
//! runs on the tile's shapes, so the simulator runs the op's reference
//! kernel and the C emitter the op's C on exactly the same operands.
//!
//! [`check`] is the independent checker of a lowered program: it replays
//! the steps over byte ranges of every arena and proves that no DMA or
//! kernel touches bytes outside its arena, that a kernel reads only bytes
//! whose inbound DMA has been waited for, that nothing overwrites bytes a
//! DMA is still reading or writing, and that no DMA id is reused while in
//! flight.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::ir::{NodeId, TensorId};
use crate::tensor::{Tensor, TensorType};

/// A memory level of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Level {
    /// The cluster's scratchpad: kernels compute out of it.
    L1,
    /// SoC memory: where tensors live between ops.
    L2,
    /// Off-chip HyperRAM.
    L3,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::L1 => "L1",
            Level::L2 => "L2",
            Level::L3 => "L3",
        })
    }
}

/// What an offset counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Base {
    /// The level's arena.
    Arena(Level),
    /// A read-only constant (kept in L2 beside the arena, as a C array).
    Const(TensorId),
}

/// A byte address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub base: Base,
    pub offset: u64,
}

impl Loc {
    pub fn arena(level: Level, offset: u64) -> Loc {
        Loc {
            base: Base::Arena(level),
            offset,
        }
    }
    pub fn level(&self) -> Level {
        match self.base {
            Base::Arena(l) => l,
            Base::Const(_) => Level::L2,
        }
    }
    pub fn offset_by(self, d: u64) -> Loc {
        Loc {
            offset: self.offset + d,
            ..self
        }
    }
}

/// The shape of one DMA command: `counts[1] × counts[0]` runs of `bytes`
/// contiguous bytes; run `(j, i)` starts at `j·stride[1] + i·stride[0]` on
/// either side. A 1D transfer has counts `[1, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub bytes: u64,
    pub counts: [u64; 2],
    pub src_strides: [u64; 2],
    pub dst_strides: [u64; 2],
}

impl Shape {
    pub fn contiguous(bytes: u64) -> Shape {
        Shape {
            bytes,
            counts: [1, 1],
            src_strides: [0, 0],
            dst_strides: [0, 0],
        }
    }
    pub fn total(&self) -> u64 {
        self.bytes * self.counts[0] * self.counts[1]
    }
    /// 1, 2 or 3.
    pub fn dims(&self) -> u32 {
        1 + (self.counts[0] > 1) as u32 + (self.counts[1] > 1) as u32
    }
    pub fn runs(&self) -> u64 {
        self.counts[0] * self.counts[1]
    }
    /// The byte ranges `[start, end)` of one side, relative to its base offset.
    pub fn ranges(&self, strides: [u64; 2]) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.counts[1]).flat_map(move |j| {
            (0..self.counts[0]).map(move |i| {
                let s = j * strides[1] + i * strides[0];
                (s, s + self.bytes)
            })
        })
    }
}

/// One DMA command. It is issued at its step and its data has landed only
/// once a [`Step::Wait`] on its id has run.
#[derive(Clone, Debug)]
pub struct Dma {
    pub id: u32,
    pub src: Loc,
    pub dst: Loc,
    pub shape: Shape,
}

/// A kernel operand: where the tile sits and its (dense) type.
#[derive(Clone, Debug)]
pub struct Operand {
    pub loc: Loc,
    pub ty: TensorType,
    /// The value, when the operand is a compile-time constant (shape and axes inputs).
    pub value: Option<Tensor>,
    /// For a tile in L1: the box of its tensor at home it was loaded from
    /// or is stored to. The checker proves the L1 bytes a kernel reads hold
    /// exactly that data.
    pub home: Option<HomeBox>,
    /// The kernel reads only the operand's type (a conv gradient phase's
    /// other input): no bytes are moved for it or addressed (`loc` is its
    /// home, never touched; the C passes a null pointer).
    pub shape_only: bool,
}

/// Where a dense tile's bytes live at home: runs of `run` contiguous bytes,
/// repeated by outer loops (count, home stride, tile stride), innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeBox {
    pub at: Loc,
    pub run: u64,
    pub outer: Vec<(u64, u64, u64)>,
}

impl HomeBox {
    /// (tile offset, home offset relative to `at`) of every run.
    pub fn runs(&self) -> Vec<(u64, u64)> {
        let mut v = vec![(0u64, 0u64)];
        for &(c, hs, ts) in &self.outer {
            v = v
                .iter()
                .flat_map(|&(t, h)| (0..c).map(move |k| (t + k * ts, h + k * hs)))
                .collect();
        }
        v
    }
}

/// One kernel call: node `node`'s op on the given operands (its tile).
#[derive(Clone, Debug)]
pub struct Kernel {
    pub node: NodeId,
    /// The tile's own op where it differs from the node's (a convolution
    /// tile's pads or group count); `None`: the node's op.
    pub op: Option<std::sync::Arc<dyn crate::ops::Op>>,
    /// The tile's index within the node (0 for an untiled node).
    pub tile: u32,
    pub inputs: Vec<Option<Operand>>,
    pub outputs: Vec<Option<Operand>>,
}

impl Kernel {
    /// The operand types (and constant values) the op sees for this tile.
    pub fn operands(&self) -> crate::ops::Operands<'_> {
        crate::ops::Operands {
            inputs: self
                .inputs
                .iter()
                .map(|o| {
                    o.as_ref().map(|o| crate::ops::OpInput {
                        ty: &o.ty,
                        value: o.value.as_ref(),
                    })
                })
                .collect(),
            outputs: self
                .outputs
                .iter()
                .map(|o| o.as_ref().map(|o| &o.ty))
                .collect(),
        }
    }
    /// The op type the cycle model charges: the node's, but `Add` for the
    /// kernel that adds a partial tile into an accumulated output tile.
    pub fn op_type<'g>(&self, g: &'g crate::ir::Graph) -> &'g str {
        let add = self.op.as_deref().is_some_and(|o| {
            let o: &dyn std::any::Any = o;
            o.is::<crate::ops::elementwise::Binary>()
        });
        if add {
            "Add"
        } else {
            &g.node(self.node).op_type
        }
    }
    /// The runtime kernel calls of this tile: those of its own op, else of
    /// `node_op` (the node's).
    pub fn calls(
        &self,
        node_op: &dyn crate::ops::Op,
    ) -> Result<Vec<crate::ops::KernelCall>, crate::ops::OpError> {
        let op = self.op.as_deref().unwrap_or(node_op);
        op.kernel_calls(&self.operands())
    }
}

#[derive(Clone, Debug)]
pub enum Step {
    Dma(Dma),
    Wait(u32),
    Kernel(Kernel),
    /// A tile loop (never nested).
    Loop(Loop),
}

/// A tile loop: `count` iterations of `body`. Iteration `t` is the body
/// with every number of every step ([`Step::numbers`]: DMA ids, offsets,
/// tile index) advanced by `t` times its increment in `advance`, an affine
/// rule; everything else (levels, shapes, types, ops) is the same in every
/// iteration. A node's tiles repeat this way, so a lowered program grows
/// with its ops, not its tiles.
#[derive(Clone, Debug)]
pub struct Loop {
    pub count: u32,
    pub body: Vec<Step>,
    /// Per body step, the per-iteration increment of each of its numbers.
    pub advance: Vec<Vec<i64>>,
}

impl Loop {
    /// The steps of iteration `t`.
    pub fn iteration(&self, t: u32) -> impl Iterator<Item = Step> + '_ {
        self.body.iter().zip(&self.advance).map(move |(s, d)| {
            let v: Vec<u64> = s
                .numbers()
                .iter()
                .zip(d)
                .map(|(&x, &dx)| (x as i64 + t as i64 * dx) as u64)
                .collect();
            s.with_numbers(&v)
        })
    }
}

impl Step {
    /// The numbers a tile loop advances: a DMA's id and its source and
    /// destination offsets, a wait's id, a kernel's tile index and its
    /// operands' offsets (L1 or home, and their home boxes').
    pub fn numbers(&self) -> Vec<u64> {
        match self {
            Step::Dma(d) => vec![d.id as u64, d.src.offset, d.dst.offset],
            Step::Wait(id) => vec![*id as u64],
            Step::Kernel(k) => {
                let mut v = vec![k.tile as u64];
                for o in k.inputs.iter().chain(&k.outputs).flatten() {
                    v.push(o.loc.offset);
                    if let Some(h) = &o.home {
                        v.push(h.at.offset);
                    }
                }
                v
            }
            // A loop nested in a loop: its body's first iteration, step by
            // step (the outer loop advances where the inner one starts).
            Step::Loop(l) => l.body.iter().flat_map(Step::numbers).collect(),
        }
    }
    /// This step with its numbers replaced (in [`Step::numbers`]' order).
    pub fn with_numbers(&self, v: &[u64]) -> Step {
        match self {
            Step::Dma(d) => Step::Dma(Dma {
                id: v[0] as u32,
                src: Loc {
                    offset: v[1],
                    ..d.src
                },
                dst: Loc {
                    offset: v[2],
                    ..d.dst
                },
                shape: d.shape,
            }),
            Step::Wait(_) => Step::Wait(v[0] as u32),
            Step::Kernel(k) => {
                let mut k = k.clone();
                k.tile = v[0] as u32;
                let mut i = 1;
                for o in k.inputs.iter_mut().chain(k.outputs.iter_mut()).flatten() {
                    o.loc.offset = v[i];
                    i += 1;
                    if let Some(h) = &mut o.home {
                        h.at.offset = v[i];
                        i += 1;
                    }
                }
                Step::Kernel(k)
            }
            Step::Loop(l) => {
                let mut at = 0;
                let body = l
                    .body
                    .iter()
                    .map(|b| {
                        let k = b.numbers().len();
                        at += k;
                        b.with_numbers(&v[at - k..at])
                    })
                    .collect();
                Step::Loop(Loop {
                    count: l.count,
                    body,
                    advance: l.advance.clone(),
                })
            }
        }
    }
    /// Everything of the step but its numbers: two steps with the same
    /// shape differ only in [`Step::numbers`].
    fn shape_key(&self) -> String {
        match self {
            Step::Dma(d) => format!("D {:?} {:?} {:?}", d.src.base, d.dst.base, d.shape),
            Step::Wait(_) => "W".into(),
            Step::Kernel(k) => {
                let mut s = format!("K {} {:?}", k.node.0, k.op);
                for o in k.inputs.iter().chain(&k.outputs) {
                    match o {
                        None => s.push_str(" -"),
                        // A constant value is the constant its base names.
                        Some(o) => s.push_str(&format!(
                            " ({:?} {} {} {} {:?})",
                            o.loc.base,
                            o.ty,
                            o.value.is_some(),
                            o.shape_only,
                            o.home.as_ref().map(|h| (h.at.base, h.run, &h.outer))
                        )),
                    }
                }
                s
            }
            // Its count, its rule and its body's shapes: two loops of the
            // same shape differ only in where they start.
            Step::Loop(l) => {
                let mut s = format!("L {} {:?} [", l.count, l.advance);
                for b in &l.body {
                    s.push_str(&b.shape_key());
                    s.push(';');
                }
                s.push(']');
                s
            }
        }
    }
}

/// The steps with every loop expanded, in the order they run.
pub fn expand(steps: &[Step]) -> impl Iterator<Item = std::borrow::Cow<'_, Step>> {
    use std::borrow::Cow;
    steps
        .iter()
        .flat_map(|s| -> Box<dyn Iterator<Item = Cow<'_, Step>> + '_> {
            match s {
                Step::Loop(l) => Box::new((0..l.count).flat_map(move |t| {
                    l.iteration(t).flat_map(|s| match s {
                        // A nested loop: its own iterations.
                        Step::Loop(_) => expand(std::slice::from_ref(&s))
                            .map(|s| Cow::Owned(s.into_owned()))
                            .collect::<Vec<_>>(),
                        s => vec![Cow::Owned(s)],
                    })
                })),
                s => Box::new(std::iter::once(Cow::Borrowed(s))),
            }
        })
}

/// Roll runs of steps into tile loops: where a block of `p` steps repeats
/// (at least [`MIN_REPEATS`] times, `p` up to [`MAX_PERIOD`]) with the same
/// shapes and numbers that advance by a constant from block to block, the
/// run becomes one [`Loop`]; at each position the period covering the most
/// steps wins, the shortest on a tie. Loops nest: a loop's body is rolled
/// in turn where its repeats also advance alike from one iteration of the
/// loop to the next (a node whose tiles repeat in groups, a reduction's
/// tiles per output tile, is a loop over the groups of a loop over the
/// tiles), and a second pass rolls runs of blocks that hold a loop. Exact:
/// [`expand`] gives `steps` back.
pub fn roll(steps: Vec<Step>) -> Vec<Step> {
    let once = roll_keyed(steps, None, true).0;
    roll_keyed(once, None, false).0
}

/// [`roll`]'s one pass. With `adv` (the steps are a loop's body, `adv` its
/// per-step advance), two steps match only where their advances match too,
/// and the advances of what it returns come back with it (an inner loop's:
/// those of its first iteration's steps). `nest`: roll each new loop's
/// body in turn.
fn roll_keyed(
    steps: Vec<Step>,
    adv: Option<&[Vec<i64>]>,
    nest: bool,
) -> (Vec<Step>, Vec<Vec<i64>>) {
    // Each distinct shape as a small number, compared many times below.
    let mut ids: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let keys: Vec<u32> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n = ids.len() as u32;
            let mut key = s.shape_key();
            if let Some(adv) = adv {
                key.push_str(&format!(" +{:?}", adv[i]));
            }
            *ids.entry(key).or_insert(n)
        })
        .collect();
    let nums: Vec<Vec<u64>> = steps.iter().map(Step::numbers).collect();
    let n = steps.len();
    // Blocks 0..k of period p from `at` repeat affinely: block k's numbers
    // are block 0's plus k times (block 1's − block 0's).
    let run_len = |at: usize, p: usize| -> usize {
        let mut k = 1;
        while at + (k + 1) * p <= n
            && (0..p).all(|j| {
                let (a, b1, bk) = (at + j, at + p + j, at + k * p + j);
                keys[a] == keys[bk]
                    && nums[a]
                        .iter()
                        .zip(&nums[b1])
                        .zip(&nums[bk])
                        .all(|((&x, &y), &z)| {
                            z as i128 == x as i128 + k as i128 * (y as i128 - x as i128)
                        })
            })
        {
            k += 1;
        }
        k
    };
    let mut out = Vec::new();
    let mut out_adv = Vec::new();
    let mut at = 0;
    while at < n {
        let mut best = (1usize, 1usize);
        for p in 1..=MAX_PERIOD.min((n - at) / 2) {
            if keys[at + p] != keys[at] {
                continue;
            }
            let k = run_len(at, p);
            if k >= MIN_REPEATS && k * p > best.0 * best.1 {
                best = (p, k);
            }
        }
        let (p, k) = best;
        if k < MIN_REPEATS {
            out.push(steps[at].clone());
            if let Some(adv) = adv {
                out_adv.push(adv[at].clone());
            }
            at += 1;
            continue;
        }
        let advance: Vec<Vec<i64>> = (0..p)
            .map(|j| {
                nums[at + j]
                    .iter()
                    .zip(&nums[at + p + j])
                    .map(|(&a, &b)| b as i64 - a as i64)
                    .collect()
            })
            .collect();
        let body = steps[at..at + p].to_vec();
        let (body, advance) = if nest {
            roll_keyed(body, Some(&advance), false)
        } else {
            (body, advance)
        };
        out.push(Step::Loop(Loop {
            count: k as u32,
            body,
            advance,
        }));
        if let Some(adv) = adv {
            out_adv.push(adv[at..at + p].concat());
        }
        at += k * p;
    }
    (out, out_adv)
}

/// The fewest repeats of a block that become a loop.
pub const MIN_REPEATS: usize = 3;
/// The longest block a loop repeats: a double-buffered tile alternates its
/// slots, so its steps repeat with a period of two tiles (tens of steps for
/// a node with many operands, each staged through L2), and a node whose
/// tiles come in groups of an odd count (a channel's rows) repeats every
/// two groups: mobilenet's BatchNorm gradients at `--l2 17071`, 7 tiles of
/// 35 steps a channel, repeat every 490 steps. (256 wrote those out tile by
/// tile: 95,000 lines of C that took gcc -O2 minutes.)
pub const MAX_PERIOD: usize = 1024;

/// How an op's tiles are pipelined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Buffering {
    /// Load, compute, store, one tile after another.
    Single,
    /// The next tile loads and the previous one stores while a tile computes.
    Double,
}

/// How one node was lowered.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeTiling {
    pub node: String,
    pub op_type: String,
    /// Tiles the node runs as (0 for a view: no code).
    pub tiles: u32,
    /// How the tiles split the node: e.g. `whole`, or `axis 1 by 4` of the tile space.
    pub how: String,
    /// L1 bytes of the node's working set (every slot); untiled: the L1
    /// bytes its operands would need as one tile.
    pub l1_bytes: u64,
    /// L2 staging bytes of the node's operands in L3.
    pub staging_bytes: u64,
    /// Per phase (they run one after another), per operand stream: its
    /// tensor and the L2 staging bytes it would take if the tensor lived in
    /// L3 (what the choice of homes weighs).
    #[serde(skip)]
    pub stage_need: Vec<Vec<(TensorId, u64)>>,
}

/// A lowered program.
#[derive(Clone, Debug)]
pub struct Lir {
    /// Arena bytes per level (a level absent here has no arena).
    pub arenas: BTreeMap<Level, u64>,
    /// The lower bound of each planned arena.
    pub lower_bounds: BTreeMap<Level, u64>,
    pub steps: Vec<Step>,
    /// `steps[..train_end]` is the training step, the rest the optimizer.
    pub train_end: usize,
    /// Per graph node, the range of its steps.
    pub node_steps: Vec<std::ops::Range<usize>>,
    pub tilings: Vec<NodeTiling>,
    pub buffering: Option<Buffering>,
    /// The L2 staging area `[start, end)`: where tiles of L3 tensors pass
    /// on their way between L3 and L1 (or, untiled, where kernels read them).
    /// Like L1 it holds copies, which the checker tracks by provenance.
    pub staging: Option<(u64, u64)>,
}

/// The largest number of bytes one DMA command carries (the mchan command
/// word's 17-bit length field; 2^17 would wrap to a zero-length transfer).
pub const DMA_MAX_BYTES: u64 = (1 << 17) - 1;

impl Lir {
    pub fn arena(&self, l: Level) -> u64 {
        self.arenas.get(&l).copied().unwrap_or(0)
    }
    /// DMA commands in `range` of the steps (loops expanded).
    pub fn dma_commands(&self, range: std::ops::Range<usize>) -> usize {
        dma_count(&self.steps[range])
    }
    /// Steps with every loop expanded (what [`expand`] gives).
    pub fn flat_len(&self, range: std::ops::Range<usize>) -> usize {
        flat_count(&self.steps[range])
    }
    /// Expand every loop in place (node ranges and the training step's end
    /// follow): the flat program, step for step, e.g. to edit one tile.
    pub fn unroll(&mut self) {
        let mut steps = Vec::new();
        let mut node_steps = Vec::with_capacity(self.node_steps.len());
        for r in &self.node_steps {
            let start = steps.len();
            steps.extend(expand(&self.steps[r.clone()]).map(|s| s.into_owned()));
            node_steps.push(start..steps.len());
        }
        self.train_end = self.flat_len(0..self.train_end);
        self.steps = steps;
        self.node_steps = node_steps;
    }
}

/// DMA commands of `steps`, loops (nested too) expanded.
fn dma_count(steps: &[Step]) -> usize {
    steps
        .iter()
        .map(|s| match s {
            Step::Dma(_) => 1,
            Step::Loop(l) => l.count as usize * dma_count(&l.body),
            _ => 0,
        })
        .sum()
}

/// Steps of `steps`, loops (nested too) expanded.
fn flat_count(steps: &[Step]) -> usize {
    steps
        .iter()
        .map(|s| match s {
            Step::Loop(l) => l.count as usize * flat_count(&l.body),
            _ => 1,
        })
        .sum()
}

/// Sizes of the read-only constants the program may address.
pub type ConstSizes = BTreeMap<TensorId, u64>;

/// A fault found by [`check`].
fn fail(step: usize, msg: String) -> Error {
    Error::PlanCheck(format!("LIR step {step}: {msg}"))
}

/// Byte ranges of one base with an owner tag; non-overlapping, unsorted.
#[derive(Default)]
struct Ranges(Vec<(u64, u64, u32)>);

impl Ranges {
    fn insert(&mut self, s: u64, e: u64, tag: u32) {
        self.remove(s, e);
        self.0.push((s, e, tag));
    }
    fn remove(&mut self, s: u64, e: u64) {
        let mut next = Vec::with_capacity(self.0.len() + 1);
        for &(a, b, t) in &self.0 {
            if b <= s || e <= a {
                next.push((a, b, t));
            } else {
                if a < s {
                    next.push((a, s, t));
                }
                if e < b {
                    next.push((e, b, t));
                }
            }
        }
        self.0 = next;
    }
    fn overlap(&self, s: u64, e: u64) -> Option<u32> {
        self.0
            .iter()
            .find(|&&(a, b, _)| a < e && s < b)
            .map(|&(_, _, t)| t)
    }
    fn remove_tag(&mut self, tag: u32) {
        self.0.retain(|&(_, _, t)| t != tag);
    }
}

/// What L1 bytes hold: per range, the home address its first byte mirrors
/// (`home.offset - start` is constant along a contiguous run). Ranges do
/// not overlap; keyed by their start, so a write or a lookup touches only
/// the ranges it overlaps.
#[derive(Default)]
struct Content(BTreeMap<u64, (u64, Base, i64)>);

impl Content {
    /// The ranges overlapping `[s, e)`: (start, end, home base, home - start).
    fn overlapping(&self, s: u64, e: u64) -> Vec<(u64, u64, Base, i64)> {
        let before = self
            .0
            .range(..s)
            .next_back()
            .filter(|(_, &(b, ..))| b > s)
            .map(|(&a, &(b, hb, d))| (a, b, hb, d));
        before
            .into_iter()
            .chain(self.0.range(s..e).map(|(&a, &(b, hb, d))| (a, b, hb, d)))
            .collect()
    }
    fn write(&mut self, s: u64, e: u64, base: Base, home: u64) {
        for (a, b, hb, d) in self.overlapping(s, e) {
            self.0.remove(&a);
            if a < s {
                self.0.insert(a, (s, hb, d));
            }
            if e < b {
                self.0.insert(e, (b, hb, d));
            }
        }
        self.0.insert(s, (e, base, home as i64 - s as i64));
    }
    /// The pieces of `[s, e)` that hold data, clipped: (start, end, home base, home - start).
    fn pieces(&self, s: u64, e: u64) -> Vec<(u64, u64, Base, i64)> {
        self.overlapping(s, e)
            .into_iter()
            .map(|(a, b, hb, d)| (a.max(s), b.min(e), hb, d))
            .collect()
    }
    /// Whether byte `s` mirrors `home`, and every byte of `[s, e)` holds some loaded or computed data.
    fn holds(&self, s: u64, e: u64, home: &Loc) -> bool {
        let mut covered = 0;
        let mut first = false;
        for (a, b, hb, d) in self.overlapping(s, e) {
            covered += b.min(e) - a.max(s);
            if a <= s && s < b {
                first = hb == home.base && s as i64 + d == home.offset as i64;
            }
        }
        first && covered == e - s
    }
}

/// The independent checker of a lowered program (see the module doc).
///
/// Per base it keeps the bytes an in-flight DMA reads (`reading`) and the
/// bytes one writes (`landing`). A DMA may not write bytes that another
/// in-flight DMA reads or writes, nor read bytes one is writing; a kernel
/// may touch neither; a wait retires its DMA. At the end of the program and
/// of the training step nothing may be in flight. Every range must lie
/// inside its arena (or its constant), and a DMA command carries at most
/// [`DMA_MAX_BYTES`]. L1 content is tracked by provenance: a kernel's L1
/// operand must hold the data of its `home` box (loaded by a DMA from there,
/// or computed for there by an earlier kernel), and a DMA from L1 to home
/// must carry data that was computed or loaded for that very home.
pub fn check(lir: &Lir, consts: &ConstSizes) -> Result<()> {
    // Copies: L1 and the L2 staging area.
    let scratch = |l: &Loc| match l.base {
        Base::Arena(Level::L1) => true,
        Base::Arena(Level::L2) => lir
            .staging
            .is_some_and(|(s, e)| s <= l.offset && l.offset < e),
        _ => false,
    };
    let mut content: BTreeMap<Level, Content> = BTreeMap::new();
    let mut reading: BTreeMap<Base, Ranges> = BTreeMap::new();
    let mut landing: BTreeMap<Base, Ranges> = BTreeMap::new();
    let mut in_flight: BTreeMap<u32, usize> = BTreeMap::new();
    let bounds = |loc: &Loc, len_end: u64, step: usize, what: &str| -> Result<()> {
        let cap = match loc.base {
            Base::Arena(l) => lir.arena(l),
            Base::Const(t) => *consts.get(&t).ok_or_else(|| {
                fail(
                    step,
                    format!("{what} names constant {} that does not exist", t.0),
                )
            })?,
        };
        if loc.offset + len_end > cap {
            let name = match loc.base {
                Base::Arena(l) => format!("the {l} arena"),
                Base::Const(t) => format!("constant {}", t.0),
            };
            return Err(fail(
                step,
                format!(
                    "{what} reaches byte {} of {name}, which has {cap} bytes",
                    loc.offset + len_end
                ),
            ));
        }
        Ok(())
    };
    if lir.train_end > lir.steps.len() {
        return Err(fail(
            lir.steps.len(),
            format!(
                "the training step ends at step {} of a program of {}",
                lir.train_end,
                lir.steps.len()
            ),
        ));
    }
    let train_end = lir.flat_len(0..lir.train_end);
    let mut total = 0;
    for (i, step) in expand(&lir.steps).enumerate() {
        total = i + 1;
        if i == train_end && !in_flight.is_empty() {
            return Err(fail(
                i,
                format!(
                    "the training step ends with DMA {} still in flight",
                    in_flight.keys().next().unwrap()
                ),
            ));
        }
        match &*step {
            Step::Loop(_) => unreachable!("expanded"),
            Step::Dma(d) => {
                if in_flight.contains_key(&d.id) {
                    return Err(fail(i, format!("DMA id {} reused while in flight", d.id)));
                }
                if d.shape.total() > DMA_MAX_BYTES || d.shape.total() == 0 {
                    return Err(fail(
                        i,
                        format!(
                            "DMA {} carries {} bytes: one command carries 1 to {DMA_MAX_BYTES}",
                            d.id,
                            d.shape.total()
                        ),
                    ));
                }
                if d.dst.level() == d.src.level() {
                    return Err(fail(
                        i,
                        format!("DMA {} stays within {}", d.id, d.src.level()),
                    ));
                }
                if matches!(d.dst.base, Base::Const(_)) {
                    return Err(fail(i, format!("DMA {} writes a read-only constant", d.id)));
                }
                for (s, e) in d.shape.ranges(d.shape.src_strides) {
                    bounds(&d.src, e, i, &format!("DMA {} source", d.id))?;
                    let (s, e) = (d.src.offset + s, d.src.offset + e);
                    if let Some(o) = landing.get(&d.src.base).and_then(|r| r.overlap(s, e)) {
                        return Err(fail(i, format!("DMA {} reads bytes [{s}, {e}) of {:?} that DMA {o} is still writing (a missing wait)", d.id, d.src.base)));
                    }
                    reading.entry(d.src.base).or_default().0.push((s, e, d.id));
                }
                let (from, to) = (scratch(&d.src), scratch(&d.dst));
                let pairs: Vec<((u64, u64), (u64, u64))> = d
                    .shape
                    .ranges(d.shape.src_strides)
                    .zip(d.shape.ranges(d.shape.dst_strides))
                    .collect();
                for &((ss, se), (ds, de)) in &pairs {
                    let (ss, se) = (d.src.offset + ss, d.src.offset + se);
                    let (ds, de) = (d.dst.offset + ds, d.dst.offset + de);
                    let lv = |l: &Loc| l.level();
                    if from && to {
                        // A copy between scratch levels carries the data's provenance along.
                        let c = content.entry(lv(&d.src)).or_default();
                        let pieces = c.pieces(ss, se);
                        if pieces.iter().map(|p| p.1 - p.0).sum::<u64>() != se - ss {
                            return Err(fail(i, format!("DMA {} copies {} bytes [{ss}, {se}) that hold no loaded or computed data", d.id, d.src.level())));
                        }
                        let dc = content.entry(lv(&d.dst)).or_default();
                        for (a, b, hb, dd) in pieces {
                            let home = (a as i64 + dd) as u64;
                            dc.write(a - ss + ds, b - ss + ds, hb, home);
                        }
                    } else if from {
                        let home = Loc {
                            base: d.dst.base,
                            offset: ds,
                        };
                        if !content.entry(lv(&d.src)).or_default().holds(ss, se, &home) {
                            return Err(fail(i, format!("DMA {} stores {} bytes [{ss}, {se}) to {:?}+{ds}, but they do not hold data for that place", d.id, d.src.level(), home.base)));
                        }
                    } else if to {
                        content
                            .entry(lv(&d.dst))
                            .or_default()
                            .write(ds, de, d.src.base, ss);
                    }
                    let _ = de;
                }
                for (s, e) in d.shape.ranges(d.shape.dst_strides) {
                    bounds(&d.dst, e, i, &format!("DMA {} destination", d.id))?;
                    let (s, e) = (d.dst.offset + s, d.dst.offset + e);
                    for (map, what) in [(&landing, "writing"), (&reading, "reading")] {
                        if let Some(o) = map.get(&d.dst.base).and_then(|r| r.overlap(s, e)) {
                            if o != d.id {
                                return Err(fail(i, format!("DMA {} writes bytes [{s}, {e}) of {:?} that DMA {o} is still {what} (a missing wait)", d.id, d.dst.base)));
                            }
                        }
                    }
                    landing.entry(d.dst.base).or_default().insert(s, e, d.id);
                }
                in_flight.insert(d.id, i);
            }
            Step::Wait(id) => {
                if in_flight.remove(id).is_none() {
                    return Err(fail(i, format!("wait on DMA {id}, which is not in flight")));
                }
                for m in [&mut reading, &mut landing] {
                    for r in m.values_mut() {
                        r.remove_tag(*id);
                    }
                }
            }
            Step::Kernel(k) => {
                let ops = k
                    .inputs
                    .iter()
                    .map(|o| (o, false))
                    .chain(k.outputs.iter().map(|o| (o, true)));
                for (o, write) in ops {
                    let Some(o) = o.as_ref().filter(|o| !o.shape_only) else {
                        continue;
                    };
                    let len = o.ty.bytes() as u64;
                    bounds(&o.loc, len, i, &format!("kernel of node {}", k.node.0))?;
                    if write && matches!(o.loc.base, Base::Const(_)) {
                        return Err(fail(
                            i,
                            format!("kernel of node {} writes a read-only constant", k.node.0),
                        ));
                    }
                    let (s, e) = (o.loc.offset, o.loc.offset + len);
                    if scratch(&o.loc) && len > 0 {
                        let lv = o.loc.level();
                        let Some(home) = &o.home else {
                            return Err(fail(
                                i,
                                format!(
                                    "kernel of node {} has an {lv} operand without a home",
                                    k.node.0
                                ),
                            ));
                        };
                        let c = content.entry(lv).or_default();
                        for (t, h) in home.runs() {
                            let (rs, re) = (s + t, s + t + home.run);
                            let at = home.at.offset_by(h);
                            if write {
                                c.write(rs, re, at.base, at.offset);
                            } else if !c.holds(rs, re, &at) {
                                return Err(fail(i, format!("kernel of node {} reads {lv} bytes [{rs}, {re}) expecting data of {:?}+{}, but they hold other data (overwritten, or never loaded)", k.node.0, at.base, at.offset)));
                            }
                        }
                    }
                    if let Some(d) = landing.get(&o.loc.base).and_then(|r| r.overlap(s, e)) {
                        return Err(fail(i, format!("kernel of node {} touches bytes [{s}, {e}) of {:?} before DMA {d} into them has been waited for", k.node.0, o.loc.base)));
                    }
                    if write {
                        if let Some(d) = reading.get(&o.loc.base).and_then(|r| r.overlap(s, e)) {
                            return Err(fail(i, format!("kernel of node {} writes bytes [{s}, {e}) of {:?} that DMA {d} is still reading", k.node.0, o.loc.base)));
                        }
                    }
                }
            }
        }
    }
    if let Some(id) = in_flight.keys().next() {
        return Err(fail(
            total,
            format!("the program ends with DMA {id} in flight"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dma(id: u32, src: u64, dst: u64, bytes: u64) -> Step {
        Step::Dma(Dma {
            id,
            src: Loc::arena(Level::L2, src),
            dst: Loc::arena(Level::L1, dst),
            shape: Shape::contiguous(bytes),
        })
    }

    /// Rolling is exact: the loops expand to the very steps rolled, for
    /// periodic runs (alternating slots, advancing ids and offsets), runs
    /// broken by a step off the rule, and aperiodic noise.
    #[test]
    fn rolled_steps_expand_to_the_original() {
        let mut seed = 7u64;
        let mut rnd = move |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for case in 0..200 {
            let mut steps = Vec::new();
            let mut id = 0u32;
            for _ in 0..(1 + rnd(6)) {
                let tiles = rnd(12);
                let slots = 1 + rnd(2);
                let bytes = 64 * (1 + rnd(4));
                for k in 0..tiles {
                    steps.push(dma(id, 4096 + k * bytes, (k % slots) * 512, bytes));
                    steps.push(Step::Wait(id));
                    id += 1;
                    if rnd(10) == 0 {
                        // Off the rule: another size.
                        steps.push(dma(id, 0, 0, 8));
                        steps.push(Step::Wait(id));
                        id += 1;
                    }
                }
            }
            let before = format!("{steps:?}");
            let rolled = roll(steps.clone());
            let after: Vec<Step> = expand(&rolled).map(|s| s.into_owned()).collect();
            assert_eq!(format!("{after:?}"), before, "case {case}");
            assert!(rolled.len() <= steps.len());
        }
        // A long periodic run becomes one loop.
        let steps: Vec<Step> = (0..40u32)
            .flat_map(|k| {
                [
                    dma(k, 1000 + 64 * k as u64, (k as u64 % 2) * 64, 64),
                    Step::Wait(k),
                ]
            })
            .collect();
        let rolled = roll(steps);
        assert_eq!(rolled.len(), 1);
        let Step::Loop(l) = &rolled[0] else { panic!() };
        assert_eq!((l.count, l.body.len()), (20, 4));
        // Tiles in groups (a reduction's tiles per output tile, then its
        // store): a loop over the groups whose body is a loop over the
        // tiles, not a loop per group; expanded, the same steps.
        let mut steps = Vec::new();
        let mut id = 0u32;
        for g in 0..9u64 {
            for k in 0..7u64 {
                steps.push(dma(id, 8192 + 448 * g + 64 * k, (k % 2) * 64, 64));
                steps.push(Step::Wait(id));
                id += 1;
            }
            steps.push(dma(id, 128, 65536 + 16 * g, 16));
            steps.push(Step::Wait(id));
            id += 1;
        }
        let before = format!("{steps:?}");
        let rolled = roll(steps);
        let after: Vec<Step> = expand(&rolled).map(|s| s.into_owned()).collect();
        assert_eq!(format!("{after:?}"), before);
        assert_eq!(rolled.len(), 1, "{rolled:#?}");
        let Step::Loop(outer) = &rolled[0] else {
            panic!()
        };
        assert_eq!(outer.count, 9);
        assert!(
            outer
                .body
                .iter()
                .any(|s| matches!(s, Step::Loop(l) if l.count >= 3)),
            "{outer:#?}"
        );
        let lir_steps = rolled.len();
        assert_eq!(lir_steps, 1);
        assert_eq!(dma_count(&rolled), 9 * 8);
        assert_eq!(flat_count(&rolled), 9 * 16);
    }
}
