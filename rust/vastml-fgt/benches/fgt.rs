//! Criterion benches of the Gauss transform methods on uniform data.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_fgt::{GaussTransform, Method};

fn uniform(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * dim).map(|_| rng.random::<f64>()).collect()
}

fn bench_methods(c: &mut Criterion) {
    let n = 5_000;
    let cancel = AtomicBool::new(false);
    let mut group = c.benchmark_group("gauss_transform_5k");
    group.sample_size(10);
    for &(dim, h) in &[(1usize, 0.1f64), (3, 0.1), (3, 0.5)] {
        let x = uniform(n, dim, 1);
        let y = uniform(n, dim, 2);
        let q = uniform(n, 1, 3);
        for method in [
            Method::Direct,
            Method::DirectTree,
            Method::Ifgt,
            Method::Auto,
        ] {
            let Ok(gt) = GaussTransform::new(&x, dim, h, 1e-6, method) else {
                continue;
            };
            group.bench_function(format!("d{dim}_h{h}_{method}"), |b| {
                b.iter(|| black_box(gt.evaluate(&y, &q, 1, &cancel).unwrap()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_methods);
criterion_main!(benches);
