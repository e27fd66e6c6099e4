//! Times the pieces of IFGT planning: `cargo run --release --example plan_speed`.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use vastml_fgt::{GaussTransform, IfgtProblem, Method, choose_parameters, cutoff_radius};

fn main() {
    let cancel = AtomicBool::new(false);
    for &(n, dim, h) in &[(20_000usize, 1usize, 0.1f64), (1_000_000, 2, 0.1)] {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let x: Vec<f64> = (0..n * dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect();
        let t = Instant::now();
        let mut fp = vastml_spatial::FarthestPoint::new(&x, dim, 0).expect("fp");
        let t_new = t.elapsed().as_secs_f64();
        let t = Instant::now();
        fp.grow_to(30);
        println!(
            "farthest point: new {t_new:.4}s, grow to 30 {:.4}s",
            t.elapsed().as_secs_f64()
        );
        let r = cutoff_radius(h, 1e-6, None);
        let t = Instant::now();
        let p = choose_parameters(
            &x,
            &IfgtProblem {
                n_sources: n,
                n_targets: n,
                dim,
                range: 1.0,
                bandwidth: h,
                epsilon: 1e-6,
                cutoff: r,
                max_clusters: usize::MAX,
            },
            &cancel,
        )
        .expect("choose");
        let t_choose = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let gt = GaussTransform::new(&x, dim, h, 1e-6, Method::Ifgt).expect("plan");
        let t_plan = t.elapsed().as_secs_f64();
        let q = vec![1.0; n];
        let mut t_eval = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            let _ = gt.evaluate(&x, &q, 1, &cancel).expect("eval");
            t_eval = t_eval.min(t.elapsed().as_secs_f64());
        }
        println!(
            "n={n} d={dim}: choose {t_choose:.4}s ({p:?}), plan {t_plan:.4}s, evaluate {t_eval:.4}s, info {:?}",
            gt.info()
        );
    }
}
