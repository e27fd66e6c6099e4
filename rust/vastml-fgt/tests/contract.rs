//! Every method against the O(MN) oracle: the epsilon-exact contract
//! max_j |G_hat - G| / sum_i |q_i| <= epsilon (spec oracles 1-3).

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_fgt::{FgtError, GaussTransform, Method, direct_reference, gauss_transform};

fn uniform(rng: &mut Pcg64, n: usize, dim: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n * dim)
        .map(|_| lo + (hi - lo) * rng.random::<f64>())
        .collect()
}

/// Mixture of 10 tight Gaussians in the unit cube ("clumpy" data of the thesis).
fn clumpy(rng: &mut Pcg64, n: usize, dim: usize) -> Vec<f64> {
    let centres = uniform(rng, 10, dim, 0.1, 0.9);
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.random_range(0..10);
        for k in 0..dim {
            // Box-Muller
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            out.push(centres[c * dim + k] + 0.03 * z);
        }
    }
    out
}

/// Largest error per weight column divided by that column's sum |q|.
fn scaled_error(fast: &[f64], exact: &[f64], weights: &[f64], w: usize) -> f64 {
    let mut worst: f64 = 0.0;
    for c in 0..w {
        let q: f64 = weights.iter().skip(c).step_by(w).map(|v| v.abs()).sum();
        let e = fast
            .iter()
            .zip(exact)
            .skip(c)
            .step_by(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        worst = worst.max(e / q);
    }
    worst
}

const METHODS: [Method; 5] = [
    Method::Direct,
    Method::DirectTree,
    Method::Ifgt,
    Method::IfgtTree,
    Method::Auto,
];

fn check_all(x: &[f64], y: &[f64], q: &[f64], w: usize, dim: usize, h: f64, eps: f64) {
    let exact = direct_reference(x, y, dim, q, w, h);
    let cancel = AtomicBool::new(false);
    for method in METHODS {
        match gauss_transform(x, y, dim, q, w, h, eps, method, &cancel) {
            Ok(g) => {
                let err = scaled_error(&g, &exact, q, w);
                assert!(
                    err <= eps,
                    "{method} d={dim} h={h} eps={eps:e}: error {err:e} exceeds epsilon"
                );
            }
            // An explicit IFGT may refuse when it cannot meet epsilon: that is allowed,
            // silently returning a wrong answer is not.
            Err(FgtError::InvalidParameter { name: "method", .. })
                if matches!(method, Method::Ifgt | Method::IfgtTree) => {}
            Err(e) => panic!("{method} d={dim} h={h} eps={eps:e}: {e}"),
        }
    }
}

#[test]
fn contract_uniform_grid_of_settings() {
    let mut rng = Pcg64::seed_from_u64(7);
    for &dim in &[1usize, 2, 3, 5, 8, 10] {
        for &h in &[0.05, 0.2, 0.5, 1.0, 0.5 * (dim as f64).sqrt()] {
            for &eps in &[1e-2, 1e-4, 1e-6, 1e-8] {
                let x = uniform(&mut rng, 600, dim, 0.0, 1.0);
                let y = uniform(&mut rng, 150, dim, 0.0, 1.0);
                let q = uniform(&mut rng, 600, 1, -1.0, 1.0);
                check_all(&x, &y, &q, 1, dim, h, eps);
            }
        }
    }
}

#[test]
fn contract_clumpy_sources_and_targets_outside_the_box() {
    let mut rng = Pcg64::seed_from_u64(11);
    for &dim in &[2usize, 3, 4] {
        for &h in &[0.05, 0.2, 0.6] {
            let x = clumpy(&mut rng, 800, dim);
            let mut y = clumpy(&mut rng, 100, dim);
            y.extend(uniform(&mut rng, 60, dim, -1.0, 2.0));
            let q = uniform(&mut rng, 800, 1, -1.0, 1.0);
            check_all(&x, &y, &q, 1, dim, h, 1e-6);
        }
    }
}

#[test]
fn contract_several_weight_columns() {
    let mut rng = Pcg64::seed_from_u64(3);
    for &dim in &[1usize, 3] {
        let x = uniform(&mut rng, 700, dim, 0.0, 1.0);
        let y = uniform(&mut rng, 120, dim, 0.0, 1.0);
        let q = uniform(&mut rng, 700 * 3, 1, -2.0, 1.0);
        check_all(&x, &y, &q, 3, dim, 0.3, 1e-5);
    }
}

#[test]
fn near_machine_precision() {
    let mut rng = Pcg64::seed_from_u64(5);
    let x = uniform(&mut rng, 500, 2, 0.0, 1.0);
    let y = uniform(&mut rng, 100, 2, 0.0, 1.0);
    let q = uniform(&mut rng, 500, 1, 0.0, 1.0);
    let exact = direct_reference(&x, &y, 2, &q, 1, 0.4);
    let cancel = AtomicBool::new(false);
    for method in [Method::Direct, Method::Ifgt, Method::Auto] {
        let g = gauss_transform(&x, &y, 2, &q, 1, 0.4, 1e-14, method, &cancel).unwrap();
        let err = scaled_error(&g, &exact, &q, 1);
        assert!(err <= 1e-13, "{method}: {err:e}");
    }
}

#[test]
fn linear_in_the_weights_for_a_fixed_plan() {
    let mut rng = Pcg64::seed_from_u64(9);
    let x = uniform(&mut rng, 900, 3, 0.0, 1.0);
    let y = uniform(&mut rng, 80, 3, 0.0, 1.0);
    let q1 = uniform(&mut rng, 900, 1, -1.0, 1.0);
    let q2 = uniform(&mut rng, 900, 1, -1.0, 1.0);
    let cancel = AtomicBool::new(false);
    for method in [
        Method::Direct,
        Method::DirectTree,
        Method::Ifgt,
        Method::IfgtTree,
    ] {
        let gt = GaussTransform::new(&x, 3, 0.3, 1e-6, method).unwrap();
        let combo: Vec<f64> = q1.iter().zip(&q2).map(|(a, b)| 2.0 * a - 0.5 * b).collect();
        let g1 = gt.evaluate(&y, &q1, 1, &cancel).unwrap();
        let g2 = gt.evaluate(&y, &q2, 1, &cancel).unwrap();
        let gc = gt.evaluate(&y, &combo, 1, &cancel).unwrap();
        for j in 0..80 {
            let lin = 2.0 * g1[j] - 0.5 * g2[j];
            assert!((gc[j] - lin).abs() < 1e-12 * (1.0 + lin.abs()), "{method}");
        }
    }
}

#[test]
fn translation_invariance_within_epsilon() {
    let mut rng = Pcg64::seed_from_u64(13);
    let x = uniform(&mut rng, 800, 2, 0.0, 1.0);
    let y = uniform(&mut rng, 100, 2, 0.0, 1.0);
    let q = uniform(&mut rng, 800, 1, 0.0, 1.0);
    let shift = |p: &[f64]| p.iter().map(|v| v + 17.25).collect::<Vec<_>>();
    let cancel = AtomicBool::new(false);
    let qsum: f64 = q.iter().sum();
    for method in METHODS {
        let a = gauss_transform(&x, &y, 2, &q, 1, 0.2, 1e-6, method, &cancel).unwrap();
        let b =
            gauss_transform(&shift(&x), &shift(&y), 2, &q, 1, 0.2, 1e-6, method, &cancel).unwrap();
        for j in 0..100 {
            assert!((a[j] - b[j]).abs() <= 2e-6 * qsum, "{method}");
        }
    }
}

#[test]
fn deterministic_and_independent_of_thread_count() {
    let mut rng = Pcg64::seed_from_u64(21);
    let x = uniform(&mut rng, 3000, 3, 0.0, 1.0);
    let y = uniform(&mut rng, 500, 3, 0.0, 1.0);
    let q = uniform(&mut rng, 3000, 1, -1.0, 1.0);
    let cancel = AtomicBool::new(false);
    for method in METHODS {
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| gauss_transform(&x, &y, 3, &q, 1, 0.25, 1e-6, method, &cancel).unwrap())
        };
        let one = run(1);
        assert_eq!(
            one,
            run(2),
            "{method}: results differ between 1 and 2 threads"
        );
        assert_eq!(one, run(2), "{method}: results differ between runs");
    }
}

