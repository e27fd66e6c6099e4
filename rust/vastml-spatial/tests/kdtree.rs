//! Property tests: kd-tree queries against brute force.

use proptest::prelude::*;
use vastml_spatial::{KdTree, squared_distance};

/// Coordinates drawn partly from a coarse lattice so duplicate points and exact ties are common.
fn coord() -> impl Strategy<Value = f64> {
    prop_oneof![(-3i32..=3).prop_map(|v| f64::from(v) * 0.5), -5.0f64..5.0,]
}

#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    points: Vec<f64>,
    leaf_size: usize,
    queries: Vec<f64>,
    radii: Vec<f64>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=20, 1usize..=120, 1usize..=9).prop_flat_map(|(dim, n, leaf_size)| {
        (
            proptest::collection::vec(coord(), n * dim),
            proptest::collection::vec(coord(), 4 * dim),
            proptest::collection::vec(0usize..n, 2),
            proptest::collection::vec(
                prop_oneof![Just(0.0), 0.0f64..3.0, 0.0f64..30.0, Just(f64::INFINITY)],
                3,
            ),
        )
            .prop_map(move |(points, mut queries, picks, radii)| {
                // Two queries sit exactly on data points (exercises radius 0 and distance-0
                // ties), and one is far outside the data.
                for &p in &picks {
                    queries.extend_from_slice(&points[p * dim..(p + 1) * dim]);
                }
                queries.extend(std::iter::repeat_n(1e6, dim));
                Case {
                    dim,
                    points,
                    leaf_size,
                    queries,
                    radii,
                }
            })
    })
}

fn brute_within(points: &[f64], dim: usize, q: &[f64], radius: f64) -> Vec<(usize, f64)> {
    points
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, p)| (i, squared_distance(p, q)))
        .filter(|&(_, d2)| d2 <= radius * radius)
        .collect()
}

/// Squared distance from `q` to the box [lo, hi], summed coordinate by coordinate.
fn box_distance(q: &[f64], lo: &[f64], hi: &[f64]) -> f64 {
    q.iter()
        .zip(lo.iter().zip(hi))
        .map(|(&x, (&l, &h))| {
            let d = (l - x).max(0.0) + (x - h).max(0.0);
            d * d
        })
        .sum()
}

#[test]
fn leaves_partition_the_points_with_tight_boxes() {
    let mut s = 3u64;
    let mut rand = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    for dim in [1, 3, 7] {
        let points: Vec<f64> = (0..500 * dim).map(|_| rand()).collect();
        let tree = KdTree::build(&points, dim, 16).unwrap();
        let tp = tree.points_in_tree_order();
        let mut next = 0;
        for (range, lo, hi) in tree.leaves() {
            assert_eq!(range.start, next, "leaves cover the points in order");
            assert!(!range.is_empty() && range.len() <= 16);
            next = range.end;
            for k in 0..dim {
                let col = || range.clone().map(|t| tp[t * dim + k]);
                assert_eq!(lo[k], col().fold(f64::INFINITY, f64::min));
                assert_eq!(hi[k], col().fold(f64::NEG_INFINITY, f64::max));
            }
        }
        assert_eq!(next, 500);
    }
}

