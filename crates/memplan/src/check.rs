//! Independent solution checker. It shares no code with the solver: it
//! re-derives everything from the problem and the offsets with a plain sweep
//! over start times, testing each buffer against its neighbours in offset
//! among the buffers live when it starts.

use crate::Problem;

/// Why a placement is invalid. Buffer ids are those of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("expected {expected} offsets, found {found}")]
    WrongLength { expected: usize, found: usize },
    #[error(
        "buffers {a} [{a_offset}, {a_end}) and {b} [{b_offset}, {b_end}) overlap in time and space"
    )]
    Overlap {
        a: String,
        a_offset: u64,
        a_end: u64,
        b: String,
        b_offset: u64,
        b_end: u64,
    },
    #[error("buffer {id} at offset {offset} is not a multiple of its alignment {alignment}")]
    Misaligned {
        id: String,
        offset: u64,
        alignment: u64,
    },
    #[error("buffer {id} ends at {end}, beyond the capacity {capacity}")]
    ExceedsCapacity { id: String, end: u64, capacity: u64 },
    #[error("buffer {id} must be at fixed offset {expected}, found {found}")]
    FixedMoved {
        id: String,
        expected: u64,
        found: u64,
    },
    #[error("buffer {id}: offset + size overflows u64")]
    Overflow { id: String },
    #[error("buffer {id} has an empty or inverted lifetime or zero alignment")]
    BadBuffer { id: String },
}

/// Check `offsets` against `p`; on success return the peak.
pub fn check(p: &Problem, offsets: &[u64]) -> Result<u64, CheckError> {
    let bs = &p.buffers;
    if offsets.len() != bs.len() {
        return Err(CheckError::WrongLength {
            expected: bs.len(),
            found: offsets.len(),
        });
    }
    let mut peak = 0u64;
    let mut ends = Vec::with_capacity(bs.len());
    for (b, &o) in bs.iter().zip(offsets) {
        if b.upper <= b.lower || b.alignment == 0 {
            return Err(CheckError::BadBuffer { id: b.id.clone() });
        }
        let end = o
            .checked_add(b.size)
            .ok_or_else(|| CheckError::Overflow { id: b.id.clone() })?;
        if o % b.alignment != 0 {
            return Err(CheckError::Misaligned {
                id: b.id.clone(),
                offset: o,
                alignment: b.alignment,
            });
        }
        if let Some(f) = b.offset {
            if f != o {
                return Err(CheckError::FixedMoved {
                    id: b.id.clone(),
                    expected: f,
                    found: o,
                });
            }
        }
        if let Some(c) = p.capacity {
            if end > c {
                return Err(CheckError::ExceedsCapacity {
                    id: b.id.clone(),
                    end,
                    capacity: c,
                });
            }
        }
        peak = peak.max(end);
        ends.push(end);
    }
    // Sweep by start time. `live` maps the offset of each buffer still
    // live to its end and index; they are disjoint (an overlap ends the
    // check), so in offset order their ends rise too, and a new buffer
    // overlaps one of them iff it overlaps the last one at or below its
    // offset or the first one at or above it. `expiry` holds (upper,
    // offset) of the live ones, the earliest end first. O(n log n): the
    // pairwise test among all buffers live together that this replaces
    // took 24 s after a 2 s solve of 100,000 buffers, 45,000 live at once.
    let mut order: Vec<usize> = (0..bs.len()).filter(|&i| bs[i].size > 0).collect();
    order.sort_by_key(|&i| (bs[i].lower, i));
    let mut live: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
    let mut expiry = std::collections::BinaryHeap::new();
    for &i in &order {
        while let Some(&std::cmp::Reverse((upper, o))) = expiry.peek() {
            if upper > bs[i].lower {
                break;
            }
            expiry.pop();
            live.remove(&o);
        }
        let (o, end) = (offsets[i], ends[i]);
        let below = live.range(..=o).next_back();
        let above = live.range(o..).next();
        for (&oj, &(ej, j)) in below.into_iter().chain(above) {
            if o < ej && oj < end {
                let (a, b) = if j < i { (j, i) } else { (i, j) };
                return Err(CheckError::Overlap {
                    a: bs[a].id.clone(),
                    a_offset: offsets[a],
                    a_end: ends[a],
                    b: bs[b].id.clone(),
                    b_offset: offsets[b],
                    b_end: ends[b],
                });
            }
        }
        live.insert(o, (end, i));
        expiry.push(std::cmp::Reverse((bs[i].upper, o)));
    }
    Ok(peak)
}

