//! Criterion benches of the Gauss transform methods on uniform data.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_fgt::{GaussTransform, Method, SumMethod, erfc_sum, hermite_gauss_sum};

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

fn bench_sums(c: &mut Criterion) {
    let n = 20_000;
    let cancel = AtomicBool::new(false);
    let x = uniform(n, 1, 4);
    let y = uniform(n, 1, 5);
    let q = vec![1.0; n];
    let mut group = c.benchmark_group("sums_1d_20k");
    group.sample_size(10);
    for method in [SumMethod::Fast, SumMethod::Direct] {
        group.bench_function(format!("hermite_r4_h0.1_{}", method.name()), |b| {
            b.iter(|| {
                black_box(
                    hermite_gauss_sum(&x, &q, &y, 4, 0.1, 0.1 * 2f64.sqrt(), 1e-6, method, &cancel)
                        .unwrap(),
                )
            })
        });
        group.bench_function(format!("erfc_{}", method.name()), |b| {
            b.iter(|| black_box(erfc_sum(&x, &q, &y, 1e-6, method, &cancel).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_methods, bench_sums);
criterion_main!(benches);