#[test]
fn bad_input_is_rejected_before_work() {
    let x = [0.0, 1.0, 2.0, 3.0];
    let q = [1.0, 1.0];
    let cancel = AtomicBool::new(false);
    let call = |x: &[f64], y: &[f64], q: &[f64], h: f64, eps: f64| {
        gauss_transform(x, y, 2, q, 1, h, eps, Method::Auto, &cancel)
    };
    assert!(matches!(
        call(&x, &x, &q, 0.0, 1e-6),
        Err(FgtError::InvalidParameter {
            name: "bandwidth",
            ..
        })
    ));
    assert!(matches!(
        call(&x, &x, &q, -1.0, 1e-6),
        Err(FgtError::InvalidParameter {
            name: "bandwidth",
            ..
        })
    ));
    assert!(matches!(
        call(&x, &x, &q, f64::NAN, 1e-6),
        Err(FgtError::InvalidParameter {
            name: "bandwidth",
            ..
        })
    ));
    assert!(matches!(
        call(&x, &x, &q, 1.0, 0.0),
        Err(FgtError::InvalidParameter {
            name: "epsilon",
            ..
        })
    ));
    assert!(matches!(
        call(&x, &x, &q, 1.0, 1.0),
        Err(FgtError::InvalidParameter {
            name: "epsilon",
            ..
        })
    ));
    assert!(matches!(
        call(&[], &x, &[], 1.0, 1e-6),
        Err(FgtError::Empty { name: "sources" })
    ));
    assert!(matches!(
        call(&x, &[], &q, 1.0, 1e-6),
        Err(FgtError::Empty { name: "targets" })
    ));
    assert!(matches!(
        call(&x, &[1.0, 2.0, 3.0], &q, 1.0, 1e-6),
        Err(FgtError::ShapeMismatch(_))
    ));
    assert!(matches!(
        call(&x, &x, &[1.0], 1.0, 1e-6),
        Err(FgtError::ShapeMismatch(_))
    ));
    assert!(matches!(
        call(&[0.0, f64::NAN, 1.0, 1.0], &x, &q, 1.0, 1e-6),
        Err(FgtError::NonFinite { name: "sources" })
    ));
    assert!(matches!(
        call(&x, &x, &[1.0, f64::INFINITY], 1.0, 1e-6),
        Err(FgtError::NonFinite { name: "weights" })
    ));
    assert!("nonsense".parse::<Method>().is_err());
}

