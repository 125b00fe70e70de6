//! Helpers for command-line front ends (`strata plan`).

/// Flat result summary for `--json` output.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub buffers: usize,
    pub lower_bound: u64,
    pub peak: u64,
    pub optimal: bool,
    pub seconds: f64,
}

impl Summary {
    /// One-line JSON object with the fields above.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"buffers\":{},\"lower_bound\":{},\"peak\":{},\"optimal\":{},\"seconds\":{:.6}}}",
            self.buffers, self.lower_bound, self.peak, self.optimal, self.seconds
        )
    }
}

/// Directory of the shared benchmark data: `$STRATA_SHARED` if set, else
/// `<workspace root>/../shared`; `None` when it does not exist.
pub fn shared_dir() -> Option<std::path::PathBuf> {
    let p = match std::env::var_os("STRATA_SHARED") {
        Some(v) => std::path::PathBuf::from(v),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    p.is_dir().then_some(p)
}

/// What a program's output sends when its reader has gone away (a pipe
/// into `head` closed): see [`outln!`](crate::outln) and [`run_to_closed_stdout`].
#[derive(Debug)]
pub struct ClosedStdout;

/// Writes to stdout as `print!` does, but where the reader has gone away
/// (`EPIPE`), ends the program by unwinding with [`ClosedStdout`], without
/// a panic message: destructors run (a benchmark's scratch directory is
/// removed) and [`run_to_closed_stdout`] ends the process. Any other
/// write error is a panic, as in `print!`.
pub fn out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::panic::resume_unwind(Box::new(ClosedStdout));
        }
        panic!("failed printing to stdout: {e}");
    }
}

/// `println!` through [`cli::out`](crate::cli::out): a closed stdout ends
/// the program quietly instead of panicking.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::cli::out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Runs a command-line program's `body`; where it ends on [`ClosedStdout`]
/// (its output's reader went away), ends the process as a Unix filter
/// does, by SIGPIPE (status 141 where there are no signals), after the
/// unwinding has run every destructor. Any other panic goes on as it was.
pub fn run_to_closed_stdout(body: impl FnOnce()) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(()) => {}
        Err(p) if p.is::<ClosedStdout>() => {
            #[cfg(unix)]
            // SAFETY: restores SIGPIPE's default action and raises it; the
            // body has returned (unwound), so nothing else runs after.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
            std::process::exit(141);
        }
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Deterministic xorshift generator for synthetic instances.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Random instance: `n` buffers over `n * 2` time steps, mostly short
/// lifetimes (1..100) with 5% long ones, log-uniform sizes up to 1 MiB.
pub fn random_instance(n: usize, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let horizon = (n as u64 * 2).max(2);
    let buffers = (0..n)
        .map(|i| {
            let lower = r.below(horizon);
            let dur = if r.below(20) == 0 {
                1 + r.below(horizon / 10 + 1)
            } else {
                1 + r.below(100)
            };
            let bits = 4 + r.below(17);
            let size = 1 + r.below(1 << bits);
            crate::Buffer::new(i.to_string(), lower, lower + dur, size)
        })
        .collect();
    crate::Problem {
        buffers,
        capacity: None,
    }
}

/// Long-lived instance: `n` buffers, each starting in the first `n` steps
/// and live for `0.3 n` to `0.6 n` of them, 1 B-4 KiB: about 45 % are live
/// at once, so a first fit meets many gaps too small for it (a stress
/// case for the time limit, not a real shape).
pub fn long_lived(n: usize, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let n64 = (n as u64).max(1);
    let buffers = (0..n)
        .map(|i| {
            let lower = r.below(n64);
            let len = 1 + 3 * n64 / 10 + r.below(3 * n64 / 10);
            crate::Buffer::new(i.to_string(), lower, lower + len, 1 + r.below(4096))
        })
        .collect();
    crate::Problem {
        buffers,
        capacity: None,
    }
}

