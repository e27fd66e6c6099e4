//! Criterion benches: entropic affinities and the repulsive sums (exact vs Barnes-Hut vs FGT).
use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_embed::affinity::{AffinityParams, RootOptions, WarmStart, entropic_affinities};
use vastml_embed::nbody::{BarnesHut, Kernel, exact_sums, fgt_sums};

fn bench(c: &mut Criterion) {
    let mut rng = Pcg64::seed_from_u64(3);
    let cancel = AtomicBool::new(false);
    let (n, k) = (5000, 90);
    let mut d2: Vec<f64> = (0..n * k).map(|_| rng.random::<f64>() * 10.0).collect();
    for row in d2.chunks_mut(k) {
        row.sort_by(f64::total_cmp);
    }
    let order: Vec<usize> = (0..n).collect();
    c.bench_function("affinities n=5000 k=90 K=30", |b| {
        b.iter(|| {
            let params = AffinityParams {
                perplexity: 30.0,
                root: RootOptions::default(),
                order: &order,
                warm: WarmStart::Previous,
                chunk_size: 1024,
            };
            entropic_affinities(black_box(&d2), n, k, &params, &cancel)
        })
    });
    let x: Vec<f64> = (0..2 * 4000).map(|_| rng.random::<f64>() * 20.0).collect();
    c.bench_function("exact student sums n=4000", |b| {
        b.iter(|| exact_sums(black_box(&x), 2, Kernel::StudentT, None, &cancel))
    });
    c.bench_function("barnes-hut student sums n=4000 theta=0.5", |b| {
        b.iter(|| {
            BarnesHut::new(black_box(&x), 2, None)
                .and_then(|t| t.sums(Kernel::StudentT, 0.5, &cancel))
        })
    });
    c.bench_function("fgt gaussian sums n=4000", |b| {
        b.iter(|| fgt_sums(black_box(&x), 2, None, 1e-6, &cancel))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
