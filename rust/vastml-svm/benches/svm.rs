//! Criterion benchmarks of one training epoch on synthetic sparse data.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use vastml_core::Control;

use criterion::{Criterion, criterion_group, criterion_main};
use vastml_svm::{Amm, AmmParams, Examples};

fn sparse_data(n: usize, dim: usize, nnz: usize) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<usize>) {
    let mut indptr = vec![0i64];
    let (mut idx, mut val, mut y) = (Vec::new(), Vec::new(), Vec::new());
    let mut s: u64 = 7;
    for _ in 0..n {
        let mut cols: Vec<i64> = (0..nnz)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) % dim as u64) as i64
            })
            .collect();
        cols.sort_unstable();
        cols.dedup();
        y.push(usize::from(
            cols.iter().filter(|&&c| c % 3 == 0).count() % 2 == 0,
        ));
        val.extend(cols.iter().map(|_| 1.0));
        idx.extend(cols);
        indptr.push(idx.len() as i64);
    }
    (indptr, idx, val, y)
}

fn bench(c: &mut Criterion) {
    let (p, i, v, y) = sparse_data(20_000, 123, 14);
    let data = Examples::csr(&p, &i, &v, 123).expect("valid CSR");
    let cancel = AtomicBool::new(false);
    c.bench_function("amm_epoch_20k_sparse", |b| {
        b.iter(|| {
            let params = AmmParams {
                lambda: 1e-3,
                max_weights_per_class: 20,
                ..AmmParams::default()
            };
            let mut m = Amm::new(params, 123, 2).expect("valid params");
            m.epoch(&data, &y, true, 0, false, Control::new(&cancel))
                .expect("runs");
            black_box(m.n_weights())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
