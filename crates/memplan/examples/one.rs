fn main() {
    let a: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&a[1]).unwrap();
    let mut p = memplan::csv::read(&text).unwrap();
    p.capacity = a.get(2).and_then(|c| c.parse().ok());
    let minimize = a.get(3).is_some_and(|m| m == "min");
    let t = std::time::Instant::now();
    let r = memplan::solve(
        &p,
        &memplan::Options {
            time_limit: std::time::Duration::from_secs(5),
            minimize,
            ..Default::default()
        },
    );
    println!(
        "{:?} {:?}",
        r.as_ref().map(|s| (s.peak, s.lower_bound, s.optimal)),
        t.elapsed()
    );
}
