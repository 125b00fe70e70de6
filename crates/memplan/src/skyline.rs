//! Skyline search: the exact search used for groups whose alignments all
//! divide the gcd of the sizes (then every offset built from sums of sizes
//! is aligned, so alignment can be ignored) and whose fixed buffers, if
//! any, lie one on another from offset 0 up with no hole ([`fixed_floor`]):
//! those are the floors the search starts from, and it places the free
//! buffers alone.
//!
//! **State.** The time axis of the group is cut at every start and end into
//! sections. `h[s]` is a *floor* for section `s`: every unplaced buffer live
//! in `s` must lie at an offset `>= h[s]`. `rem[s]` is the total size of the
//! unplaced buffers live in `s`; a section with `rem[s] == 0` is *dead* (no
//! unplaced buffer crosses it) and acts as a wall. A node stands for "is
//! there a placement of the unplaced buffers, pairwise disjoint where they
//! overlap in time, each at an offset `>=` the floor of every section it is
//! live in, with every top `<= cap`?".
//!
//! **Normal form.** If such a placement exists, one exists where every
//! unplaced buffer `b` sits at `max(floor over its sections, tops of the
//! unplaced buffers below it that overlap it in time)` (drop the buffers one
//! by one in offset order; nothing rises). Below, "completion" means such a
//! normal-form placement.
//!
//! **Branching.** Let `L` be the lowest floor over live sections and `t0`
//! the leftmost live section with floor `L`; the *plateau* `P = [t0, pe)` is
//! the maximal run of live sections with floor `L` starting at `t0`. Every
//! unplaced buffer lies at `>= L`. In a completion, either some buffer `b`
//! covers the cell `(t0, L)`, or none does.
//! * If `b` does, its offset is `L` (nothing lies lower), so every floor over
//!   its lifetime is `<= L`, hence `== L`: its lifetime lies in one run of
//!   live sections at `L` containing `t0`, i.e. in `P`, and starts at `t0`
//!   (section `t0 - 1` is dead, or its floor is `> L`, or `t0 == 0`). So the
//!   children are "place `b` at `L`" for each unplaced `b` starting at `t0`
//!   and ending by `pe`; afterwards every unplaced buffer overlapping `b` in
//!   time must lie at `>= L + size(b)` (it lies at `>= L` and cannot be below
//!   `b`), which becomes the floor over `b`'s lifetime.
//! * If none does (the *waste* child): let `tn` be the first section in
//!   `(t0, pe)` where an unplaced buffer starts (`pe` if none). Take the
//!   lowest buffer `b*` covering some section of `[t0, tn)`. It cannot start
//!   inside `(t0, tn)` (nothing starts there), so it starts before `t0` —
//!   then it covers `t0 - 1` and lies at `>= hl = h[t0 - 1]` — or at `t0`.
//!   Starting at `t0`, if it ended by `tn` nothing would lie below it in its
//!   lifetime (it is the lowest there, nothing else reaches `[t0, tn)`), so
//!   the normal form would put it at `L`, which this child excludes; so it
//!   reaches `tn`. Then either the largest floor `M` over its lifetime is
//!   `> L` and it lies at `>= M`, or `M == L` (its lifetime is inside `P`)
//!   and its offset `> L` is the top of an unplaced buffer `c` below it that
//!   overlaps it in time; `c` does not reach `[t0, tn)` (`b*` is the lowest
//!   there) so `c` starts in `[tn, end(b*))` and the offset is
//!   `>= L + size(c)`. Hence every buffer covering a section of `[t0, tn)`
//!   lies at `>= R = min(hl, min over unplaced b starting at t0 of nb(b))`
//!   with `nb(b) = M(b)` if `M(b) > L`, else `L` + the smallest unplaced
//!   size starting in `[tn, end(b))` (none: `b` cannot be `b*`). The floor of
//!   `[t0, tn)` rises to `R > L`; `R == inf` means no completion exists.
//!
//! The children are disjoint and cover all completions, every step raises a
//! floor, and a leaf places every buffer, so the search is complete and
//! terminates. Identical buffers (same lifetime and size) are placed in index
//! order (swapping two unplaced identical buffers maps completions onto
//! completions).
//!
//! **Pruning.** Unplaced buffers live in `s` lie above `h[s]` and are
//! pairwise disjoint there, so `h[s] + rem[s] <= cap` for every live
//! section; a waste step into `[t0, tn)` spends `R - L` of that slack. On
//! instances whose lower bound equals the capacity the peak sections have no
//! slack at all, so the search is almost forced there.
//!
//! **Level bound** (runs with `level` set). An unplaced buffer lies at
//! `>= M(b)`, the largest floor over its lifetime, so in a section, for
//! every level `z`, the unplaced buffers live there with `M(b) >= z` must
//! fit in `[z, cap)`. Checked in sections without slack, where a buffer
//! held up by a higher floor elsewhere in its lifetime leaves a gap below
//! it that the others must fill exactly.
//!
//! **Dead-state memo.** Whether a component has a completion depends only
//! on its floors, its set of unplaced buffers and the cap. A component whose
//! children all failed (not cut by a budget) is stored under a 128-bit hash
//! of that state with the cap, and is pruned when met again at the same or
//! a smaller cap: through another path, after a failing sibling component,
//! or in a later restart. (Only a hash collision could prune wrongly.)

use crate::{Deadline, Problem};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const INF: u64 = u64::MAX;
const NONE: u32 = u32::MAX;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The dead-state memo: a direct-mapped table, each slot the 128-bit
/// state hash and the largest cap the state was found dead at (plus one;
/// 0 marks an empty slot). A state goes to the slot its hash's low bits
/// name and replaces what was there, so the memo keeps the most recent
/// failures. The table starts at [`DEAD_MIN`] slots and doubles whenever
/// the states recorded since the last doubling reach its size, up to
/// [`DEAD_SLOTS`] (24 MB), so a search that fails little keeps a small
/// table in cache. It replaced a hash map cleared at 4M entries, which held
/// 1.2 GB after 10 s on D (213 buffers; two directions and two threads);
/// a map cleared at 256k entries held 80 MB but forgot everything at every
/// clear, and D's minimisation lost most of its progress.
struct DeadMemo {
    slots: Vec<[u64; 3]>,
    /// States recorded since the table last grew.
    fresh: usize,
}

/// Initial slots of [`DeadMemo`].
const DEAD_MIN: usize = 1 << 12;
/// Largest [`DeadMemo`]: 24 MB per search direction and thread.
const DEAD_SLOTS: usize = 1 << 20;

