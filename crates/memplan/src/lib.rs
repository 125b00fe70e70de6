//! `memplan` owns static memory planning for strata: given buffers that are
//! each live over a half-open time interval `[lower, upper)` and need `size`
//! bytes, it assigns every buffer a byte offset so that no two buffers that are
//! live at the same time share a byte, while keeping the peak (highest byte
//! used) small or within a capacity. This is the dynamic storage allocation
//! (DSA) problem. The crate provides proven lower bounds, a fast greedy
//! portfolio that scales to 100,000+ buffers, an anytime exact branch-and-bound
//! search over canonical placements, an independent solution checker, and
//! reading/writing of the MiniMalloc CSV format. It depends on no other strata
//! crate.
//!
//! The time limit: every stage watches it (the first greedy pass every
//! 256 buffers, the portfolio between passes, the large-instance
//! improvement within passes, the exact search every 1,024 nodes, or
//! 256 in the general search, down to 16 on its groups of over 512
//! buffers). What
//! always runs is `O(n log n)` or bounded: validation, the lower bound,
//! the attempt to build the overlap graph (stopped at 8M pairs), and the
//! start above [`LARGE`] buffers: the start-time sweep (first fit,
//! 0.07-0.26 s at 100,000 buffers), or, when minimising on two threads
//! with half a second left, the anchored sweep
//! ([`greedy::sweep_place_anchored`], 0.06-0.28 s) and the first fit,
//! made on a thread of its own beside the first pass and followed there
//! by other sweeps while the time left holds two more (cut at the
//! rounds' end); with fixed buffers, which make the sweeps slower, those
//! are cut at the deadline too, and the start is then the first fit of
//! the free buffers above the fixed ones (`greedy::sweep_place_in_time`);
//! the first fit also when the portfolio's first
//! pass is cut short or the overlap graph is too large to build, so every
//! solve returns the best complete placement found within the limit plus
//! 0.1-0.35 s at 100,000 buffers (what always runs, which depends on the
//! machine and the instance), proportionally less on smaller instances.
//! Measured 2026-11-29 on a quiet 2-core machine (load average 0.5),
//! release build, two threads, limits of 0 and 50 ms: somas_like(100000,
//! 7) 0.14-0.20 s, random_instance(100000, 2) 0.17-0.22 s,
//! stream_like(100000, 1) 0.17-0.22 s, long_lived(100000, 1) (45,000
//! live at once) 0.22-0.35 s; a limit of 300 ms returned after 0.30-0.31
//! s (tests/deadline.rs). On 2026-11-24 the first two gave 0.09-0.10 s;
//! that day's code takes 0.18-0.27 s on this machine today, so the
//! difference is the machine's. Eleven other shapes of 100,000 buffers
//! (one clique; nested lifetimes; chains each live for two steps;
//! disjoint; alignments up to 4 KiB; equal sizes; half of size 0; sizes up
//! to 1 TiB; half fixed; each live for 50,000-100,000 steps) returned
//! after 0.05-0.22 s for 50 ms and at most 2.006 s for 2 s.
//! Memory:
//! about 200-500 bytes per buffer
//! (somas_like(100000): 21-39 MB resident in all), plus at most about 190
//! bytes per buffer for the ejection chains (a time index of at most 32
//! entries of 4 bytes, and 57 bytes per buffer: its own copy of the
//! buffer's times, size and alignment in the order of the starts, its
//! offset and its state), plus about 250 bytes per buffer for each
//! further worker of the large-instance improvement (its runs, time index
//! and best placement, and for the second up to 30,000 buffers its own
//! time buckets, 12 bytes per buffer; one worker -> two, peak resident
//! in a 2 s solve: random_instance(100000) 38 -> 42 MB, somas_like(100000)
//! 34 -> 37 MB (34 -> 42 and 34 -> 36 before the chains kept their own
//! copy of the buffers; `greedy::max_load`'s table of every level made
//! them 41 -> 51 and 34 -> 52 MB); a bucketed pass keeps one
//! 32-byte entry per buffer and time block it is kept in, two for most,
//! at most 32 for the longest-lived: 100,000 buffers each live for
//! 30-60 % of the time, 62 MB resident in all), plus 8 bytes per
//! overlapping pair where the greedy graph is built (at most 8M pairs) and
//! the exact search's state on groups of at most 5,000 buffers, whose
//! dead-state memo takes at most 24 MB per search direction and thread, so
//! memory does not grow with the time limit (D, 213 buffers: 118 MB
//! resident after 20 s on two threads, where it once held 1.2 GB at 10 s).
//!
//! Above [`LARGE`] buffers, with 100 ms or more, a narrow instance (at
//! most 64 buffers live at once) is first fitted at the goal window by
//! window (`window.rs`: cut where the crossing buffers nest, stacked from
//! 0 there, those live throughout lowest in every stack, or, where at
//! most 23 of them do not nest, stacked in the order whose holes fit
//! under the goal, the holes filled with fixed buffers; each window of
//! about 500 buffers fitted by a first-fit sweep and the skyline search
//! over its stacks, by one worker per thread, or by one where a node
//! budget is kept), in at most half
//! the limit when fitting, three quarters when minimising; where a
//! window does not fit, a fit ends there and the stages below go on,
//! while a minimisation minimises that window and the stages below start
//! from the windows' placement. It
//! says no to a wider instance in about 1 ms (its average live count,
//! without sorting). Chains of buffers that each live two steps
//! (`cli::chain_like`, optimum at the bound): 100,000 at the bound in
//! 0.24-0.34 s (seeds 1-3), where they ended at 1.26-1.37 of it after 2
//! s; of three to eight steps (`cli::staggered_chain`): 100,000 at the
//! bound in 0.35-0.65 s on one worker (0.25-0.39 s on two), where they
//! ended at up to 1.21 of it; of nine to sixteen steps, at 20,000 in
//! 0.06-0.19 s (22 of 24; of the other two, whose most loaded window
//! the search hardly fits at the bound over its stacks, one in 1.50 s,
//! one at 1.0016), at 100,000 in 0.15-0.64 s (seeds 1-2), where they
//! ended at up to 1.0823 and 1.0521; of 17 to 22 steps, at 20,000 in
//! 0.15-0.50 s, and 17 and 18 at 100,000 in 0.67-1.18 s, where they
//! ended at up to 1.073 (`window::UNNESTED`); the windows' problems take
//! about 100 bytes per buffer.
//!
//! Where an alignment does not divide the gcd of the sizes, the skyline
//! search does not apply (`pad.rs`): the windows are then fitted on a
//! copy with every size rounded up to the least common multiple of the
//! alignments, at its bound if that is within 3 % of the goal, and the
//! placement settled (each buffer moved down where the padding left
//! room); a placement so found above the goal is where the stages below
//! start from. At most [`LARGE`] buffers, the padded copy gets half the
//! time the exact search leaves after an eighth of it, and the search
//! goes on from the lower of the two. Chains of two to eight steps with
//! sizes multiples of 4 aligned to 4-64 bytes (`cli::aligned_chain`):
//! 100,000 at 1.0000-1.0081 of their bound in 2 s, where they ended at up
//! to 1.32; 500 at 1.0000-1.0118, where they ended at up to 1.26. The
//! padded copy takes 72 bytes per buffer (each a `Buffer` without a name).
//!
//! Above [`LARGE`] buffers the squeaky-wheel improvement runs one round
//! before the exact search and, when the search leaves time (its groups
//! are over 5,000 buffers, or it is done) and the peak is still above the
//! bound, goes on where it stopped until the bound or nine tenths of the
//! limit; the last tenth goes to ejection slices on the best placement
//! (`POLISH_SHARE`). It runs
//! one worker per thread (`Options::threads`, at most one per starting
//! order), each from a different first order, with its own ejection
//! slices, and the first to reach the goal stops the others (up to
//! 30,000 buffers where the graph is too large, the first scans the
//! placed buffers and the second tries time buckets, keeping them if its
//! first pass over them ends before the first worker ends one; see
//! `greedy::Squeaker::new`). Above 30,000 buffers, minimising, where
//! the setup and the first worker's first pass take more than an eighth
//! of the rounds' time, the second thread instead slices the first
//! worker's passes while it makes the next ones (`Pipe`). After
//! every pass an ejection-chain slice (`eject.rs`) works on the pass's
//! own placement, a fresh start (on the best placement instead when the
//! pass is the best or repeats the previous pass's peak; the lower of the
//! two is kept): it moves the buffers that end above a target into slots
//! lower down and evicts what is in the way. Its work is charged to the
//! node budget too, and adapts to its success (a few percent of a pass
//! where it fails, about as much as a pass where it lowers the peak).
//!
//! Determinism: with `threads: 1`, for the same input and options the result
//! is the same, except that the time limit may cut the greedy stage or the
//! exact search short at a different point on a slower or busier machine.
//! A node budget (`Options::node_limit`) cuts it at the same point
//! everywhere; strata plans with one and a time limit that only backs it
//! up. With more threads the exact search races complementary
//! configurations (minimising, every thread begins as a fit at the
//! bound, so a bound a fit reaches is reached about as fast; see
//! `search.rs`) and the large-instance improvement runs several
//! workers, so the placement may differ between runs (which thread wins,
//! and how far each got, is timing-dependent); every result still passes
//! [`check()`], fits the
//! capacity when it is reported to, and is marked optimal only when proven.

