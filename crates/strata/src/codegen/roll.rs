//! Loop rolling of emitted C: a node's tiles emit the same statements with
//! different integer literals (offsets, DMA ids, extents). Runs of blocks
//! whose statements match but for literals that change by a constant step
//! from block to block become one `for` loop, so the emitted code grows with
//! the number of ops, not of tiles. The transformation is textual and
//! exact: every literal of every iteration is the one it replaces.

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

/// The literals of block `k` (statements `at + k*p .. at + (k+1)*p`), flattened.
fn block_ints(s: &[Stmt], at: usize, p: usize, k: usize) -> Vec<u64> {
    s[at + k * p..at + (k + 1) * p]
        .iter()
        .flat_map(|x| x.ints.iter().copied())
        .collect()
}

/// How many blocks of `p` statements from `at` repeat with affine literals.
fn run_len(s: &[Stmt], at: usize, p: usize) -> usize {
    let same = |k: usize| (0..p).all(|j| s[at + j].template == s[at + k * p + j].template);
    if at + 2 * p > s.len() || !same(1) {
        return 1;
    }
    let v0 = block_ints(s, at, p, 0);
    let v1 = block_ints(s, at, p, 1);
    let d: Vec<i128> = v0
        .iter()
        .zip(&v1)
        .map(|(a, b)| *b as i128 - *a as i128)
        .collect();
    let mut k = 2;
    while at + (k + 1) * p <= s.len() && same(k) {
        let vk = block_ints(s, at, p, k);
        if !vk
            .iter()
            .zip(&v0)
            .zip(&d)
            .all(|((x, a), dd)| *x as i128 == *a as i128 + k as i128 * dd)
        {
            break;
        }
        k += 1;
    }
    k
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

/// Roll `lines` (one statement each, already indented by `indent`).
pub fn roll(lines: &[String], indent: &str) -> Vec<String> {
    const MIN_REPEATS: usize = 3;
    // A double-buffered tile alternates its slots, so its statements repeat
    // with a period of two tiles: tens of statements for a node with many
    // operands, each staged through L2.
    const MAX_PERIOD: usize = 256;
    let s: Vec<Stmt> = lines.iter().map(|l| parse(l.trim_start())).collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < s.len() {
        // The period covering the most statements, the shortest on a tie;
        // only periods whose next block starts with the same statement.
        let mut best = (1usize, 1usize);
        for p in 1..=MAX_PERIOD.min((s.len() - at) / 2) {
            if s[at + p].template != s[at].template {
                continue;
            }
            let k = run_len(&s, at, p);
            if k >= MIN_REPEATS && k * p > best.0 * best.1 {
                best = (p, k);
            }
        }
        let (p, k) = best;
        if k < MIN_REPEATS {
            out.push(lines[at].clone());
            at += 1;
            continue;
        }
        let v0 = block_ints(&s, at, p, 0);
        let v1 = block_ints(&s, at, p, 1);
        out.push(format!("{indent}for (uint32_t t = 0; t < {k}u; t++) {{"));
        let mut n = 0;
        for stmt in &s[at..at + p] {
            let mut text = String::new();
            for (j, piece) in stmt.template.iter().enumerate() {
                text.push_str(piece);
                if j < stmt.ints.len() {
                    text.push_str(&affine(v0[n], v1[n] as i128 - v0[n] as i128));
                    n += 1;
                }
            }
            out.push(format!("{indent}    {text}"));
        }
        out.push(format!("{indent}}}"));
        at += k * p;
    }
    out
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
    fn rolled_code_unrolls_to_the_original() {
        let mut lines = vec!["a = 1;".to_string()];
        for k in 0..20u64 {
            lines.push(format!(
                "st_dma({}, st_l1 + {}, st_l2 + {}, 64);",
                3 + 2 * k,
                (k % 2) * 256,
                4096 - 64 * k
            ));
            lines.push(format!("st_dma_wait({});", 3 + 2 * k));
            lines.push(format!("kernel(st_l1 + {}, {});", (k % 2) * 256, 16));
        }
        lines.push("b = 2;".to_string());
        let rolled = roll(&lines, "");
        assert!(rolled.len() < lines.len() / 2, "{rolled:#?}");
        assert_eq!(unroll(&rolled), lines);
    }
}
