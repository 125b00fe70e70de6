//! MiniMalloc CSV format: a header naming the columns `id,lower,upper,size`
//! and optionally `alignment` and `offset`, in any order, then one buffer per
//! line. `upper` is exclusive. An empty `offset` field means "not fixed".
//! `write` emits the same columns plus the chosen `offset` when given.
//!
//! Times may be negative (idealloc's SOMAS traces start the tensors that
//! exist before the first step at `-1`): [`read_timed`] shifts every time
//! by the same amount so the earliest is 0, which changes no overlap, and
//! [`write_timed`] shifts them back.

use crate::{Buffer, Problem};

/// A malformed CSV input. `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CsvError {
    pub line: usize,
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> CsvError {
    CsvError {
        line,
        message: message.into(),
    }
}

/// Parse a problem (capacity is left `None`); times shifted as in
/// [`read_timed`].
pub fn read(text: &str) -> Result<Problem, CsvError> {
    read_timed(text).map(|(p, _)| p)
}

/// Parse a problem and its time origin: the problem's times are the file's
/// minus `origin`, which is the earliest `lower` when that is negative and
/// 0 otherwise (so a file without negative times reads unchanged).
pub fn read_timed(text: &str) -> Result<(Problem, i64), CsvError> {
    // A byte-order mark (spreadsheets write one) is not part of the header.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty());
    let (hline, header) = lines.next().ok_or_else(|| {
        err(
            1,
            "expected a header line `id,lower,upper,size`, found nothing",
        )
    })?;
    let names: Vec<String> = header
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let col = |name: &str| names.iter().position(|n| n == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            err(
                hline,
                format!("expected a `{name}` column in the header, found `{header}`"),
            )
        })
    };
    let (ci, cl, cu, cs) = (need("id")?, need("lower")?, need("upper")?, need("size")?);
    let (ca, co) = (col("alignment"), col("offset"));
    for (k, n) in names.iter().enumerate() {
        if names[..k].contains(n) {
            return Err(err(hline, format!("duplicate column `{n}` in the header")));
        }
    }
    let mut buffers = Vec::new();
    // Line of each id seen so far: a second buffer with the same id is an
    // error (placements are reported by id, so one would be ambiguous).
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (line, l) in lines {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != names.len() {
            return Err(err(
                line,
                format!("expected {} fields, found {}", names.len(), f.len()),
            ));
        }
        let num = |c: usize, what: &str| -> Result<u64, CsvError> {
            f[c].parse::<u64>().map_err(|_| {
                let found = f[c];
                if found.starts_with('-') {
                    err(
                        line,
                        format!("expected a non-negative {what}, found `{found}`"),
                    )
                } else {
                    err(
                        line,
                        format!("expected an unsigned integer {what}, found `{found}`"),
                    )
                }
            })
        };
        let time = |c: usize, what: &str| -> Result<i128, CsvError> {
            f[c].parse::<i128>()
                .ok()
                .filter(|t| (i64::MIN as i128..=u64::MAX as i128).contains(t))
                .ok_or_else(|| {
                    err(
                        line,
                        format!(
                            "expected an integer {what} from -2^63 to 2^64 - 1, found `{}`",
                            f[c]
                        ),
                    )
                })
        };
        let lower = time(cl, "lower")?;
        let upper = time(cu, "upper")?;
        let size = num(cs, "size")?;
        if upper <= lower {
            return Err(err(
                line,
                format!("expected upper > lower, found lower {lower} and upper {upper}"),
            ));
        }
        let alignment = match ca {
            Some(c) if !f[c].is_empty() => {
                let a = num(c, "alignment")?;
                if a == 0 {
                    return Err(err(line, "expected alignment >= 1, found 0"));
                }
                a
            }
            _ => 1,
        };
        let offset = match co {
            Some(c) if !f[c].is_empty() => Some(num(c, "offset")?),
            _ => None,
        };
        if let Some(first) = seen.insert(f[ci].to_string(), line) {
            return Err(err(
                line,
                format!(
                    "duplicate id `{}`: line {line} repeats the id of line {first}",
                    f[ci]
                ),
            ));
        }
        buffers.push((
            line,
            Buffer {
                id: f[ci].to_string(),
                lower: 0,
                upper: 0,
                size,
                alignment,
                offset,
            },
            lower,
            upper,
        ));
    }
    let origin = buffers.iter().map(|b| b.2).min().unwrap_or(0).min(0);
    let buffers = buffers
        .into_iter()
        .map(|(line, mut b, lower, upper)| {
            let shifted = |t: i128| u64::try_from(t - origin).ok();
            match (shifted(lower), shifted(upper)) {
                (Some(l), Some(u)) => {
                    (b.lower, b.upper) = (l, u);
                    Ok(b)
                }
                _ => Err(err(
                    line,
                    format!(
                        "expected times within 2^64 - 1 of the earliest lower {origin}, found upper {upper}"
                    ),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        Problem {
            buffers,
            capacity: None,
        },
        origin as i64,
    ))
}

/// Write `p` as CSV. With `offsets`, the `offset` column holds them;
/// otherwise it holds the fixed offsets (empty when free), and is omitted
/// entirely if no buffer is fixed. `alignment` is written when any is > 1.
pub fn write(p: &Problem, offsets: Option<&[u64]>) -> String {
    write_timed(p, offsets, 0)
}

/// [`write()`] with every time shifted by `origin` (from [`read_timed`]), so
/// the file's own times come back.
pub fn write_timed(p: &Problem, offsets: Option<&[u64]>, origin: i64) -> String {
    let t = |v: u64| v as i128 + origin as i128;
    let with_align = p.buffers.iter().any(|b| b.alignment > 1);
    let with_offset = offsets.is_some() || p.buffers.iter().any(|b| b.offset.is_some());
    let mut s = String::from("id,lower,upper,size");
    if with_align {
        s.push_str(",alignment");
    }
    if with_offset {
        s.push_str(",offset");
    }
    s.push('\n');
    for (i, b) in p.buffers.iter().enumerate() {
        s.push_str(&format!(
            "{},{},{},{}",
            b.id,
            t(b.lower),
            t(b.upper),
            b.size
        ));
        if with_align {
            s.push_str(&format!(",{}", b.alignment));
        }
        if with_offset {
            match offsets.map(|o| o[i]).or(b.offset) {
                Some(o) => s.push_str(&format!(",{o}")),
                None => s.push(','),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_basic_and_round_trip() {
        let p = read("id,lower,upper,size\n0,0,4,10\r\n1,2,6,20\n\n").unwrap();
        assert_eq!(p.buffers.len(), 2);
        assert_eq!(p.buffers[1], Buffer::new("1", 2, 6, 20));
        assert_eq!(read(&write(&p, None)).unwrap(), p);
        let out = write(&p, Some(&[0, 10]));
        assert_eq!(out, "id,lower,upper,size,offset\n0,0,4,10,0\n1,2,6,20,10\n");
        // Reading an output file gives fixed offsets.
        let q = read(&out).unwrap();
        assert_eq!(q.buffers[1].offset, Some(10));
        assert_eq!(read(&write(&q, None)).unwrap(), q);
    }

    #[test]
    fn columns_in_any_order_and_optional() {
        let p = read("size,offset,upper,alignment,lower,id\n8,,5,4,1,x\n4,16,3,1,0,y\n").unwrap();
        assert_eq!(
            p.buffers[0],
            Buffer {
                alignment: 4,
                ..Buffer::new("x", 1, 5, 8)
            }
        );
        assert_eq!(p.buffers[1].offset, Some(16));
        assert_eq!(read(&write(&p, None)).unwrap(), p);
        // Large values beyond 2^32.
        let big = read("id,lower,upper,size\na,0,1,9000000000\n").unwrap();
        assert_eq!(big.buffers[0].size, 9_000_000_000);
    }

    #[test]
    fn negative_times_shift_and_come_back() {
        let text = "id,lower,upper,size\n0,-1,3,4\n1,0,2,8\n";
        let (p, origin) = read_timed(text).unwrap();
        assert_eq!(origin, -1);
        assert_eq!(p.buffers[0], Buffer::new("0", 0, 4, 4));
        assert_eq!(p.buffers[1], Buffer::new("1", 1, 3, 8));
        assert_eq!(write_timed(&p, None, origin), text);
        assert_eq!(
            write_timed(&p, Some(&[0, 4]), origin),
            "id,lower,upper,size,offset\n0,-1,3,4,0\n1,0,2,8,4\n"
        );
        // Without negative times nothing moves.
        let (q, o) = read_timed("id,lower,upper,size\n0,5,9,1\n").unwrap();
        assert_eq!((o, q.buffers[0].lower, q.buffers[0].upper), (0, 5, 9));
        // A span wider than 2^64 - 1 cannot be shifted into u64.
        bad(
            "id,lower,upper,size\n0,-5,3,1\n1,0,18446744073709551615,1\n",
            3,
            "within 2^64 - 1 of the earliest lower -5",
        );
        bad(
            "id,lower,upper,size\n0,-9223372036854775809,3,1\n",
            2,
            "from -2^63",
        );
    }

    fn bad(text: &str, line: usize, needle: &str) {
        let e = read(text).unwrap_err();
        assert_eq!(e.line, line, "{e}");
        assert!(e.message.contains(needle), "{e} lacks {needle}");
    }

    /// A file saved with a UTF-8 byte-order mark reads as without one.
    #[test]
    fn a_byte_order_mark_is_skipped() {
        let plain = "id,lower,upper,size\na,0,4,10\n";
        assert_eq!(read(&format!("\u{feff}{plain}")), read(plain));
        assert_eq!(read(plain).unwrap().buffers.len(), 1);
    }

    #[test]
    fn malformed_inputs_name_the_line() {
        bad("", 1, "header");
        bad("id,lower,size\n0,1,2\n", 1, "`upper` column");
        bad(
            "id,lower,upper,size\n0,0,4,10\n1,2,6\n",
            3,
            "expected 4 fields, found 3",
        );
        bad(
            "id,lower,upper,size\n0,0,4,10,5\n",
            2,
            "expected 4 fields, found 5",
        );
        bad("id,lower,upper,size\n0,0,4,-10\n", 2, "non-negative size");
        bad("id,lower,upper,size\n0,0,4,ten\n", 2, "found `ten`");
        bad("id,lower,upper,size\n0,x,4,1\n", 2, "lower");
        bad("id,lower,upper,size\n\n0,4,4,1\n", 3, "upper > lower");
        bad("id,lower,upper,size\n0,5,4,1\n", 2, "upper > lower");
        bad(
            "id,lower,upper,size,alignment\n0,0,4,1,0\n",
            2,
            "alignment >= 1",
        );
        bad("id,lower,upper,size,offset\n0,0,4,1,q\n", 2, "offset");
        bad("id,lower,upper,size,size\n0,0,4,1,1\n", 1, "duplicate");
        // A repeated id names both lines (blank lines still count).
        bad(
            "id,lower,upper,size\na,0,4,1\nb,0,4,1\n\na,1,2,3\n",
            5,
            "duplicate id `a`: line 5 repeats the id of line 2",
        );
        bad(
            "id,lower,upper,size\n0,0,99999999999999999999,1\n",
            2,
            "upper",
        );
    }
}