/// Stream-like instance: buffer `i` starts at step `i` and lives 1 to
/// 5,000 steps, 1 B-4 KiB, so about 2,500 are live at once and every step
/// frees and allocates in the middle of them (a stress case for the
/// greedy starts: a first fit leaves slivers that a best fit avoids).
pub fn stream_like(n: usize, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0x94d0_49bb_1331_11eb) | 1);
    let buffers = (0..n)
        .map(|i| {
            let lower = i as u64;
            let len = 1 + r.below(5000);
            crate::Buffer::new(i.to_string(), lower, lower + len, 1 + r.below(4096))
        })
        .collect();
    crate::Problem {
        buffers,
        capacity: None,
    }
}

/// Chain instance: buffer `i` lives over steps `i` and `i + 1`, 1 B-4
/// KiB (a sequential network's activations, each read by the next
/// operator only). Its optimum is its bound, the largest two neighbours
/// (each buffer alternately at the bottom and at the top), but a first
/// fit climbs wherever sizes grow along the chain (`window`).
pub fn chain_like(n: usize, seed: u64) -> crate::Problem {
    staggered_chain(n, 2, seed)
}

/// Chain instance whose buffer `i` lives over steps `i` to `i + steps -
/// 1`, sizes as [`chain_like`]'s (the same for the same seed): each
/// activation read by the next `steps - 1` operators, so `steps - 1`
/// buffers cross every step, the older ending first (`window`'s stacks
/// with holes).
pub fn staggered_chain(n: usize, steps: u64, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1);
    let buffers = (0..n as u64)
        .map(|i| crate::Buffer::new(i.to_string(), i, i + steps.max(1), 1 + r.below(4096)))
        .collect();
    crate::Problem {
        buffers,
        capacity: None,
    }
}

/// A [`staggered_chain`] of tensors of 4-byte elements (sizes 4 B to 4
/// KiB, multiples of 4), each aligned to 4 to 64 bytes: the alignments do
/// not divide the sizes, so the skyline search does not take its windows
/// as they are (`window::fit` pads them).
pub fn aligned_chain(n: usize, steps: u64, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0xd6e8_feb8_6659_fd93) | 1);
    let buffers = (0..n as u64)
        .map(|i| {
            let size = 4 * (1 + r.below(1024));
            crate::Buffer {
                alignment: 4 << r.below(5),
                ..crate::Buffer::new(i.to_string(), i, i + steps.max(1), size)
            }
        })
        .collect();
    crate::Problem {
        buffers,
        capacity: None,
    }
}

/// Training-like workload of about `n` buffers: a chain of layers whose
/// forward activations live until the matching backward step, with weights
/// and optimizer state live throughout, short-lived temporaries and
/// gradients, repeated over a few micro-batches; sizes are 64-byte multiples.
pub fn training_like(n: usize, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let mut bs = Vec::new();
    let layers = (n / 12).max(1) as u64;
    let steps = 4 * layers + 2;
    let push = |bs: &mut Vec<crate::Buffer>, l: u64, u: u64, s: u64| {
        let id = bs.len().to_string();
        bs.push(crate::Buffer::new(id, l, u.max(l + 1), s * 64));
    };
    for l in 0..layers {
        let act = 16 + r.below(4096);
        let w = 1 + r.below(512);
        // Weight (live throughout) and its optimizer state.
        push(&mut bs, 0, steps, w);
        push(&mut bs, 0, steps, w);
        // Forward activation: produced at 2l, consumed by backward at 4L-2l.
        push(&mut bs, 2 * l, 4 * layers - 2 * l + 1, act);
        // Forward temporaries.
        for _ in 0..3 {
            let t = 2 * l + r.below(2);
            push(&mut bs, t, t + 1 + r.below(2), 1 + r.below(act));
        }
        // Backward: activation gradient, weight gradient, temporaries.
        let b = 4 * layers - 2 * l;
        push(&mut bs, b, b + 3, act);
        push(&mut bs, b, b + 2 + r.below(3), w);
        for _ in 0..4 {
            let t = b + r.below(2);
            push(&mut bs, t, t + 1 + r.below(2), 1 + r.below(act));
        }
    }
    crate::Problem {
        buffers: bs,
        capacity: None,
    }
}

