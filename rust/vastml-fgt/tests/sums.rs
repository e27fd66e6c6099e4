//! The 1-D sums against their O(MN) oracles: Hermite x Gaussian for every order 0..8 and a
//! range of bandwidths, erfc with mixed-sign weights and wide spreads; max error / sum |q|
//! must stay below epsilon.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_fgt::{SumMethod, erfc, erfc_sum, hermite, hermite_gauss_sum};

fn no_cancel() -> AtomicBool {
    AtomicBool::new(false)
}

fn oracle_hermite(x: &[f64], q: &[f64], y: &[f64], r: usize, h1: f64, h2: f64) -> Vec<f64> {
    y.iter()
        .map(|&yj| {
            x.iter()
                .zip(q)
                .map(|(&xi, &qi)| {
                    let d = yj - xi;
                    qi * hermite(r, d / h1) * (-d * d / (h2 * h2)).exp()
                })
                .sum()
        })
        .collect()
}

fn max_rel_err(got: &[f64], want: &[f64], q: &[f64]) -> f64 {
    let qsum: f64 = q.iter().map(|v| v.abs()).sum();
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / qsum
}

#[test]
fn hermite_fast_meets_epsilon_for_every_order() {
    let mut rng = Pcg64::seed_from_u64(7);
    let x: Vec<f64> = (0..1500).map(|_| rng.random::<f64>()).collect();
    let q: Vec<f64> = (0..1500).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
    // Targets inside and outside the sources' range.
    let y: Vec<f64> = (0..300).map(|_| rng.random::<f64>() * 1.4 - 0.2).collect();
    for r in 0..=8 {
        for h in [0.01, 0.05, 0.1, 0.3, 1.0] {
            for eps in [1e-3, 1e-6, 1e-10] {
                let (h1, h2) = (h, h * 2f64.sqrt());
                let got =
                    hermite_gauss_sum(&x, &q, &y, r, h1, h2, eps, SumMethod::Fast, &no_cancel())
                        .unwrap();
                let want = oracle_hermite(&x, &q, &y, r, h1, h2);
                let err = max_rel_err(&got, &want, &q);
                assert!(err <= eps, "r={r} h={h} eps={eps}: err {err}");
            }
        }
    }
}

#[test]
fn hermite_general_bandwidth_pair_and_direct_method() {
    let mut rng = Pcg64::seed_from_u64(3);
    let x: Vec<f64> = (0..800).map(|_| rng.random::<f64>() * 10.0 - 5.0).collect();
    let q: Vec<f64> = (0..800).map(|_| rng.random::<f64>()).collect();
    let y: Vec<f64> = (0..200).map(|_| rng.random::<f64>() * 12.0 - 6.0).collect();
    for (h1, h2) in [(0.3, 0.2), (0.5, 0.9), (1.0, 1.9)] {
        for r in [0, 1, 3, 5] {
            let want = oracle_hermite(&x, &q, &y, r, h1, h2);
            for method in [SumMethod::Fast, SumMethod::Direct, SumMethod::Auto] {
                let got =
                    hermite_gauss_sum(&x, &q, &y, r, h1, h2, 1e-7, method, &no_cancel()).unwrap();
                let err = max_rel_err(&got, &want, &q);
                assert!(err <= 1e-7, "{method:?} h1={h1} h2={h2} r={r}: {err}");
            }
        }
    }
    // No decay: the fast method refuses, auto falls back to direct.
    assert!(
        hermite_gauss_sum(&x, &q, &y, 2, 0.5, 1.0, 1e-6, SumMethod::Fast, &no_cancel()).is_err()
    );
    let auto =
        hermite_gauss_sum(&x, &q, &y, 2, 0.5, 1.0, 1e-6, SumMethod::Auto, &no_cancel()).unwrap();
    assert!(max_rel_err(&auto, &oracle_hermite(&x, &q, &y, 2, 0.5, 1.0), &q) < 1e-12);
}

#[test]
fn hermite_derivative_is_finite_difference_of_lower_order() {
    // d/dy [He_r(u) e^{-u^2/2}] = -(1/h) He_{r+1}(u) e^{-u^2/2}, u = (y - x)/h.
    let mut rng = Pcg64::seed_from_u64(11);
    let x: Vec<f64> = (0..1000).map(|_| rng.random::<f64>()).collect();
    let q = vec![1.0; x.len()];
    let h = 0.07;
    let (h1, h2) = (h, h * 2f64.sqrt());
    let delta = 1e-4;
    for r in 0..6 {
        for &y0 in &[0.2, 0.5, 0.77] {
            let eval = |y: f64, r: usize| {
                hermite_gauss_sum(
                    &x,
                    &q,
                    &[y],
                    r,
                    h1,
                    h2,
                    1e-12,
                    SumMethod::Fast,
                    &no_cancel(),
                )
                .unwrap()[0]
            };
            let fd = (eval(y0 + delta, r) - eval(y0 - delta, r)) / (2.0 * delta);
            let analytic = -eval(y0, r + 1) / h;
            assert!(
                (fd - analytic).abs() <= 1e-5 * analytic.abs().max(1.0) * 10f64.powi(r as i32),
                "r={r} y={y0}: {fd} vs {analytic}"
            );
        }
    }
}

