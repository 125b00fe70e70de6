//! Writes `cli::somas_like(n, seed)` as a planner CSV:
//! `cargo run --release -p memplan --example gen -- N SEED > out.csv`
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n = a.get(1).and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let seed = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
    print!(
        "{}",
        memplan::csv::write(&memplan::cli::somas_like(n, seed), None)
    );
}
