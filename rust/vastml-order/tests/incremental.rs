//! Incremental error == full recomputation for every move, kernel, padding and error kind
//! (spec §18 oracle 4), and the full error == the dense floating-point oracle.

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, Move, MoveConfig, MoveKind, Objective,
    Padding, Tolerance, dense_error, random_move,
};

const PADDINGS: [Padding; 4] = [
    Padding::ZerosAndOnes,
    Padding::Extension,
    Padding::Zero,
    Padding::Cyclic,
];
const KINDS: [KernelKind; 5] = [
    KernelKind::Gbs,
    KernelKind::Gbe,
    KernelKind::Uniform,
    KernelKind::CrossGbs,
    KernelKind::CrossGbe,
];

fn random_matrix(rng: &mut Pcg64, m: usize, n: usize, colours: usize, density: f64) -> Matrix {
    if colours == 1 {
        let v: Vec<u8> = (0..m * n)
            .map(|_| u8::from(rng.random_bool(density)))
            .collect();
        Matrix::binary(m, n, &v).unwrap()
    } else {
        let v: Vec<u32> = (0..m * n)
            .map(|_| rng.random_range(0..colours as u32))
            .collect();
        Matrix::categorical(m, n, &v, colours).unwrap()
    }
}

fn check_case(seed: u64, quadratic: bool) {
    let mut rng = Pcg64::seed_from_u64(seed);
    // a third of the cases are wide and sparse: several words per bit row, most of them
    // zero, so the skipped words of the sparse overlaps and the entities a commit leaves
    // alone matter
    let wide = rng.random_bool(0.3);
    let size = if wide { 65..=200 } else { 1..=40 };
    let m = rng.random_range(size.clone());
    let n = rng.random_range(size);
    let colours = if rng.random_bool(0.7) {
        1
    } else {
        rng.random_range(2..=5)
    };
    let density = if wide {
        rng.random_range(0.003..0.05)
    } else {
        rng.random_range(0.05..0.95)
    };
    let matrix = random_matrix(&mut rng, m, n, colours, density);
    let kr = 2 * rng.random_range(0..=5) + 1;
    let kc = 2 * rng.random_range(0..=3) + 1;
    let kernel = Kernel::new(KINDS[rng.random_range(0..KINDS.len())], kr, kc).unwrap();
    let padding = PADDINGS[rng.random_range(0..4)];
    let kind = if quadratic {
        ErrorKind::Quadratic
    } else {
        ErrorKind::Abs
    };
    let obj = Objective {
        kernel: kernel.clone(),
        padding,
        kind,
    };
    let mut rows: Vec<usize> = (0..m).collect();
    let mut cols: Vec<usize> = (0..n).collect();
    for i in (1..m).rev() {
        rows.swap(i, rng.random_range(0..=i));
    }
    for i in (1..n).rev() {
        cols.swap(i, rng.random_range(0..=i));
    }
    let mut arr = Arrangement::new(matrix.clone(), obj, Some(&rows), Some(&cols)).unwrap();
    let cfg = MoveConfig {
        swap_radius: 10,
        max_block: 12,
        tolerance: if rng.random_bool(0.5) {
            Tolerance::default()
        } else {
            Tolerance::exact()
        },
        recolour: false,
    };
    for step in 0..60 {
        let axis = rng.random_range(0..2);
        let len = arr.len(axis);
        let mv = if step % 15 == 0 && len > 1 {
            Some(Move::Reverse(0, len - 1))
        } else {
            let kind = MoveKind::ALL[rng.random_range(0..MoveKind::ALL.len())];
            random_move(&arr, axis, kind, 0, len, &cfg, &mut rng)
        };
        let Some(mv) = mv else { continue };
        let segs = mv.segments();
        let before = arr.raw_error();
        let d = arr.delta(axis, &segs);
        if rng.random_bool(0.3) {
            // rejected: nothing changed
            assert_eq!(arr.raw_error(), before);
            continue;
        }
        arr.commit(axis, &segs, d);
        let full0 = arr.full_raw(0);
        let full1 = arr.full_raw(1);
        assert_eq!(
            arr.raw_error(),
            full0,
            "move {mv:?} axis {axis} {m}x{n} kernel {kr}x{kc} {padding:?} {kind:?}"
        );
        assert_eq!(full0, full1, "transposed view disagrees");
    }
    let oracle = dense_error(
        &matrix,
        &arr.order(0),
        &arr.order(1),
        &kernel,
        padding,
        kind,
        false,
    );
    let e = arr.error();
    assert!(
        (e - oracle).abs() <= 1e-9 * oracle.max(1.0),
        "fast {e} vs dense {oracle}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn incremental_equals_full_abs(seed in any::<u64>()) {
        check_case(seed, false);
    }
    #[test]
    fn incremental_equals_full_quadratic(seed in any::<u64>()) {
        check_case(seed, true);
    }
}