impl DeadMemo {
    fn new() -> DeadMemo {
        DeadMemo {
            slots: Vec::new(),
            fresh: 0,
        }
    }

    fn slot(&self, key: u128) -> usize {
        key as usize & (self.slots.len() - 1)
    }

    /// Whether `key` is recorded dead at a cap of at least `cap`.
    fn dead_at(&self, key: u128, cap: u64) -> bool {
        !self.slots.is_empty() && {
            let e = self.slots[self.slot(key)];
            e[2] > cap && (e[0], e[1]) == ((key >> 64) as u64, key as u64)
        }
    }

    /// Start loading `key`'s slot into the cache: the table is larger than
    /// the caches, so a lookup is a memory access; issued before a node
    /// scans its sections, it is there by the time [`DeadMemo::dead_at`]
    /// reads it.
    fn prefetch(&self, key: u128) {
        if self.slots.is_empty() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let at: *const [u64; 3] = &self.slots[self.slot(key)];
            // SAFETY: a prefetch is a hint that reads nothing and cannot
            // fault; the pointer is in bounds all the same.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    at as *const i8,
                )
            };
        }
    }

    /// Record `key` dead at `cap`.
    fn insert(&mut self, key: u128, cap: u64) {
        if self.slots.is_empty() {
            self.slots = vec![[0; 3]; DEAD_MIN];
        } else if self.fresh >= self.slots.len() && self.slots.len() < DEAD_SLOTS {
            let grown = vec![[0; 3]; self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, grown);
            for e in old.into_iter().filter(|e| e[2] > 0) {
                let k = ((e[0] as u128) << 64) | e[1] as u128;
                let at = self.slot(k);
                self.slots[at] = e;
            }
            self.fresh = 0;
        }
        self.fresh += 1;
        let at = self.slot(key);
        let e = &mut self.slots[at];
        let (hi, lo) = ((key >> 64) as u64, key as u64);
        let c = cap.saturating_add(1);
        if e[2] > 0 && (e[0], e[1]) == (hi, lo) {
            e[2] = e[2].max(c);
        } else {
            *e = [hi, lo, c];
        }
    }
}

/// Incremental hash of the search state, per lane `k` (two independent
/// 64-bit lanes): over a section range, `sum salt[s][k] * h[s]` plus the
/// sum of the keys of the unplaced buffers starting in the range (wrapping
/// arithmetic). Two different states collide in a lane only if
/// `sum salt[s] * dh[s] + sum dkeys == 0 mod 2^64`, which random salts and
/// keys make unlikely (about `2^-64` per lane, times `2^v` where every
/// floor difference is a multiple of `2^v`).
///
/// Floors change by range additions (a placement adds its size over its
/// lifetime, a raise adds `r - l` over its range; all floors of the range
/// are equal before, but that is not needed). With `d` the difference
/// array of `h` and `S` the prefix sums of the salts,
/// `sum_{s<x} salt[s] h[s] = S[x] * sum_{j<x} d[j] - sum_{j<x} d[j] S[j]`,
/// so two Fenwick trees over `d` and `d * S` give range sums in
/// `O(log n)` and range additions in `O(log n)`.
struct StateHash {
    /// `S[x]`, prefix sums of `salt`.
    pre: Vec<[u64; 2]>,
    /// Fenwick trees (1-based internally) over `d`, `d * S` and the keys.
    fd: Vec<u64>,
    fds: Vec<[u64; 2]>,
    fkey: Vec<[u64; 2]>,
}

/// Lane-wise wrapping sum.
fn add2(a: [u64; 2], b: [u64; 2]) -> [u64; 2] {
    [a[0].wrapping_add(b[0]), a[1].wrapping_add(b[1])]
}

impl StateHash {
    fn new(salt: &[[u64; 2]]) -> StateHash {
        let n = salt.len();
        let mut pre = vec![[0u64; 2]; n + 1];
        for s in 0..n {
            pre[s + 1] = add2(pre[s], salt[s]);
        }
        StateHash {
            pre,
            fd: vec![0; n + 2],
            fds: vec![[0; 2]; n + 2],
            fkey: vec![[0; 2]; n + 2],
        }
    }

    fn point(&mut self, j: usize, delta: u64) {
        let ds = self.pre[j].map(|p| delta.wrapping_mul(p));
        let mut i = j + 1;
        while i < self.fd.len() {
            self.fd[i] = self.fd[i].wrapping_add(delta);
            self.fds[i] = add2(self.fds[i], ds);
            i += i & i.wrapping_neg();
        }
    }

    /// Add `delta` (wrapping) to the floors of sections `[a, b)`.
    fn raise(&mut self, a: usize, b: usize, delta: u64) {
        self.point(a, delta);
        self.point(b, delta.wrapping_neg());
    }

    /// Add (or with `remove` subtract) a buffer key at section `s`.
    fn key_add(&mut self, s: usize, key: [u64; 2], remove: bool) {
        let key = if remove {
            key.map(u64::wrapping_neg)
        } else {
            key
        };
        let mut i = s + 1;
        while i < self.fkey.len() {
            self.fkey[i] = add2(self.fkey[i], key);
            i += i & i.wrapping_neg();
        }
    }

    /// Hash value of sections `[0, x)`.
    fn prefix(&self, x: usize) -> [u64; 2] {
        let (mut d, mut ds, mut key) = (0u64, [0u64; 2], [0u64; 2]);
        let mut i = x;
        while i > 0 {
            d = d.wrapping_add(self.fd[i]);
            ds = add2(ds, self.fds[i]);
            key = add2(key, self.fkey[i]);
            i &= i - 1;
        }
        [0, 1].map(|k| {
            self.pre[x][k]
                .wrapping_mul(d)
                .wrapping_sub(ds[k])
                .wrapping_add(key[k])
        })
    }

    /// Hash value of sections `[a, b)`.
    fn range(&self, a: usize, b: usize) -> [u64; 2] {
        let (x, y) = (self.prefix(b), self.prefix(a));
        [x[0].wrapping_sub(y[0]), x[1].wrapping_sub(y[1])]
    }
}

