//! The branch-free exp against std's, over a block of arguments as the Gauss sums use it.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vastml_core::exp::{exp, exp_nonpositive};

fn bench_exp(c: &mut Criterion) {
    const N: usize = 4096;
    let args: Vec<f64> = (0..N).map(|i| -40.0 * i as f64 / N as f64).collect();
    let mut out = vec![0.0; N];
    let mut group = c.benchmark_group("exp_4096");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("std", |b| {
        b.iter(|| {
            for (o, &x) in out.iter_mut().zip(black_box(&args)) {
                *o = x.exp();
            }
            black_box(&out);
        })
    });
    group.bench_function("exp", |b| {
        b.iter(|| {
            for (o, &x) in out.iter_mut().zip(black_box(&args)) {
                *o = exp(x);
            }
            black_box(&out);
        })
    });
    group.bench_function("exp_nonpositive", |b| {
        b.iter(|| {
            for (o, &x) in out.iter_mut().zip(black_box(&args)) {
                *o = exp_nonpositive(x);
            }
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_exp);
criterion_main!(benches);