#[test]
fn identity_moves_are_free() {
    let mut rng = Pcg64::seed_from_u64(3);
    let matrix = random_matrix(&mut rng, 10, 8, 1, 0.5);
    let obj = Objective {
        kernel: Kernel::new(KernelKind::Gbs, 5, 3).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: ErrorKind::Abs,
    };
    let mut arr = Arrangement::new(matrix, obj, None, None).unwrap();
    for mv in [
        Move::Swap(3, 3),
        Move::Reverse(4, 4),
        Move::AdjacentBlocks {
            start: 2,
            first: 3,
            second: 0,
        },
    ] {
        assert!(mv.segments().is_empty());
        assert_eq!(arr.delta(0, &mv.segments()), 0);
    }
}

#[test]
fn cyclic_identity_and_transpose_invariance() {
    let mut rng = Pcg64::seed_from_u64(11);
    let matrix = random_matrix(&mut rng, 40, 30, 1, 0.4);
    let kernel = Kernel::new(KernelKind::Gbs, 5, 5).unwrap();
    let ids_r: Vec<usize> = (0..40).collect();
    let ids_c: Vec<usize> = (0..30).collect();
    let ratio = |p: Padding| {
        let full = dense_error(&matrix, &ids_r, &ids_c, &kernel, p, ErrorKind::Abs, true);
        let ones = dense_error(&matrix, &ids_r, &ids_c, &kernel, p, ErrorKind::Abs, false);
        full / ones
    };
    assert!((ratio(Padding::Cyclic) - 2.0).abs() < 1e-12);
    for p in [Padding::ZerosAndOnes, Padding::Zero] {
        assert!((ratio(p) - 2.0).abs() > 1e-3, "{p:?}");
    }
    // Row reversal: free under zero/extension/cyclic padding, not under ZerosAndOnes.
    for p in PADDINGS {
        let obj = Objective {
            kernel: kernel.clone(),
            padding: p,
            kind: ErrorKind::Abs,
        };
        let mut arr = Arrangement::new(matrix.clone(), obj, None, None).unwrap();
        let d = arr.delta(0, &Move::Reverse(0, 39).segments());
        if p == Padding::ZerosAndOnes {
            assert_ne!(d, 0);
        } else {
            assert_eq!(d, 0, "{p:?}");
        }
    }
}

#[test]
fn cross_kernel_separability() {
    let mut rng = Pcg64::seed_from_u64(5);
    let matrix = random_matrix(&mut rng, 12, 9, 1, 0.5);
    let mut rows: Vec<usize> = (0..12).collect();
    let mut cols: Vec<usize> = (0..9).collect();
    rows.reverse();
    rows.swap(0, 5);
    cols.swap(1, 7);
    let idr: Vec<usize> = (0..12).collect();
    let idc: Vec<usize> = (0..9).collect();
    for (kind, sep) in [(KernelKind::CrossGbe, true), (KernelKind::Gbs, false)] {
        let k = Kernel::new(kind, 5, 3).unwrap();
        for p in [Padding::ZerosAndOnes, Padding::Zero, Padding::Extension] {
            let e =
                |r: &[usize], c: &[usize]| dense_error(&matrix, r, c, &k, p, ErrorKind::Abs, false);
            let s = e(&rows, &cols) - e(&rows, &idc) - e(&idr, &cols) + e(&idr, &idc);
            if sep {
                assert!(s.abs() < 1e-9, "{kind:?} {p:?} {s}");
            } else if p == Padding::Zero {
                assert!(s.abs() > 1e-6, "{kind:?} {p:?} {s}");
            }
        }
    }
}