/// Whether the skyline search applies to `members` (see the module docs):
/// every alignment divides the gcd of the sizes, something is free, and
/// the fixed buffers, if any, are a floor ([`fixed_floor`]).
pub(crate) fn applies(p: &Problem, members: &[usize]) -> bool {
    let bs = &p.buffers;
    let mut g = 0u64;
    let (mut free, mut fixed) = (false, false);
    for &i in members {
        if bs[i].size > 0 {
            g = gcd(g, bs[i].size);
            free |= bs[i].offset.is_none();
            fixed |= bs[i].offset.is_some();
        }
    }
    free && members.iter().all(|&i| {
        let b = &bs[i];
        b.size == 0 || b.offset.is_some() || g.is_multiple_of(b.alignment)
    }) && (!fixed || fixed_floor(p, members))
}

/// Whether the fixed buffers of `members` lie one on another from offset
/// 0 up at every time, with no hole (as a stack whose upper buffers end
/// first and start last does). Then the free buffers can only lie above
/// them: the search starts from that floor, each section's the total size
/// of the fixed buffers live in it, and places the free ones alone. Sizes
/// add up to the floors, so the gcd argument above still holds. (The
/// fixed buffers are pairwise disjoint, `validate`: at each time they fill
/// `[0, top)` exactly when their sizes add up to their highest top.)
pub(crate) fn fixed_floor(p: &Problem, members: &[usize]) -> bool {
    let bs = &p.buffers;
    // (time, start, top, size): ends before starts at equal times.
    let mut ev: Vec<(u64, bool, u64, u64)> = Vec::new();
    for &i in members {
        let b = &bs[i];
        if let (Some(o), true) = (b.offset, b.size > 0 && b.upper > b.lower) {
            ev.push((b.lower, true, o + b.size, b.size));
            ev.push((b.upper, false, o + b.size, b.size));
        }
    }
    ev.sort_unstable();
    let mut tops = std::collections::BTreeMap::<u64, u32>::new();
    let mut sum = 0u64;
    let mut k = 0;
    while k < ev.len() {
        let t = ev[k].0;
        while k < ev.len() && ev[k].0 == t {
            let (_, start, top, size) = ev[k];
            if start {
                sum += size;
                *tops.entry(top).or_default() += 1;
            } else {
                sum -= size;
                let c = tops.get_mut(&top).expect("started");
                *c -= 1;
                if *c == 0 {
                    tops.remove(&top);
                }
            }
            k += 1;
        }
        if tops.last_key_value().map_or(0, |(&top, _)| top) != sum {
            return false;
        }
    }
    true
}

/// A bitset of `n` bits, all clear.
fn bits(n: usize) -> Vec<u64> {
    vec![0; n.div_ceil(64).max(1)]
}

/// Set (`on`) or clear bit `s` of `bits`.
fn put_bit(bits: &mut [u64], s: usize, on: bool) {
    let bit = 1u64 << (s % 64);
    if on {
        bits[s / 64] |= bit;
    } else {
        bits[s / 64] &= !bit;
    }
}

/// The first set bit of `bits` in `[from, hi)`, or `hi`.
fn next_bit(bits: &[u64], from: usize, hi: usize) -> usize {
    if from >= hi {
        return hi;
    }
    let mut w = from / 64;
    let mut word = bits[w] & (u64::MAX << (from % 64));
    loop {
        if word != 0 {
            return (w * 64 + word.trailing_zeros() as usize).min(hi);
        }
        w += 1;
        if w * 64 >= hi {
            return hi;
        }
        word = bits[w];
    }
}

pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A state change, for undo.
enum Op {
    /// Buffer placed at this offset (its sections' floors were all there).
    Place(u32, u64),
    /// Floors of sections `[a, b)` raised from this height.
    Raise(u32, u32, u64),
}

pub(crate) struct Sky {
    /// Global index of each local buffer.
    pub gid: Vec<usize>,
    size: Vec<u64>,
    span: Vec<(u32, u32)>,
    /// Per section: the buffers starting there, in the current key order.
    starts: Vec<Vec<u32>>,
    /// Per section: how many unplaced buffers start there.
    nstart: Vec<u32>,
    prev_same: Vec<u32>,
    h: Vec<u64>,
    /// The highest top of a fixed buffer (0 without them): the group's
    /// peak is at least this.
    floor_top: u64,
    /// Bit `s` set iff a run of equal floors starts at `s` (`s == 0` or
    /// `h[s] != h[s - 1]`), so that `pick_well` visits runs, not sections
    /// (D: 10 runs per component of 100 sections). Every change of `h`
    /// sets one value over a run of equal floors (a buffer is placed over
    /// a well, a raise covers part of one), so only the bits at its two
    /// ends can change.
    bnd: Vec<u64>,
    rem: Vec<u64>,
    placed: Vec<bool>,
    off: Vec<u64>,
    /// Per section boundary `s | s + 1`: unplaced buffers live in both.
    cross: Vec<u32>,
    /// Bit `s` set iff `cross[s] == 0`, so that `solve_parts` finds the
    /// ends of components without scanning their sections.
    uncrossed: Vec<u64>,
    trail: Vec<Op>,
    nsec: usize,
    /// Random key per buffer (two independent 64-bit lanes).
    zkey: Vec<[u64; 2]>,
    /// Incremental state hash (see `state_hash`).
    hash: StateHash,
    /// Failed component states (128-bit hash) -> the largest cap at which
    /// that state was proven to have no completion (see `solve`).
    dead: DeadMemo,
    /// Branching strategy (see `pick_well`).
    pub mode: u32,
    pub cap: u64,
    pub goal: u64,
    pub best: Option<(u64, Vec<u64>)>,
    pub nodes: u64,
    /// Per section: the buffers live there.
    live: Vec<Vec<u32>>,
    /// Scratch of `level_bound`: `M(b)` memoised per call (`stamp`).
    lv: Vec<(u64, u64)>,
    mval: Vec<u64>,
    mstamp: Vec<u64>,
    stamp: u64,
    /// Whether `level_bound` runs (it costs more than it saves on some
    /// instances, so restarts alternate).
    pub level: bool,

    /// Node budget of the current run (restarts); `u64::MAX` for none.
    node_limit: u64,
    pub aborted: bool,
    deadline: Deadline,
    pub timed_out: bool,
    stop: bool,
    /// Stop flag shared by the threads of a parallel portfolio.
    pub halt: Option<Arc<AtomicBool>>,
    /// The run was stopped through `halt` (sticky).
    pub halted: bool,
}