/// Somas/iopddl-like training-step instance of about `n` buffers, shaped
/// after the real ones (somas_pangu_2.6B): a forward pass over `n / 50`
/// layers and the mirrored backward pass, one time step per operator.
/// Per layer: a parameter live throughout (every fourth layer's also has
/// an optimizer-state copy), a saved activation live from its forward step
/// to the matching backward step, and about 45 short-lived temporaries (1-8
/// steps, log-uniform sizes 512 B-8 MiB, some odd sizes); plus a few huge
/// buffers (100-400 MiB, one per 5,000 buffers, at least 3) around the turn
/// from forward to backward, where the load peaks.
pub fn somas_like(n: usize, seed: u64) -> crate::Problem {
    let mut r = Rng(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
    let layers = (n / 50).max(1) as u64;
    let per = 24u64; // time steps per layer in each direction
    let turn = layers * per;
    let end = 2 * turn + 1;
    let mut bs: Vec<crate::Buffer> = Vec::with_capacity(n + 8);
    let push = |bs: &mut Vec<crate::Buffer>, l: u64, u: u64, s: u64| {
        let id = bs.len().to_string();
        bs.push(crate::Buffer::new(id, l, u.max(l + 1), s.max(1)));
    };
    let sized = |r: &mut Rng, lo_bits: u64, hi_bits: u64| {
        let bits = lo_bits + r.below(hi_bits - lo_bits + 1);
        let s = (1u64 << bits) + r.below(1 << bits);
        // Most sizes are 512-byte multiples, a few are not.
        if r.below(10) == 0 {
            s + 4
        } else {
            s.div_ceil(512) * 512
        }
    };
    while (bs.len() as u64) < n as u64 {
        let l = (bs.len() as u64 / 50).min(layers - 1);
        let f = l * per;
        let b = end - 1 - f - per;
        let w = sized(&mut r, 12, 22);
        push(&mut bs, 0, end, w);
        if l.is_multiple_of(4) {
            push(&mut bs, 0, end, w);
        }
        let act = sized(&mut r, 16, 23);
        push(&mut bs, f + r.below(per), b + r.below(per), act);
        for _ in 0..45 {
            let (base, t) = if r.below(2) == 0 { (f, 0) } else { (b, 1) };
            let s = base + r.below(per);
            let d = 1 + r.below(if t == 0 { 4 } else { 8 });
            push(&mut bs, s, s + d, sized(&mut r, 9, 23));
        }
    }
    let huge = (n as u64 / 5_000).max(3);
    for _ in 0..huge {
        let s = turn - per * 2 + r.below(per * 4);
        let long = r.below(3) == 0;
        let d = 1 + r.below(if long { per * 8 } else { 6 });
        push(&mut bs, s, s + d, (100 + r.below(301)) << 20);
    }
    crate::Problem {
        buffers: bs,
        capacity: None,
    }
}

/// The distinct start and end times of `p`'s buffers, sorted.
pub fn event_times(p: &crate::Problem) -> Vec<u64> {
    let mut t: Vec<u64> = p.buffers.iter().flat_map(|b| [b.lower, b.upper]).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// The part of `p` between its `from`-th and `to`-th event times
/// ([`event_times`]): every buffer live then, its life cut to
/// `[t_from, t_to)`, without a capacity. Any placement of `p` places the
/// window too, so its peak is at most `p`'s optimum: an instance of the
/// same shape as `p` that is not `p` (memplan-bench `--windows`).
pub fn window(p: &crate::Problem, from: usize, to: usize) -> crate::Problem {
    let t = event_times(p);
    let at = |k: usize| {
        t.get(k.min(t.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let (a, z) = (at(from), at(to));
    crate::Problem {
        buffers: p
            .buffers
            .iter()
            .filter(|b| b.lower.max(a) < b.upper.min(z))
            .map(|b| crate::Buffer {
                lower: b.lower.max(a),
                upper: b.upper.min(z),
                ..b.clone()
            })
            .collect(),
        capacity: None,
    }
}

/// `k` windows of `p` ([`window`]: first and last event time), each over
/// a third to four fifths of its event times, at a random place; the same
/// for the same `seed`.
pub fn windows_of(p: &crate::Problem, k: usize, seed: u64) -> Vec<(usize, usize)> {
    let n = event_times(p).len().saturating_sub(1);
    let mut r = Rng(0x5851_f42d_4c95_7f2d ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..k)
        .map(|_| {
            let w = n / 3 + r.below((4 * n / 5 - n / 3 + 1) as u64) as usize;
            let from = r.below((n - w + 1) as u64) as usize;
            (from, from + w)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::{check, Buffer, Problem};

    /// A window keeps the buffers live in it, cut to it; the full
    /// instance's placement places it, and its bound is at most the full
    /// one's.
    #[test]
    fn a_window_cuts_lives_to_its_times() {
        let p = Problem {
            buffers: vec![
                Buffer::new("a", 0, 10, 4),
                Buffer::new("b", 2, 4, 3),
                Buffer::new("c", 4, 8, 5),
                Buffer::new("d", 8, 12, 6),
            ],
            capacity: Some(100),
        };
        assert_eq!(super::event_times(&p), vec![0, 2, 4, 8, 10, 12]);
        // Times 2 to 8: a cut to [2, 8), b whole, c whole; d starts at 8.
        let w = super::window(&p, 1, 3);
        let lives: Vec<(&str, u64, u64)> = w
            .buffers
            .iter()
            .map(|b| (b.id.as_str(), b.lower, b.upper))
            .collect();
        assert_eq!(lives, vec![("a", 2, 8), ("b", 2, 4), ("c", 4, 8)]);
        assert_eq!(w.capacity, None);
        let full = crate::solve(&p, &crate::Options::default()).unwrap();
        let off: Vec<u64> = [0, 1, 2].map(|i| full.offsets[i]).to_vec();
        assert!(check(&w, &off).unwrap() <= full.peak);
        assert!(crate::lower_bound(&w) <= crate::lower_bound(&p));
        let big = super::random_instance(2000, 3);
        let t = super::event_times(&big).len();
        let w = super::window(&big, t / 4, t / 2);
        assert!(!w.buffers.is_empty() && w.buffers.len() < big.buffers.len());
        let sol = crate::solve(&big, &crate::Options::default()).unwrap();
        let kept: Vec<u64> = (0..big.buffers.len())
            .filter(|&i| w.buffers.iter().any(|b| b.id == big.buffers[i].id))
            .map(|i| sol.offsets[i])
            .collect();
        assert!(check(&w, &kept).unwrap() <= sol.peak);
        let ws = super::windows_of(&big, 8, 1);
        assert_eq!(ws, super::windows_of(&big, 8, 1));
        assert_ne!(ws, super::windows_of(&big, 8, 2));
        let n = t - 1;
        for (a, z) in ws {
            assert!(
                z <= n && z - a >= n / 3 && z - a <= 4 * n / 5,
                "{a} {z} of {n}"
            );
        }
    }

    #[test]
    fn json() {
        let s = super::Summary {
            buffers: 3,
            lower_bound: 10,
            peak: 12,
            optimal: false,
            seconds: 0.5,
        };
        assert_eq!(
            s.to_json(),
            r#"{"buffers":3,"lower_bound":10,"peak":12,"optimal":false,"seconds":0.500000}"#
        );
    }
}