/// Long runs of moves on one axis (as in the P-LS split jobs) go through the pair-overlap
/// cache of the abs error: it must stay exact through accepted, rejected and reversed moves,
/// and after the other axis moves (which invalidates it).
#[test]
fn pair_cache_stays_exact_on_single_axis_runs() {
    for seed in 0..12u64 {
        let mut rng = Pcg64::seed_from_u64(100 + seed);
        let (m, n) = (rng.random_range(20..=60), rng.random_range(20..=60));
        let colours = if seed % 3 == 0 { 3 } else { 1 };
        let matrix = random_matrix(&mut rng, m, n, colours, 0.4);
        let kr = 2 * rng.random_range(1..=5) + 1;
        let kc = 2 * rng.random_range(0..=4) + 1;
        let obj = Objective {
            kernel: Kernel::new(KINDS[(seed % 5) as usize], kr, kc).unwrap(),
            padding: if seed % 2 == 0 {
                Padding::ZerosAndOnes
            } else {
                Padding::Zero
            },
            kind: ErrorKind::Abs,
        };
        let mut arr = Arrangement::new(matrix, obj, None, None).unwrap();
        let cfg = MoveConfig {
            max_block: 15,
            ..MoveConfig::default()
        };
        let mut used = [false, false];
        for axis in [0, 1, 0] {
            let len = arr.len(axis);
            for step in 0..300 {
                let kind = MoveKind::ALL[rng.random_range(0..MoveKind::ALL.len())];
                let mv = if step % 50 == 49 {
                    Some(Move::Reverse(0, len - 1))
                } else {
                    random_move(&arr, axis, kind, 0, len, &cfg, &mut rng)
                };
                let Some(mv) = mv else { continue };
                let segs = mv.segments();
                used[axis] |= arr.pair_cache_ready(axis);
                let d = arr.delta(axis, &segs);
                if rng.random_bool(0.5) {
                    continue;
                }
                arr.commit(axis, &segs, d);
                assert_eq!(
                    arr.raw_error(),
                    arr.full_raw(0),
                    "seed {seed} axis {axis} {mv:?}"
                );
            }
        }
        for (axis, &u) in used.iter().enumerate() {
            // a kernel one row tall along an axis has no pairs there, hence no cache
            assert!(
                u || arr.kernel_rows(axis) == 1,
                "seed {seed}: the cache of axis {axis} was never used"
            );
        }
    }
}

/// The cancellable construction gives the same error as the plain one, and a raised flag
/// stops it with `Cancelled` instead of computing the full error.
#[test]
fn cancellable_construction_matches_and_stops() {
    use std::sync::atomic::AtomicBool;
    use vastml_order::OrderError;

    let mut rng = Pcg64::seed_from_u64(11);
    let matrix = random_matrix(&mut rng, 90, 70, 1, 0.3);
    let obj = Objective {
        kernel: Kernel::new(KernelKind::Gbs, 9, 7).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: ErrorKind::Abs,
    };
    let plain = Arrangement::new(matrix.clone(), obj.clone(), None, None).unwrap();
    let go = AtomicBool::new(false);
    let same = Arrangement::new_cancellable(matrix.clone(), obj.clone(), None, None, &go).unwrap();
    assert_eq!(plain.raw_error(), same.raw_error());
    assert_eq!(plain.raw_error(), same.full_raw(0));
    let stop = AtomicBool::new(true);
    assert!(matches!(
        Arrangement::new_cancellable(matrix, obj, None, None, &stop),
        Err(OrderError::Cancelled)
    ));
}