impl Sky {
    /// `reversed`: run time backwards (the problem is symmetric in time; the
    /// mirrored search makes different early choices, which restarts use).
    pub fn new(p: &Problem, members: &[usize], deadline: Deadline, reversed: bool) -> Sky {
        let bs = &p.buffers;
        let gid: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| bs[i].size > 0 && bs[i].offset.is_none())
            .collect();
        // Fixed buffers (a floor, see `fixed_floor`): (lower, upper, size).
        let fixed: Vec<(u64, u64, u64)> = members
            .iter()
            .filter(|&&i| bs[i].size > 0 && bs[i].offset.is_some())
            .map(|&i| (bs[i].lower, bs[i].upper, bs[i].size))
            .collect();
        let floor_top = members
            .iter()
            .filter_map(|&i| bs[i].offset.map(|o| o + bs[i].size))
            .max()
            .unwrap_or(0);
        let mut times: Vec<u64> = gid
            .iter()
            .flat_map(|&i| [bs[i].lower, bs[i].upper])
            .collect();
        times.sort_unstable();
        times.dedup();
        if let (Some(&first), Some(&last)) = (times.first(), times.last()) {
            // The floor changes where a fixed buffer starts or ends.
            let inside = |t: u64| first < t && t < last;
            times.extend(
                fixed
                    .iter()
                    .flat_map(|&(l, u, _)| [l, u])
                    .filter(|&t| inside(t)),
            );
            times.sort_unstable();
            times.dedup();
        }
        let sec = |t: u64| times.binary_search(&t).unwrap() as u32;
        let nsec = times.len().saturating_sub(1);
        let n = gid.len();
        let size: Vec<u64> = gid.iter().map(|&i| bs[i].size).collect();
        let span: Vec<(u32, u32)> = gid
            .iter()
            .map(|&i| {
                let (a, b) = (sec(bs[i].lower), sec(bs[i].upper));
                if reversed {
                    (nsec as u32 - b, nsec as u32 - a)
                } else {
                    (a, b)
                }
            })
            .collect();
        let mut rem = vec![0u64; nsec];
        let mut nstart = vec![0u32; nsec];
        let mut cross = vec![0u32; nsec];
        for i in 0..n {
            for s in span[i].0..span[i].1 - 1 {
                cross[s as usize] += 1;
            }
            nstart[span[i].0 as usize] += 1;
            for s in span[i].0..span[i].1 {
                rem[s as usize] += size[i];
            }
        }
        let mut prev_same = vec![NONE; n];
        let mut ids: Vec<usize> = (0..n).collect();
        ids.sort_by_key(|&i| (span[i], size[i], i));
        for w in ids.windows(2) {
            if (span[w[0]], size[w[0]]) == (span[w[1]], size[w[1]]) {
                prev_same[w[1]] = w[0] as u32;
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let zkey: Vec<[u64; 2]> = (0..n).map(|_| [rnd(), rnd()]).collect();
        let salt: Vec<[u64; 2]> = (0..nsec).map(|_| [rnd(), rnd()]).collect();
        let mut hash = StateHash::new(&salt);
        for i in 0..n {
            hash.key_add(span[i].0 as usize, zkey[i], false);
        }
        // Each section's floor: the total size of the fixed buffers live
        // over it (a difference array in the problem's time, then read in
        // the search's).
        let mut h = vec![0u64; nsec];
        if !fixed.is_empty() && nsec > 0 {
            let mut d = vec![0i128; nsec + 1];
            let (first, last) = (times[0], times[nsec]);
            for &(l, u, size) in &fixed {
                let (l, u) = (l.max(first), u.min(last));
                if l < u {
                    d[sec(l) as usize] += size as i128;
                    d[sec(u) as usize] -= size as i128;
                }
            }
            let mut run = 0i128;
            for s in 0..nsec {
                run += d[s];
                h[if reversed { nsec - 1 - s } else { s }] = run as u64;
            }
            for (s, &f) in h.iter().enumerate() {
                hash.raise(s, s + 1, f);
            }
        }
        let mut live = vec![Vec::new(); nsec];
        for (i, &(a, e)) in span.iter().enumerate() {
            for l in &mut live[a as usize..e as usize] {
                l.push(i as u32);
            }
        }
        let mut sky = Sky {
            zkey,
            hash,
            dead: DeadMemo::new(),
            gid,
            size,
            span,
            starts: vec![Vec::new(); nsec],
            nstart,
            prev_same,
            bnd: {
                let mut v = bits(nsec);
                for s in 0..nsec {
                    put_bit(&mut v, s, s == 0 || h[s] != h[s - 1]);
                }
                v
            },
            h,
            floor_top,
            rem,
            placed: vec![false; n],
            off: vec![0; n],
            uncrossed: {
                let mut v = bits(nsec);
                for (s, &c) in cross.iter().enumerate() {
                    put_bit(&mut v, s, c == 0);
                }
                v
            },
            cross,
            trail: Vec::new(),
            nsec,
            mode: 0,
            cap: 0,
            goal: 0,
            best: None,
            nodes: 0,
            live,
            lv: Vec::new(),
            mval: vec![0; n],
            mstamp: vec![0; n],
            stamp: 0,
            level: false,

            node_limit: u64::MAX,
            aborted: false,
            deadline,
            timed_out: false,
            stop: false,
            halt: None,
            halted: false,
        };
        sky.set_order(0, false);
        sky
    }

    /// Order in which the buffers starting in one section are tried.
    /// Variant 0: longer first, then larger; 1: larger first, then longer;
    /// 2: larger area first; above that one of those with a deterministic
    /// random perturbation (for restarts): a rank moves past up to 3
    /// others, or, in a `roomy` run (its cap leaves slack in every
    /// section), past up to half of all buffers.
    ///
    /// Why the wider perturbation where there is room: with slack the
    /// three orders' choices are not forced, and restarts that only swap
    /// neighbours retry nearly the same dives. On 64 windows of D, I and J
    /// (`cli::windows_of`; minimising, one thread, 2M nodes, order
    /// variants 0-2) the summed excess over the bounds went 28,826 ->
    /// 23,801 (1e-4), 84 -> 87 of 192 at the bound and 108 -> 124 within
    /// 1.01 (a quarter of all buffers, all and four times all: 25,244,
    /// 24,273 and 25,118). D and J at 3M nodes, order variants 0-5, mean:
    /// 1034.5 -> 1016.0 and 1021.8 -> 1012.3 units (1 KiB). Fits of the 64
    /// windows at 1.02 of their bound within 2M nodes: 19 -> 9 failed (at
    /// 1.04, 6 -> 4). J's own fit at its capacity is one of the unlucky
    /// ones: it succeeds at run 84 instead of 61 on one thread, in 0.5-0.7
    /// s instead of 0.36 on two. Where the cap is a perfect packing (some
    /// section without slack) the orders are forced, and the wide
    /// perturbation kept I from fitting at its capacity in 2 s: there it
    /// stays at 3.
    pub fn set_order(&mut self, variant: u32, roomy: bool) {
        let n = self.size.len();
        let len = |i: usize| (self.span[i].1 - self.span[i].0) as u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(variant as u64 + 1) | 1;
        let spread = if roomy { (n as u64 / 2).max(4) } else { 4 };
        let noise: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if variant < 3 {
                    0
                } else {
                    x % spread
                }
            })
            .collect();
        for l in &mut self.starts {
            l.clear();
        }
        let mut ids: Vec<usize> = (0..n).collect();
        match variant % 3 {
            0 => ids.sort_by_key(|&i| (std::cmp::Reverse((len(i), self.size[i])), i)),
            1 => ids.sort_by_key(|&i| (std::cmp::Reverse((self.size[i], len(i))), i)),
            _ => {
                ids.sort_by_key(|&i| (std::cmp::Reverse(self.size[i] as u128 * len(i) as u128), i))
            }
        }
        // Perturb the ranks (see above).
        let mut ranked: Vec<(usize, usize)> = ids
            .iter()
            .enumerate()
            .map(|(r, &i)| (r + noise[i] as usize, i))
            .collect();
        ranked.sort_unstable();
        for (_, i) in ranked {
            self.starts[self.span[i].0 as usize].push(i as u32);
        }
    }

    /// How many sections have no slack below `cap` (call between runs,
    /// when nothing is placed).
    pub fn tight_sections(&self, cap: u64) -> usize {
        debug_assert!(self.trail.is_empty());
        (0..self.nsec)
            .filter(|&s| self.h[s] + self.rem[s] >= cap)
            .count()
    }

    pub fn sections(&self) -> usize {
        self.nsec
    }

    /// Start a run with a budget of `budget` more nodes.
    pub fn begin_run(&mut self, budget: u64) {
        self.node_limit = self.nodes.saturating_add(budget);
        self.aborted = false;
        self.stop = false;
    }

    /// Recompute the run-start bit of section `s` (see `bnd`).
    fn fix_bnd(&mut self, s: usize) {
        if s == 0 || s >= self.nsec {
            return;
        }
        put_bit(&mut self.bnd, s, self.h[s] != self.h[s - 1]);
    }

    fn apply_place(&mut self, b: usize, l: u64) {
        let (lo, hi) = (self.span[b].0 as usize, self.span[b].1 as usize);
        let sz = self.size[b];
        self.placed[b] = true;
        self.off[b] = l;

        self.nstart[lo] -= 1;
        self.hash.key_add(lo, self.zkey[b], true);
        self.hash.raise(lo, hi, sz);
        for s in lo..hi {
            self.h[s] = l + sz;
            self.rem[s] -= sz;
        }
        self.fix_bnd(lo);
        self.fix_bnd(hi);
        for s in lo..hi - 1 {
            self.cross[s] -= 1;
            put_bit(&mut self.uncrossed, s, self.cross[s] == 0);
        }
        self.trail.push(Op::Place(b as u32, l));
    }

    fn apply_raise(&mut self, t0: usize, tn: usize, l: u64, r: u64) {
        for s in t0..tn {
            self.h[s] = r;
        }
        self.fix_bnd(t0);
        self.fix_bnd(tn);
        self.hash.raise(t0, tn, r - l);
        self.trail.push(Op::Raise(t0 as u32, tn as u32, l));
    }

    /// Undo everything after trail position `mark`.
    pub fn undo(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop().unwrap() {
                Op::Place(b, l) => {
                    let b = b as usize;
                    let (lo, hi) = (self.span[b].0 as usize, self.span[b].1 as usize);
                    let sz = self.size[b];
                    for s in lo..hi {
                        self.h[s] = l;
                        self.rem[s] += sz;
                    }
                    self.fix_bnd(lo);
                    self.fix_bnd(hi);
                    for s in lo..hi - 1 {
                        self.cross[s] += 1;
                        put_bit(&mut self.uncrossed, s, false);
                    }
                    self.nstart[lo] += 1;
                    self.hash.key_add(lo, self.zkey[b], false);
                    self.hash.raise(lo, hi, sz.wrapping_neg());
                    self.placed[b] = false;
                }
                Op::Raise(t0, tn, l) => {
                    let (t0, tn) = (t0 as usize, tn as usize);
                    self.hash.raise(t0, tn, l.wrapping_sub(self.h[t0]));
                    for s in t0..tn {
                        self.h[s] = l;
                    }
                    self.fix_bnd(t0);
                    self.fix_bnd(tn);
                }
            }
        }
    }

    /// One run: search for a placement with peak `<= cap`. On success the
    /// placement is recorded in `best`, `cap` drops below it and `true` is
    /// returned; the state is always restored.
    pub fn run(&mut self) -> bool {
        debug_assert!(self.trail.is_empty());
        // Section bound at the root (see `solve`).
        if self.floor_top > self.cap || (0..self.nsec).any(|s| self.h[s] + self.rem[s] > self.cap) {
            return false;
        }
        let ok = self.solve_parts(0, self.nsec);
        if ok {
            let pk = (0..self.size.len())
                .map(|i| self.off[i] + self.size[i])
                .max()
                .unwrap_or(0)
                .max(self.floor_top);
            debug_assert!(pk <= self.cap);
            self.best = Some((pk, self.off.clone()));
            self.cap = pk.saturating_sub(1);
        }
        self.undo(0);
        ok
    }

    /// Solve the live sections of `[lo, hi)` component by component. Two
    /// maximal runs of live sections that no unplaced buffer crosses between
    /// are independent (they share no buffer, and floors are per section),
    /// so a failure of a later one is never retried against other choices
    /// in an earlier one. On success the placements stay applied.
    fn solve_parts(&mut self, lo: usize, hi: usize) -> bool {
        let mut s = lo;
        while s < hi {
            if self.rem[s] == 0 {
                s += 1;
                continue;
            }
            let a = s;
            // The first boundary from `a` on that nothing crosses.
            s = next_bit(&self.uncrossed, a, hi - 1);
            debug_assert!((a..s).all(|x| self.cross[x] > 0));
            s += 1;
            if !self.solve(a, s) {
                return false;
            }
        }
        true
    }

    /// Choose where to branch in the component `[lo, hi)` (all live, every
    /// boundary crossed). A *well* is a maximal run of equal floors whose
    /// neighbours are higher (or outside the component); the branching
    /// argument of the module docs only needs `P` to be a well, not the
    /// lowest one: a buffer covering `(t0, w)` lies at `w`, so its lifetime
    /// has floors `<= w`, i.e. lies in the well and starts at its left end,
    /// and everything in the waste analysis happens inside the well and at
    /// its two higher neighbours. Fail first: the well with the fewest
    /// children (candidates, plus one if its slack allows waste), ties to
    /// the least slack. `None` if some well has no child at all.
    fn pick_well(&mut self, lo: usize, hi: usize) -> Option<(usize, usize)> {
        let cap = self.cap;
        let mut best: Option<(u32, u64, usize, usize)> = None;
        // `lo` starts a run of the component even where it continues one
        // of the section before (a dead section's floor can equal it).
        let mut a = lo;
        while a < hi {
            let w = self.h[a];
            let e = next_bit(&self.bnd, a + 1, hi);
            debug_assert!(
                self.h[a..e].iter().all(|&x| x == w) && (e == hi || self.h[e] != w),
                "run-start bits of [{a}, {e})"
            );
            let left_ok = a == lo || self.h[a - 1] > w;
            let right_ok = e == hi || self.h[e] > w;
            if left_ok && right_ok {
                let mut n = 0u32;
                for &b in &self.starts[a] {
                    let b = b as usize;
                    if self.placed[b] || self.span[b].1 as usize > e {
                        continue;
                    }
                    let ps = self.prev_same[b];
                    if ps != NONE && !self.placed[ps as usize] {
                        continue;
                    }
                    n += 1;
                }
                let mut tn = a + 1;
                while tn < e && self.nstart[tn] == 0 {
                    tn += 1;
                }
                let slack = (a..tn)
                    .map(|s| cap - self.h[s] - self.rem[s])
                    .min()
                    .unwrap();
                if slack > 0 {
                    n += 1;
                }
                if n == 0 {
                    return None;
                }
                // Mode 0: forced wells first, else the lowest (leftmost);
                // mode 1: fewest children, then least slack.
                let key = if self.mode == 0 {
                    (n.min(2), w, a, e)
                } else {
                    (n, slack, a, e)
                };
                if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                    best = Some(key);
                }
            }
            a = e;
        }
        best.map(|b| (b.2, b.3))
    }

    /// Solve one connected component `[lo, hi)` of live sections.
    fn solve(&mut self, lo: usize, hi: usize) -> bool {
        self.nodes += 1;
        if self.nodes & 1023 == 0 && self.deadline.passed(1024) {
            self.timed_out = true;
            self.stop = true;
        }
        if self.nodes & 63 == 0
            && self
                .halt
                .as_ref()
                .is_some_and(|h| h.load(Ordering::Relaxed))
        {
            self.halted = true;
            self.aborted = true;
            self.stop = true;
        }
        if self.nodes >= self.node_limit {
            self.aborted = true;
            self.stop = true;
        }
        if self.stop {
            return false;
        }
        // The section bound `h + rem <= cap` is checked once per run (in
        // `run`): placing `b` at the floor `l` of its sections keeps
        // `h + rem` there (`l + size + rem - size`), and a waste raise checks
        // it where it raises, so it holds at every node. Then the level
        // bound, then pick a well (see `pick_well`).
        let cap = self.cap;
        if self.level {
            let maxh = self.h[lo..hi].iter().copied().max().unwrap_or(0);
            if !self.level_bound(lo, hi, maxh) {
                return false;
            }
        }
        // Memo of dead states: whether the component has a completion
        // depends only on its floors, its unplaced buffers and the cap
        // (every unplaced buffer live in it lies inside it), and a state
        // dead at some cap is dead at every smaller one. The slot is
        // fetched while the wells are scanned.
        let key = self.state_hash(lo, hi);
        self.dead.prefetch(key);
        let Some((t0, pe)) = self.pick_well(lo, hi) else {
            return false;
        };
        if self.dead.dead_at(key, cap) {
            return false;
        }
        let ok = self.branch(lo, hi, t0, pe);
        if !ok && !self.stop {
            self.dead.insert(key, cap);
        }
        ok
    }

    /// Level bound: an unplaced buffer `b` lies at `>= M(b)`, the largest
    /// floor over its lifetime, so in a section `s`, for every level `z`,
    /// the unplaced buffers live in `s` with `M(b) >= z` fit in `[z, cap)`.
    /// It can only fail in `s` if some `M(b) > cap - rem[s]`; `maxh` (the
    /// largest floor of the component) skips the other sections cheaply.
    /// Only sections without slack are checked (elsewhere it rarely fails
    /// and costs the most).
    fn level_bound(&mut self, lo: usize, hi: usize, maxh: u64) -> bool {
        let cap = self.cap;
        self.stamp += 1;
        let stamp = self.stamp;
        let mut v = std::mem::take(&mut self.lv);
        let mut ok = true;
        'sec: for s in lo..hi {
            if maxh <= cap - self.rem[s] || cap - self.rem[s] - self.h[s] > 0 {
                continue;
            }
            v.clear();
            for k in 0..self.live[s].len() {
                let b = self.live[s][k] as usize;
                if self.placed[b] {
                    continue;
                }
                if self.mstamp[b] != stamp {
                    let (a, e) = (self.span[b].0 as usize, self.span[b].1 as usize);
                    self.mval[b] = self.h[a..e].iter().copied().max().unwrap();
                    self.mstamp[b] = stamp;
                }
                v.push((self.mval[b], self.size[b]));
            }
            v.sort_unstable_by(|x, y| y.cmp(x));
            let mut acc = 0u64;
            for &(m, z) in v.iter() {
                acc += z;
                if m + acc > cap {
                    ok = false;
                    break 'sec;
                }
            }
        }
        self.lv = v;
        ok
    }

    /// Hash of the state of component `[lo, hi)`: its bounds, floors and
    /// unplaced buffers, in `O(log sections)` (see `StateHash`).
    fn state_hash(&self, lo: usize, hi: usize) -> u128 {
        let v = self.hash.range(lo, hi);
        #[cfg(debug_assertions)]
        {
            let w = [0, 1].map(|k| {
                let mut w = 0u64;
                for s in lo..hi {
                    let salt = self.hash.pre[s + 1][k].wrapping_sub(self.hash.pre[s][k]);
                    w = w.wrapping_add(salt.wrapping_mul(self.h[s]));
                }
                for b in 0..self.size.len() {
                    let a = self.span[b].0 as usize;
                    if !self.placed[b] && (lo..hi).contains(&a) {
                        w = w.wrapping_add(self.zkey[b][k]);
                    }
                }
                w
            });
            debug_assert_eq!(v, w, "incremental state hash of [{lo}, {hi})");
        }
        let a = (lo as u64) << 32 | hi as u64;
        let x = mix(v[0] ^ mix(a));
        let y = mix(v[1].wrapping_add(mix(a ^ 0x9e37_79b9_7f4a_7c15)));
        (x as u128) << 64 | y as u128
    }

    /// Branch at the well `[t0, pe)` of component `[lo, hi)`.
    fn branch(&mut self, lo: usize, hi: usize, t0: usize, pe: usize) -> bool {
        let cap = self.cap;
        let l = self.h[t0];
        // Place a buffer at (t0, l).
        for k in 0..self.starts[t0].len() {
            let b = self.starts[t0][k] as usize;
            if self.placed[b] {
                continue;
            }
            if self.span[b].1 as usize > pe {
                continue;
            }
            let ps = self.prev_same[b];
            if ps != NONE && !self.placed[ps as usize] {
                continue;
            }
            let mark = self.trail.len();
            self.apply_place(b, l);
            if self.solve_parts(lo, hi) {
                return true;
            }
            self.undo(mark);
            if self.stop {
                return false;
            }
        }
        // Waste: nothing covers (t0, l); raise [t0, tn) to R (module docs).
        let mut tn = t0 + 1;
        while tn < pe && self.nstart[tn] == 0 {
            tn += 1;
        }
        let mut r = if t0 > lo && self.cross[t0 - 1] > 0 {
            self.h[t0 - 1]
        } else {
            INF
        };
        // `nb` per unplaced `b` starting at `t0`, minimised over them in one
        // pass each way: the floors are `l` over the well, higher from `pe`
        // on, so `M(b) > l` iff `b` ends after `pe`, and then `M(b)` is the
        // largest floor of `[pe, end(b))`, least for the earliest end;
        // otherwise `nb(b)` is `l` + the smallest size starting in
        // `[tn, end(b))`, least for the latest end.
        let (mut end_after, mut end_within) = (usize::MAX, 0usize);
        for &b in &self.starts[t0] {
            let b = b as usize;
            if self.placed[b] {
                continue;
            }
            let bhi = self.span[b].1 as usize;
            if bhi > pe {
                end_after = end_after.min(bhi);
            } else {
                end_within = end_within.max(bhi);
            }
        }
        if end_after != usize::MAX {
            r = r.min(self.h[pe..end_after].iter().copied().max().unwrap());
        }
        let mut smin = INF;
        for s in tn..end_within {
            if self.nstart[s] == 0 {
                continue;
            }
            for &c in &self.starts[s] {
                if !self.placed[c as usize] {
                    smin = smin.min(self.size[c as usize]);
                }
            }
        }
        r = r.min(l.saturating_add(smin));
        if r == INF {
            return false;
        }
        for s in t0..tn {
            if r.saturating_add(self.rem[s]) > cap {
                return false;
            }
        }
        let mark = self.trail.len();
        self.apply_raise(t0, tn, l, r);
        // A raise changes no `rem` or `cross`: the component stays whole.
        if self.solve(lo, hi) {
            return true;
        }
        self.undo(mark);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, Buffer};
    use std::time::{Duration, Instant};

    /// The dead-state memo answers for the caps it was told, keeps the
    /// largest cap per state, grows from `DEAD_MIN` slots and never past
    /// `DEAD_SLOTS`.
    #[test]
    fn dead_memo_is_bounded_and_answers_by_cap() {
        let mut m = DeadMemo::new();
        let key = |i: u64| ((mix(i) as u128) << 64) | mix(i ^ 0xabcd) as u128;
        assert!(!m.dead_at(key(1), 0));
        m.insert(key(1), 100);
        assert_eq!(m.slots.len(), DEAD_MIN);
        assert!(m.dead_at(key(1), 100) && m.dead_at(key(1), 7));
        assert!(!m.dead_at(key(1), 101) && !m.dead_at(key(2), 0));
        m.insert(key(1), 50);
        assert!(m.dead_at(key(1), 100), "the larger cap is kept");
        m.insert(key(1), 200);
        assert!(m.dead_at(key(1), 200));
        // A state with the same low bits takes the slot over.
        let twin = key(1) ^ (1u128 << 100);
        m.insert(twin, 10);
        assert!(m.dead_at(twin, 10) && !m.dead_at(key(1), 0));
        // Growth keeps what it can and stops at the cap on memory.
        for i in 10..(3 * DEAD_SLOTS as u64) {
            m.insert(key(i), i);
        }
        assert_eq!(m.slots.len(), DEAD_SLOTS);
        let last = 3 * DEAD_SLOTS as u64 - 1;
        assert!(m.dead_at(key(last), last));
    }

    /// Optimum by brute force: the best over all orders of "lowest gap
    /// among the earlier buffers that overlap in time" (sorting an optimal
    /// placement by offset gives an order that reaches it).
    fn brute(bs: &[(u64, u64, u64)]) -> u64 {
        brute_fixed(bs, &[])
    }

    /// Over a floor of fixed buffers (a stack of one to three, each
    /// above one that outlives it on both sides), the search places the
    /// free buffers alone and must find the optimum of brute force with
    /// the fixed buffers in place, and prove that none exists below it.
    #[test]
    fn complete_on_small_instances_over_a_floor() {
        let mut x = 0x0fed_cba9_8765_4321u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut floored = 0;
        for case in 0..400 {
            let n = 1 + rnd(6) as usize;
            let mut bs: Vec<(u64, u64, u64)> = (0..n)
                .map(|_| {
                    let l = rnd(6);
                    (
                        l,
                        l + 1 + rnd(4),
                        1 + rnd(if case % 2 == 0 { 5 } else { 3 }),
                    )
                })
                .collect();
            // The stack: nested lifetimes, offsets from 0 up.
            let (mut l, mut u, mut top) = (rnd(3), 6 + rnd(4), 0);
            let mut fixed = Vec::new();
            for _ in 0..1 + rnd(3) {
                if l >= u {
                    break;
                }
                let s = 1 + rnd(3);
                fixed.push((bs.len(), top));
                bs.push((l, u, s));
                top += s;
                l += rnd(3);
                u -= rnd(3);
            }
            let p = Problem {
                buffers: bs
                    .iter()
                    .enumerate()
                    .map(|(i, &(l, u, s))| {
                        let mut b = Buffer::new(i.to_string(), l, u, s);
                        b.offset = fixed.iter().find(|f| f.0 == i).map(|f| f.1);
                        b
                    })
                    .collect(),
                capacity: None,
            };
            let members: Vec<usize> = (0..bs.len()).collect();
            assert!(applies(&p, &members), "case {case}: a floor");
            let opt = brute_fixed(&bs, &fixed);
            let far = Instant::now() + Duration::from_secs(60);
            let mut d = Sky::new(&p, &members, Deadline::new(far, None), case % 3 == 1);
            assert_eq!(d.gid.len(), n);
            d.mode = (case % 4 / 2) as u32;
            d.level = case % 8 >= 4;
            d.cap = opt;
            d.goal = 0;
            d.begin_run(u64::MAX);
            assert!(d.run(), "case {case}: {bs:?} {fixed:?} fits in {opt}");
            let (pk, loc) = d.best.clone().unwrap();
            let mut offs: Vec<u64> = p.buffers.iter().map(|b| b.offset.unwrap_or(0)).collect();
            for (k, &g) in d.gid.iter().enumerate() {
                offs[g] = loc[k];
            }
            assert_eq!(check(&p, &offs).unwrap(), pk, "case {case}");
            assert_eq!(pk, opt, "case {case}: {bs:?} {fixed:?}");
            floored += usize::from(offs[..n].iter().any(|&o| o > 0));
            d.begin_run(u64::MAX);
            assert!(!d.run(), "case {case}: {bs:?} {fixed:?} below {opt}");
            assert!(!d.aborted && !d.timed_out);
        }
        // The floor is not empty: free buffers were lifted by it.
        assert!(floored > 200, "{floored}");
    }

    /// A hole under a fixed buffer, or one fixed above another that
    /// outlives it, is not a floor: the general search takes those.
    #[test]
    fn fixed_buffers_with_a_hole_are_not_a_floor() {
        let fixed = |l, u, s, o| {
            let mut b = Buffer::new(format!("{l}-{u}"), l, u, s);
            b.offset = Some(o);
            b
        };
        let free = Buffer::new("f", 0, 4, 2);
        for (bs, floor) in [
            (vec![fixed(0, 4, 2, 0), fixed(1, 3, 1, 2)], true),
            (vec![fixed(0, 4, 2, 1)], false),
            (vec![fixed(1, 3, 2, 0), fixed(0, 4, 1, 2)], false),
            (vec![fixed(0, 2, 2, 0), fixed(2, 4, 3, 0)], true),
        ] {
            let mut bs = bs;
            bs.push(free.clone());
            let p = Problem {
                buffers: bs,
                capacity: None,
            };
            let members: Vec<usize> = (0..p.buffers.len()).collect();
            assert_eq!(applies(&p, &members), floor, "{:?}", p.buffers);
        }
    }

    /// [`brute`] with the buffers `fixed` (index, offset) in place first.
    fn brute_fixed(bs: &[(u64, u64, u64)], fixed: &[(usize, u64)]) -> u64 {
        fn rec(bs: &[(u64, u64, u64)], off: &mut Vec<Option<u64>>, best: &mut u64) {
            let mut any = false;
            for i in 0..bs.len() {
                if off[i].is_some() {
                    continue;
                }
                any = true;
                let (l, u, s) = bs[i];
                let mut o = 0;
                'again: loop {
                    for (j, oj) in off.iter().enumerate() {
                        if let Some(oj) = *oj {
                            let (lj, uj, sj) = bs[j];
                            if l < uj && lj < u && o < oj + sj && oj < o + s {
                                o = oj + sj;
                                continue 'again;
                            }
                        }
                    }
                    break;
                }
                off[i] = Some(o);
                rec(bs, off, best);
                off[i] = None;
            }
            if !any {
                let pk = (0..bs.len())
                    .map(|i| off[i].unwrap() + bs[i].2)
                    .max()
                    .unwrap();
                *best = (*best).min(pk);
            }
        }
        let mut best = u64::MAX;
        let mut off = vec![None; bs.len()];
        for &(i, o) in fixed {
            off[i] = Some(o);
        }
        rec(bs, &mut off, &mut best);
        best
    }

    /// The skyline search alone (no greedy, no restarts) must find a
    /// placement at the optimum and prove that none exists below it.
    #[test]
    fn complete_on_small_instances() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for case in 0..400 {
            let n = 1 + rnd(7) as usize;
            let bs: Vec<(u64, u64, u64)> = (0..n)
                .map(|_| {
                    let l = rnd(6);
                    (
                        l,
                        l + 1 + rnd(4),
                        1 + rnd(if case % 2 == 0 { 5 } else { 3 }),
                    )
                })
                .collect();
            let p = Problem {
                buffers: bs
                    .iter()
                    .enumerate()
                    .map(|(i, &(l, u, s))| Buffer::new(i.to_string(), l, u, s))
                    .collect(),
                capacity: None,
            };
            let opt = brute(&bs);
            let members: Vec<usize> = (0..n).collect();
            let far = Instant::now() + Duration::from_secs(60);
            let mut d = Sky::new(&p, &members, Deadline::new(far, None), case % 3 == 1);
            d.mode = (case % 4 / 2) as u32;
            d.level = case % 8 >= 4;
            d.cap = opt;
            d.goal = 0;
            d.begin_run(u64::MAX);
            assert!(d.run(), "case {case}: {bs:?} fits in {opt}");
            let (pk, loc) = d.best.clone().unwrap();
            let mut offs = vec![0; n];
            for (k, &g) in d.gid.iter().enumerate() {
                offs[g] = loc[k];
            }
            assert_eq!(check(&p, &offs).unwrap(), pk);
            assert_eq!(pk, opt, "case {case}: {bs:?}");
            // cap is now opt - 1: nothing must be found.
            d.begin_run(u64::MAX);
            assert!(!d.run(), "case {case}: {bs:?} below {opt}");
            assert!(!d.aborted && !d.timed_out);
        }
    }
}
