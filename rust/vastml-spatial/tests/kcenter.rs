//! Farthest-point (Gonzalez) k-center clustering against brute force.

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_spatial::{FarthestPoint, farthest_point_clustering, squared_distance};

fn row(points: &[f64], dim: usize, i: usize) -> &[f64] {
    &points[i * dim..(i + 1) * dim]
}

/// Squared distance from each point to its nearest centre (centres given as point indices).
fn min_d2(points: &[f64], dim: usize, centres: &[usize]) -> Vec<f64> {
    points
        .chunks_exact(dim)
        .map(|p| {
            centres
                .iter()
                .map(|&c| squared_distance(p, row(points, dim, c)))
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

/// Optimal k-center radius with centres restricted to the data points, by enumerating every
/// subset of size `k`. Gonzalez is within 2x of the unrestricted optimum, which is no larger.
fn brute_optimal_radius(points: &[f64], dim: usize, k: usize) -> f64 {
    let n = points.len() / dim;
    let mut best = f64::INFINITY;
    let mut subset: Vec<usize> = (0..k).collect();
    loop {
        let r2 = min_d2(points, dim, &subset).into_iter().fold(0.0, f64::max);
        best = best.min(r2);
        // Next k-combination of 0..n in lexicographic order.
        let mut i = k;
        loop {
            if i == 0 {
                return best.sqrt();
            }
            i -= 1;
            if subset[i] < n - k + i {
                break;
            }
        }
        subset[i] += 1;
        for j in i + 1..k {
            subset[j] = subset[j - 1] + 1;
        }
    }
}

fn coord() -> impl Strategy<Value = f64> {
    prop_oneof![(-2i32..=2).prop_map(|v| f64::from(v) * 0.5), -3.0f64..3.0,]
}

fn points_strategy(max_n: usize) -> impl Strategy<Value = (usize, Vec<f64>, usize)> {
    (1usize..=4, 1usize..=max_n).prop_flat_map(|(dim, n)| {
        (
            Just(dim),
            proptest::collection::vec(coord(), n * dim),
            0usize..n,
        )
    })
}

fn uniform(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * dim).map(|_| rng.random::<f64>()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every step is exactly Gonzalez: the next seed is the farthest point (smallest index on
    /// ties), labels are the nearest seed (earliest seed on ties), and `max_radius` is the
    /// brute-force covering radius. Seeds are never moved (progressive property).
    #[test]
    fn each_step_matches_brute_force_gonzalez((dim, pts, first) in points_strategy(60)) {
        let n = pts.len() / dim;
        let mut fp = FarthestPoint::new(&pts, dim, first).unwrap();
        let mut seeds = vec![first];
        loop {
            prop_assert_eq!(fp.seed_indices(), &seeds[..]);
            let d2 = min_d2(&pts, dim, &seeds);
            let brute_labels: Vec<usize> = (0..n)
                .map(|i| {
                    let p = row(&pts, dim, i);
                    let mut best = 0;
                    for (j, &s) in seeds.iter().enumerate() {
                        if squared_distance(p, row(&pts, dim, s))
                            < squared_distance(p, row(&pts, dim, seeds[best]))
                        {
                            best = j;
                        }
                    }
                    best
                })
                .collect();
            prop_assert_eq!(fp.labels(), &brute_labels[..]);
            let max = d2.iter().copied().fold(0.0, f64::max);
            prop_assert_eq!(fp.max_radius(), max.sqrt());
            let next = (0..n).find(|&i| d2[i] == max);
            let added = fp.add_center();
            if max == 0.0 {
                prop_assert!(!added, "all points are seeds' duplicates, K must not grow");
                prop_assert_eq!(fp.n_centers(), seeds.len());
                break;
            }
            prop_assert!(added);
            seeds.push(next.unwrap());
        }
    }

    /// Radius is at most twice the optimal k-center radius (brute force over all centre subsets).
    #[test]
    fn radius_is_within_twice_optimal((dim, pts, first) in points_strategy(12), k in 1usize..=12) {
        let n = pts.len() / dim;
        let k = k.min(n);
        let mut fp = FarthestPoint::new(&pts, dim, first).unwrap();
        fp.grow_to(k);
        let opt = brute_optimal_radius(&pts, dim, k);
        prop_assert!(
            fp.max_radius() <= 2.0 * opt * (1.0 + 1e-12),
            "radius {} > 2 x optimal {}", fp.max_radius(), opt
        );
    }

    /// The final clustering's centres are member means and its radii are the max member
    /// distance to those means (recomputed, not carried over from the seeds).
    #[test]
    fn clustering_recomputes_radii_about_means((dim, pts, first) in points_strategy(80), k in 1usize..10) {
        let mut fp = FarthestPoint::new(&pts, dim, first).unwrap();
        fp.grow_to(k);
        let c = fp.clustering();
        let kk = fp.n_centers();
        prop_assert_eq!(c.n_clusters(), kk);
        prop_assert_eq!(c.dim, dim);
        prop_assert_eq!(c.centers.len(), kk * dim);
        prop_assert_eq!(&c.labels[..], fp.labels());
        let (off, idx) = c.members();
        prop_assert_eq!(off.len(), kk + 1);
        for j in 0..kk {
            let m = &idx[off[j]..off[j + 1]];
            prop_assert!(m.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(m.iter().all(|&i| c.labels[i] == j));
            prop_assert_eq!(c.counts[j], m.len());
            prop_assert!(!m.is_empty());
            let mut mean = vec![0.0; dim];
            for &i in m {
                for (a, x) in mean.iter_mut().zip(row(&pts, dim, i)) {
                    *a += x;
                }
            }
            for a in &mut mean {
                *a /= m.len() as f64;
            }
            let center = &c.centers[j * dim..(j + 1) * dim];
            for (a, b) in mean.iter().zip(center) {
                prop_assert!((a - b).abs() <= 1e-12 * (1.0 + a.abs()));
            }
            let r = m
                .iter()
                .map(|&i| squared_distance(row(&pts, dim, i), &mean).sqrt())
                .fold(0.0, f64::max);
            prop_assert!((r - c.radii[j]).abs() <= 1e-12 * (1.0 + r));
            for &i in m {
                prop_assert!(squared_distance(row(&pts, dim, i), center).sqrt() <= c.radii[j]);
            }
        }
        prop_assert_eq!(c.max_radius(), c.radii.iter().copied().fold(0.0, f64::max));
    }
}

#[test]
fn recomputed_radius_can_exceed_the_seed_radius() {
    // Seed 0 covers everything within 1, but the mean is 0.5 and the point -1 is 1.5 away
    // from it: keeping the seed radius (as the public FIGTree code does) would be wrong.
    let pts = [0.0, -1.0, 1.0, 1.0, 1.0, 1.0];
    let fp = FarthestPoint::new(&pts, 1, 0).unwrap();
    assert_eq!(fp.max_radius(), 1.0);
    let c = fp.clustering();
    assert_eq!(c.centers, vec![0.5]);
    assert_eq!(c.radii, vec![1.5]);
    assert_eq!(c.counts, vec![6]);
}

#[test]
fn progressive_seeds_are_stable_as_k_grows() {
    let pts = uniform(3_000, 3, 7);
    let mut small = FarthestPoint::new(&pts, 3, 5).unwrap();
    assert_eq!(small.grow_to(20), 20);
    let mut big = FarthestPoint::new(&pts, 3, 5).unwrap();
    assert_eq!(big.grow_to(60), 60);
    assert_eq!(&big.seed_indices()[..20], small.seed_indices());
    // Growing the small one further reproduces the big one exactly.
    let before = small.seed_indices().to_vec();
    small.grow_to(60);
    assert_eq!(&small.seed_indices()[..20], &before[..]);
    assert_eq!(small.seed_indices(), big.seed_indices());
    assert_eq!(small.labels(), big.labels());
    // grow_to never shrinks.
    assert_eq!(small.grow_to(3), 60);
    // Radii are non-increasing in K.
    let mut fp = FarthestPoint::new(&pts, 3, 0).unwrap();
    let mut last = fp.max_radius();
    while fp.n_centers() < 50 {
        assert!(fp.add_center());
        assert!(fp.max_radius() <= last);
        last = fp.max_radius();
    }
}

#[test]
fn stops_at_duplicates() {
    // Three distinct 2-D values, each repeated.
    let base = [[0.0, 0.0], [1.0, 2.0], [-3.0, 0.5]];
    let pts: Vec<f64> = (0..30).flat_map(|i| base[i % 3]).collect();
    let mut fp = FarthestPoint::new(&pts, 2, 4).unwrap();
    assert_eq!(fp.grow_to(10), 3);
    assert_eq!(fp.max_radius(), 0.0);
    assert!(!fp.add_center());
    assert_eq!(fp.n_centers(), 3);
    let c = farthest_point_clustering(&pts, 2, 10, 0).unwrap();
    assert_eq!(c.n_clusters(), 3);
    assert_eq!(c.counts, vec![10, 10, 10]);
    assert_eq!(c.max_radius(), 0.0);

    let single = [4.0, 2.0];
    let mut fp = FarthestPoint::new(&single, 2, 0).unwrap();
    assert!(!fp.add_center());
    assert_eq!(fp.labels(), &[0]);
}

#[test]
fn deterministic_across_runs() {
    let pts = uniform(50_000, 2, 11);
    let a = farthest_point_clustering(&pts, 2, 100, 123).unwrap();
    let b = farthest_point_clustering(&pts, 2, 100, 123).unwrap();
    assert_eq!(a, b);
    let mut fa = FarthestPoint::new(&pts, 2, 123).unwrap();
    let mut fb = FarthestPoint::new(&pts, 2, 123).unwrap();
    fa.grow_to(100);
    fb.grow_to(100);
    assert_eq!(fa.seed_indices(), fb.seed_indices());
}

/// Grows K until the covering radius is at most `r`, returning K.
fn clusters_for_radius(pts: &[f64], dim: usize, r: f64) -> usize {
    let mut fp = FarthestPoint::new(pts, dim, 0).unwrap();
    while fp.max_radius() > r {
        assert!(fp.add_center());
    }
    fp.n_centers()
}

/// Anchor from the IFGT thesis: 10,000 points uniform in the unit square need about 22
/// farthest-point clusters for a maximum radius of 0.2 (we measure 20..=25 over seeds 0..5).
///
/// The thesis' companion figure of about 11 clusters for 10,000 standard-normal points is not
/// asserted: it does not say how the normal sample was scaled, and no obvious reading reproduces
/// it (we measure ~430 clusters for raw N(0, I) points, 13..=18 after min-max scaling into the
/// unit square, 40..=48 after dividing by the largest |coordinate|), so any range wide enough to
/// accept it would be vacuous.
#[test]
fn thesis_anchor_uniform_unit_square() {
    let pts = uniform(10_000, 2, 2024);
    let k = clusters_for_radius(&pts, 2, 0.2);
    assert!((15..=30).contains(&k), "uniform: K = {k}");
}

#[test]
fn clustering_of_first_equals_a_fresh_clustering_grown_to_k() {
    let mut state = 42u64;
    // every dimension the updates specialise (1-3) and one they do not
    for dim in [1usize, 2, 3, 5] {
        let pts: Vec<f64> = (0..3000 * dim)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect();
        let mut grown = vastml_spatial::FarthestPoint::new(&pts, dim, 0).unwrap();
        grown.grow_to(60);
        for k in [1usize, 2, 7, 31, 59, 60] {
            let mut fresh = vastml_spatial::FarthestPoint::new(&pts, dim, 0).unwrap();
            fresh.grow_to(k);
            assert_eq!(
                grown.clustering_of_first(k),
                fresh.clustering(),
                "dim = {dim}, k = {k}"
            );
        }
    }
}
