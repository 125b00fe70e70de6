//! The C of a tile loop of the LIR ([`crate::lir::Loop`]): its iterations
//! emit the same statements with integer literals (offsets, DMA ids) that
//! advance by a constant step, which one `for` loop writes as `v0 + t*d`,
//! so the emitted code grows with the number of ops, not of tiles. Exact:
//! every literal of every iteration is checked to be the one it replaces.

/// One statement: its text with every standalone integer literal replaced by
/// a hole, and the literals in order.
#[derive(Clone, Debug, PartialEq)]
struct Stmt {
    template: Vec<String>,
    ints: Vec<u64>,
}

/// Split a statement into text pieces and standalone unsigned integer
/// literals (not part of an identifier or a float literal).
fn parse(line: &str) -> Stmt {
    let b = line.as_bytes();
    let mut template = Vec::new();
    let mut ints = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !word(b[i - 1])) {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let standalone = j == b.len() || !word(b[j]);
            // Leading zeros would not round-trip; 20 digits may not fit u64.
            let lit = &line[i..j];
            if standalone && (lit == "0" || !lit.starts_with('0')) && lit.len() < 19 {
                template.push(std::mem::take(&mut text));
                ints.push(lit.parse().unwrap());
                i = j;
                continue;
            }
            text.push_str(lit);
            i = j;
            continue;
        }
        let c = line[i..].chars().next().unwrap();
        text.push(c);
        i += c.len_utf8();
    }
    template.push(text);
    Stmt { template, ints }
}

/// A literal of iteration `var`: `v0 + var*d`. The outer loop's variable
/// is `t` and writes `v0` as `v0u`; an inner loop's is `u` and writes `v0`
/// bare, so that the outer loop reads it as a literal of its own (and
/// writes `((v0u + t * Du) + u * d)`); `d` is part of the statement's text.
fn affine(v0: u64, d: i128, var: Var) -> String {
    let v = match var {
        Var::T => format!("{v0}u"),
        Var::U => v0.to_string(),
    };
    let n = var.name();
    match d {
        0 => v0.to_string(),
        1 => format!("({v} + {n})"),
        d if d > 0 => format!("({v} + {n} * {d}u)"),
        d => format!("({v} - {n} * {}u)", -d),
    }
}

/// A loop's variable: `t` for a tile loop, `u` for a loop nested in one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Var {
    T,
    U,
}

impl Var {
    fn name(self) -> &'static str {
        match self {
            Var::T => "t",
            Var::U => "u",
        }
    }
}

