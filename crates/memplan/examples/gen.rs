//! Writes `cli::somas_like(n, seed)` (or `random_instance`, `training_like`,
//! `long_lived`, `stream_like`, `chain_like` with KIND `random`,
//! `training`, `long`, `stream`, `chain`, or `staggered_chain` and
//! `aligned_chain` with K steps with KIND `chainK` and `alignedK`) as a
//! planner CSV:
//! `cargo run --release -p memplan --example gen -- N SEED [KIND] > out.csv`
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n = a.get(1).and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let seed = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
    let p = match a.get(3).map(String::as_str) {
        Some("random") => memplan::cli::random_instance(n, seed),
        Some("training") => memplan::cli::training_like(n, seed),
        Some("long") => memplan::cli::long_lived(n, seed),
        Some("stream") => memplan::cli::stream_like(n, seed),
        Some("chain") => memplan::cli::chain_like(n, seed),
        Some(k) if k.starts_with("chain") && k[5..].parse::<u64>().is_ok() => {
            memplan::cli::staggered_chain(n, k[5..].parse().unwrap(), seed)
        }
        Some(k) if k.starts_with("aligned") && k[7..].parse::<u64>().is_ok() => {
            memplan::cli::aligned_chain(n, k[7..].parse().unwrap(), seed)
        }
        _ => memplan::cli::somas_like(n, seed),
    };
    print!("{}", memplan::csv::write(&p, None));
}