pub mod bound;
pub mod check;
pub mod cli;
pub mod csv;
mod eject;
pub mod greedy;
mod pad;
mod search;
mod skyline;
mod window;

pub use bound::lower_bound;
pub use check::{check, CheckError};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One buffer to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Identifier from the CSV, or any label.
    pub id: String,
    /// First time step at which the buffer is live.
    pub lower: u64,
    /// First time step at which the buffer is no longer live (exclusive).
    pub upper: u64,
    /// Size in bytes (zero allowed).
    pub size: u64,
    /// Required offset alignment in bytes (>= 1; 1 means none).
    pub alignment: u64,
    /// Offset the buffer must be placed at, if fixed.
    pub offset: Option<u64>,
}

impl Buffer {
    /// A buffer with no alignment requirement and no fixed offset.
    pub fn new(id: impl Into<String>, lower: u64, upper: u64, size: u64) -> Self {
        Buffer {
            id: id.into(),
            lower,
            upper,
            size,
            alignment: 1,
            offset: None,
        }
    }
}

/// A planning problem: the buffers and an optional memory capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    pub buffers: Vec<Buffer>,
    pub capacity: Option<u64>,
}

/// Solver options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Wall-clock budget for the whole solve; only `O(n log n)` stages
    /// always run to the end (see the crate documentation).
    pub time_limit: Duration,
    /// Minimise the peak. Without it and with a capacity, any fitting
    /// placement is returned as soon as one is found.
    pub minimize: bool,
    /// Threads for the exact search's portfolio and for the workers of the
    /// large-instance improvement (0 counts as 1). With 1 the
    /// result is deterministic (up to the time limit, see the crate docs).
    /// With more, the threads run complementary search configurations (or
    /// improvement runs) and the first to reach the goal stops the others,
    /// so the placement
    /// returned may differ from run to run; it always passes [`check()`] and
    /// carries the same guarantees (fits the capacity if reported to,
    /// `optimal` only when proven). Default: the available parallelism,
    /// at most 2.
    pub threads: usize,
    /// A budget of exact-search nodes, over all restarts and groups (above
    /// [`LARGE`] buffers each greedy improvement pass is charged one node per
    /// buffer); spent, it ends the search like the time limit does. Unlike the time limit it
    /// ends the search at the same point on every machine, so with
    /// `threads: 1` and a time limit that is never reached first the result
    /// is the same everywhere (strata plans this way). `None`: no budget.
    pub node_limit: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            time_limit: Duration::from_secs(1),
            minimize: true,
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(2),
            node_limit: None,
        }
    }
}

/// A placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    /// One offset per buffer, in the problem's buffer order.
    pub offsets: Vec<u64>,
    /// Highest byte used plus one (max of offset + size; 0 if no buffers).
    pub peak: u64,
    /// Best proven lower bound on the peak of any valid placement.
    pub lower_bound: u64,
    /// The peak is proven minimal (equals a lower bound, or the search
    /// space was exhausted).
    pub optimal: bool,
}

/// Solver errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No placement within the capacity. Proven impossible when
    /// `lower_bound > capacity`; otherwise none was found in the time limit.
    /// `greedy`: `best_peak` is the greedy start's, not lowered (the exact
    /// search looks only for placements within the capacity, so on
    /// instances it works on alone, up to [`LARGE`] buffers, a peak above
    /// the capacity stays the start's).
    #[error("{}", does_not_fit(*capacity, *best_peak, *lower_bound, *greedy))]
    DoesNotFit {
        capacity: u64,
        best_peak: u64,
        lower_bound: u64,
        greedy: bool,
    },
    #[error("invalid buffer {id}: {reason}")]
    InvalidBuffer { id: String, reason: String },
    #[error("fixed buffers {a} and {b} overlap in time and space")]
    FixedOverlap { a: String, b: String },
    /// The highest fixed end plus the other buffers' sizes and alignment
    /// padding (`total`) exceed [`MAX_TOTAL`].
    #[error("too large: the highest fixed end plus every other buffer's size and alignment - 1 add up to {total} bytes, above the planner's limit of 2^62 (which keeps every offset and sum it computes within 64 bits)")]
    TooLarge { total: u128 },
}

fn does_not_fit(capacity: u64, best_peak: u64, lower_bound: u64, greedy: bool) -> String {
    // The greedy start's peak may be far above what a minimisation without
    // a capacity reaches (D at 994 KiB: 1,291,264, where minimising finds
    // 1,028,096): say which it is.
    let whose = if greedy {
        "the greedy start's peak"
    } else {
        "the best peak found"
    };
    if lower_bound > capacity {
        format!(
            "does not fit: every placement needs at least {lower_bound} bytes, {} more than the capacity {capacity} ({whose}: {best_peak})",
            lower_bound - capacity
        )
    } else {
        format!(
            "no placement within the capacity {capacity} found in the time limit: {whose}, {best_peak}, exceeds it by {} bytes{}; the proven lower bound {lower_bound} fits, so a longer time limit may find one",
            best_peak.saturating_sub(capacity),
            if greedy {
                " (the search looks only within the capacity; minimising without one lowers the peak as far as it can)"
            } else {
                ""
            }
        )
    }
}

pub(crate) fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a).saturating_mul(a)
    }
}

/// The largest instance `solve` takes: the highest end of a fixed buffer
/// plus, over the other buffers, `size + alignment - 1`, which bounds every
/// offset a placement can need (each buffer above all the others, padded
/// to its alignment). At most 2^62 bytes, so that the solver's sums of a
/// few offsets, sizes and alignments stay within `u64`.
pub const MAX_TOTAL: u64 = 1 << 62;

fn validate(p: &Problem) -> Result<(), Error> {
    for b in &p.buffers {
        let bad = |reason: &str| {
            Err(Error::InvalidBuffer {
                id: b.id.clone(),
                reason: reason.to_string(),
            })
        };
        if b.upper <= b.lower {
            return bad("upper must be greater than lower");
        }
        if b.alignment == 0 {
            return bad("alignment must be at least 1");
        }
        if let Some(o) = b.offset {
            if o % b.alignment != 0 {
                return bad("fixed offset is not a multiple of the alignment");
            }
            if o.checked_add(b.size).is_none() {
                return bad("fixed offset + size overflows u64");
            }
        }
    }
    let fixed_end = p
        .buffers
        .iter()
        .filter_map(|b| b.offset.map(|o| o + b.size))
        .max();
    let total = p
        .buffers
        .iter()
        .filter(|b| b.offset.is_none())
        .map(|b| b.size as u128 + (b.alignment - 1) as u128)
        .sum::<u128>()
        + fixed_end.unwrap_or(0) as u128;
    if total > MAX_TOTAL as u128 {
        return Err(Error::TooLarge { total });
    }
    // Fixed buffers must not collide with one another.
    let fixed: Vec<usize> = (0..p.buffers.len())
        .filter(|&i| p.buffers[i].offset.is_some() && p.buffers[i].size > 0)
        .collect();
    let mut by_start = fixed.clone();
    by_start.sort_by_key(|&i| p.buffers[i].lower);
    let mut active: Vec<usize> = Vec::new();
    for &i in &by_start {
        let bi = &p.buffers[i];
        active.retain(|&j| p.buffers[j].upper > bi.lower);
        for &j in &active {
            let bj = &p.buffers[j];
            let (oi, oj) = (bi.offset.unwrap(), bj.offset.unwrap());
            if oi < oj + bj.size && oj < oi + bi.size {
                return Err(Error::FixedOverlap {
                    a: bj.id.clone(),
                    b: bi.id.clone(),
                });
            }
        }
        active.push(i);
    }
    Ok(())
}

/// When the exact search must stop: a wall-clock deadline and, optionally, a
/// node budget shared by every search of one `solve` call.
#[derive(Clone, Debug)]
pub(crate) struct Deadline {
    at: Instant,
    budget: Option<Arc<NodeBudget>>,
}

