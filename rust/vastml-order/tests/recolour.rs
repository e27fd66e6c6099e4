//! Recolouring (spec §9.5, §10.3): every incremental recolour delta equals a full
//! recomputation, undo is exact, Algorithm 5 never lowers the count of equal adjacent cells.

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_order::colours::{align_colours, equal_adjacent_pairs, set_colour_map};
use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, MoveConfig, MoveKind, Objective, Padding,
    Proposal, Tolerance, dense_error, random_proposal,
};

const PADDINGS: [Padding; 4] = [
    Padding::ZerosAndOnes,
    Padding::Extension,
    Padding::Zero,
    Padding::Cyclic,
];
const KINDS: [KernelKind; 4] = [
    KernelKind::Gbs,
    KernelKind::Gbe,
    KernelKind::Uniform,
    KernelKind::CrossGbs,
];

fn shuffled(rng: &mut Pcg64, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

fn random_case(seed: u64, quadratic: bool) -> (Arrangement, Pcg64) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let m = rng.random_range(2..=30);
    let n = rng.random_range(2..=30);
    let k = rng.random_range(2..=5);
    // blocky data so that rectangles exist
    let v: Vec<u32> = (0..m * n)
        .map(|i| {
            if rng.random_bool(0.5) {
                ((i / n) / 4 + (i % n) / 5) as u32 % k as u32
            } else {
                rng.random_range(0..k as u32)
            }
        })
        .collect();
    let matrix = Matrix::categorical(m, n, &v, k).unwrap();
    let kr = 2 * rng.random_range(0..=4) + 1;
    let kc = 2 * rng.random_range(0..=4) + 1;
    let obj = Objective {
        kernel: Kernel::new(KINDS[rng.random_range(0..KINDS.len())], kr, kc).unwrap(),
        padding: PADDINGS[rng.random_range(0..4)],
        kind: if quadratic {
            ErrorKind::Quadratic
        } else {
            ErrorKind::Abs
        },
    };
    let (rows, cols) = (shuffled(&mut rng, m), shuffled(&mut rng, n));
    let arr = Arrangement::new(matrix, obj, Some(&rows), Some(&cols)).unwrap();
    (arr, rng)
}

fn check_full(arr: &Arrangement, what: &str) {
    let full0 = arr.full_raw(0);
    assert_eq!(arr.raw_error(), full0, "{what}");
    assert_eq!(full0, arr.full_raw(1), "{what}: transposed view disagrees");
    let o = arr.objective();
    let dense = dense_error(
        arr.matrix(),
        &arr.order(0),
        &arr.order(1),
        &o.kernel,
        o.padding,
        o.kind,
        false,
    );
    assert!(
        (arr.error() - dense).abs() <= 1e-9 * dense.max(1.0),
        "{what}: {} vs dense {dense}",
        arr.error()
    );
}

fn check_recolour(seed: u64, quadratic: bool) {
    let (mut arr, mut rng) = random_case(seed, quadratic);
    let k = arr.matrix().n_layers();
    let n = arr.len(1);
    for _ in 0..25 {
        let col = rng.random_range(0..n);
        let (a, b) = (rng.random_range(0..k), rng.random_range(0..k));
        let before = arr.raw_error();
        let maps = arr.colour_maps().to_vec();
        let d = arr.recolour(col, a, b);
        assert_eq!(arr.raw_error(), before + d);
        check_full(&arr, &format!("recolour col {col} {a}<->{b}"));
        if rng.random_bool(0.4) {
            let back = arr.recolour(col, a, b);
            assert_eq!(back, -d, "undo is the exact opposite");
            assert_eq!(arr.raw_error(), before);
            assert_eq!(arr.colour_maps(), &maps[..]);
            check_full(&arr, "after undo");
        }
    }
    // the search's proposals, including rectangles recoloured before their relocation
    let cfg = MoveConfig {
        swap_radius: 10,
        max_block: 12,
        tolerance: Tolerance::default(),
        recolour: true,
    };
    for _ in 0..40 {
        let kind = if rng.random_bool(0.5) {
            MoveKind::Recolor
        } else {
            MoveKind::SwapRectangles
        };
        let Some(p) = random_proposal(&arr, 1, kind, 0, n, &cfg, &mut rng) else {
            continue;
        };
        let before = arr.raw_error();
        match p {
            Proposal::Perm(mv) => {
                let segs = mv.segments();
                let d = arr.delta(1, &segs);
                arr.commit(1, &segs, d);
            }
            Proposal::Recolour(rc) => {
                let mut d = 0;
                for &c in &rc.cols {
                    d += arr.recolour(c, rc.a, rc.b);
                }
                if let Some(mv) = rc.then {
                    let segs = mv.segments();
                    let dm = arr.delta(1, &segs);
                    arr.commit(1, &segs, dm);
                    d += dm;
                }
                assert_eq!(arr.raw_error(), before + d);
            }
        }
        check_full(&arr, "proposal");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]
    #[test]
    fn recolour_delta_equals_full_abs(seed in any::<u64>()) {
        check_recolour(seed, false);
    }
    #[test]
    fn recolour_delta_equals_full_quadratic(seed in any::<u64>()) {
        check_recolour(seed, true);
    }
    #[test]
    fn algorithm_5_never_lowers_equal_adjacent_pairs(seed in any::<u64>()) {
        let (mut arr, _) = random_case(seed, false);
        let k = arr.matrix().n_layers();
        let hist = |a: &Arrangement| {
            let mut h: Vec<Vec<usize>> = (0..a.len(1)).map(|c| {
                let mut v: Vec<usize> = (0..k)
                    .map(|l| (0..a.len(0)).filter(|&r| a.matrix().get(l, r, c)).count())
                    .collect();
                v.sort_unstable();
                v
            }).collect();
            h.sort();
            h
        };
        let (before, h0) = (equal_adjacent_pairs(&arr), hist(&arr));
        let e0 = arr.raw_error();
        let d = align_colours(&mut arr);
        prop_assert!(equal_adjacent_pairs(&arr) >= before);
        prop_assert_eq!(hist(&arr), h0);
        prop_assert_eq!(arr.raw_error(), e0 + d);
        check_full(&arr, "algorithm 5");
    }
}

#[test]
fn algorithm_5_aligns_relabelled_stripes() {
    // every column is the same stripe pattern under its own relabelling: alignment makes
    // all adjacent cells equal
    let (m, n, k) = (12, 6, 3);
    let perms = [
        [0, 1, 2],
        [2, 0, 1],
        [1, 2, 0],
        [0, 2, 1],
        [2, 1, 0],
        [1, 0, 2],
    ];
    let v: Vec<u32> = (0..m * n)
        .map(|i| perms[i % n][(i / n) / 4] as u32)
        .collect();
    let obj = Objective {
        kernel: Kernel::new(KernelKind::Gbs, 3, 3).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: ErrorKind::Abs,
    };
    let mut arr =
        Arrangement::new(Matrix::categorical(m, n, &v, k).unwrap(), obj, None, None).unwrap();
    let e0 = arr.error();
    align_colours(&mut arr);
    assert_eq!(equal_adjacent_pairs(&arr), (m * (n - 1)) as u64);
    assert!(arr.error() < e0);
    // colour maps restore: set_colour_map back to the identity gives the original error
    for c in 0..n {
        set_colour_map(&mut arr, c, &[0, 1, 2]);
    }
    assert!((arr.error() - e0).abs() < 1e-12);
    check_full(&arr, "restored");
}
