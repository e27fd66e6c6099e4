//! Contracts of vastml-embed against slow oracles: entropies of the affinities, bracket
//! validity of the bounds, Barnes-Hut / FGT sums against exact sums, gradients against
//! finite differences.
use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_embed::affinity::{
    AffinityParams, RootMethod, RootOptions, WarmStart, entropic_affinities, log_beta_bounds,
    p1_bound, row_entropy,
};
use vastml_embed::nbody::{BarnesHut, Kernel, exact_sums, fgt_sums};
use vastml_embed::{Csr, Model, Repulsion, evaluate};

const METHODS: [RootMethod; 6] = [
    RootMethod::Newton,
    RootMethod::Halley,
    RootMethod::Euler,
    RootMethod::Bisection,
    RootMethod::Brent,
    RootMethod::Ridders,
];

fn solve(
    d2: &[f64],
    n: usize,
    k: usize,
    perp: f64,
    method: RootMethod,
    warm: WarmStart,
) -> vastml_embed::affinity::Affinities {
    let order: Vec<usize> = (0..n).collect();
    let root = RootOptions {
        method,
        ..RootOptions::default()
    };
    let params = AffinityParams {
        perplexity: perp,
        root,
        order: &order,
        warm,
        chunk_size: 7,
    };
    entropic_affinities(d2, n, k, &params, &AtomicBool::new(false)).unwrap()
}

fn random_rows(seed: u64, n: usize, k: usize, scale: f64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * k)
        .map(|_| (rng.random::<f64>() * scale).powi(2))
        .collect()
}

#[test]
fn every_row_has_the_target_perplexity_for_every_method() {
    let (n, k) = (60, 40);
    let d2 = random_rows(1, n, k, 3.0);
    let mut reference: Option<Vec<f64>> = None;
    for m in METHODS {
        let a = solve(&d2, n, k, 12.0, m, WarmStart::Previous);
        for i in 0..n {
            assert!(a.converged[i]);
            let h = row_entropy(&d2[i * k..(i + 1) * k], a.log_beta[i]);
            assert!((h - 12f64.ln()).abs() <= 1e-10, "{m:?} row {i}: {h}");
            let p = &a.probabilities[i * k..(i + 1) * k];
            let s: f64 = p.iter().sum();
            assert!((s - 1.0).abs() < 1e-12);
            // Entropy of the returned probabilities themselves.
            let hp: f64 = -p
                .iter()
                .filter(|&&v| v > 0.0)
                .map(|v| v * v.ln())
                .sum::<f64>();
            assert!((hp - 12f64.ln()).abs() < 1e-9);
            assert!(a.log_beta_lower[i] <= a.log_beta[i] && a.log_beta[i] <= a.log_beta_upper[i]);
        }
        match &reference {
            None => reference = Some(a.log_beta.clone()),
            Some(r) => {
                for (i, (x, y)) in r.iter().zip(&a.log_beta).enumerate() {
                    assert!((x - y).abs() < 1e-8, "{m:?} disagrees at {i}");
                }
            }
        }
    }
}

#[test]
fn derivative_methods_need_few_iterations_bisection_many() {
    let (n, k) = (300, 90);
    let d2 = random_rows(2, n, k, 1.0);
    let mean = |m| {
        let a = solve(&d2, n, k, 30.0, m, WarmStart::Previous);
        a.evaluations.iter().map(|&e| e as f64).sum::<f64>() / n as f64
    };
    let newton = mean(RootMethod::Newton);
    let bisection = mean(RootMethod::Bisection);
    assert!(newton < 6.0, "newton {newton}");
    assert!(
        bisection > 20.0 && bisection > 4.0 * newton,
        "bisection {bisection}"
    );
}

/// Two-level distance sets: j points at distance a, the rest at b > a (and the thesis
/// bounds are tightest there).
fn adversarial(n: usize, j: usize, a: f64, b: f64) -> Vec<f64> {
    (0..n).map(|i| if i < j { a } else { b }).collect()
}

