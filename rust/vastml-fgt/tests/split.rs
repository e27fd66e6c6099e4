//! The split IFGT (sources in several parts) against the O(MN) oracle and against itself.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_fgt::{FgtError, Method, SplitIfgt, cluster_radii, direct_reference, split_centers};

fn uniform(rng: &mut Pcg64, n: usize, dim: usize) -> Vec<f64> {
    (0..n * dim).map(|_| rng.random::<f64>()).collect()
}

/// Plans from a sample, combines radii and coefficients over `parts`, evaluates `targets`
/// with bandwidth `h`, error bound `eps` and `method`.
fn split_transform(
    (parts, weights, n_weights): (&[&[f64]], &[&[f64]], usize),
    dim: usize,
    (h, eps, method): (f64, f64, Method),
    targets: &[f64],
) -> vastml_fgt::Result<Option<(SplitIfgt, Vec<f64>)>> {
    let cancel = AtomicBool::new(false);
    let n: usize = parts.iter().map(|p| p.len() / dim).sum();
    let sample: Vec<f64> = parts
        .iter()
        .flat_map(|p| p.iter().copied())
        .take(500 * dim)
        .collect();
    let sizes = (n, targets.len() / dim, n_weights);
    let Some(centers) = split_centers(&sample, dim, h, eps, sizes, method, &cancel)? else {
        return Ok(None);
    };
    let mut radii = vec![0.0f64; centers.len() / dim];
    for p in parts {
        for (r, s) in radii.iter_mut().zip(cluster_radii(p, dim, &centers)?) {
            *r = r.max(s);
        }
    }
    let plan = SplitIfgt::new(centers, radii, dim, h, eps, method, targets)?;
    let mut coeffs = vec![0.0; plan.coefficient_len(n_weights)];
    for (p, w) in parts.iter().zip(weights) {
        for (c, d) in coeffs
            .iter_mut()
            .zip(plan.coefficients(p, w, n_weights, &cancel)?)
        {
            *c += d;
        }
    }
    let g = plan.evaluate(targets, &coeffs, n_weights, &cancel)?;
    Ok(Some((plan, g)))
}