/// Peak of a placement without validating it (solver helper).
pub(crate) fn peak_of(p: &Problem, offsets: &[u64]) -> u64 {
    p.buffers
        .iter()
        .zip(offsets)
        .map(|(b, &o)| o + b.size)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Buffer;

    fn prob(cap: Option<u64>) -> Problem {
        Problem {
            buffers: vec![
                Buffer::new("a", 0, 4, 10),
                Buffer::new("b", 2, 6, 10),
                Buffer::new("c", 6, 8, 10),
                Buffer::new("z", 0, 8, 0),
            ],
            capacity: cap,
        }
    }

    #[test]
    fn accepts_valid() {
        assert_eq!(check(&prob(Some(20)), &[0, 10, 0, 5]), Ok(20));
        // c does not overlap b in time (b ends at 6 exclusive).
        assert_eq!(check(&prob(None), &[10, 0, 5, 0]), Ok(20));
    }

    #[test]
    fn catches_overlap_naming_both() {
        let e = check(&prob(None), &[0, 5, 0, 0]).unwrap_err();
        match e {
            CheckError::Overlap { a, b, .. } => assert_eq!((a.as_str(), b.as_str()), ("a", "b")),
            e => panic!("{e}"),
        }
        // Touching in space is fine, touching in time is fine.
        assert!(check(&prob(None), &[0, 10, 0, 0]).is_ok());
    }

    /// The pairwise test the sweep must agree with.
    fn overlaps_pairwise(p: &Problem, off: &[u64]) -> bool {
        let bs = &p.buffers;
        (0..bs.len()).any(|i| {
            (0..i).any(|j| {
                let (a, b) = (&bs[i], &bs[j]);
                a.size > 0
                    && b.size > 0
                    && a.lower < b.upper
                    && b.lower < a.upper
                    && off[i] < off[j] + b.size
                    && off[j] < off[i] + a.size
            })
        })
    }

    #[test]
    fn agrees_with_the_pairwise_test() {
        // Small random instances and offsets on a coarse grid, so that
        // about half of the placements overlap somewhere.
        let mut r = crate::cli::Rng(7);
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..4000 {
            let n = 1 + r.below(12) as usize;
            let buffers: Vec<Buffer> = (0..n)
                .map(|i| {
                    let lower = r.below(10);
                    Buffer::new(i.to_string(), lower, lower + 1 + r.below(6), r.below(5))
                })
                .collect();
            let p = Problem {
                buffers,
                capacity: None,
            };
            let off: Vec<u64> = (0..n).map(|_| r.below(4 * n as u64)).collect();
            let got = check(&p, &off);
            assert_eq!(got.is_err(), overlaps_pairwise(&p, &off), "{p:?} {off:?}");
            if let Err(CheckError::Overlap { a, b, .. }) = &got {
                // The pair named does overlap (ids are the indices).
                let pair = [a, b].map(|id| id.parse::<usize>().unwrap());
                let two = Problem {
                    buffers: pair.map(|k| p.buffers[k].clone()).to_vec(),
                    capacity: None,
                };
                assert!(overlaps_pairwise(&two, &pair.map(|k| off[k])));
                invalid += 1;
            } else {
                valid += 1;
            }
        }
        assert!(
            valid > 500 && invalid > 500,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn catches_capacity_alignment_fixed_length() {
        assert!(matches!(
            check(&prob(Some(19)), &[0, 10, 0, 0]),
            Err(CheckError::ExceedsCapacity { end: 20, .. })
        ));
        let mut p = prob(None);
        p.buffers[1].alignment = 4;
        assert!(matches!(
            check(&p, &[0, 10, 0, 0]),
            Err(CheckError::Misaligned { offset: 10, .. })
        ));
        assert!(check(&p, &[0, 12, 0, 0]).is_ok());
        p.buffers[2].offset = Some(3);
        assert!(matches!(
            check(&p, &[0, 12, 0, 0]),
            Err(CheckError::FixedMoved {
                expected: 3,
                found: 0,
                ..
            })
        ));
        assert!(matches!(
            check(&p, &[0, 12]),
            Err(CheckError::WrongLength {
                expected: 4,
                found: 2
            })
        ));
        assert!(matches!(
            check(&p, &[u64::MAX, 12, 3, 0]),
            Err(CheckError::Overflow { .. })
        ));
    }
}