#[test]
fn cancel_flag_stops_the_work() {
    let x = vec![0.5; 2000];
    let cancel = AtomicBool::new(true);
    let r = gauss_transform(
        &x,
        &x,
        1,
        &vec![1.0; 2000],
        1,
        0.1,
        1e-6,
        Method::Direct,
        &cancel,
    );
    assert!(matches!(r, Err(FgtError::Cancelled)));
}

#[test]
fn duplicate_sources_do_not_break_clustering() {
    let x = vec![0.25; 300 * 2];
    let y = [0.25, 0.25, 0.3, 0.2];
    let q = vec![1.0; 300];
    let cancel = AtomicBool::new(false);
    for method in METHODS {
        let g = gauss_transform(&x, &y, 2, &q, 1, 0.1, 1e-6, method, &cancel).unwrap();
        assert!((g[0] - 300.0).abs() < 300.0 * 1e-6, "{method}");
        let e = 300.0 * (-(0.05f64.powi(2) * 2.0) / 0.01).exp();
        assert!((g[1] - e).abs() < 300.0 * 1e-6, "{method}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn contract_holds_for_random_problems(
        seed in 0u64..10_000,
        dim in 1usize..6,
        n in 1usize..400,
        m in 1usize..60,
        log_h in -2.5f64..0.5,
        log_eps in -9.0f64..-2.0,
    ) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let x = uniform(&mut rng, n, dim, 0.0, 1.0);
        let y = uniform(&mut rng, m, dim, -0.2, 1.2);
        let q = uniform(&mut rng, n, 1, -1.0, 1.0);
        check_all(&x, &y, &q, 1, dim, 10f64.powf(log_h), 10f64.powf(log_eps));
    }
}

