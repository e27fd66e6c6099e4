//! Criterion benchmarks: one incremental move evaluation (`Arrangement::delta`) per move kind
//! against one full recomputation (on the rayon pool: set `RAYON_NUM_THREADS=1` for the
//! single-thread ratio of `benches/reorder.py`), on a random 2,000 x 400 binary matrix with GBS(25), the
//! anti-Robinson gradient order at n = 16 (dynamic programmes) and its branch and bound at
//! n = 13 (tree search), and the ConvoMap branch and bound (rows
//! only, GBS 3 x 3, zero padding) on banded rows with 10% noise and on rows with many ties
//! (copies of four patterns).

use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use vastml_order::bnb::{Bound, PairCosts, branch_and_bound};
use vastml_order::gradient::{Gradient, gradient_order, gradient_order_with};
use vastml_order::{
    Arrangement, Control, ErrorKind, Kernel, KernelKind, Matrix, MoveConfig, MoveKind, Objective,
    Padding, random_move,
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

/// Euclidean distances between n random points in 5-D.
fn distances(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    let x: Vec<f64> = (0..n * 5)
        .map(|_| (lcg(&mut s) % 1_000_000) as f64)
        .collect();
    (0..n * n)
        .map(|k| {
            let (a, b) = (k / n, k % n);
            (0..5)
                .map(|j| (x[a * 5 + j] - x[b * 5 + j]).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect()
}

fn gradient(c: &mut Criterion) {
    // `gradient_order` at n = 16 dispatches to the dynamic programmes over sets; the tree
    // search itself is measured through `gradient_order_with` at n = 13
    let mut g = c.benchmark_group("gradient order n=16 (dynamic programme)");
    g.sample_size(10);
    let d = distances(16, 5);
    for kind in [Gradient::Unweighted, Gradient::Weighted] {
        g.bench_function(format!("{kind:?}"), |b| {
            b.iter(|| black_box(gradient_order(&d, 16, kind, &AtomicBool::new(false)).unwrap()))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("gradient branch and bound n=13 (tree search)");
    g.sample_size(10);
    let d = distances(13, 5);
    for kind in [Gradient::Unweighted, Gradient::Weighted] {
        g.bench_function(format!("{kind:?}"), |b| {
            let cancel = AtomicBool::new(false);
            b.iter(|| black_box(gradient_order_with(&d, 13, kind, &cancel, 46).unwrap()))
        });
    }
    g.finish();
}

fn convomap_bnb(c: &mut Criterion) {
    let cols = 40;
    let obj = Objective {
        kernel: Kernel::new(KernelKind::Gbs, 3, 3).unwrap(),
        padding: Padding::Zero,
        kind: ErrorKind::Abs,
    };
    let mut s = 11u64;
    let mut cases = Vec::new();
    for n in [16, 20] {
        // a band of width 8 moving across the columns, 10% of the bits flipped
        let bits: Vec<u8> = (0..n * cols)
            .map(|k| {
                let (r, j) = ((k / cols) as f64, (k % cols) as f64);
                let band = (r - j * n as f64 / cols as f64).abs() < 4.0;
                u8::from(band ^ (lcg(&mut s) % 10 == 0))
            })
            .collect();
        cases.push((format!("banded n={n}"), n, bits));
    }
    let n = 16;
    let patterns: Vec<Vec<u8>> = (0..4)
        .map(|_| (0..cols).map(|_| u8::from(lcg(&mut s) % 3 == 0)).collect())
        .collect();
    let bits: Vec<u8> = (0..n)
        .flat_map(|_| patterns[(lcg(&mut s) % 4) as usize].clone())
        .collect();
    cases.push((format!("ties n={n}"), n, bits));
    let mut g = c.benchmark_group("convomap branch and bound");
    g.sample_size(10);
    for (name, n, bits) in cases {
        let m = Matrix::binary(n, cols, &bits).unwrap();
        let pc = PairCosts::convomap(&m, &obj, None).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| black_box(branch_and_bound(&pc, None, Bound::Slow, Control::none()).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, moves, gradient, convomap_bnb);
criterion_main!(benches);
