//! The simulator: runs a lowered program ([`Lir`]) with real f32 numerics
//! over byte arenas, and counts cycles with the cycle model of
//! [`Platform`].
//!
//! DMA semantics expose a missing wait: a transfer reads its source when it
//! is issued, fills its destination with poison (all bits set: NaN for
//! floats) at once, and lands its data only at the wait on its id. A kernel
//! that reads a tile before its wait computes on NaN, and the run fails its
//! comparison.
//!
//! Timing: the cores, the cluster DMA engine (L2↔L1) and the L3 channel
//! (HyperRAM↔L2) are three resources. Issuing a command costs the cores
//! `dma_issue` cycles; each engine runs its commands in order, a cluster
//! DMA `setup + bytes / dma_bw (+ per row)`, an L3 transfer
//! `l3_latency + bytes / l3_bw (+ per row)`; a wait stalls the cores until
//! its command is done; a kernel costs `overhead + work / (cores × rate)`,
//! times `l2_access` when it computes out of L2 (untiled). Double
//! buffering shows up on its own: a transfer issued before a kernel runs
//! while it computes.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::fixture::{Fixture, Results};
use crate::ir::TensorId;
use crate::lir::{Base, Level, Lir, Step};
use crate::plan::MemoryPlan;
use crate::platform::Platform;
use crate::program::Program;
use crate::tensor::{Tensor, TensorType};

/// Cycles of one op (node) over a run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct OpCycles {
    pub node: String,
    pub op_type: String,
    /// Kernel cycles.
    pub compute: u64,
    /// Cycles the DMA engine spent on the node's transfers.
    pub dma: u64,
    /// Cycles the cores waited for a transfer.
    pub stall: u64,
    /// The node's own bounds: its work at the peak rate, and its bytes over
    /// each channel's bandwidth (cluster DMA, L3).
    #[serde(skip)]
    pub work: f64,
    #[serde(skip)]
    pub transfer: [f64; 2],
}

/// Cycle counts of a simulated run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Cycles {
    pub train: u64,
    pub optimizer: u64,
    pub total: u64,
}

/// The two bounds of the same run: all work at the peak rate, and every
/// byte across each level boundary at its bandwidth.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Bounds {
    pub compute: u64,
    pub transfer: u64,
    /// Σ over nodes of max(the node's compute, its transfers): nodes run
    /// one after another (a node's pipeline drains before the next
    /// starts), so a program whose compute-bound nodes (convolutions) and
    /// transfer-bound ones (element-wise, BatchNorm, accumulators) take
    /// turns cannot beat this, however well each node overlaps its own.
    pub sequential: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SimReport {
    /// Summed over the run.
    pub cycles: Cycles,
    pub bounds: Bounds,
    pub train_steps: u64,
    pub optimizer_steps: u64,
    /// DMA commands of one training step and of one optimizer step.
    pub dma_commands: BTreeMap<String, u64>,
    pub ops: Vec<OpCycles>,
}

/// The timing of the cycle model alone: the cores' clock and the DMA
/// engine's, shared by the simulator and by the tiler (which times its
/// candidate tilings with it).
#[derive(Clone, Debug, Default)]
pub struct Clock {
    pub now: f64,
    pub dma_free: f64,
    /// When the L3 channel is free.
    pub l3_free: f64,
    ends: BTreeMap<u32, f64>,
}

