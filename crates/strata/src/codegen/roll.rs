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

/// A literal of iteration `t`: `v0 + t*d`.
fn affine(v0: u64, d: i128) -> String {
    match d {
        0 => v0.to_string(),
        1 => format!("({v0}u + t)"),
        d if d > 0 => format!("({v0}u + t * {d}u)"),
        d => format!("({v0}u - t * {}u)", -d),
    }
}

/// The C of a tile loop ([`crate::lir::Loop`]) from the statements of each
/// of its iterations: one `for` whose body is the first iteration's
/// statements with every integer literal that changes written as
/// `v0 + t*d`, or `None` when the iterations' statements do not match that
/// rule literal for literal (then the caller writes them out one by one).
pub fn affine_loop(iters: &[Vec<String>]) -> Option<Vec<String>> {
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
    let mut out = vec![format!(
        "for (uint32_t t = 0; t < {}u; t++) {{",
        iters.len()
    )];
    for (stmt, dd) in p0.iter().zip(&d) {
        let mut text = String::new();
        for (j, piece) in stmt.template.iter().enumerate() {
            text.push_str(piece);
            if j < stmt.ints.len() {
                text.push_str(&affine(stmt.ints[j], dd[j]));
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

    /// Expand rolled lines back by running the loops with a tiny evaluator
    /// of the `(a u + t * b u)` forms this module writes.
    fn unroll(lines: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_start();
            if let Some(rest) = l.strip_prefix("for (uint32_t t = 0; t < ") {
                let k: u64 = rest[..rest.find('u').unwrap()].parse().unwrap();
                let end = i + lines[i..].iter().position(|x| x.trim() == "}").unwrap();
                for t in 0..k {
                    for body in &lines[i + 1..end] {
                        out.push(eval(body.trim_start(), t));
                    }
                }
                i = end + 1;
            } else {
                out.push(l.to_string());
                i += 1;
            }
        }
        out
    }

    fn eval(s: &str, t: u64) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(p) = rest.find('(') {
            let inner_end = rest[p..].find(')').map(|e| p + e);
            let parsed = inner_end.and_then(|e| {
                let inner = &rest[p + 1..e];
                let parts: Vec<&str> = inner.split(' ').collect();
                match parts.as_slice() {
                    [a, "+", "t"] => Some(a.strip_suffix('u')?.parse::<u64>().ok()? + t),
                    [a, "+", "t", "*", b] => Some(
                        a.strip_suffix('u')?.parse::<u64>().ok()?
                            + t * b.strip_suffix('u')?.parse::<u64>().ok()?,
                    ),
                    [a, "-", "t", "*", b] => Some(
                        a.strip_suffix('u')?.parse::<u64>().ok()?
                            - t * b.strip_suffix('u')?.parse::<u64>().ok()?,
                    ),
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
        let rolled = affine_loop(&iters).unwrap();
        assert_eq!(rolled.len(), 5, "{rolled:#?}");
        assert_eq!(unroll(&rolled), iters.concat());
        // A literal off the rule in one iteration: no loop.
        let mut off = iters.clone();
        off[7][2] = "kernel(st_l1 + 256, 17);".into();
        assert!(affine_loop(&off).is_none());
        // A statement of another shape: no loop.
        let mut other = iters;
        other[3][1] = "st_dma_wait2(9);".into();
        assert!(affine_loop(&other).is_none());
    }
}
