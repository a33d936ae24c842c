fn main() {
    let mut rng = models::rng::Xoshiro256PlusPlus::seed_from_u64(5);
    let mut v: Vec<f64> = (0..200000).map(|_| rng.next_gaussian()).collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
    v.sort_by(f64::total_cmp);
    println!("mean {mean} var {var} q99.5 {} q0.5 {}", v[199000], v[1000]);
    let mut t = models::calibration::Thresholder::new(Default::default()).unwrap();
    let mut rng = models::rng::Xoshiro256PlusPlus::seed_from_u64(5);
    let mut flags = 0;
    let mut lastthr = 0.0;
    for i in 0..200000 {
        let g = t.process(1.0 + rng.next_gaussian().abs() * 0.3);
        flags += g.is_anomaly as usize;
        if i % 20000 == 0 {
            println!("{i} thr {} flags {flags}", g.threshold);
        }
        lastthr = g.threshold;
    }
    println!("{flags} {lastthr}");
}