fn worst_scaled_error(g: &[f64], exact: &[f64], weights: &[f64], w: usize) -> f64 {
    (0..w)
        .map(|c| {
            let q: f64 = weights.iter().skip(c).step_by(w).map(|v| v.abs()).sum();
            g.iter()
                .zip(exact)
                .skip(c)
                .step_by(w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
                / q
        })
        .fold(0.0, f64::max)
}

#[test]
fn three_parts_meet_epsilon_in_2d_and_3d() {
    let mut rng = Pcg64::seed_from_u64(7);
    for (dim, h) in [(2usize, 0.2), (3, 0.4)] {
        for method in [Method::Ifgt, Method::IfgtTree, Method::Auto] {
            let src = uniform(&mut rng, 3000, dim);
            let q: Vec<f64> = (0..3000 * 2).map(|_| rng.random::<f64>() - 0.3).collect();
            let tgt = uniform(&mut rng, 400, dim);
            let cuts = [0, 700, 2100, 3000];
            let parts: Vec<&[f64]> = cuts
                .windows(2)
                .map(|c| &src[c[0] * dim..c[1] * dim])
                .collect();
            let ws: Vec<&[f64]> = cuts.windows(2).map(|c| &q[c[0] * 2..c[1] * 2]).collect();
            for eps in [1e-3, 1e-6] {
                let Some((plan, g)) =
                    split_transform((&parts, &ws, 2), dim, (h, eps, method), &tgt).unwrap()
                else {
                    assert_eq!(method, Method::Auto, "explicit IFGT must plan");
                    continue;
                };
                assert!(plan.n_clusters() > 1);
                let exact = direct_reference(&src, &tgt, dim, &q, 2, h);
                let err = worst_scaled_error(&g, &exact, &q, 2);
                assert!(err <= eps, "dim {dim} {method:?} eps {eps}: error {err:e}");
                // and not trivially: the truncation is real
                assert!(plan.truncation() >= 2);
            }
        }
    }
}

#[test]
fn radii_of_no_sources_are_zero_and_the_identity_of_the_maximum() {
    let mut rng = Pcg64::seed_from_u64(5);
    let src = uniform(&mut rng, 300, 2);
    let centers = [0.2, 0.2, 0.8, 0.8, 0.5, 0.1];
    assert_eq!(cluster_radii(&[], 2, &centers).unwrap(), vec![0.0; 3]);
    let whole = cluster_radii(&src, 2, &centers).unwrap();
    let empty = cluster_radii(&[], 2, &centers).unwrap();
    let combined: Vec<f64> = whole.iter().zip(&empty).map(|(a, b)| a.max(*b)).collect();
    assert_eq!(combined, whole);
}

#[test]
fn coefficients_add_over_parts() {
    let mut rng = Pcg64::seed_from_u64(3);
    let src = uniform(&mut rng, 2000, 2);
    let q: Vec<f64> = (0..2000).map(|_| rng.random::<f64>()).collect();
    let cancel = AtomicBool::new(false);
    let centers = split_centers(&src, 2, 0.3, 1e-6, (2000, 2000, 1), Method::Ifgt, &cancel)
        .unwrap()
        .unwrap();
    let radii = cluster_radii(&src, 2, &centers).unwrap();
    let plan = SplitIfgt::new(centers, radii, 2, 0.3, 1e-6, Method::Ifgt, &[]).unwrap();
    let whole = plan.coefficients(&src, &q, 1, &cancel).unwrap();
    let a = plan
        .coefficients(&src[..1200], &q[..600], 1, &cancel)
        .unwrap();
    let b = plan
        .coefficients(&src[1200..], &q[600..], 1, &cancel)
        .unwrap();
    let scale = whole.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for ((w, x), y) in whole.iter().zip(&a).zip(&b) {
        assert!((w - (x + y)).abs() <= 1e-12 * scale);
    }
    // a raised cancel flag stops the coefficient pass
    let raised = AtomicBool::new(true);
    assert!(matches!(
        plan.coefficients(&src, &q, 1, &raised),
        Err(FgtError::Cancelled)
    ));
    // an empty part contributes nothing
    assert!(
        plan.coefficients(&[], &[], 1, &cancel)
            .unwrap()
            .iter()
            .all(|&v| v == 0.0)
    );
}

#[test]
fn radii_that_miss_a_part_are_rejected() {
    let mut rng = Pcg64::seed_from_u64(5);
    let src = uniform(&mut rng, 1000, 2);
    let cancel = AtomicBool::new(false);
    let centers = split_centers(&src, 2, 0.3, 1e-6, (1000, 1000, 1), Method::Ifgt, &cancel)
        .unwrap()
        .unwrap();
    // radii from the first half only
    let radii = cluster_radii(&src[..400], 2, &centers).unwrap();
    let plan = SplitIfgt::new(centers, radii, 2, 0.3, 1e-6, Method::Ifgt, &[]).unwrap();
    let err = plan
        .coefficients(&src, &vec![1.0; 1000], 1, &cancel)
        .unwrap_err();
    assert!(matches!(err, FgtError::InvalidParameter { .. }), "{err}");
}

#[test]
fn bad_arguments_are_rejected() {
    let cancel = AtomicBool::new(false);
    let pts = [0.0, 0.0, 1.0, 1.0];
    assert!(split_centers(&pts, 2, 0.3, 1e-6, (2, 2, 1), Method::DirectTree, &cancel).is_err());
    assert!(split_centers(&pts, 2, -1.0, 1e-6, (2, 2, 1), Method::Ifgt, &cancel).is_err());
    assert!(
        SplitIfgt::new(
            vec![0.0, 0.0],
            vec![1.0, 2.0],
            2,
            0.3,
            1e-6,
            Method::Ifgt,
            &[]
        )
        .is_err()
    );
    assert!(SplitIfgt::new(vec![0.0, 0.0], vec![-1.0], 2, 0.3, 1e-6, Method::Ifgt, &[]).is_err());
    assert!(
        SplitIfgt::new(
            vec![0.0, 0.0],
            vec![0.1],
            2,
            0.3,
            1e-3,
            Method::DirectTree,
            &[]
        )
        .is_err()
    );
    let plan = SplitIfgt::new(vec![0.0, 0.0], vec![0.1], 2, 0.3, 1e-3, Method::Ifgt, &[]).unwrap();
    assert!(plan.evaluate(&pts, &[1.0], 1, &cancel).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Any split of the sources into parts meets the contract.
    #[test]
    fn any_split_meets_epsilon(seed in 0u64..1000, n in 50usize..600, cut1 in 0.0f64..1.0, cut2 in 0.0f64..1.0,
                               h in 0.15f64..0.8, dim in 1usize..4) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let src = uniform(&mut rng, n, dim);
        let q: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
        let tgt = uniform(&mut rng, 60, dim);
        let (a, b) = ((cut1.min(cut2) * n as f64) as usize, (cut1.max(cut2) * n as f64) as usize);
        let parts = [&src[..a * dim], &src[a * dim..b * dim], &src[b * dim..]];
        let ws = [&q[..a], &q[a..b], &q[b..]];
        let eps = 1e-5;
        if let Some((_, g)) = split_transform((&parts, &ws, 1), dim, (h, eps, Method::Ifgt), &tgt).unwrap() {
            let exact = direct_reference(&src, &tgt, dim, &q, 1, h);
            let err = worst_scaled_error(&g, &exact, &q, 1);
            prop_assert!(err <= eps, "error {err:e}");
        }
    }
}