fn brute_knn(points: &[f64], dim: usize, q: &[f64], k: usize) -> Vec<(usize, f64)> {
    let mut all: Vec<(usize, f64)> = points
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, p)| (i, squared_distance(p, q)))
        .collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn range_search_equals_brute_force(c in case()) {
        let tree = KdTree::build(&c.points, c.dim, c.leaf_size).unwrap();
        prop_assert_eq!(tree.len(), c.points.len() / c.dim);
        let mut out = Vec::new();
        for q in c.queries.chunks_exact(c.dim) {
            for &r in &c.radii {
                let expected = brute_within(&c.points, c.dim, q, r);

                tree.within_radius(q, r, &mut out).unwrap();
                out.sort_by_key(|h| h.0);
                prop_assert_eq!(&out, &expected);

                let mut via_closure = Vec::new();
                tree.for_each_within_radius(q, r, |i, d2| via_closure.push((i, d2)));
                via_closure.sort_by_key(|h| h.0);
                prop_assert_eq!(&via_closure, &expected);

                prop_assert_eq!(tree.count_within_radius(q, r), expected.len());

                // Leaf ranges: filtering the visited leaves gives the same set, every leaf is
                // visited at most once, and the reported box distance is a lower bound.
                let tp = tree.points_in_tree_order();
                let perm = tree.permutation();
                let mut via_leaves = Vec::new();
                let mut leaves_visited = Vec::new();
                tree.for_each_leaf_within_radius(q, r, |s, e, bd| {
                    leaves_visited.push((s, e, bd));
                    for t in s..e {
                        let d2 = squared_distance(&tp[t * c.dim..(t + 1) * c.dim], q);
                        assert!(bd <= d2, "box distance {bd} exceeds point distance {d2}");
                        if d2 <= r * r {
                            via_leaves.push((perm[t], d2));
                        }
                    }
                });
                via_leaves.sort_by_key(|h| h.0);
                prop_assert_eq!(&via_leaves, &expected);
                // Exactly the leaves whose own box is within the radius, in tree order, each
                // with its box distance: the search prunes nothing more, and nothing less.
                let boxed: Vec<(usize, usize, f64)> = tree
                    .leaves()
                    .map(|(range, lo, hi)| (range.start, range.end, box_distance(q, lo, hi)))
                    .filter(|&(_, _, bd)| bd <= r * r)
                    .collect();
                prop_assert_eq!(&leaves_visited, &boxed);
                let mut by_boxes = Vec::new();
                tree.for_each_leaf_within_large_radius(q, r, |s, e, bd| by_boxes.push((s, e, bd)));
                prop_assert_eq!(&by_boxes, &boxed);
            }
        }
    }

    #[test]
    fn knn_equals_brute_force(c in case(), k in 0usize..40) {
        let tree = KdTree::build(&c.points, c.dim, c.leaf_size).unwrap();
        for q in c.queries.chunks_exact(c.dim) {
            let got = tree.nearest(q, k).unwrap();
            prop_assert_eq!(got, brute_knn(&c.points, c.dim, q, k));
        }
    }
}

#[test]
fn knn_clamps_k_and_handles_k_zero() {
    let pts = [0.0, 1.0, 2.0, 3.0];
    let tree = KdTree::build(&pts, 1, 1).unwrap();
    assert!(tree.nearest(&[0.0], 0).unwrap().is_empty());
    let all = tree.nearest(&[2.4], 100).unwrap();
    let order: Vec<usize> = all.iter().map(|h| h.0).collect();
    assert_eq!(order, vec![2, 3, 1, 0]);
    for (i, d2) in all {
        assert_eq!(d2, squared_distance(&[pts[i]], &[2.4]));
    }
}

#[test]
fn many_threads_share_one_tree() {
    let n = 20_000;
    let pts: Vec<f64> = (0..n * 2)
        .map(|i| {
            ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect();
    let tree = KdTree::build(&pts, 2, 16).unwrap();
    let counts: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let tree = &tree;
                s.spawn(move || {
                    let q = [0.2 * t as f64, 0.5];
                    tree.count_within_radius(&q, 0.1)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, &got) in counts.iter().enumerate() {
        let q = [0.2 * t as f64, 0.5];
        assert_eq!(got, brute_within(&pts, 2, &q, 0.1).len());
    }
}

/// A raised cancel flag stops the kd-tree and kNN-tree builds of a large point set (every
/// subtree of 4,096 points or more polls it); a lowered one changes nothing.
#[test]
fn a_raised_cancel_flag_stops_the_tree_builds_and_a_lowered_one_changes_nothing() {
    use std::sync::atomic::AtomicBool;
    use vastml_spatial::{SpatialError, knn_graph, knn_graph_with};

    let n = 20_000;
    let pts: Vec<f64> = (0..2 * n).map(|i| ((i * 7919) % 10_007) as f64).collect();
    let raised = AtomicBool::new(true);
    let lowered = AtomicBool::new(false);
    assert!(matches!(
        KdTree::build_with(&pts, 2, 16, &raised),
        Err(SpatialError::Cancelled)
    ));
    let plain = KdTree::build(&pts, 2, 16).unwrap();
    let with = KdTree::build_with(&pts, 2, 16, &lowered).unwrap();
    assert_eq!(plain.permutation(), with.permutation());
    assert_eq!(plain.n_nodes(), with.n_nodes());
    assert!(matches!(
        knn_graph_with(&pts, 2, 5, 0.0, &raised),
        Err(SpatialError::Cancelled)
    ));
    let a = knn_graph(&pts, 2, 5, 0.0).unwrap();
    let b = knn_graph_with(&pts, 2, 5, 0.0, &lowered).unwrap();
    assert_eq!(a.indices, b.indices);
    assert_eq!(a.sqdist, b.sqdist);
}
