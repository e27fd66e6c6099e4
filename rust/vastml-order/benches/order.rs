//! Criterion benchmarks: one incremental move evaluation (`Arrangement::delta`) per move kind
//! against one full recomputation (on the rayon pool: set `RAYON_NUM_THREADS=1` for the
//! single-thread ratio of `benches/reorder.py`), on a random 2,000 x 400 binary matrix with GBS(25), and the
//! anti-Robinson gradient branch and bound at n = 16.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use vastml_order::gradient::{Gradient, gradient_order};
use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, MoveConfig, MoveKind, Objective, Padding,
    random_move,
};

fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 33
}

fn moves(c: &mut Criterion) {
    let (m, n) = (2000, 400);
    let mut s = 1u64;
    let bits: Vec<u8> = (0..m * n).map(|_| u8::from(lcg(&mut s) % 10 < 3)).collect();
    let matrix = Matrix::binary(m, n, &bits).unwrap();
    let obj = Objective {
        kernel: Kernel::new(KernelKind::Gbs, 25, 25).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: ErrorKind::Abs,
    };
    let mut arr = Arrangement::new(matrix, obj, None, None).unwrap();
    let cfg = MoveConfig::default();
    let mut rng = Pcg64::seed_from_u64(0);
    let mut g = c.benchmark_group("move 2000x400 GBS(25)");
    g.sample_size(10);
    for kind in MoveKind::ALL {
        let segs: Vec<_> = (0..64)
            .filter_map(|_| random_move(&arr, 0, kind, 0, m, &cfg, &mut rng))
            .map(|mv| mv.segments())
            .collect();
        let mut i = 0;
        g.bench_function(kind.name(), |b| {
            b.iter(|| {
                i = (i + 1) % segs.len();
                black_box(arr.delta(0, &segs[i]))
            })
        });
    }
    g.bench_function("full recomputation", |b| {
        b.iter(|| black_box(arr.full_raw(0)))
    });
    g.finish();
}

fn gradient(c: &mut Criterion) {
    let n = 16;
    let mut s = 5u64;
    let x: Vec<f64> = (0..n * 5)
        .map(|_| (lcg(&mut s) % 1_000_000) as f64)
        .collect();
    let d: Vec<f64> = (0..n * n)
        .map(|k| {
            let (a, b) = (k / n, k % n);
            (0..5)
                .map(|j| (x[a * 5 + j] - x[b * 5 + j]).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    let mut g = c.benchmark_group("gradient branch and bound n=16");
    g.sample_size(10);
    for kind in [Gradient::Unweighted, Gradient::Weighted] {
        g.bench_function(format!("{kind:?}"), |b| {
            b.iter(|| black_box(gradient_order(&d, n, kind, &AtomicBool::new(false)).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, moves, gradient);
criterion_main!(benches);