#[test]
fn bounds_bracket_the_root_on_adversarial_rows() {
    let mut violations = 0;
    let mut rng = Pcg64::seed_from_u64(5);
    for _ in 0..3000 {
        let n = rng.random_range(5..400usize);
        let perp = 1.2 + rng.random::<f64>() * (n as f64 - 1.3);
        let j = 1; // a unique nearest neighbour keeps the root finite
        let a = rng.random::<f64>() * 2.0;
        let b = a + 10f64.powf(rng.random::<f64>() * 6.0 - 3.0);
        let mut d2 = adversarial(n, j, a, b);
        // Some rows get a third level.
        if rng.random::<f64>() < 0.5 {
            let c = b + rng.random::<f64>() * 5.0;
            let cut = rng.random_range(1..n);
            for v in d2.iter_mut().skip(cut) {
                *v = c;
            }
        }
        let p1 = p1_bound(n, perp);
        let (lo, hi) = log_beta_bounds(&d2, perp, p1);
        if !lo.is_finite() || !hi.is_finite() {
            continue;
        }
        let flo = row_entropy(&d2, lo) - perp.ln();
        let fhi = row_entropy(&d2, hi) - perp.ln();
        if !(flo > 0.0 && fhi < 0.0) {
            violations += 1;
        }
        let sol = solve(&d2, 1, n, perp, RootMethod::Newton, WarmStart::Bounds);
        assert!(sol.converged[0]);
        assert!((row_entropy(&d2, sol.log_beta[0]) - perp.ln()).abs() <= 1e-10);
    }
    assert_eq!(violations, 0);
}

#[test]
fn doubled_lower_bound_of_the_reference_code_is_not_valid() {
    // The circulating MATLAB code doubles β_L; search two-level rows for a violation.
    let mut rng = Pcg64::seed_from_u64(9);
    let mut found = false;
    for _ in 0..20000 {
        let n = rng.random_range(5..200usize);
        let perp = 1.2 + rng.random::<f64>() * (n as f64 - 1.3);
        let j = rng.random_range(1..n);
        let d2 = adversarial(n, j.min(1), 0.0, 1.0 + rng.random::<f64>());
        let d2: Vec<f64> = d2
            .iter()
            .enumerate()
            .map(|(i, &v)| if i < j && i > 0 { 1.0 + v * 0.0 } else { v })
            .collect();
        let (lo, _) = log_beta_bounds(&d2, perp, p1_bound(n, perp));
        if lo.is_finite() && row_entropy(&d2, lo + 2f64.ln()) - perp.ln() <= 0.0 {
            found = true;
            break;
        }
    }
    assert!(found, "2 x beta_L was valid on every sampled row");
}

#[test]
fn ties_and_degenerate_rows_do_not_hang() {
    // Three tied nearest neighbours, perplexity 5: a root exists.
    let d2 = [1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let a = solve(&d2, 1, 10, 5.0, RootMethod::Newton, WarmStart::Bounds);
    assert!(a.converged[0]);
    // Five tied nearest neighbours and perplexity 4: H -> log 5 > log 4, no root.
    let d2 = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0];
    let a = solve(&d2, 1, 8, 4.0, RootMethod::Newton, WarmStart::Bounds);
    assert!(!a.converged[0]);
    // All equal: uniform row, not converged.
    let a = solve(&[2.0; 6], 1, 6, 3.0, RootMethod::Halley, WarmStart::Bounds);
    assert!(!a.converged[0]);
    assert!(
        a.probabilities
            .iter()
            .all(|&p| (p - 1.0 / 6.0).abs() < 1e-15)
    );
}

#[test]
fn bad_input_is_rejected() {
    let d2 = vec![1.0; 12];
    let order = [0, 1, 2];
    let c = AtomicBool::new(false);
    let params = |perplexity, order| AffinityParams {
        perplexity,
        root: RootOptions::default(),
        order,
        warm: WarmStart::Previous,
        chunk_size: 8,
    };
    assert!(entropic_affinities(&d2, 3, 4, &params(4.0, &order), &c).is_err());
    assert!(entropic_affinities(&d2, 3, 4, &params(1.0, &order), &c).is_err());
    assert!(entropic_affinities(&d2, 3, 4, &params(2.0, &[0, 0, 1]), &c).is_err());
    let mut nan = d2.clone();
    nan[3] = f64::NAN;
    assert!(entropic_affinities(&nan, 3, 4, &params(2.0, &order), &c).is_err());
    assert!(entropic_affinities(&d2[..11], 3, 4, &params(2.0, &order), &c).is_err());
}

