//! k-means against exhaustive checks: Lloyd fixed point, monotone improvement over seeding,
//! exact recovery of well-separated clusters, determinism and errors.

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_core::Csr;
use vastml_spatial::{SpatialError, kmeans, kmeans_csr, kmeans_plus_plus, squared_distance};

fn points(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * dim).map(|_| rng.random::<f64>()).collect()
}

fn inertia(p: &[f64], c: &[f64], dim: usize) -> f64 {
    p.chunks(dim)
        .map(|x| {
            c.chunks(dim)
                .map(|z| squared_distance(x, z))
                .fold(f64::INFINITY, f64::min)
        })
        .sum()
}

#[test]
fn recovers_separated_clusters() {
    let mut pts = Vec::new();
    let centres = [[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]];
    let noise = points(400, 2, 1);
    for (i, e) in noise.chunks(2).enumerate() {
        let c = centres[i % 4];
        pts.extend([c[0] + e[0] * 0.5, c[1] + e[1] * 0.5]);
    }
    let km = kmeans(&pts, 2, 4, 100, 0.0, 3).unwrap();
    for i in 0..400 {
        for j in 0..400 {
            assert_eq!(km.labels[i] == km.labels[j], i % 4 == j % 4);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20))]

    #[test]
    fn lloyd_fixed_point_and_improvement(seed in 0u64..1000, k in 1usize..8, dim in 1usize..4) {
        let pts = points(120, dim, seed);
        let km = kmeans(&pts, dim, k, 300, 0.0, seed).unwrap();
        let init = kmeans_plus_plus(&pts, dim, k, seed).unwrap();
        // Labels are the nearest centres; reported inertia is exact.
        let direct = inertia(&pts, &km.centers, dim);
        prop_assert!((direct - km.inertia).abs() <= 1e-9 * (1.0 + direct));
        for (x, &l) in pts.chunks(dim).zip(&km.labels) {
            let d = squared_distance(x, &km.centers[l * dim..(l + 1) * dim]);
            for z in km.centers.chunks(dim) { prop_assert!(d <= squared_distance(x, z) + 1e-12); }
        }
        // Lloyd never does worse than its seeding.
        prop_assert!(km.inertia <= inertia(&pts, &init, dim) + 1e-9);
        // Same seed, same answer.
        prop_assert_eq!(&kmeans(&pts, dim, k, 300, 0.0, seed).unwrap(), &km);
        // Converged (fewer iterations than the cap): every centre is the mean of its points.
        if km.n_iter < 300 {
            for j in 0..k {
                let members: Vec<&[f64]> = pts.chunks(dim).zip(&km.labels).filter(|(_, l)| **l == j).map(|(x, _)| x).collect();
                if members.is_empty() { continue; }
                for a in 0..dim {
                    let mean = members.iter().map(|x| x[a]).sum::<f64>() / members.len() as f64;
                    prop_assert!((mean - km.centers[j * dim + a]).abs() < 1e-9);
                }
            }
        }
    }
}

#[test]
fn errors() {
    let pts = points(10, 2, 0);
    assert!(kmeans(&pts, 2, 0, 10, 0.0, 0).is_err());
    assert!(kmeans(&pts, 2, 11, 10, 0.0, 0).is_err());
    assert!(kmeans(&pts, 2, 3, 0, 0.0, 0).is_err());
    assert!(kmeans(&pts, 3, 3, 10, 0.0, 0).is_err());
    assert!(kmeans(&[f64::NAN, 0.0], 2, 1, 10, 0.0, 0).is_err());
    // k = n with duplicate points still gives n centres.
    let dup = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0];
    assert_eq!(kmeans(&dup, 2, 3, 10, 0.0, 0).unwrap().centers.len(), 6);
}