impl Clock {
    /// Issue a DMA command: the cores pay the issue, the engine runs it in order. Returns its cost.
    pub fn dma(&mut self, pf: &Platform, d: &crate::lir::Dma) -> f64 {
        let sh = &d.shape;
        self.now += pf.dma_issue;
        let (free, cost) = if d.src.level() == Level::L3 || d.dst.level() == Level::L3 {
            (&mut self.l3_free, pf.l3_cycles(sh.total(), sh.runs()))
        } else {
            (&mut self.dma_free, pf.dma_cycles(sh.total(), sh.runs()))
        };
        *free = self.now.max(*free) + cost;
        self.ends.insert(d.id, *free);
        cost
    }
    /// Wait for a command; returns the cycles the cores stalled.
    pub fn wait(&mut self, id: u32) -> f64 {
        let end = self.ends.remove(&id).unwrap_or(0.0);
        let stall = (end - self.now).max(0.0);
        self.now += stall;
        stall
    }
    /// Run a kernel of node `node`'s op type on the kernel step's operand
    /// types; returns (its cycles, its work at the peak rate).
    pub fn kernel(
        &mut self,
        pf: &Platform,
        g: &crate::ir::Graph,
        k: &crate::lir::Kernel,
    ) -> (f64, f64) {
        let ins: Vec<Option<&TensorType>> =
            k.inputs.iter().map(|o| o.as_ref().map(|o| &o.ty)).collect();
        let outs: Vec<Option<&TensorType>> = k
            .outputs
            .iter()
            .map(|o| o.as_ref().map(|o| &o.ty))
            .collect();
        let w = crate::tile::work(k.op_type(g), &ins, &outs);
        // Computing out of L2 (the untiled baseline) pays the slower access.
        let in_l2 = k
            .outputs
            .iter()
            .flatten()
            .next()
            .is_some_and(|o| o.loc.level() != Level::L1);
        let c = if in_l2 {
            pf.kernel_overhead + pf.work_cycles(w) * pf.l2_access
        } else {
            pf.kernel_cycles(w)
        };
        self.now += c;
        (c, pf.work_cycles(w))
    }
}

/// The modelled cycles of a run of steps from an idle machine (no numerics).
pub fn time(steps: &[Step], g: &crate::ir::Graph, pf: &Platform) -> f64 {
    let mut c = Clock::default();
    for s in crate::lir::expand(steps) {
        match &*s {
            Step::Loop(_) => unreachable!("expanded"),
            Step::Dma(d) => {
                c.dma(pf, d);
            }
            Step::Wait(id) => {
                c.wait(*id);
            }
            Step::Kernel(k) => {
                c.kernel(pf, g, k);
            }
        }
    }
    c.now.max(c.dma_free).max(c.l3_free)
}

/// A machine running one lowered program.
pub struct Sim<'a> {
    p: &'a Program,
    plan: &'a MemoryPlan,
    lir: &'a Lir,
    pf: Platform,
    mem: BTreeMap<Base, Vec<u8>>,
    /// In-flight DMAs: id → destination writes.
    pending: BTreeMap<u32, Vec<(Base, u64, Vec<u8>)>>,
    clock: Clock,
    compute_bound: f64,
    /// Transfer cycles at full bandwidth: L2↔L1 and L3↔L2.
    transfer_bound: [f64; 2],
    ops: Vec<OpCycles>,
}