fn points(seed: u64, n: usize, dim: usize, scale: f64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * dim)
        .map(|_| (rng.random::<f64>() - 0.5) * scale)
        .collect()
}

fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn barnes_hut_with_theta_zero_is_exact_and_error_falls_with_theta() {
    let c = AtomicBool::new(false);
    for dim in [1, 2, 3] {
        let x = points(dim as u64, 700, dim, 10.0);
        for kernel in [Kernel::Gaussian, Kernel::StudentT] {
            let exact = exact_sums(&x, dim, kernel, None, &c).unwrap();
            let tree = BarnesHut::new(&x, dim, None).unwrap();
            let zero = tree.sums(kernel, 0.0, &c).unwrap();
            assert!(max_rel(&zero.s0, &exact.s0) < 1e-12);
            assert!(max_rel(&zero.s1, &exact.s1) < 1e-12);
            assert!(max_rel(&zero.sx, &exact.sx) < 1e-12);
            let mut last = f64::INFINITY;
            for theta in [1.5, 0.8, 0.4, 0.1] {
                let s = tree.sums(kernel, theta, &c).unwrap();
                let err = max_rel(&s.sx, &exact.sx);
                assert!(
                    err <= last * 1.05 + 1e-14,
                    "d={dim} {kernel:?} θ={theta}: {err} > {last}"
                );
                last = err;
            }
            assert!(last < 1e-2);
        }
    }
}

#[test]
fn grouped_barnes_hut_is_exact_at_theta_zero_and_no_less_accurate() {
    let c = AtomicBool::new(false);
    for dim in [1, 2, 3] {
        let x = points(40 + dim as u64, 1500, dim, 10.0);
        let w: Vec<f64> = (0..1500).map(|i| 0.5 + (i % 5) as f64 / 5.0).collect();
        for kernel in [Kernel::Gaussian, Kernel::StudentT] {
            let exact = exact_sums(&x, dim, kernel, Some(&w), &c).unwrap();
            let tree = BarnesHut::new(&x, dim, Some(&w)).unwrap();
            let zero = tree.sums_grouped(kernel, 0.0, &c).unwrap();
            assert!(max_rel(&zero.s0, &exact.s0) < 1e-12);
            assert!(max_rel(&zero.s1, &exact.s1) < 1e-12);
            assert!(max_rel(&zero.sx, &exact.sx) < 1e-12);
            let mut last = f64::INFINITY;
            for theta in [1.5, 0.8, 0.4, 0.1] {
                let g = tree.sums_grouped(kernel, theta, &c).unwrap();
                let p = tree.sums(kernel, theta, &c).unwrap();
                let (eg, ep) = (max_rel(&g.sx, &exact.sx), max_rel(&p.sx, &exact.sx));
                assert!(
                    eg <= last * 1.05 + 1e-14,
                    "d={dim} {kernel:?} θ={theta}: {eg} > {last}"
                );
                // The group criterion implies the per-target one: never much less accurate.
                assert!(
                    eg <= 1.5 * ep + 1e-14,
                    "d={dim} {kernel:?} θ={theta}: {eg} vs {ep}"
                );
                assert!(max_rel(&g.s1, &exact.s1) <= 1.5 * max_rel(&p.s1, &exact.s1) + 1e-14);
                last = eg;
            }
            assert!(last < 1e-2);
        }
    }
    // Coincident points (leaves at the depth limit) stay exact at θ = 0.
    let dup = vec![1.0; 80];
    let t = BarnesHut::new(&dup, 2, None)
        .unwrap()
        .sums_grouped(Kernel::StudentT, 0.0, &c)
        .unwrap();
    assert!(t.s0.iter().all(|&s| (s - 39.0).abs() < 1e-12));
}