#[test]
fn csr_equals_dense() {
    // Half the entries zero; the CSR path must give the dense path's clustering.
    let mut pts = points(300, 5, 9);
    for (i, v) in pts.iter_mut().enumerate() {
        if (i * 7919) % 2 == 0 {
            *v = 0.0;
        }
    }
    let (mut indptr, mut idx, mut val) = (vec![0usize], vec![], vec![]);
    for row in pts.chunks(5) {
        for (j, &v) in row.iter().enumerate() {
            if v != 0.0 {
                idx.push(j);
                val.push(v);
            }
        }
        indptr.push(idx.len());
    }
    let a = kmeans(&pts, 5, 6, 50, 0.0, 4).unwrap();
    let b = kmeans_csr(
        Csr::new("X", &indptr, &idx, &val, 5).unwrap(),
        6,
        50,
        0.0,
        4,
    )
    .unwrap();
    assert_eq!(a.labels, b.labels);
    for (x, y) in a.centers.iter().zip(&b.centers) {
        assert!((x - y).abs() < 1e-12);
    }
    // The same rows with int64 and int32 indices give the same clustering.
    let (ip64, ix64): (Vec<i64>, Vec<i64>) = (
        indptr.iter().map(|&p| p as i64).collect(),
        idx.iter().map(|&j| j as i64).collect(),
    );
    let c = kmeans_csr(Csr::new("X", &ip64, &ix64, &val, 5).unwrap(), 6, 50, 0.0, 4).unwrap();
    assert_eq!(c, b);
    let (ip32, ix32): (Vec<i32>, Vec<i32>) = (
        indptr.iter().map(|&p| p as i32).collect(),
        idx.iter().map(|&j| j as i32).collect(),
    );
    let d = kmeans_csr(Csr::new("X", &ip32, &ix32, &val, 5).unwrap(), 6, 50, 0.0, 4).unwrap();
    assert_eq!(d, b);
    // A column out of range and a short `indices` are rejected by the view, and the error
    // converts into this crate's error.
    let e: SpatialError = Csr::new("X", &[0usize, 1], &[7], &[1.0], 5)
        .unwrap_err()
        .into();
    assert!(
        matches!(e, SpatialError::InvalidParameter { name: "X", .. }),
        "{e}"
    );
    let e: SpatialError = Csr::new("X", &[0usize, 2], &[0], &[1.0], 5)
        .unwrap_err()
        .into();
    assert!(
        matches!(
            e,
            SpatialError::ShapeMismatch {
                name: "X",
                actual: 1,
                ..
            }
        ),
        "{e}"
    );
    // No rows, no columns, or k > n.
    let empty = Csr::new_or_empty("X", &[0usize], &[], &[], 5).unwrap();
    assert_eq!(
        kmeans_csr(empty, 1, 10, 0.0, 0).unwrap_err(),
        SpatialError::Empty { name: "points" }
    );
    let no_cols = Csr::new("X", &[0usize, 0], &[], &[], 0).unwrap();
    assert!(matches!(
        kmeans_csr(no_cols, 1, 10, 0.0, 0),
        Err(SpatialError::InvalidParameter { name: "dim", .. })
    ));
    let one = Csr::new("X", &[0usize, 1], &[0], &[1.0], 5).unwrap();
    assert!(kmeans_csr(one, 2, 10, 0.0, 0).is_err());
}

#[test]
fn a_raised_cancel_flag_stops_kmeans_and_a_lowered_one_changes_nothing() {
    use std::sync::atomic::AtomicBool;
    use vastml_spatial::{SpatialError, kmeans_with};

    let pts: Vec<f64> = (0..400).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
    let plain = kmeans(&pts, 2, 5, 50, 0.0, 9).unwrap();
    let with = kmeans_with(&pts, 2, 5, 50, 0.0, 9, &AtomicBool::new(false)).unwrap();
    assert_eq!(plain.labels, with.labels);
    assert_eq!(plain.centers, with.centers);
    assert!(matches!(
        kmeans_with(&pts, 2, 5, 50, 0.0, 9, &AtomicBool::new(true)),
        Err(SpatialError::Cancelled)
    ));
}
