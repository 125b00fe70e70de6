//! Times the stages of a solve that always run (validation is inside
//! `solve`): lower bound, graph attempt, the first greedy pass.
//! `cargo run --release -p memplan --example stage_times -- N SEED`
use std::time::Instant;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n = a.get(1).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(3);
    let p = memplan::cli::somas_like(n, seed);
    let t = Instant::now();
    let lb = memplan::lower_bound(&p);
    println!("lower bound {lb}: {:?}", t.elapsed());
    let t = Instant::now();
    let g = memplan::greedy::graph_of(&p);
    println!(
        "graph (limit {} pairs): {} {:?}",
        memplan::greedy::EDGE_LIMIT,
        g.is_some(),
        t.elapsed()
    );
    let t = Instant::now();
    let off = memplan::greedy::portfolio_until(&p, &mut || true);
    let took = t.elapsed();
    println!("first pass {}: {took:?}", memplan::check(&p, &off).unwrap());
}