impl<'a> Sim<'a> {
    pub fn new(p: &'a Program, plan: &'a MemoryPlan, lir: &'a Lir, pf: Platform) -> Sim<'a> {
        let mut mem = BTreeMap::new();
        for (l, bytes) in &lir.arenas {
            mem.insert(Base::Arena(*l), vec![0u8; *bytes as usize]);
        }
        for (t, v) in &p.graph.constants {
            mem.insert(Base::Const(*t), v.to_le_bytes());
        }
        let ops = p
            .graph
            .nodes
            .iter()
            .map(|n| OpCycles {
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                ..Default::default()
            })
            .collect();
        Sim {
            p,
            plan,
            lir,
            pf,
            mem,
            pending: BTreeMap::new(),
            clock: Clock::default(),
            compute_bound: 0.0,
            transfer_bound: [0.0; 2],
            ops,
        }
    }

    fn bytes(&self, base: Base, off: u64, len: u64) -> Result<&[u8]> {
        let m = self
            .mem
            .get(&base)
            .ok_or_else(|| Error::Backend(format!("simulator: no memory {base:?}")))?;
        m.get(off as usize..(off + len) as usize).ok_or_else(|| {
            Error::Backend(format!(
                "simulator: access [{off}, {}) outside {base:?} ({} bytes)",
                off + len,
                m.len()
            ))
        })
    }

    fn write(&mut self, base: Base, off: u64, data: &[u8]) -> Result<()> {
        let m = self
            .mem
            .get_mut(&base)
            .ok_or_else(|| Error::Backend(format!("simulator: no memory {base:?}")))?;
        let len = m.len();
        m.get_mut(off as usize..off as usize + data.len())
            .ok_or_else(|| {
                Error::Backend(format!(
                    "simulator: write [{off}, {}) outside {base:?} ({len} bytes)",
                    off as usize + data.len()
                ))
            })?
            .copy_from_slice(data);
        Ok(())
    }

    /// Put a tensor's value at its home.
    pub fn set(&mut self, t: TensorId, v: &Tensor) -> Result<()> {
        let (level, off) = self.plan.home(t).ok_or_else(|| {
            Error::Backend(format!(
                "simulator: `{}` has no place in the arena",
                self.p.graph.name(t)
            ))
        })?;
        self.write(Base::Arena(level), off, &v.to_le_bytes())
    }

    /// A tensor's value at its home.
    pub fn get(&self, t: TensorId) -> Result<Tensor> {
        let ty = self.p.graph.ty(t);
        let Some((level, off)) = self.plan.home(t) else {
            return self.p.graph.constants.get(&t).cloned().ok_or_else(|| {
                Error::Backend(format!(
                    "simulator: `{}` has no value",
                    self.p.graph.name(t)
                ))
            });
        };
        let b = self.bytes(Base::Arena(level), off, ty.bytes() as u64)?;
        Tensor::from_le_bytes(ty, b).ok_or_else(|| {
            Error::Backend(format!("simulator: cannot read `{}`", self.p.graph.name(t)))
        })
    }

    /// Run steps `range` of the program; returns the cycles they took.
    pub fn run(&mut self, range: std::ops::Range<usize>) -> Result<f64> {
        let t0 = self.clock.now;
        let g = &self.p.graph;
        let mut node_of = vec![0usize; self.lir.steps.len()];
        for (n, r) in self.lir.node_steps.iter().enumerate() {
            for s in r.clone() {
                node_of[s] = n;
            }
        }
        let lir = self.lir;
        for step in
            range.flat_map(|i| crate::lir::expand(&lir.steps[i..i + 1]).map(move |s| (i, s)))
        {
            let (i, step) = step;
            let n = node_of[i];
            match &*step {
                Step::Loop(_) => unreachable!("expanded"),
                Step::Dma(d) => {
                    let sh = d.shape;
                    let mut writes = Vec::new();
                    for ((ss, se), (ds, _)) in
                        sh.ranges(sh.src_strides).zip(sh.ranges(sh.dst_strides))
                    {
                        let data = self.bytes(d.src.base, d.src.offset + ss, se - ss)?.to_vec();
                        writes.push((d.dst.base, d.dst.offset + ds, data));
                    }
                    for (b, off, data) in &writes {
                        let poison = vec![0xFFu8; data.len()];
                        self.write(*b, *off, &poison)?;
                    }
                    let cost = self.clock.dma(&self.pf, d);
                    self.ops[n].dma += cost as u64;
                    if d.src.level() == Level::L3 || d.dst.level() == Level::L3 {
                        self.transfer_bound[1] += sh.total() as f64 / self.pf.l3_bw;
                        self.ops[n].transfer[1] += sh.total() as f64 / self.pf.l3_bw;
                    } else {
                        self.transfer_bound[0] += sh.total() as f64 / self.pf.dma_bw;
                        self.ops[n].transfer[0] += sh.total() as f64 / self.pf.dma_bw;
                    }
                    if self.pending.insert(d.id, writes).is_some() {
                        return Err(Error::Backend(format!(
                            "simulator: DMA id {} reused in flight",
                            d.id
                        )));
                    }
                }
                Step::Wait(id) => {
                    let writes = self.pending.remove(id).ok_or_else(|| {
                        Error::Backend(format!("simulator: wait on DMA {id}, not in flight"))
                    })?;
                    for (b, off, data) in writes {
                        self.write(b, off, &data)?;
                    }
                    self.ops[n].stall += self.clock.wait(*id) as u64;
                }
                Step::Kernel(k) => {
                    let node = g.node(k.node);
                    let mut ins: Vec<Option<Tensor>> = Vec::with_capacity(k.inputs.len());
                    for o in &k.inputs {
                        ins.push(match o {
                            None => None,
                            // Only its type is read: no bytes stand behind it.
                            Some(o) if o.shape_only => Some(Tensor::zeros(&o.ty)),
                            Some(o) => {
                                let b =
                                    self.bytes(o.loc.base, o.loc.offset, o.ty.bytes() as u64)?;
                                Some(Tensor::from_le_bytes(&o.ty, b).ok_or_else(|| {
                                    Error::Backend(format!(
                                        "simulator: cannot read an operand of `{}`",
                                        node.name
                                    ))
                                })?)
                            }
                        });
                    }
                    let in_refs: Vec<Option<&Tensor>> = ins.iter().map(|t| t.as_ref()).collect();
                    let out_tys: Vec<Option<&TensorType>> = k
                        .outputs
                        .iter()
                        .map(|o| o.as_ref().map(|o| &o.ty))
                        .collect();
                    let op = k.op.as_deref().unwrap_or(&*node.op);
                    let outs = op.eval(&in_refs, &out_tys).map_err(|e| Error::Node {
                        node: node.name.clone(),
                        op_type: node.op_type.clone(),
                        msg: e.0,
                    })?;
                    for (o, v) in k.outputs.iter().zip(&outs) {
                        if let Some(o) = o {
                            self.write(o.loc.base, o.loc.offset, &v.to_le_bytes())?;
                        }
                    }
                    let (c, w) = self.clock.kernel(&self.pf, g, k);
                    self.ops[n].compute += c as u64;
                    self.compute_bound += w;
                    self.ops[n].work += w;
                }
            }
        }
        Ok(self.clock.now - t0)
    }
}

/// Run a fixture's training loop on the simulator.
pub fn run_fixture(
    f: &Fixture,
    plan: &MemoryPlan,
    lir: &Lir,
    pf: &Platform,
) -> Result<(Results, SimReport)> {
    let p = &f.program;
    let mut sim = Sim::new(p, plan, lir, pf.clone());
    for (t, v) in &f.initial {
        sim.set(*t, v)?;
    }
    for t in &p.accumulators {
        sim.set(*t, &Tensor::zeros(p.graph.ty(*t)))?;
    }
    for (t, v) in &p.state_init {
        sim.set(*t, v)?;
    }
    let mut rep = SimReport::default();
    let (mut train, mut opt) = (0.0, 0.0);
    let mut losses = Vec::new();
    for (b, batch) in f.batches.iter().enumerate() {
        for (t, v) in p.data.iter().zip(batch) {
            sim.set(*t, v)?;
        }
        if let Some(flag) = p.flag {
            let ty = p.graph.ty(flag);
            sim.set(
                flag,
                &Tensor::bool(ty.shape.clone(), vec![b % f.n_accum == 0; ty.numel()]),
            )?;
        }
        train += sim.run(0..lir.train_end)?;
        rep.train_steps += 1;
        if let Some(l) = p.loss {
            losses.push(sim.get(l)?.as_f32()[0]);
        }
        if p.has_optimizer() && (b + 1) % f.n_accum == 0 {
            opt += sim.run(lir.train_end..lir.steps.len())?;
            rep.optimizer_steps += 1;
        }
    }
    let tensors = f
        .ref_tensors
        .iter()
        .map(|(_, t, _)| sim.get(*t))
        .collect::<Result<Vec<_>>>()?;
    rep.cycles = Cycles {
        train: train.round() as u64,
        optimizer: opt.round() as u64,
        total: train.round() as u64 + opt.round() as u64,
    };
    rep.bounds = Bounds {
        compute: sim.compute_bound.round() as u64,
        // The two channels run side by side: the busier one bounds the run.
        transfer: sim.transfer_bound[0].max(sim.transfer_bound[1]).round() as u64,
        sequential: sim
            .ops
            .iter()
            .map(|o| o.work.max(o.transfer[0]).max(o.transfer[1]))
            .sum::<f64>()
            .round() as u64,
    };
    rep.dma_commands
        .insert("train".into(), lir.dma_commands(0..lir.train_end) as u64);
    rep.dma_commands.insert(
        "optimizer".into(),
        lir.dma_commands(lir.train_end..lir.steps.len()) as u64,
    );
    rep.ops = sim.ops;
    Ok((Results { losses, tensors }, rep))
}
