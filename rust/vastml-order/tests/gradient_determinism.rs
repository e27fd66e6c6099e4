//! The anti-Robinson gradient branch and bound returns the same order whatever the thread
//! count and timing: an optimal order (checked against an enumeration of all orders) whose
//! first two objects are the smallest pair of any optimal order searched (the subtree
//! tie-break), and the same order run after run on 1, 2 and 8 threads, with busy threads
//! competing for the cores.

use std::sync::atomic::AtomicBool;

mod common;
use common::{lcg, under_load};
use vastml_order::gradient::{Gradient, gradient_order, gradient_order_with, gradient_value};

/// Symmetric dissimilarities in {0, .., levels - 1}: many orders tie.
fn tie_heavy(n: usize, levels: u64, seed: u64) -> Vec<f64> {
    let mut x = seed;
    let mut d = vec![0.0; n * n];
    for a in 0..n {
        for b in a + 1..n {
            let v = (lcg(&mut x) % levels) as f64;
            d[a * n + b] = v;
            d[b * n + a] = v;
        }
    }
    d
}

/// Points on a line at a few distinct places (duplicate objects tie exactly).
fn duplicates(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed;
    let at: Vec<f64> = (0..n).map(|_| (lcg(&mut x) % 4) as f64).collect();
    (0..n * n).map(|k| (at[k / n] - at[k % n]).abs()).collect()
}

/// (optimal value, smallest (first, second) object of an optimal order in which object 0
/// comes before object n - 1), by enumerating every order.
fn enumerate(d: &[f64], n: usize, kind: Gradient) -> (f64, (usize, usize)) {
    fn rec(
        d: &[f64],
        kind: Gradient,
        order: &mut Vec<usize>,
        used: &mut [bool],
        best: &mut (f64, (usize, usize)),
    ) {
        let n = used.len();
        if order.len() == n {
            let v = gradient_value(d, n, order, kind);
            let zero_first =
                order.iter().position(|&u| u == 0) < order.iter().position(|&u| u == n - 1);
            if !zero_first {
                return;
            }
            let pair = (order[0], order[1]);
            // the data are integers: values are exact
            if v > best.0 || (v == best.0 && pair < best.1) {
                *best = (v, pair);
            }
            return;
        }
        for u in 0..n {
            if !used[u] {
                used[u] = true;
                order.push(u);
                rec(d, kind, order, used, best);
                order.pop();
                used[u] = false;
            }
        }
    }
    let mut best = (f64::NEG_INFINITY, (usize::MAX, usize::MAX));
    rec(d, kind, &mut Vec::new(), &mut vec![false; n], &mut best);
    best
}

fn run_on(
    threads: usize,
    d: &[f64],
    n: usize,
    kind: Gradient,
    restarts: Option<usize>,
) -> Vec<usize> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let no = AtomicBool::new(false);
    pool.install(|| match restarts {
        Some(r) => gradient_order_with(d, n, kind, &no, r),
        None => gradient_order(d, n, kind, &no),
    })
    .unwrap()
    .order
}

#[test]
fn optimal_and_the_tie_break_is_the_smallest_first_pair() {
    for seed in 0..12 {
        let n = 8;
        for (d, what) in [
            (tie_heavy(n, 3, seed), "levels"),
            (duplicates(n, 50 + seed), "duplicates"),
        ] {
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                let (opt, pair) = enumerate(&d, n, kind);
                // without a heuristic incumbent the symmetry puts object 0 before n - 1
                for threads in [1, 2, 8] {
                    let order = run_on(threads, &d, n, kind, Some(0));
                    let v = gradient_value(&d, n, &order, kind);
                    assert_eq!(v, opt, "{what} seed {seed} {kind:?} {threads} threads");
                    assert_eq!(
                        (order[0], order[1]),
                        pair,
                        "{what} seed {seed} {kind:?} {threads} threads: {order:?}"
                    );
                }
                // with the heuristic incumbent: optimal, on any thread count
                let want = run_on(1, &d, n, kind, None);
                assert_eq!(gradient_value(&d, n, &want, kind), opt);
                for threads in [2, 8] {
                    assert_eq!(
                        run_on(threads, &d, n, kind, None),
                        want,
                        "{what} seed {seed}"
                    );
                }
            }
        }
    }
}

#[test]
fn same_order_on_any_thread_count_and_under_load() {
    let mut cases: Vec<(Vec<f64>, usize, Gradient)> = Vec::new();
    for seed in 0..4 {
        cases.push((tie_heavy(14, 3, seed), 14, Gradient::Unweighted));
        cases.push((tie_heavy(12, 4, 100 + seed), 12, Gradient::Weighted));
        cases.push((duplicates(15, 200 + seed), 15, Gradient::Unweighted));
        cases.push((duplicates(12, 300 + seed), 12, Gradient::Weighted));
    }
    for (i, (d, n, kind)) in cases.iter().enumerate() {
        // restarts 0: no incumbent, every tie is decided by the search itself
        for restarts in [0, 4] {
            let want = run_on(1, d, *n, *kind, Some(restarts));
            for threads in [1, 2, 8] {
                for _ in 0..3 {
                    let got = run_on(threads, d, *n, *kind, Some(restarts));
                    assert_eq!(
                        got, want,
                        "case {i} {kind:?} restarts {restarts} {threads} threads"
                    );
                }
            }
            let loaded = under_load(3, || {
                (0..3)
                    .map(|_| run_on(8, d, *n, *kind, Some(restarts)))
                    .collect::<Vec<_>>()
            });
            assert!(
                loaded.iter().all(|o| *o == want),
                "case {i} {kind:?} restarts {restarts} under load"
            );
        }
    }
}