#[test]
fn weighted_barnes_hut_and_fgt_match_exact() {
    let c = AtomicBool::new(false);
    let x = points(11, 500, 2, 6.0);
    let w: Vec<f64> = (0..500).map(|i| 0.5 + (i % 7) as f64 / 7.0).collect();
    let exact = exact_sums(&x, 2, Kernel::Gaussian, Some(&w), &c).unwrap();
    let bh = BarnesHut::new(&x, 2, Some(&w))
        .unwrap()
        .sums(Kernel::Gaussian, 0.0, &c)
        .unwrap();
    assert!(max_rel(&bh.sx, &exact.sx) < 1e-12);
    let f = fgt_sums(&x, 2, Some(&w), 1e-8, &c).unwrap();
    let total: f64 = w.iter().sum();
    for i in 0..500 {
        assert!((f.s0[i] - exact.s0[i]).abs() <= 1e-8 * total * 4.0);
    }
    // Coincident points terminate and stay exact at θ = 0.
    let dup = vec![1.0; 40];
    let t = BarnesHut::new(&dup, 2, None)
        .unwrap()
        .sums(Kernel::StudentT, 0.0, &c)
        .unwrap();
    assert!(t.s0.iter().all(|&s| (s - 19.0).abs() < 1e-12));
}

/// A random symmetric sparse W with Σ w = 1.
fn random_csr(seed: u64, n: usize, per_row: usize) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut dense = vec![0.0; n * n];
    for i in 0..n {
        for _ in 0..per_row {
            let j = rng.random_range(0..n);
            if j != i {
                let w = rng.random::<f64>();
                dense[i * n + j] += w;
                dense[j * n + i] += w;
            }
        }
    }
    let total: f64 = dense.iter().sum();
    let (mut indptr, mut indices, mut data) = (vec![0], vec![], vec![]);
    for i in 0..n {
        for j in 0..n {
            if dense[i * n + j] > 0.0 {
                indices.push(j as i64);
                data.push(dense[i * n + j] / total);
            }
        }
        indptr.push(indices.len() as i64);
    }
    (indptr, indices, data)
}

#[test]
fn gradients_match_finite_differences() {
    let c = AtomicBool::new(false);
    let n = 30;
    let (ip, ix, dt) = random_csr(4, n, 3);
    let w = Csr::new("P", &ip, &ix, &dt, n).unwrap();
    for model in [
        Model::ElasticEmbedding,
        Model::Sne,
        Model::SymmetricSne,
        Model::TSne,
    ] {
        for lambda in [0.3, 1.0, 4.0] {
            for dim in [1, 2, 3] {
                let x = points(dim as u64 + 20, n, dim, 2.0);
                let ev = evaluate(model, &x, dim, &w, lambda, Repulsion::Exact, &c).unwrap();
                let h = 1e-5;
                // Round-off of the central difference: ~eps |E| / h.
                let noise = 1e-13 * ev.objective.abs() / h;
                for i in 0..n * dim {
                    let mut xp = x.clone();
                    xp[i] += h;
                    let mut xm = x.clone();
                    xm[i] -= h;
                    let ep = evaluate(model, &xp, dim, &w, lambda, Repulsion::Exact, &c)
                        .unwrap()
                        .objective;
                    let em = evaluate(model, &xm, dim, &w, lambda, Repulsion::Exact, &c)
                        .unwrap()
                        .objective;
                    let fd = (ep - em) / (2.0 * h);
                    let g = ev.gradient[i];
                    assert!(
                        (fd - g).abs() <= 1e-6 * g.abs().max(1e-3) + noise,
                        "{model:?} λ={lambda} d={dim} i={i}: fd {fd} vs {g}"
                    );
                }
                // Translation invariance: gradient columns sum to 0.
                for k in 0..dim {
                    let s: f64 = (0..n).map(|i| ev.gradient[i * dim + k]).sum();
                    assert!(s.abs() < 1e-10);
                }
            }
        }
    }
}

