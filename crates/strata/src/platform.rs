//! The target's parameters and its cycle model: every figure the tiler and
//! the simulator use, in one place, each with its source or marked as an
//! estimate (`est`). Estimates are named parameters, overridable from the
//! command line (`--param name=value`), never presented as measured silicon.

use crate::error::{Error, Result};

/// The cycle model of a PULP cluster with an L2↔L1 DMA engine (see
/// `shared/docs/PLATFORM.md` for the figures and their sources).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Platform {
    /// Cluster cores (src: GVSoC siracusa cluster config).
    pub cores: f64,
    /// fp32 MACs per cycle per core on gemm/conv-like kernels (src:
    /// PULP-TrainLib, SAMOS'22: up to 4.39 MAC/cycle on 8 cores).
    pub mac_rate: f64,
    /// Elements per cycle per core of element-wise, reduction and loss
    /// kernels (est: one load, one op, one store per element and core).
    pub elem_rate: f64,
    /// Cycles of a kernel call: argument set-up, fork and barrier (est).
    pub kernel_overhead: f64,
    /// Cycles to program one DMA command (est, PLATFORM.md: ~30).
    pub dma_setup: f64,
    /// L2↔L1 bytes per cycle (est, PLATFORM.md: 8).
    pub dma_bw: f64,
    /// Extra cycles per row of a 2D/3D command (est).
    pub dma_row: f64,
    /// Cycles the core spends issuing one command (est).
    pub dma_issue: f64,
    /// L3↔L2 (HyperRAM over HyperBus) bytes per cycle (est, PLATFORM.md: ~1).
    pub l3_bw: f64,
    /// Cycles of latency per L3 transfer command (est, PLATFORM.md: ~200).
    pub l3_latency: f64,
    /// Extra cycles per row of a 2D L3 transfer (est).
    pub l3_row: f64,
    /// How much slower a kernel runs on operands in L2 than in L1: the
    /// cores reach L2 through the cluster's bus, not single-cycle TCDM
    /// (est; the untiled baseline's kernels pay it).
    pub l2_access: f64,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            cores: 8.0,
            mac_rate: 4.39 / 8.0,
            elem_rate: 1.0,
            kernel_overhead: 100.0,
            dma_setup: 30.0,
            dma_bw: 8.0,
            dma_row: 2.0,
            dma_issue: 10.0,
            l3_bw: 1.0,
            l3_latency: 200.0,
            l3_row: 4.0,
            l2_access: 2.0,
        }
    }
}

/// What a kernel does, for the cycle model.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Work {
    /// Multiply-accumulates of a gemm/conv-like kernel.
    Macs(u64),
    /// Elements of an element-wise, reduction or loss kernel.
    Elems(u64),
}

impl Platform {
    /// Cycles of one kernel call.
    pub fn kernel_cycles(&self, w: Work) -> f64 {
        self.kernel_overhead + self.work_cycles(w)
    }
    /// Cycles of the work alone at the peak rate (the compute bound's share).
    pub fn work_cycles(&self, w: Work) -> f64 {
        match w {
            Work::Macs(m) => m as f64 / (self.cores * self.mac_rate),
            Work::Elems(e) => e as f64 / (self.cores * self.elem_rate),
        }
    }
    /// Cycles of one DMA command of `bytes` in `rows` runs.
    pub fn dma_cycles(&self, bytes: u64, rows: u64) -> f64 {
        transfer(self.dma_setup, self.dma_bw, self.dma_row, bytes, rows)
    }

    /// Cycles of one L3↔L2 transfer command of `bytes` in `rows` runs.
    pub fn l3_cycles(&self, bytes: u64, rows: u64) -> f64 {
        transfer(self.l3_latency, self.l3_bw, self.l3_row, bytes, rows)
    }

    /// Set one parameter from `name=value`.
    pub fn set(&mut self, assignment: &str) -> Result<()> {
        let bad = |m: String| Error::Usage(format!("--param `{assignment}`: {m}"));
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| bad("expected name=value".into()))?;
        let v: f64 = value
            .trim()
            .parse()
            .map_err(|_| bad(format!("`{value}` is not a number")))?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad(format!("{v} is not a finite non-negative number")));
        }
        let slot = match name.trim() {
            "cores" => &mut self.cores,
            "mac_rate" => &mut self.mac_rate,
            "elem_rate" => &mut self.elem_rate,
            "kernel_overhead" => &mut self.kernel_overhead,
            "dma_setup" => &mut self.dma_setup,
            "dma_bw" => &mut self.dma_bw,
            "dma_row" => &mut self.dma_row,
            "dma_issue" => &mut self.dma_issue,
            "l3_bw" => &mut self.l3_bw,
            "l3_latency" => &mut self.l3_latency,
            "l3_row" => &mut self.l3_row,
            "l2_access" => &mut self.l2_access,
            other => {
                return Err(bad(format!(
                    "unknown parameter `{other}`; known: cores, mac_rate, elem_rate, kernel_overhead, dma_setup, dma_bw, dma_row, dma_issue, l3_bw, l3_latency, l3_row, l2_access"
                )))
            }
        };
        if v == 0.0
            && matches!(
                name.trim(),
                "cores" | "mac_rate" | "elem_rate" | "dma_bw" | "l3_bw" | "l2_access"
            )
        {
            return Err(bad("a rate must be positive".into()));
        }
        *slot = v;
        Ok(())
    }
}

/// One transfer command: a fixed cost, the bytes at the bandwidth, and a
/// cost per row when it has more than one.
fn transfer(fixed: f64, bw: f64, per_row: f64, bytes: u64, rows: u64) -> f64 {
    fixed + bytes as f64 / bw + if rows > 1 { rows as f64 * per_row } else { 0.0 }
}