#[test]
fn erfc_fast_meets_epsilon() {
    let mut rng = Pcg64::seed_from_u64(5);
    for (spread, n) in [(1.0, 2000), (4.0, 1500), (30.0, 1500)] {
        let normal = |rng: &mut Pcg64| {
            let (u, v): (f64, f64) = (rng.random(), rng.random());
            (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let x: Vec<f64> = (0..n).map(|_| spread * normal(&mut rng)).collect();
        let q: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
        let y: Vec<f64> = (0..400).map(|_| 1.3 * spread * normal(&mut rng)).collect();
        let want: Vec<f64> = y
            .iter()
            .map(|&yj| x.iter().zip(&q).map(|(&xi, &qi)| qi * erfc(yj - xi)).sum())
            .collect();
        for eps in [1e-2, 1e-4, 1e-6, 1e-9, 1e-12] {
            let got = erfc_sum(&x, &q, &y, eps, SumMethod::Fast, &no_cancel()).unwrap();
            let err = max_rel_err(&got, &want, &q);
            assert!(err <= eps, "spread {spread} eps {eps}: {err}");
        }
    }
}

#[test]
fn cancellation_and_bad_input() {
    let x = [0.0, 1.0];
    let q = [1.0, 1.0];
    let stop = AtomicBool::new(true);
    assert!(matches!(
        erfc_sum(&x, &q, &[0.5], 1e-6, SumMethod::Fast, &stop),
        Err(vastml_fgt::FgtError::Cancelled)
    ));
    assert!(erfc_sum(&x, &[1.0], &[0.5], 1e-6, SumMethod::Fast, &no_cancel()).is_err());
    assert!(erfc_sum(&x, &q, &[f64::NAN], 1e-6, SumMethod::Fast, &no_cancel()).is_err());
    assert!(erfc_sum(&x, &q, &[0.0], 1.5, SumMethod::Fast, &no_cancel()).is_err());
    assert!(
        hermite_gauss_sum(
            &x,
            &q,
            &[0.0],
            1,
            -1.0,
            1.0,
            1e-3,
            SumMethod::Auto,
            &no_cancel()
        )
        .is_err()
    );
    assert!(
        hermite_gauss_sum(
            &x,
            &q,
            &[0.0],
            99,
            1.0,
            1.0,
            1e-3,
            SumMethod::Auto,
            &no_cancel()
        )
        .is_err()
    );
    assert!(
        hermite_gauss_sum(
            &[],
            &[],
            &[0.0],
            1,
            1.0,
            1.0,
            1e-3,
            SumMethod::Auto,
            &no_cancel()
        )
        .is_err()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn hermite_contract_on_random_inputs(
        seed in 0u64..10_000,
        n in 1usize..300,
        r in 0usize..9,
        h in 0.005f64..2.0,
        ratio in 0.3f64..1.95,
        log_eps in -12.0f64..-2.0,
    ) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let x: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 3.0).collect();
        let q: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
        let y: Vec<f64> = (0..50).map(|_| rng.random::<f64>() * 4.0 - 0.5).collect();
        let eps = 10f64.powf(log_eps);
        let (h1, h2) = (h, h * ratio);
        let got = hermite_gauss_sum(&x, &q, &y, r, h1, h2, eps, SumMethod::Fast, &no_cancel()).unwrap();
        let err = max_rel_err(&got, &oracle_hermite(&x, &q, &y, r, h1, h2), &q);
        prop_assert!(err <= eps, "err {}", err);
    }

    #[test]
    fn erfc_contract_on_random_inputs(
        seed in 0u64..10_000,
        n in 1usize..300,
        spread in 0.01f64..50.0,
        log_eps in -13.0f64..-1.0,
    ) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let x: Vec<f64> = (0..n).map(|_| (rng.random::<f64>() - 0.5) * spread).collect();
        let q: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
        let y: Vec<f64> = (0..50).map(|_| (rng.random::<f64>() - 0.5) * 1.5 * spread).collect();
        let eps = 10f64.powf(log_eps);
        let got = erfc_sum(&x, &q, &y, eps, SumMethod::Fast, &no_cancel()).unwrap();
        let want: Vec<f64> = y.iter().map(|&yj| x.iter().zip(&q).map(|(&xi, &qi)| qi * erfc(yj - xi)).sum()).collect();
        prop_assert!(max_rel_err(&got, &want, &q) <= eps);
    }
}