#[test]
fn approximate_gradients_approach_the_exact_one() {
    let c = AtomicBool::new(false);
    let n = 400;
    let (ip, ix, dt) = random_csr(8, n, 5);
    let w = Csr::new("P", &ip, &ix, &dt, n).unwrap();
    let x = points(3, n, 2, 8.0);
    for model in [
        Model::ElasticEmbedding,
        Model::Sne,
        Model::SymmetricSne,
        Model::TSne,
    ] {
        let exact = evaluate(model, &x, 2, &w, 1.0, Repulsion::Exact, &c).unwrap();
        let bh0 = evaluate(
            model,
            &x,
            2,
            &w,
            1.0,
            Repulsion::BarnesHut { theta: 0.0 },
            &c,
        )
        .unwrap();
        assert!(max_rel(&bh0.gradient, &exact.gradient) < 1e-11);
        assert!((bh0.objective - exact.objective).abs() < 1e-10 * exact.objective.abs().max(1.0));
        let bh = evaluate(
            model,
            &x,
            2,
            &w,
            1.0,
            Repulsion::BarnesHut { theta: 0.5 },
            &c,
        )
        .unwrap();
        assert!(max_rel(&bh.gradient, &exact.gradient) < 5e-2, "{model:?}");
        if model != Model::TSne {
            let f = evaluate(model, &x, 2, &w, 1.0, Repulsion::Fgt { epsilon: 1e-10 }, &c).unwrap();
            assert!(
                max_rel(&f.gradient, &exact.gradient) < 1e-6,
                "{model:?} fgt"
            );
        } else {
            assert!(evaluate(model, &x, 2, &w, 1.0, Repulsion::Fgt { epsilon: 1e-6 }, &c).is_err());
        }
    }
    // An isolated point with no attraction has zero gradient only from repulsion balance:
    // a single point has zero gradient.
    let one = [0.5, 0.5];
    let empty: Csr = Csr::new("P", &[0, 0], &[], &[], 1).unwrap();
    let ev = evaluate(
        Model::TSne,
        &one,
        2,
        &empty,
        1.0,
        Repulsion::BarnesHut { theta: 1.0 },
        &c,
    )
    .unwrap();
    assert_eq!(ev.gradient, vec![0.0, 0.0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_row_reaches_its_perplexity(
        rows in proptest::collection::vec(proptest::collection::vec(0.0f64..50.0, 12), 1..6),
        frac in 0.05f64..0.9,
        m in 0usize..3,
    ) {
        let k = 12;
        let n = rows.len();
        let d2: Vec<f64> = rows.concat();
        let perp = 1.0 + frac * (k as f64 - 1.0);
        let a = solve(&d2, n, k, perp, [RootMethod::Newton, RootMethod::Halley, RootMethod::Euler][m], WarmStart::Previous);
        for i in 0..n {
            let row = &d2[i * k..(i + 1) * k];
            let (d1, _) = row.iter().fold((f64::INFINITY, 0), |(b, c), &v| if v < b { (v, 1) } else if v == b { (b, c + 1) } else { (b, c) });
            let ties = row.iter().filter(|&&v| v == d1).count();
            if (ties as f64) < perp {
                prop_assert!(a.converged[i]);
                prop_assert!((row_entropy(row, a.log_beta[i]) - perp.ln()).abs() <= 1e-10);
            }
        }
    }
}

#[test]
fn an_attraction_that_does_not_fit_is_refused() {
    let c = AtomicBool::new(false);
    let x = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let eval = |w: &Csr| evaluate(Model::Sne, &x, 2, w, 1.0, Repulsion::Exact, &c);
    let (ip, ix) = ([0i64, 1, 2, 2], [1i64, 0]);
    assert!(eval(&Csr::new("P", &ip, &ix, &[0.5, 0.5], 3).unwrap()).is_ok());
    // 3 x 4, 2 x 2, a negative weight
    assert!(eval(&Csr::new("P", &ip, &ix, &[0.5, 0.5], 4).unwrap()).is_err());
    assert!(eval(&Csr::new("P", &ip[..3], &ix, &[0.5, 0.5], 2).unwrap()).is_err());
    assert!(eval(&Csr::new("P", &ip, &ix, &[0.5, -0.5], 3).unwrap()).is_err());
    // a broken structure or a NaN never makes a matrix
    assert!(Csr::new("P", &[0i64, 2, 1, 2], &ix, &[0.5, 0.5], 3).is_err());
    assert!(Csr::new("P", &ip, &[1i64, 3], &[0.5, 0.5], 3).is_err());
    assert!(Csr::new("P", &ip, &ix, &[0.5, f64::NAN], 3).is_err());
}
