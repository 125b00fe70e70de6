//! Interim first-fit planner with the crate's public API; replaced by the
//! full planner (lower bounds, portfolio, exact search) on its branch.
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Buffer {
    pub id: String,
    pub lower: u64,
    pub upper: u64,
    pub size: u64,
    pub alignment: u64,
    pub offset: Option<u64>,
}
#[derive(Clone, Debug)]
pub struct Problem {
    pub buffers: Vec<Buffer>,
    pub capacity: Option<u64>,
}
pub struct Options {
    pub time_limit: Duration,
    pub minimize: bool,
}
impl Default for Options {
    fn default() -> Self {
        Options {
            time_limit: Duration::from_secs(1),
            minimize: true,
        }
    }
}
#[derive(Clone, Debug)]
pub struct Solution {
    pub offsets: Vec<u64>,
    pub peak: u64,
    pub lower_bound: u64,
    pub optimal: bool,
}
#[derive(Debug)]
pub enum Error {
    DoesNotFit {
        capacity: u64,
        best_peak: u64,
        lower_bound: u64,
    },
}
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
#[derive(Debug)]
pub struct CheckError(pub String);
pub fn lower_bound(p: &Problem) -> u64 {
    let mut ev: Vec<(u64, i64)> = Vec::new();
    for b in &p.buffers {
        ev.push((b.lower, b.size as i64));
        ev.push((b.upper, -(b.size as i64)));
    }
    ev.sort_by_key(|e| (e.0, e.1));
    let (mut cur, mut best) = (0i64, 0i64);
    for (_, d) in ev {
        cur += d;
        best = best.max(cur);
    }
    best as u64
}
pub fn solve(p: &Problem, _opts: &Options) -> Result<Solution, Error> {
    let mut order: Vec<usize> = (0..p.buffers.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(p.buffers[i].size), i));
    let mut offsets = vec![0u64; p.buffers.len()];
    let mut placed: Vec<usize> = Vec::new();
    for &i in &order {
        let b = &p.buffers[i];
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .map(|&j| &p.buffers[j])
            .zip(placed.iter())
            .filter(|(o, _)| o.lower < b.upper && b.lower < o.upper)
            .map(|(o, &j)| (offsets[j], offsets[j] + o.size))
            .collect();
        busy.sort();
        let al = b.alignment.max(1);
        let mut off = 0u64;
        for (s, e) in busy {
            if off + b.size <= s {
                break;
            }
            if e > off {
                off = e.div_ceil(al) * al;
            }
        }
        offsets[i] = off;
        placed.push(i);
    }
    let peak = p
        .buffers
        .iter()
        .zip(&offsets)
        .map(|(b, o)| o + b.size)
        .max()
        .unwrap_or(0);
    let lb = lower_bound(p);
    if let Some(c) = p.capacity {
        if peak > c {
            return Err(Error::DoesNotFit {
                capacity: c,
                best_peak: peak,
                lower_bound: lb,
            });
        }
    }
    Ok(Solution {
        offsets,
        peak,
        lower_bound: lb,
        optimal: peak == lb,
    })
}
