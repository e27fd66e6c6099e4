//! Local search, P-LS and TSP initial order: planted recovery, determinism, best-tracking
//! (spec §18 oracles 9, 12, 14, 15).

use std::sync::atomic::AtomicBool;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_order::tsp::{hamming_distances, path_length, tsp_arrange, tsp_path};
use vastml_order::{
    Arrangement, Axes, ErrorKind, Kernel, KernelKind, Matrix, MoveWeights, Objective, Padding,
    Pattern, PlsParams, SearchParams, local_search, planted, pls,
};

fn gbs(k: usize) -> Objective {
    Objective {
        kernel: Kernel::new(KernelKind::Gbs, k, k).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: ErrorKind::Abs,
    }
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

fn planted_arr(p: Pattern, n: usize, noise: f64, k: usize) -> (Arrangement, f64) {
    let m = Matrix::binary(n, n, &planted(p, n, noise, 7).unwrap()).unwrap();
    let planted_err = Arrangement::new(m.clone(), gbs(k), None, None)
        .unwrap()
        .error();
    let arr = Arrangement::new(m, gbs(k), Some(&shuffled(n, 1)), Some(&shuffled(n, 2))).unwrap();
    (arr, planted_err)
}

#[test]
fn nested_noise_free_is_recovered_exactly() {
    let (mut arr, target) = planted_arr(Pattern::Nested, 60, 0.0, 5);
    let cancel = AtomicBool::new(false);
    tsp_arrange(&mut arr, Axes::Both).unwrap();
    let params = PlsParams {
        search: SearchParams {
            max_iter: 3000,
            segment: 100,
            seed: 1,
            ..SearchParams::default()
        },
        ..PlsParams::default()
    };
    pls(&mut arr, &params, &cancel).unwrap();
    assert!(
        (arr.error() - target).abs() < 1e-9,
        "{} vs {}",
        arr.error(),
        target
    );
}

#[test]
fn planted_patterns_within_half_percent() {
    let cancel = AtomicBool::new(false);
    for p in [Pattern::Banded, Pattern::Blocks, Pattern::BandedBlocks] {
        for noise in [0.0, 0.1] {
            let (mut arr, target) = planted_arr(p, 60, noise, 5);
            tsp_arrange(&mut arr, Axes::Both).unwrap();
            let params = PlsParams {
                search: SearchParams {
                    max_iter: 20000,
                    segment: 100,
                    stop_threshold: None,
                    seed: 3,
                    ..SearchParams::default()
                },
                ..PlsParams::default()
            };
            pls(&mut arr, &params, &cancel).unwrap();
            assert!(
                arr.error() <= target * 1.005,
                "{p:?} {noise}: {} vs planted {}",
                arr.error(),
                target
            );
        }
    }
}

#[test]
fn deterministic_and_best_tracking() {
    let cancel = AtomicBool::new(false);
    let run = || {
        let (mut arr, _) = planted_arr(Pattern::Blocks, 50, 0.1, 5);
        let start = arr.error();
        let params = PlsParams {
            search: SearchParams {
                max_iter: 1500,
                segment: 100,
                seed: 9,
                ..SearchParams::default()
            },
            ..PlsParams::default()
        };
        let rep = pls(&mut arr, &params, &cancel).unwrap();
        assert!(arr.error() <= start);
        let best = rep
            .history
            .iter()
            .map(|h| h.1)
            .fold(f64::INFINITY, f64::min);
        assert!((arr.error() - best).abs() < 1e-9);
        (arr.order(0), arr.order(1), arr.raw_error())
    };
    assert_eq!(run(), run());
}

#[test]
fn local_search_improves_and_history_is_monotone() {
    let (mut arr, _) = planted_arr(Pattern::Banded, 50, 0.1, 3);
    let start = arr.error();
    let rep = local_search(
        &mut arr,
        &SearchParams {
            max_iter: 5000,
            segment: 100,
            stop_threshold: None,
            ..SearchParams::default()
        },
        None,
        &AtomicBool::new(false),
    )
    .unwrap();
    assert!(arr.error() < start);
    assert!(rep.history.windows(2).all(|w| w[1].1 <= w[0].1 + 1e-9));
    assert!(rep.weights.iter().all(|&w| w > 0.0));
    assert!((arr.full_error() - arr.error()).abs() < 1e-9);
    let cancelled = local_search(
        &mut arr,
        &SearchParams::default(),
        None,
        &AtomicBool::new(true),
    );
    assert!(cancelled.is_err());
}

#[test]
fn move_weights_floor_and_sampling() {
    let mut w = MoveWeights::new(3, 0.6);
    w.record(0, 10.0);
    w.record(1, 0.0);
    w.end_segment();
    let p = w.probabilities();
    assert!(p.iter().all(|&x| x > 0.1), "{p:?}");
    assert!(p[0] > p[1]);
    let mut fixed = MoveWeights::new(3, 0.0);
    fixed.record(0, 10.0);
    fixed.end_segment();
    assert_eq!(fixed.probabilities(), vec![1.0 / 3.0; 3]);
    // sampling frequencies follow the weights (chi-square, 2 dof, p = 0.001 -> 13.8)
    let mut rng = Pcg64::seed_from_u64(0);
    let mut counts = [0f64; 3];
    let trials = 30_000;
    for _ in 0..trials {
        counts[w.sample(rng.random::<f64>())] += 1.0;
    }
    let chi: f64 = counts
        .iter()
        .zip(&p)
        .map(|(c, q)| (c - q * trials as f64).powi(2) / (q * trials as f64))
        .sum();
    assert!(chi < 13.8, "{chi}");
}

#[test]
fn tsp_restores_banded_adjacency() {
    let n = 40;
    let m = Matrix::binary(n, n, &planted(Pattern::Banded, n, 0.0, 1).unwrap()).unwrap();
    let dist = hamming_distances(&m, 0);
    let ident: Vec<usize> = (0..n).collect();
    let planted_len = path_length(&ident, &dist, n);
    let perm = shuffled(n, 5);
    let pd: Vec<u32> = (0..n * n)
        .map(|k| dist[perm[k / n] * n + perm[k % n]])
        .collect();
    let path = tsp_path(&pd, n).unwrap();
    assert!(path_length(&path, &pd, n) <= planted_len);
}
