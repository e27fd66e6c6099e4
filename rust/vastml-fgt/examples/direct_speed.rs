//! Times the direct method on one thread: `cargo run --release --example direct_speed`.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use vastml_fgt::{GaussTransform, Method};

fn main() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let (n, m) = (20_000usize, 2_000usize);
    for dim in [1usize, 3, 8] {
        let x: Vec<f64> = (0..n * dim)
            .map(|i| ((i * 7919) % 10007) as f64 / 10007.0)
            .collect();
        let y: Vec<f64> = (0..m * dim)
            .map(|i| ((i * 104_729) % 10007) as f64 / 10007.0)
            .collect();
        let q = vec![1.0; n];
        let gt = GaussTransform::new(&x, dim, 0.5, 1e-6, Method::Direct).expect("plan");
        let cancel = AtomicBool::new(false);
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            let g = pool.install(|| gt.evaluate(&y, &q, 1, &cancel).expect("eval"));
            std::hint::black_box(g);
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "d={dim}: {:.2} ns/pair (one thread)",
            best * 1e9 / (n * m) as f64
        );
    }
}