/// The explicit IFGT methods must run (not refuse) in the regimes they are made for, so the
/// contract checks above really exercise them.
#[test]
fn ifgt_runs_in_its_regimes() {
    let mut rng = Pcg64::seed_from_u64(17);
    let cancel = AtomicBool::new(false);
    for &(dim, h) in &[(1usize, 0.05f64), (2, 0.2), (3, 0.5), (5, 1.0), (8, 2.0)] {
        let x = uniform(&mut rng, 1500, dim, 0.0, 1.0);
        let y = uniform(&mut rng, 200, dim, 0.0, 1.0);
        let q = uniform(&mut rng, 1500, 1, -1.0, 1.0);
        let exact = direct_reference(&x, &y, dim, &q, 1, h);
        for method in [Method::Ifgt, Method::IfgtTree] {
            let gt = GaussTransform::plan(&x, dim, h, 1e-6, method, Some(&y), 1, &cancel)
                .unwrap_or_else(|e| panic!("{method} d={dim} h={h} refused: {e}"));
            assert!(gt.info().n_clusters >= 1 && gt.info().truncation >= 1);
            let g = gt.evaluate(&y, &q, 1, &cancel).unwrap();
            assert!(
                scaled_error(&g, &exact, &q, 1) <= 1e-6,
                "{method} d={dim} h={h}"
            );
        }
    }
}

/// Spec oracle 5: Algorithm 1 returns p <= 100 and K <= K_lim, and a looser epsilon never
/// makes the chosen plan's estimated cost grow (the cost at every K falls with epsilon).
#[test]
fn parameter_choice_properties() {
    use vastml_fgt::{MAX_TRUNCATION, choose_parameters, cutoff_radius, max_clusters, monomials};
    let mut rng = Pcg64::seed_from_u64(23);
    let cancel = AtomicBool::new(false);
    for &(dim, h) in &[(1usize, 0.05f64), (2, 0.2), (3, 0.4), (4, 1.0)] {
        let x = uniform(&mut rng, 2000, dim, 0.0, 1.0);
        let mut last_cost = f64::INFINITY;
        for k in 2..=10 {
            let eps = 10f64.powi(-(12 - k));
            let r = cutoff_radius(h, eps, None);
            let problem = vastml_fgt::IfgtProblem {
                n_sources: 2000,
                n_targets: 2000,
                dim,
                range: 1.0,
                bandwidth: h,
                epsilon: eps,
                cutoff: r,
                max_clusters: usize::MAX,
            };
            let p = choose_parameters(&x, &problem, &cancel)
                .unwrap()
                .expect("reachable");
            assert!(p.truncation <= MAX_TRUNCATION);
            assert!(p.n_clusters <= max_clusters(2000, dim, 1.0, h));
            let uniform = vastml_fgt::choose_parameters_uniform(&problem).expect("reachable");
            assert!(uniform.truncation <= MAX_TRUNCATION);
            assert!(monomials::n_terms(dim, p.truncation - 1) >= 1.0);
            // eps grows with k: the plan's cost never grows with it
            assert!(
                p.cost <= last_cost * (1.0 + 1e-12),
                "d={dim} h={h} eps={eps:e}: cost {} after {last_cost}",
                p.cost
            );
            last_cost = p.cost;
        }
    }
}