#[derive(Debug)]
struct NodeBudget {
    spent: AtomicU64,
    limit: u64,
    /// The budget this one is a part of ([`Deadline::part`]), charged too.
    whole: Option<Arc<NodeBudget>>,
}

impl Deadline {
    pub(crate) fn new(at: Instant, node_limit: Option<u64>) -> Deadline {
        Deadline {
            at,
            budget: node_limit.map(|limit| {
                Arc::new(NodeBudget {
                    spent: AtomicU64::new(0),
                    limit,
                    whole: None,
                })
            }),
        }
    }

    /// The same budget, with the wall-clock deadline moved up to `at` (if
    /// that is sooner).
    pub(crate) fn until(&self, at: Instant) -> Deadline {
        Deadline {
            at: self.at.min(at),
            budget: self.budget.clone(),
        }
    }

    /// `share` of what is left of this deadline: of its time, and of its
    /// node budget, if any (the nodes charged to the part are charged to
    /// the whole too), so that a stage given a part of a node-limited
    /// solve ends at the same point everywhere.
    pub(crate) fn part(&self, share: f64) -> Deadline {
        let now = Instant::now();
        let left = self.at.saturating_duration_since(now);
        Deadline {
            at: now + left.mul_f64(share),
            budget: self.budget.as_ref().map(|b| {
                let left = b.limit.saturating_sub(b.spent.load(Ordering::Relaxed));
                Arc::new(NodeBudget {
                    spent: AtomicU64::new(0),
                    limit: (left as f64 * share) as u64,
                    whole: Some(b.clone()),
                })
            }),
        }
    }

    /// Whether a node budget is kept (`Options::node_limit`).
    pub(crate) fn has_budget(&self) -> bool {
        self.budget.is_some()
    }

    /// Called by a search every `nodes` nodes: charges them to the budget
    /// and says whether the search must stop (budget spent or time up).
    pub(crate) fn passed(&self, nodes: u64) -> bool {
        let mut spent = false;
        let mut b = self.budget.as_deref();
        while let Some(x) = b {
            spent |= x.spent.fetch_add(nodes, Ordering::Relaxed) + nodes >= x.limit;
            b = x.whole.as_deref();
        }
        spent || Instant::now() >= self.at
    }
}

/// Above this many buffers `solve` runs the greedy local improvement
/// (`greedy::Squeaker`) before the exact search, and after it while time
/// is left. Between 1,000 and 5,000 buffers (27 own instances of 1,500,
/// 2,500 and 4,000 buffers, random-, somas- and training-like, 3 seeds
/// each, `--minimize --time-limit 2`) this path reached the bound wherever
/// the portfolio and exact search did, mostly sooner (random-like 1,500
/// seed 2: 0.75 -> 0.02 s; tiny_bert, 1,821 buffers: 0.45 -> 0.01 s), and
/// ended lower where neither reached it (random-like 4,000 seed 1: 1.0412
/// -> 1.0229; the 4,458 buffers of random-like 90k seed 27 that live over
/// 100 steps: 1.0946 -> 1.0573). Slower: somas_resnet50 (1,042 buffers),
/// at the bound in 0.03 -> 0.09 s. MiniMalloc's A-K (at most 454
/// buffers) stay below it.
pub const LARGE: usize = 1_000;

/// Stack of each exact-search thread (virtual: only what the recursion
/// touches is committed).
pub(crate) const SEARCH_STACK: usize = 256 << 20;

/// Runs `search` on a thread of its own with a stack of [`SEARCH_STACK`]
/// bytes, and returns what it returns.
pub(crate) fn on_search_stack<T: Send>(search: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|sc| {
        std::thread::Builder::new()
            .stack_size(SEARCH_STACK)
            .spawn_scoped(sc, search)
            .expect("spawn the search thread")
            .join()
            .expect("search thread")
    })
}

/// What `solve` does after each squeaky-wheel pass (of `w` buffers, whose
/// placement is `this`): an ejection-chain slice on `best` or on `this`
/// (`eject::Slices::after_pass`), towards `floor` (a proven bound) until
/// `goal`; then whether the round stops: the node budget or the time is
/// spent (a slice is charged one node per `ENTRIES_PER_NODE` entries it
/// read), another worker reached the goal (`cut`), or either placement is
/// at the goal.
fn after_pass(
    p: &Problem,
    ejector: &mut eject::Slices,
    deadline: &Deadline,
    w: u64,
    (this, best): (&mut greedy::Best, &mut greedy::Best),
    (floor, goal): (u64, u64),
    cut: &dyn Fn() -> bool,
) -> bool {
    let e = ejector.after_pass(p, this, best, (floor, goal), &mut || cut());
    deadline.passed(w + e / eject::ENTRIES_PER_NODE) || cut() || best.0.min(this.0) <= goal
}

/// One worker of a large solve's squeaky-wheel improvement: its runs, its
/// ejection-chain slices and its best placement.
struct Worker {
    runs: greedy::Runs,
    slices: eject::Slices,
    best: greedy::Best,
    /// Whether one of its passes has ended (see [`squeak_workers`]).
    passed: std::cell::Cell<bool>,
    /// Whether it makes the start sweeps before its passes (the solve's
    /// start, on a thread of its own while another worker's first pass
    /// runs: the anchored and the first-fit sweep, then the other sweeps
    /// while time allows), and then the lowest of their peaks.
    sweeps: bool,
    swept: Option<u64>,
}

impl Worker {
    /// A worker on `runs` from `best`.
    fn new(runs: greedy::Runs, best: greedy::Best) -> Worker {
        Worker {
            runs,
            slices: eject::Slices::default(),
            best,
            passed: Default::default(),
            sweeps: false,
            swept: None,
        }
    }
}

/// How the second thread of a large minimisation works: on a squeaky-wheel
/// run of its own (from another start), or slicing the first worker's
/// passes, so that the first worker makes its next pass while the last
/// one is sliced instead of after it (its run goes on from each pass's
/// own placement, not the sliced one, so no pass waits for a slice).
/// Decided when the first worker's first pass ends: the second thread
/// slices when fewer than [`PIPE_STEPS`] passes the length of that one
/// (counted from the solve's start, setup included) fit in the rounds'
/// time. A run needs several passes with their slices to get low
/// (random-like 100k seed 27 from LoadDesc, one thread: 1.0320 of the
/// bound after its fourth pass and slice, 1.0028 after its eighth), and
/// at 100,000 buffers and 2 s each of two runs makes four or five.
/// Random-like instances, 2 s on two threads, paired runs of the binaries
/// before and after, summed excess over the bound (1e-4): 100k seeds
/// 1-30, two runs: 1,817 -> 1,090 and 1,855 -> 1,105, above 1.01 on 7 -> 3
/// and 6 -> 4, the worst 1.0402 -> 1.0162 both times; seeds 31-60: 2,423 ->
/// 2,225 and 2,493 -> 2,217, above 1.01 on 8 -> 8 and 9 -> 8. 80k seeds
/// 1-10 (piped too): 167 -> 152. Slicing at every size instead lost where
/// passes are short (40k seeds 1-10: 148 -> 341; 60k 265 -> 220; 80k 205
/// -> 209): where the first pass ends within an eighth of the time, each
/// of two runs makes enough passes, and two runs find more than one run
/// at twice the pace. The first worker slices a pass itself instead of
/// replacing one the second has not taken yet (random-like 100k seed 16
/// at 2 s: 8 slices against 5) changed nothing beyond noise, at 7-9 MB
/// more for its own chains: paired against the binary without, seeds 1-30
/// summed excess 955 against 1,062 (6 lower, 3 higher), seeds 31-60 2,073
/// against 1,988 (1 lower, 4 higher); above 1.01 on 4 and 8 with both.
struct Pipe {
    /// [`Pipe::OPEN`] until decided, then [`Pipe::ON`] or [`Pipe::OFF`].
    state: AtomicU8,
    /// When the solve began.
    start: Instant,
    /// The first worker's latest pass placement, until the second takes
    /// it (a newer one replaces it if it has not been taken).
    latest: Mutex<Option<greedy::Best>>,
}

/// Passes of the first pass's length that the rounds' time must hold for
/// the second thread to run passes of its own (see [`Pipe`]).
const PIPE_STEPS: u32 = 8;

impl Pipe {
    const OPEN: u8 = 0;
    const ON: u8 = 1;
    const OFF: u8 = 2;

    fn new(start: Instant, open: bool) -> Pipe {
        Pipe {
            state: AtomicU8::new(if open { Pipe::OPEN } else { Pipe::OFF }),
            start,
            latest: Mutex::new(None),
        }
    }