/// The C of a tile loop ([`crate::lir::Loop`]) from the statements of each
/// of its iterations: one `for` whose body is the first iteration's
/// statements with every integer literal that changes written as
/// `v0 + t*d`, or `None` when the iterations' statements do not match that
/// rule literal for literal (then the caller writes them out one by one).
pub fn affine_loop(iters: &[Vec<String>], var: Var) -> Option<Vec<String>> {
    iters.first()?;
    let parsed: Vec<Vec<Stmt>> = iters
        .iter()
        .map(|it| it.iter().map(|l| parse(l.trim_start())).collect())
        .collect();
    let p0 = &parsed[0];
    let d: Vec<Vec<i128>> = match parsed.get(1) {
        Some(p1) if p1.len() == p0.len() => p0
            .iter()
            .zip(p1)
            .map(|(a, b)| {
                a.ints
                    .iter()
                    .zip(&b.ints)
                    .map(|(&x, &y)| y as i128 - x as i128)
                    .collect()
            })
            .collect(),
        _ => return None,
    };
    for (t, it) in parsed.iter().enumerate() {
        if it.len() != p0.len() {
            return None;
        }
        for ((a, b), dd) in p0.iter().zip(it).zip(&d) {
            if a.template != b.template
                || a.ints.len() != b.ints.len()
                || a.ints
                    .iter()
                    .zip(&b.ints)
                    .zip(dd)
                    .any(|((&x, &y), &k)| y as i128 != x as i128 + t as i128 * k)
            {
                return None;
            }
        }
    }
    let n = var.name();
    let mut out = vec![format!(
        "for (uint32_t {n} = 0; {n} < {}u; {n}++) {{",
        iters.len()
    )];
    for ((stmt, dd), line) in p0.iter().zip(&d).zip(&iters[0]) {
        // The statement's own indentation (an inner loop's body) stays.
        let mut text = line[..line.len() - line.trim_start().len()].to_string();
        for (j, piece) in stmt.template.iter().enumerate() {
            text.push_str(piece);
            if j < stmt.ints.len() {
                text.push_str(&affine(stmt.ints[j], dd[j], var));
            }
        }
        out.push(format!("    {text}"));
    }
    out.push("}".into());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expand rolled lines back by running the loops (over `t`, and the
    /// loops over `u` inside them) with a tiny evaluator of the
    /// `(a u + t * b u)` forms this module writes.
    fn unroll(lines: &[String]) -> Vec<String> {
        unroll_var(lines, "t")
            .into_iter()
            .map(|l| l.trim_start().to_string())
            .collect()
    }

    fn unroll_var(lines: &[String], var: &str) -> Vec<String> {
        let head = format!("for (uint32_t {var} = 0; {var} < ");
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let l = &lines[i];
            let indent = &l[..l.len() - l.trim_start().len()];
            if let Some(rest) = l.trim_start().strip_prefix(&head) {
                let k: u64 = rest[..rest.find('u').unwrap()].parse().unwrap();
                let close = format!("{indent}}}");
                let end = i + lines[i..].iter().position(|x| *x == close).unwrap();
                for t in 0..k {
                    let body: Vec<String> = lines[i + 1..end]
                        .iter()
                        .map(|b| eval(b.strip_prefix("    ").unwrap(), var, t))
                        .collect();
                    out.extend(unroll_var(&body, "u"));
                }
                i = end + 1;
            } else {
                out.push(l.clone());
                i += 1;
            }
        }
        out
    }

    /// `s` with every `(a + var)`, `(a + var * b)` and `(a - var * b)` of
    /// iteration `t` replaced by its value (`a` with or without `u`).
    fn eval(s: &str, var: &str, t: u64) -> String {
        let num = |x: &str| x.strip_suffix('u').unwrap_or(x).parse::<u64>().ok();
        let mut out = String::new();
        let mut rest = s;
        while let Some(p) = rest.find('(') {
            let inner_end = rest[p..].find(')').map(|e| p + e);
            let parsed = inner_end.and_then(|e| {
                let inner = &rest[p + 1..e];
                let parts: Vec<&str> = inner.split(' ').collect();
                match parts.as_slice() {
                    [a, "+", v] if *v == var => Some(num(a)? + t),
                    [a, "+", v, "*", b] if *v == var => Some(num(a)? + t * num(b)?),
                    [a, "-", v, "*", b] if *v == var => Some(num(a)? - t * num(b)?),
                    _ => None,
                }
                .map(|v| (v, e))
            });
            match parsed {
                Some((v, e)) => {
                    out.push_str(&rest[..p]);
                    out.push_str(&v.to_string());
                    rest = &rest[e + 1..];
                }
                None => {
                    out.push_str(&rest[..=p]);
                    rest = &rest[p + 1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Tiles in groups (a reduction's tiles per output tile): each outer
    /// iteration is an inner loop and a store, and the outer loop rolls
    /// the inner one with its literals, which unroll to every statement.
    #[test]
    fn a_loop_of_loops_unrolls_to_its_iterations() {
        let inner = |g: u64| -> Vec<Vec<String>> {
            (0..6u64)
                .map(|k| {
                    vec![
                        format!(
                            "st_dma({}, st_l1 + 0, st_l2 + {}, 64);",
                            100 * g + k,
                            4096 + 640 * g + 64 * k
                        ),
                        format!("st_dma_wait({});", 100 * g + k),
                        format!("kernel(st_l1 + {}, {});", 256 - 8 * k, 16),
                    ]
                })
                .collect()
        };
        let outer: Vec<Vec<String>> = (0..5u64)
            .map(|g| {
                let mut it = affine_loop(&inner(g), Var::U).unwrap();
                it.push(format!("st_store({}, {});", 9000 + g, 77));
                it
            })
            .collect();
        assert!(outer[0][0].starts_with("for (uint32_t u = 0; u < 6u; u++)"));
        let rolled = affine_loop(&outer, Var::T).unwrap();
        assert_eq!(rolled.len(), 2 + outer[0].len(), "{rolled:#?}");
        assert!(
            rolled.iter().any(|l| l.contains("((0u + t * 100u) + u)")),
            "{rolled:#?}"
        );
        let flat: Vec<String> = (0..5u64)
            .flat_map(|g| {
                let mut v = inner(g).concat();
                v.push(format!("st_store({}, {});", 9000 + g, 77));
                v
            })
            .collect();
        assert_eq!(unroll(&rolled), flat);
    }

    #[test]
    fn literals_split_from_identifiers_and_floats() {
        let s = parse("st_dma(12, ((uint8_t *)(st_l1 + 1024)), x2, 0.5f, 1e-5f, 007);");
        assert_eq!(s.ints, vec![12, 1024]);
        assert_eq!(
            s.template.concat(),
            "st_dma(, ((uint8_t *)(st_l1 + )), x2, 0.5f, 1e-5f, 007);"
        );
    }

    #[test]
    fn a_loop_unrolls_to_its_iterations() {
        let iters: Vec<Vec<String>> = (0..20u64)
            .map(|k| {
                vec![
                    format!(
                        "st_dma({}, st_l1 + {}, st_l2 + {}, 64);",
                        3 + 2 * k,
                        256,
                        4096 - 64 * k
                    ),
                    format!("st_dma_wait({});", 3 + 2 * k),
                    format!("kernel(st_l1 + {}, {});", 256, 16),
                ]
            })
            .collect();
        let rolled = affine_loop(&iters, Var::T).unwrap();
        assert_eq!(rolled.len(), 5, "{rolled:#?}");
        assert_eq!(unroll(&rolled), iters.concat());
        // A literal off the rule in one iteration: no loop.
        let mut off = iters.clone();
        off[7][2] = "kernel(st_l1 + 256, 17);".into();
        assert!(affine_loop(&off, Var::T).is_none());
        // A statement of another shape: no loop.
        let mut other = iters;
        other[3][1] = "st_dma_wait2(9);".into();
        assert!(affine_loop(&other, Var::T).is_none());
    }
}