    fn is(&self, state: u8) -> bool {
        self.state.load(Ordering::Relaxed) == state
    }

    /// At the end of the first worker's first pass, `now`: whether fewer
    /// than [`PIPE_STEPS`] such passes fit before `rounds_end`.
    fn decide(&self, now: Instant, rounds_end: Instant) {
        let first = now.saturating_duration_since(self.start);
        let span = rounds_end.saturating_duration_since(self.start);
        let on = first * PIPE_STEPS > span;
        if std::env::var_os("MEMPLAN_DEBUG").is_some() {
            eprintln!(
                "first pass ended at {first:?} of {span:?}: the second thread {}",
                if on {
                    "slices its passes"
                } else {
                    "runs its own"
                }
            );
        }
        let state = if on { Pipe::ON } else { Pipe::OFF };
        let _ =
            self.state
                .compare_exchange(Pipe::OPEN, state, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The waiting placement (a thread that panicked holding the lock
    /// left a whole placement or none: `post` and `take` only swap it).
    fn latest(&self) -> std::sync::MutexGuard<'_, Option<greedy::Best>> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leave `pass` for the second thread (replacing one it has not taken).
    fn post(&self, pass: &greedy::Best) {
        *self.latest() = Some(pass.clone());
    }

    fn take(&self) -> Option<greedy::Best> {
        self.latest().take()
    }

    fn waiting(&self) -> bool {
        self.latest().is_some()
    }
}

/// How close to the bound the anchored sweep must land for the sweeping
/// worker to try its other sweeps (`squeak_workers`): there the sweeps
/// are the run (long-lived and stream-like instances, anchored at
/// 1.005-1.033 of the bound at 100,000 buffers, whose passes are slow and
/// end higher); further above, the passes and their ejection slices do
/// better, and the slicing thread is better off starting on them
/// (random-like 100k, anchored at 1.05-1.24, its slices reach 1.00-1.04).
/// Paired 2 s runs of random-like 100k seeds 1-30 against the sweeps
/// before (first fit, then snug fit): with the extra sweeps made after
/// the anchored one there too, 9 ended higher and 3 lower by over 5e-4
/// of the bound (seed 2 1.0168 against 1.0058), summed excess over the
/// bounds 1,705 (1e-4) against 1,339; without them, 7 higher and 5
/// lower, 1,812 against 1,999; with the first fit after the anchored
/// sweep (as now), 6 higher and 9 lower, 1,778 against 1,910 (a run's
/// noise: the same binary summed 1,339-2,133).
const SWEEPS_WITHIN: f64 = 1.04;

/// The sweeps that a large solve's sweeping worker tries after the
/// anchored and the first-fit sweep, in this order, while the time allows
/// (`squeak_workers`): the anchored sweep with (stack, weight of the match
/// of ends in its snug fit), or the snug-fit sweep from the start
/// (`None`). The other stacks at the usual weight first, then the three
/// stacks at weights 0.3, 0.5 and 1: each sweep is the lowest on some
/// instances, by a few tenths of a percent. Where the anchored sweep is
/// within `SWEEPS_WITHIN` of the bound, the squeaky-wheel passes end
/// higher, so this is time the worker would spend on passes and slices
/// that do not lower the start. Chosen on the three stacks' sweeps alone,
/// stream-like 20k seeds 5-8, 30k 4-6, 50k 2-3, 100k 3-5: the lowest of
/// the twelve anchored sweeps (three stacks at weights of 0.1, 0.3, 0.5
/// and 1) was at 0.3 on 8 of the 12 instances, 0.5 on 2, 1 and 0.1 on one
/// each, and summed 1,743 (1e-4) over the bounds against 1,970 for
/// the lowest at 0.1; on long-lived 20k-100k (6 seeds) it was at 0.1.
/// Then paired 2 s solves on seeds not used to choose, against the
/// binary before: stream-like 20k seeds 9-12, 30k 7-9, 50k 4-5, 100k
/// 6-7 summed 1,716 against 1,971, 7 lower and none higher (above 1.01
/// on 9 of 11 with both; at 100k one more sweep fits in 2 s);
/// long-lived 20k seeds 5-6, 30k 6, 50k 3, 100k 3 and random-like 100k
/// seeds 1-10 (anchored above `SWEEPS_WITHIN`) end at the same peaks.
const MORE_SWEEPS: [Option<(greedy::Stack, f64)>; 12] = {
    use greedy::{Stack::*, SNUG_END_WEIGHT as W};
    [
        Some((Ending, W)),
        Some((Starting, W)),
        None,
        Some((Nearer, 0.3)),
        Some((Ending, 0.3)),
        Some((Starting, 0.3)),
        Some((Nearer, 0.5)),
        Some((Ending, 0.5)),
        Some((Starting, 0.5)),
        Some((Nearer, 1.0)),
        Some((Ending, 1.0)),
        Some((Starting, 1.0)),
    ]
};

/// Squeaky-wheel rounds with ejection slices (see [`after_pass`]), each
/// worker on a thread of its own when there are several (one round each
/// when `once`, else rounds until the goal, the end of the `rounds` time
/// or the node budget): a worker that reaches `goal` stops the others.
/// No pass starts after `rounds` ends, and the end cuts one under way,
/// except a worker's first, which may run on to `deadline` (the first
/// pass on 100k somas-like buffers takes about 0.25 s and often reaches
/// the bound, more on a loaded machine). With a `pipe` the second worker
/// may slice the first one's passes instead of running its own (see
/// [`Pipe`]). Returns the lowest of the workers' best placements (the
/// first worker's on a tie).
fn squeak_workers(
    p: &Problem,
    how: &greedy::Index,
    workers: &mut [Worker],
    (rounds, deadline): (&Deadline, &Deadline),
    (floor, goal): (u64, u64),
    once: bool,
    pipe: Option<&Pipe>,
) -> greedy::Best {
    let pipe = pipe.filter(|_| workers.len() >= 2);
    let reached = AtomicBool::new(false);
    // The first worker's rounds have ended (its slicer then stops).
    let ended = AtomicBool::new(false);
    let piped = |k: usize| k == 1 && pipe.is_some_and(|x| x.is(Pipe::ON));
    let work = |k: usize, w: &mut Worker| {
        if w.sweeps {
            w.sweeps = false;
            let t0 = Instant::now();
            // The anchored sweep, out from the time of the largest load
            // (`greedy::sweep_place_anchored`): of the load bound at
            // 100,000 buffers, somas- and training-like seeds 1-3 at
            // 1.0000-1.0038 where the first-fit sweep's were 1.0029-1.0169,
            // and long-lived at 1.0051-1.0086 (first fit 1.069-1.074).
            // With fixed buffers, cut at the deadline: only they make the
            // sweeps slow (`greedy::sweep_place_in_time`), and the solve
            // then starts from the first fit above them.
            let fixed = p.buffers.iter().any(|b| b.offset.is_some());
            let mut late = || fixed && Instant::now() >= deadline.at;
            let stack = greedy::Stack::Nearer;
            let Some(anchored) = greedy::sweep_place_anchored_by(p, stack, &mut late) else {
                return;
            };
            let mut start = (check::peak_of(p, &anchored), anchored);
            let took = t0.elapsed();
            let near = start.0 as f64 <= SWEEPS_WITHIN * floor as f64;
            let dbg = std::env::var_os("MEMPLAN_DEBUG").is_some();
            let keep = |name: &str, o: Vec<u64>, start: &mut greedy::Best| {
                let pk = check::peak_of(p, &o);
                if dbg {
                    eprintln!("sweeps: {name} {pk} against {}", start.0);
                }
                if pk < start.0 {
                    *start = (pk, o);
                }
            };
            // The first-fit sweep as well (cut only at the deadline), unless
            // the goal is reached: the solve never ends above it, as where
            // it is the start (random-like 100k seed 2: 1.1611 of the
            // bound, anchored 1.2027).
            if start.0 > goal && !reached.load(Ordering::Relaxed) {
                if let Some(o) = greedy::sweep_place_until(p, &mut late) {
                    keep("first fit", o, &mut start);
                }
            }
            // Then, where the anchored sweep is within `SWEEPS_WITHIN` of
            // the bound and while the time left holds two more sweeps,
            // `MORE_SWEEPS`, cut short when the other worker reaches the
            // goal first.
            for sweep in MORE_SWEEPS {
                if !near
                    || start.0 <= goal
                    || reached.load(Ordering::Relaxed)
                    || rounds.at.saturating_duration_since(Instant::now()) <= 2 * took
                {
                    break;
                }
                let mut cut = || reached.load(Ordering::Relaxed) || Instant::now() >= rounds.at;
                let (name, o) = match sweep {
                    Some((stack, weight)) => (
                        format!("anchored, {stack:?}, weighing ends {weight}"),
                        greedy::sweep_place_anchored_weighing(p, stack, weight, &mut cut),
                    ),
                    None => (
                        "snug fit".to_string(),
                        greedy::sweep_place_snug_until(p, &mut cut),
                    ),
                };
                let Some(o) = o else {
                    break;
                };
                keep(&name, o, &mut start);
            }
            w.swept = Some(start.0);
            if start.0 < w.best.0 {
                w.best = start;
            }
            if w.best.0 <= goal {
                reached.store(true, Ordering::Relaxed);
                return;
            }
        }
        if piped(k) {
            return;
        }
        let passed = &w.passed;
        let cut = || {
            let end = if passed.get() { rounds } else { deadline };
            reached.load(Ordering::Relaxed) || Instant::now() >= end.at || piped(k)
        };
        loop {
            let mut stop = |n, this: &mut greedy::Best, best: &mut greedy::Best| {
                passed.set(true);
                if let Some(pipe) = pipe.filter(|_| k == 0) {
                    if pipe.is(Pipe::OPEN) {
                        pipe.decide(Instant::now(), rounds.at);
                    }
                    if pipe.is(Pipe::ON) {
                        pipe.post(this);
                        return rounds.passed(n) || cut() || best.0.min(this.0) <= goal;
                    }
                }
                after_pass(
                    p,
                    &mut w.slices,
                    rounds,
                    n,
                    (this, best),
                    (floor, goal),
                    &cut,
                )
            };
            let more = w
                .runs
                .round(p, how, floor, &mut w.best, &mut stop, &mut || cut());
            if w.best.0 <= goal {
                reached.store(true, Ordering::Relaxed);
            }
            if once || !more || w.best.0 <= goal || rounds.passed(0) {
                break;
            }
        }
    };
    // The second worker, once the first one's passes come to it: slices
    // each new pass's placement as a worker slices its own
    // (`eject::Slices::after_pass`, with the pass the best if it is lower,
    // as `greedy::squeak` makes it before its `stop`), and the best
    // (aside) while it waits for the next.
    let slice_passes = |w: &mut Worker, pipe: &Pipe| {
        let end = || reached.load(Ordering::Relaxed) || Instant::now() >= rounds.at;
        while !end() {
            let work = if let Some(mut this) = pipe.take() {
                if this.0 < w.best.0 {
                    w.best = this.clone();
                }
                let e = w
                    .slices
                    .after_pass(p, &mut this, &mut w.best, (floor, goal), &mut || end());
                if this.0 < w.best.0 {
                    w.best = this;
                }
                e
            } else if ended.load(Ordering::Relaxed) {
                break;
            } else if w.best.1.is_empty() {
                // No placement yet (the sweep was left to the others).
                std::thread::sleep(Duration::from_millis(1));
                0
            } else {
                w.slices
                    .slice_aside(p, &mut w.best, (floor, goal), &mut || {
                        end() || pipe.waiting() || ended.load(Ordering::Relaxed)
                    })
            };
            if w.best.0 <= goal {
                reached.store(true, Ordering::Relaxed);
            }
            if rounds.passed(work / eject::ENTRIES_PER_NODE) {
                break;
            }
        }
    };
    if let [w] = workers {
        work(0, w);
    } else {
        std::thread::scope(|sc| {
            for (k, w) in workers.iter_mut().enumerate() {
                let (work, ended, slice_passes) = (&work, &ended, &slice_passes);
                sc.spawn(move || {
                    work(k, w);
                    if k == 0 {
                        ended.store(true, Ordering::Relaxed);
                    } else if piped(k) {
                        slice_passes(w, pipe.expect("piped"));
                    }
                });
            }
        });
    }
    // `min_by_key` keeps the first of equal minima.
    let lowest = workers.iter().map(|w| &w.best).min_by_key(|b| b.0);
    lowest.expect("at least one worker").clone()
}

/// The share of the time limit that a large solve keeps, after its
/// squeaky-wheel rounds, for ejection slices on its best placement
/// ([`polish`]): one tenth. The slices after each pass mostly work on
/// that pass's own placement (`eject::Slices::after_pass`), so the best
/// one may hold moves they never tried. At 2 s on two threads, on 47 own
/// random-like instances of 20k-100k, summed excess over the bound (1e-4)
/// 1,199 -> 1,081-1,114 (two runs), no instance higher (random 100k seed
/// 2: 1.0077 -> 1.0021-1.0065; 90k seed 27: 1.0471 -> 1.0438-1.0442); the
/// 24 somas- and training-like ones as before. A fifth of the limit lost
/// more passes than it gained (100k seed 2: 1.0150).
const POLISH_SHARE: u32 = 10;

/// Ejection-chain slices on `best`, towards `floor` until `goal`, until
/// the deadline or the node budget (charged as in [`after_pass`]). On one
/// thread: a second thread polishing too, on the same placement or on the
/// other worker's best, changed nothing beyond noise (random-like 100k
/// seeds 1-30, 2 s: summed excess 1,698 and 1,718 against 1,743).
fn polish(
    p: &Problem,
    slices: &mut eject::Slices,
    best: &mut greedy::Best,
    deadline: &Deadline,
    (floor, goal): (u64, u64),
) {
    while best.0 > goal && !deadline.passed(0) {
        let e = slices.slice(p, best, (floor, goal), &mut || {
            Instant::now() >= deadline.at
        });
        if deadline.passed(e / eject::ENTRIES_PER_NODE) {
            break;
        }
    }
}

/// Plan `p`. See the crate documentation for the semantics of the options.
pub fn solve(p: &Problem, opts: &Options) -> Result<Solution, Error> {
    let start = Instant::now();
    solve_until(
        p,
        opts,
        Deadline::new(start + opts.time_limit, opts.node_limit),
    )
}

/// [`solve`] until `deadline` (its time and node budget; `opts`'
/// `time_limit` and `node_limit` are not read): the windows of a narrow
/// instance (`window::fit`) are solved so, on their parent's budget.
fn solve_until(p: &Problem, opts: &Options, deadline: Deadline) -> Result<Solution, Error> {
    let start = Instant::now();
    let limit = deadline.at.saturating_duration_since(start);
    // Large instances: no squeaky-wheel pass starts after this; the slices
    // on the best placement take what is left.
    let rounds = deadline.until(start + (limit - limit / POLISH_SHARE));
    validate(p)?;
    let lb = lower_bound(p);
    let time_up = || Instant::now() >= deadline.at;
    // Above `LARGE` the squeaky-wheel passes and ejection chains do the
    // work, and start from a sweep (the crate doc): the greedy portfolio's
    // passes took up to 1 s of a 2 s limit (random 50k: 1.0 s) and their
    // best never ended a solve lower (memplan-bench --minimize --seeds 3
    // and 26 own random-like instances: the same peaks or lower without
    // it, the bound reached 0.3-1.0 s sooner; from 1,000 to 5,000 buffers,
    // where the portfolio is cheaper, the same peaks on 27 own instances,
    // the bound mostly reached sooner without it).
    let large = p.buffers.len() > LARGE;
    let minimize = opts.minimize || p.capacity.is_none();
    let fits = |peak: u64| p.capacity.is_none_or(|c| peak <= c);
    // What the improvement works towards: the bound when minimising, any
    // placement within the capacity when fitting (a fit that the greedy
    // start or a pass already meets returns at once).
    let goal = if minimize { lb } else { p.capacity.unwrap() };
    // A narrow instance (few buffers live at once) fitted at the goal
    // window by window (`window`), in at most half the time when fitting
    // and three quarters when minimising; where that fails, the other
    // stages go on with what is left. Minimising, a window that does not
    // fit at the goal is minimised instead, and the windows' placement,
    // above the goal, is where the other stages start (as are windows
    // padded to the alignments, fitted within `pad::PAD_WITHIN` of the
    // goal). Chains of 100,000 buffers of 15 and 16 steps, 2 s, two seeds
    // each: their windows took 0.83-1.0 s of the 1 s that half gave them,
    // so that two or three of four runs ended at 1.044-1.063 of the bound
    // (what the other stages reach); with three quarters, all four at the
    // bound in 0.88-1.11 s (fourteen more chains of three to sixteen
    // steps of 20,000 and 100,000 buffers at their bound as before).
    let mut windowed = None;
    if large && lb <= goal && limit >= Duration::from_millis(100) {
        let share = if minimize { limit * 3 / 4 } else { limit / 2 };
        let until = deadline.until(start + share);
        let t0 = start.elapsed();
        let fitted = window::fit(p, goal, pad::ceiling(goal), &until, opts.threads, minimize);
        if std::env::var_os("MEMPLAN_DEBUG").is_some() {
            eprintln!(
                "windows: {} from {t0:?} to {:?}",
                fitted.is_some(),
                start.elapsed()
            );
        }
        if let Some(offsets) = fitted {
            let peak = check::peak_of(p, &offsets);
            if peak <= goal {
                return Ok(Solution {
                    offsets,
                    peak,
                    lower_bound: lb,
                    optimal: peak <= lb,
                });
            }
            windowed = Some((peak, offsets));
        }
    }
    // On two threads or more, a large minimisation with half a second
    // left makes its start sweeps on the second worker's thread while
    // the first worker's first pass runs (see `Worker::sweeps`): the sweep
    // takes 0.13-0.20 s at 100,000 buffers, during which the other core
    // idled (somas_like(100000, 3) on two threads: at its bound in
    // 0.24-0.30 s, was 0.30-0.37 s, five runs each). Otherwise the sweep
    // comes first, as on one thread: building the workers' index before
    // it made 50 ms limits on 100,000 buffers return 40-80 ms later, and
    // fits that the sweep meets (at 1.3 x the bound) 20-60 ms later.
    let sweep_aside = large
        && minimize
        && opts.threads >= 2
        && deadline.at.saturating_duration_since(Instant::now()) >= Duration::from_millis(500);
    let mut offsets = if sweep_aside {
        Vec::new()
    } else if large {
        greedy::sweep_place_in_time(p, &mut || time_up())
    } else {
        greedy::portfolio_until(p, &mut || time_up())
    };
    // No placement yet: a peak above any real one (those stay below 2^62).
    let mut peak = if sweep_aside {
        u64::MAX
    } else {
        check::peak_of(p, &offsets)
    };
    if let Some((at, placed)) = windowed.filter(|w| w.0 < peak) {
        (peak, offsets) = (at, placed);
    }
    let mut start_peak = peak;
    let mut squeaker = None;
    // Whether the second thread may slice the first worker's passes (see
    // `Pipe`); up to `DENSE_SCAN_LIMIT` buffers it races time buckets
    // against the first worker's scan instead (`greedy::Squeaker::new`).
    let pipe = Pipe::new(
        start,
        sweep_aside && p.buffers.len() > greedy::DENSE_SCAN_LIMIT,
    );
    if large && peak > goal && lb <= goal && !time_up() {
        // Large instances: squeaky-wheel passes first, an ejection-chain
        // slice after each (a pass is charged to the node budget as one
        // node per buffer, a slice as one per `ENTRIES_PER_NODE` entries it
        // read, so a node-limited solve stays deterministic; the time limit
        // also cuts a pass or a slice short).
        squeaker = greedy::Squeaker::new(p, opts.threads, &mut || time_up()).map(|s| {
            let workers: Vec<Worker> = s
                .workers
                .into_iter()
                .enumerate()
                .map(|(k, runs)| {
                    let mut w = Worker::new(runs, (peak, offsets.clone()));
                    w.sweeps = sweep_aside && k == 1;
                    w
                })
                .collect();
            (s.how, workers)
        });
        if let Some((how, workers)) = &mut squeaker {
            (peak, offsets) = squeak_workers(
                p,
                how,
                workers,
                (&rounds, &deadline),
                (lb, goal),
                true,
                Some(&pipe),
            );
            if let Some(swept) = workers.iter().find_map(|w| w.swept) {
                start_peak = swept;
            }
        }
    }
    if peak == u64::MAX {
        // The sweep was left to a worker that did not run (the time was
        // up first).
        offsets = greedy::sweep_place_in_time(p, &mut || time_up());
        peak = check::peak_of(p, &offsets);
        start_peak = peak;
    }
    let mut proven = lb;
    // A small instance whose alignments keep the skyline search from it
    // (`pad`): after an eighth of the time left to the search, its
    // padded copy is solved in at most half the time then left, where
    // its bound is within `pad::PAD_WITHIN` of the goal (the bound, or
    // the capacity), and settled; the search then goes on from the lower
    // of the two.
    let mut padding = if !large && lb <= goal {
        pad::padded(p)
            .map(|q| (lower_bound(&q), q))
            .filter(|&(qlb, _)| qlb <= pad::ceiling(goal))
    } else {
        None
    };
    loop {
        let need_search = !time_up()
            && if minimize {
                peak > proven
            } else {
                !fits(peak) && proven <= p.capacity.unwrap()
            };
        if !need_search {
            break;
        }
        let until = if padding.is_some() {
            deadline.part(1.0 / 8.0)
        } else {
            deadline.clone()
        };
        // The exact searches recurse once per node on their path (a dive
        // over a thousand buffers with slack is several thousand frames
        // deep), more than the 2 MiB a spawned thread gets by default: run
        // them on a thread of their own with a stack sized for that.
        let r = on_search_stack(|| {
            search::improve(
                p,
                &offsets,
                peak,
                goal,
                until,
                lb,
                minimize,
                p.capacity,
                opts.threads,
            )
        });
        if r.peak < peak {
            offsets = r.offsets;
            peak = r.peak;
        }
        proven = proven.max(r.proven_lb.min(peak));
        let Some((qlb, mut q)) = padding.take() else {
            break;
        };
        if time_up() || (if minimize { peak <= proven } else { fits(peak) }) {
            break;
        }
        // Fitting: a fit of the padded copy if its bound is within the
        // capacity, else its least peak (settling may bring it under).
        q.capacity = p.capacity.filter(|&c| !minimize && qlb <= c);
        if let Ok(s) = solve_until(&q, opts, deadline.part(0.5)) {
            let mut settled = s.offsets;
            pad::settle(p, &mut settled);
            let at = check::peak_of(p, &settled);
            debug_assert!(check(p, &settled).is_ok(), "settled invalid");
            if std::env::var_os("MEMPLAN_DEBUG").is_some() {
                eprintln!("padded: {} settled to {at} against {peak}", s.peak);
            }
            if at < peak {
                (peak, offsets) = (at, settled);
            }
        }
    }
    // Time left after the search (its groups were too large, or done) and
    // still above the bound (or the capacity): the squeaky-wheel runs go
    // on where they stopped, then slices on the best placement take the
    // time kept for them.
    if let Some((how, workers)) = &mut squeaker {
        let bounds = (proven, goal.max(proven));
        // Above what the solve can still prove or must reach.
        let unmet = |peak: u64| peak > proven && (minimize || !fits(peak));
        if unmet(peak) && !rounds.passed(0) {
            for w in workers.iter_mut() {
                if peak < w.best.0 {
                    w.best = (peak, offsets.clone());
                }
            }
            let best = squeak_workers(
                p,
                how,
                workers,
                (&rounds, &deadline),
                bounds,
                false,
                Some(&pipe),
            );
            if best.0 < peak {
                (peak, offsets) = best;
            }
        }
        if unmet(peak) {
            let mut best = (peak, offsets);
            // The slices that have worked on the passes' placements.
            let slices = if pipe.is(Pipe::ON) {
                &mut workers[1].slices
            } else {
                &mut workers[0].slices
            };
            polish(p, slices, &mut best, &deadline, bounds);
            (peak, offsets) = best;
        }
    }
    let optimal = peak <= proven;
    if !fits(peak) {
        return Err(Error::DoesNotFit {
            capacity: p.capacity.unwrap(),
            best_peak: peak,
            lower_bound: proven,
            greedy: peak == start_peak,
        });
    }
    Ok(Solution {
        offsets,
        peak,
        lower_bound: proven,
        optimal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part of a node budget ends when its share is spent, and what it
    /// spends is charged to the whole, which goes on.
    #[test]
    fn a_part_of_a_budget_charges_the_whole() {
        let whole = Deadline::new(Instant::now() + Duration::from_secs(60), Some(100));
        assert!(!whole.passed(20));
        let part = whole.part(0.5); // half of the 80 left
        assert!(!part.passed(30));
        assert!(part.passed(10), "40 of 40 spent");
        assert!(!whole.passed(0), "60 of 100 spent");
        assert!(whole.passed(40));
        assert!(whole.part(0.5).passed(0), "nothing left to share");
    }

    /// An instance above `MAX_TOTAL` is an error naming its total (the
    /// solve used to return offsets that overflowed), alignment padding
    /// counted; one at the limit is planned, and one below it with a fixed
    /// buffer (counted by where it ends).
    #[test]
    fn instances_above_the_limit_are_an_error() {
        let quarter = MAX_TOTAL / 4;
        let mut p = Problem {
            buffers: (0..4)
                .map(|i| Buffer::new(i.to_string(), 0, 10, quarter))
                .collect(),
            capacity: None,
        };
        assert_eq!(solve(&p, &Options::default()).unwrap().peak, MAX_TOTAL);
        p.buffers[0].size += 1;
        let e = solve(&p, &Options::default()).unwrap_err();
        assert_eq!(
            e,
            Error::TooLarge {
                total: MAX_TOTAL as u128 + 1
            }
        );
        assert!(e.to_string().contains("4611686018427387905 bytes"), "{e}");
        p.buffers[0].size -= 1;
        p.buffers[1].alignment = 2;
        assert!(matches!(
            solve(&p, &Options::default()),
            Err(Error::TooLarge { .. })
        ));
        p.buffers[1].alignment = 1;
        p.buffers[0].offset = Some(quarter);
        p.buffers[1].size -= quarter / 2;
        p.buffers.pop();
        let sol = solve(&p, &Options::default()).unwrap();
        assert_eq!(check(&p, &sol.offsets).unwrap(), sol.peak);
        p.buffers[1].alignment = 1 << 61;
        assert!(matches!(
            solve(&p, &Options::default()),
            Err(Error::TooLarge { .. })
        ));
    }

    /// A fit on a large instance whose greedy start is already within the
    /// capacity returns that start: no improvement runs once the capacity
    /// is met (it used to run its whole first round, or the limit). The
    /// instance is wide (hundreds live at once): a narrow one goes to the
    /// windows first, which return their own placement once it fits.
    #[test]
    fn a_large_fit_stops_at_the_capacity() {
        let mut p = cli::long_lived(LARGE + 1000, 3);
        let start = greedy::sweep_place(&p);
        let peak = check::peak_of(&p, &start);
        assert!(peak > lower_bound(&p), "the start is above the bound");
        p.capacity = Some(peak);
        let opts = Options {
            minimize: false,
            time_limit: Duration::from_secs(60),
            node_limit: Some(u64::MAX),
            threads: 1,
        };
        let sol = solve(&p, &opts).unwrap();
        assert_eq!(sol.offsets, start);
    }

    /// The workers' lowest placement is what a large solve goes on with
    /// (here a deadline already passed stops each worker's round at once).
    #[test]
    fn the_lowest_of_the_workers_placements_is_kept() {
        let (p, lb, start) = large_start();
        let lower = solve(
            &p,
            &Options {
                time_limit: Duration::from_secs(60),
                node_limit: Some(100_000),
                threads: 1,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(lower.peak < start.0, "the solve lowered the sweep's peak");
        for first_is_lower in [false, true] {
            let s = greedy::Squeaker::new(&p, 2, &mut || false).unwrap();
            let mut bests = [start.clone(), (lower.peak, lower.offsets.clone())];
            if first_is_lower {
                bests.reverse();
            }
            let mut workers: Vec<Worker> = s
                .workers
                .into_iter()
                .zip(bests)
                .map(|(runs, best)| Worker::new(runs, best))
                .collect();
            let passed = Deadline::new(Instant::now(), None);
            let both = (&passed, &passed);
            let best = squeak_workers(&p, &s.how, &mut workers, both, (lb, lb), true, None);
            assert_eq!(best, (lower.peak, lower.offsets.clone()));
        }
    }

    /// The second thread slices the first worker's passes when fewer than
    /// `PIPE_STEPS` passes as long as the first (counted from the solve's
    /// start) fit in the rounds, and the decision is made once.
    #[test]
    fn the_pipe_opens_when_few_passes_fit() {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(8);
        let decided = |first_ms: u64| {
            let pipe = Pipe::new(t0, true);
            pipe.decide(t0 + Duration::from_millis(first_ms), end);
            pipe.decide(t0, end);
            pipe.is(Pipe::ON)
        };
        assert!(!decided(900), "8 passes of 0.9 s fit in 8 s");
        assert!(!decided(1000), "exactly 8 fit");
        assert!(decided(1001), "fewer than 8 fit");
        let closed = Pipe::new(t0, false);
        closed.decide(t0 + Duration::from_secs(7), end);
        assert!(closed.is(Pipe::OFF), "a pipe not opened stays off");
    }

    /// With the pipe on, the second worker runs no pass of its own: it
    /// slices the first worker's, and what it lowers is kept.
    #[test]
    fn the_piped_worker_slices_the_first_workers_passes() {
        // Passes from its starts end above its bound (`large_start`'s
        // reach it).
        let p = cli::random_instance(6000, 9);
        let lb = lower_bound(&p);
        let start = greedy::sweep_place(&p);
        let start = (check::peak_of(&p, &start), start);
        let (how, mut workers) = workers_from(&p, 2, start);
        let pipe = Pipe::new(Instant::now(), true);
        pipe.state.store(Pipe::ON, Ordering::Relaxed);
        let later = Instant::now() + Duration::from_secs(600);
        let deadline = Deadline::new(later, Some(400_000));
        let best = squeak_workers(
            &p,
            &how,
            &mut workers,
            (&deadline, &deadline),
            (lb, lb),
            true,
            Some(&pipe),
        );
        assert!(workers[0].passed.get(), "the first worker made passes");
        assert!(!workers[1].passed.get(), "the second made none");
        assert_eq!(check(&p, &best.1).unwrap(), best.0);
        assert!(
            best.0 < workers[0].best.0,
            "the slices lowered the passes' best, {} -> {}",
            workers[0].best.0,
            best.0
        );
        assert_eq!(best, workers[1].best);
    }

    /// On two threads the second worker of a minimisation makes the
    /// anchored and the first-fit sweep (the solve's start) before its
    /// passes: with no time left for any pass or another sweep, the solve
    /// goes on with the lower, and its peak is the start's.
    #[test]
    fn the_sweeping_worker_provides_the_start() {
        let (p, lb, first) = large_start();
        let anchored = greedy::sweep_place_anchored(&p);
        let anchored = (check::peak_of(&p, &anchored), anchored);
        // The lower of the anchored and the first-fit sweep, the first
        // of equal ones.
        let start = if first.0 < anchored.0 {
            first
        } else {
            anchored
        };
        let (how, mut workers) = workers_from(&p, 2, (u64::MAX, Vec::new()));
        workers[1].sweeps = true;
        let passed = Deadline::new(Instant::now(), None);
        let both = (&passed, &passed);
        let best = squeak_workers(&p, &how, &mut workers, both, (lb, lb), true, None);
        assert_eq!(best, start);
        assert_eq!(workers[1].swept, Some(start.0));
        assert!(!workers[1].sweeps, "the sweep is made once");
        // A minimisation on two threads with a second to go takes this
        // path: it ends no higher than the sweep, with a valid placement.
        let opts = Options {
            minimize: true,
            time_limit: Duration::from_secs(1),
            threads: 2,
            node_limit: None,
        };
        let sol = solve(&p, &opts).unwrap();
        assert!(sol.peak <= start.0);
        assert_eq!(check(&p, &sol.offsets).unwrap(), sol.peak);
    }

    /// With time left for more sweeps, the sweeping worker makes
    /// [`MORE_SWEEPS`] after the anchored and the first-fit ones where the
    /// anchored one lands within `SWEEPS_WITHIN` of the bound, and starts
    /// from the lowest: long-lived seed 3 from the stack by start (1.0021
    /// of the bound, anchored 1.0055), seed 5 from the stack by end
    /// weighing ends at 0.3 (1.0039; at 0.1 1.0060, anchored 1.0226).
    /// Further above it makes none: random-like seed 2 starts from its
    /// first-fit sweep (1.0854, anchored 1.1319) although the snug fit is
    /// lower (1.0622).
    #[test]
    fn the_sweeping_worker_keeps_the_lowest_of_its_sweeps() {
        use greedy::Stack;
        let n = LARGE + 1000;
        let cases = [
            (
                cli::long_lived(n, 3),
                Some((Stack::Starting, greedy::SNUG_END_WEIGHT)),
            ),
            (cli::long_lived(n, 5), Some((Stack::Ending, 0.3))),
            (cli::random_instance(n, 2), None),
        ];
        for (k, (p, lowest)) in cases.into_iter().enumerate() {
            let lb = lower_bound(&p);
            let peak = |o: Vec<u64>| check::peak_of(&p, &o);
            let by = |(s, w)| {
                peak(greedy::sweep_place_anchored_weighing(&p, s, w, &mut || false).unwrap())
            };
            let anchored = by((Stack::Nearer, greedy::SNUG_END_WEIGHT));
            let first = peak(greedy::sweep_place(&p));
            let others: Vec<u64> = MORE_SWEEPS
                .iter()
                .map(|&s| s.map_or_else(|| peak(greedy::sweep_place_snug(&p)), by))
                .collect();
            let want = match lowest {
                Some(s) => {
                    assert!((anchored as f64) < SWEEPS_WITHIN * lb as f64);
                    assert_eq!(others.iter().min(), Some(&by(s)), "case {k}");
                    assert!(by(s) < anchored.min(first));
                    by(s)
                }
                None => {
                    assert!(anchored as f64 > SWEEPS_WITHIN * lb as f64);
                    assert!(first < anchored);
                    let lower = others.iter().any(|&o| o < first);
                    assert!(lower, "{others:?} against {first}");
                    first
                }
            };
            let (how, mut workers) = workers_from(&p, 2, (u64::MAX, Vec::new()));
            workers[1].sweeps = true;
            // Rounds that end by their node budget, long before their
            // time, so the time left holds all the sweeps; a goal below
            // the bound, so the first worker's passes never reach it and
            // cut the sweeps short (random-like seed 2's did, now and
            // then, at the bound).
            let later = Instant::now() + Duration::from_secs(600);
            let rounds = Deadline::new(later, Some(1));
            let best = squeak_workers(
                &p,
                &how,
                &mut workers,
                (&rounds, &rounds),
                (lb, 0),
                true,
                None,
            );
            assert_eq!(workers[1].swept, Some(want));
            assert!(best.0 <= want);
            assert_eq!(check(&p, &best.1).unwrap(), best.0);
        }
    }

    /// `n` workers of a large solve of `p`, each from `best`, and their index.
    fn workers_from(p: &Problem, n: usize, best: greedy::Best) -> (greedy::Index, Vec<Worker>) {
        let s = greedy::Squeaker::new(p, n, &mut || false).unwrap();
        let workers = s
            .workers
            .into_iter()
            .map(|runs| Worker::new(runs, best.clone()))
            .collect();
        (s.how, workers)
    }

    /// A random-like instance above [`LARGE`], its bound and its start-time
    /// sweep placement.
    fn large_start() -> (Problem, u64, greedy::Best) {
        let p = cli::random_instance(LARGE + 1000, 3);
        let start = greedy::sweep_place(&p);
        let (lb, peak) = (lower_bound(&p), check::peak_of(&p, &start));
        (p, lb, (peak, start))
    }

    /// The end of the rounds does not cut a worker's first pass (on a
    /// loaded machine the first pass on 100k buffers can end after it),
    /// and no pass starts after it.
    #[test]
    fn the_end_of_the_rounds_lets_a_first_pass_finish() {
        let (p, lb, start) = large_start();
        let (how, mut workers) = workers_from(&p, 1, start.clone());
        let later = Instant::now() + Duration::from_secs(600);
        let deadline = Deadline::new(later, Some(u64::MAX / 2));
        let rounds = deadline.until(Instant::now());
        let best = squeak_workers(
            &p,
            &how,
            &mut workers,
            (&rounds, &deadline),
            (lb, lb),
            false,
            None,
        );
        assert!(workers[0].passed.get(), "the first pass ended");
        assert!(best.0 < start.0, "{} -> {}", start.0, best.0);
        assert_eq!(check(&p, &best.1).unwrap(), best.0);
        // Exactly one pass (charged one node per buffer), no slice work.
        let spent = deadline
            .budget
            .as_ref()
            .unwrap()
            .spent
            .load(Ordering::Relaxed);
        assert_eq!(spent, p.buffers.len() as u64);
    }

    /// The slices kept for the end of a large solve lower the best
    /// placement's peak until the budget is spent, and do nothing once the
    /// deadline has passed.
    #[test]
    fn polish_lowers_the_best_placement_within_its_budget() {
        let (p, lb, start) = large_start();
        let run = |deadline: Deadline| {
            let mut best = start.clone();
            polish(
                &p,
                &mut eject::Slices::default(),
                &mut best,
                &deadline,
                (lb, lb),
            );
            assert_eq!(check(&p, &best.1).unwrap(), best.0);
            best
        };
        let later = Instant::now() + Duration::from_secs(600);
        let a = run(Deadline::new(later, Some(50_000)));
        assert!(a.0 < start.0 && a.0 >= lb, "{} -> {}", start.0, a.0);
        assert_eq!(a, run(Deadline::new(later, Some(50_000))));
        assert_eq!(run(Deadline::new(Instant::now(), None)), start);
    }

    #[test]
    fn solves_tiny() {
        let p = Problem {
            buffers: vec![
                Buffer::new("a", 0, 2, 4),
                Buffer::new("b", 1, 3, 4),
                Buffer::new("c", 2, 4, 4),
            ],
            capacity: None,
        };
        let s = solve(&p, &Options::default()).unwrap();
        assert_eq!(check(&p, &s.offsets).unwrap(), 8);
        assert_eq!(s.peak, 8);
        assert!(s.optimal);
    }

    #[test]
    fn does_not_fit_reports_excess() {
        let p = Problem {
            buffers: vec![Buffer::new("a", 0, 2, 4), Buffer::new("b", 1, 3, 4)],
            capacity: Some(6),
        };
        let e = solve(&p, &Options::default()).unwrap_err();
        assert_eq!(
            e,
            Error::DoesNotFit {
                capacity: 6,
                best_peak: 8,
                lower_bound: 8,
                greedy: true
            }
        );
        assert!(
            e.to_string()
                .contains("needs at least 8 bytes, 2 more than the capacity 6"),
            "{e}"
        );
        // Not proven: the lower bound fits, only the search fell short.
        for greedy in [false, true] {
            let e = Error::DoesNotFit {
                capacity: 10,
                best_peak: 12,
                lower_bound: 9,
                greedy,
            }
            .to_string();
            assert!(
                e.contains("no placement within the capacity 10")
                    && e.contains("exceeds it by 2 bytes")
                    && e.contains("lower bound 9 fits"),
                "{e}"
            );
            // A fit's best peak is the greedy start's: the message says so.
            assert_eq!(
                e.contains("the greedy start's peak, 12, exceeds"),
                greedy,
                "{e}"
            );
            assert_eq!(
                e.contains("the best peak found, 12, exceeds"),
                !greedy,
                "{e}"
            );
        }
    }

    #[test]
    fn rejects_bad_buffers() {
        let mut p = Problem {
            buffers: vec![Buffer::new("a", 3, 3, 4)],
            capacity: None,
        };
        assert!(matches!(
            solve(&p, &Options::default()),
            Err(Error::InvalidBuffer { .. })
        ));
        p.buffers = vec![
            Buffer {
                offset: Some(0),
                ..Buffer::new("x", 0, 5, 4)
            },
            Buffer {
                offset: Some(2),
                ..Buffer::new("y", 4, 6, 4)
            },
        ];
        assert_eq!(
            solve(&p, &Options::default()).unwrap_err(),
            Error::FixedOverlap {
                a: "x".into(),
                b: "y".into()
            }
        );
    }

    #[test]
    fn honours_fixed_and_alignment() {
        let p = Problem {
            buffers: vec![
                Buffer {
                    offset: Some(8),
                    ..Buffer::new("f", 0, 10, 8)
                },
                Buffer {
                    alignment: 16,
                    ..Buffer::new("a", 0, 5, 4)
                },
                Buffer::new("b", 2, 8, 8),
                Buffer::new("z", 0, 10, 0),
            ],
            capacity: None,
        };
        let s = solve(&p, &Options::default()).unwrap();
        assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
        assert_eq!(s.offsets[0], 8);
        assert_eq!(s.offsets[1] % 16, 0);
    }

    /// A large instance whose one group is beyond the exact search and
    /// whose first squeaky-wheel round ends above the bound: with budget
    /// left, the runs go on where they stopped (they used to return with
    /// the rest of the budget unused, the same peak for any budget). Seed 9,
    /// because the search improved until seeds 1-8 reach their last peak
    /// within 600,000 nodes, so no budget above that can lower it there.
    #[test]
    fn large_instances_spend_the_budget_left() {
        let p = cli::random_instance(6000, 9);
        let lb = lower_bound(&p);
        let with = |nodes| {
            let opts = Options {
                time_limit: Duration::from_secs(600),
                minimize: true,
                threads: 1,
                node_limit: Some(nodes),
            };
            let s = solve(&p, &opts).unwrap();
            assert_eq!(check(&p, &s.offsets).unwrap(), s.peak);
            s.peak
        };
        // About 100 and 170 passes of 6,000 buffers (one round is 48).
        let (some, more) = (with(600_000), with(1_000_000));
        assert!(some > lb, "the first rounds end above the bound");
        assert!(more < some, "more budget, lower peak: {more} vs {some}");
    }
}
