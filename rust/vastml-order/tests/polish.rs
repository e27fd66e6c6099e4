//! The exhaustive polish (`vastml_order::polish`): every table-scored move equals the change
//! of a full recomputation, the best relocation is the best of all, and a polished
//! arrangement is exact, a permutation, never worse and a local minimum of every move.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_order::polish::{PairTable, polish, table_fits};
use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding, PlsParams,
    SearchParams, pls,
};

fn shuffled(rng: &mut Pcg64, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

fn random_arr(
    seed: u64,
    (m, n): (usize, usize),
    colours: usize,
    density: f64,
    kernel: Kernel,
    padding: Padding,
) -> Arrangement {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mat = if colours == 1 {
        let v: Vec<u8> = (0..m * n)
            .map(|_| u8::from(rng.random_bool(density)))
            .collect();
        Matrix::binary(m, n, &v).unwrap()
    } else {
        let v: Vec<u32> = (0..m * n)
            .map(|_| rng.random_range(0..colours as u32))
            .collect();
        Matrix::categorical(m, n, &v, colours).unwrap()
    };
    let obj = Objective {
        kernel,
        padding,
        kind: ErrorKind::Abs,
    };
    let (r, c) = (shuffled(&mut rng, m), shuffled(&mut rng, n));
    Arrangement::new(mat, obj, Some(&r), Some(&c)).unwrap()
}

/// Raw error of `arr` with `axis` in order `o` (full recomputation).
fn raw_with(arr: &Arrangement, axis: usize, o: &[u32]) -> i128 {
    let mut a = arr.clone();
    let order: Vec<usize> = o.iter().map(|&x| x as usize).collect();
    a.set_order(axis, &order).unwrap();
    assert_eq!(a.raw_error(), a.full_raw(1 - axis));
    a.raw_error()
}

fn relocated(o: &[u32], i: usize, len: usize, g: usize, reversed: bool) -> Vec<u32> {
    let mut o = o.to_vec();
    let mut blk: Vec<u32> = o.drain(i..i + len).collect();
    if reversed {
        blk.reverse();
    }
    o.splice(g..g, blk);
    o
}

const KINDS: [KernelKind; 4] = [
    KernelKind::Gbs,
    KernelKind::Gbe,
    KernelKind::Uniform,
    KernelKind::CrossGbs,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// raw error = constant − S(order), and every scored move is the exact change of S.
    #[test]
    fn table_moves_equal_full_recomputation(
        seed in 0u64..1_000_000,
        m in 2usize..26,
        n in 1usize..20,
        colours in 1usize..4,
        density in 0.1f64..0.9,
        kind in 0usize..4,
        kr in 0usize..6,
        kc in 0usize..4,
        zero in any::<bool>(),
    ) {
        let padding = if zero { Padding::Zero } else { Padding::ZerosAndOnes };
        let arr = random_arr(seed, (m, n), colours, density, Kernel::new(KINDS[kind], 2 * kr + 1, 2 * kc + 1).unwrap(), padding);
        let mut rng = Pcg64::seed_from_u64(seed ^ 0xABCD);
        for axis in 0..2 {
            if !table_fits(&arr, axis) {
                continue;
            }
            let t = PairTable::build(&arr, axis).unwrap();
            let o: Vec<u32> = arr.order(axis).iter().map(|&x| x as u32).collect();
            let len = o.len();
            let constant = arr.raw_error() + i128::from(t.score(&o));
            let s0 = t.score(&o);
            for _ in 0..6 {
                let o1: Vec<u32> = shuffled(&mut rng, len).iter().map(|&p| o[p]).collect();
                prop_assert_eq!(raw_with(&arr, axis, &o1), constant - i128::from(t.score(&o1)));
            }
            for _ in 0..10 {
                let (a, b) = (rng.random_range(0..len), rng.random_range(0..len));
                let (a, b) = (a.min(b), a.max(b));
                if a < b {
                    let mut o1 = o.clone();
                    o1.swap(a, b);
                    prop_assert_eq!(t.delta_swap(&o, a, b), t.score(&o1) - s0);
                    let mut o2 = o.clone();
                    o2[a..=b].reverse();
                    prop_assert_eq!(t.delta_reverse(&o, a, b), t.score(&o2) - s0);
                }
            }
            for blk in 1..=4.min(len - 1) {
                let i = rng.random_range(0..=len - blk);
                let best = t.best_relocation(&o, i, blk).unwrap();
                // the brute force over every gap and orientation
                let mut all = Vec::new();
                for g in 0..=len - blk {
                    for rev in [false, true] {
                        if (rev && blk == 1) || (!rev && g == i) {
                            continue;
                        }
                        all.push(t.score(&relocated(&o, i, blk, g, rev)) - s0);
                    }
                }
                let brute = all.iter().copied().max().unwrap();
                prop_assert_eq!(best.0, brute);
                let o1 = relocated(&o, i, blk, best.1, best.2);
                prop_assert_eq!(t.score(&o1) - s0, best.0);
                prop_assert_eq!(raw_with(&arr, axis, &o1), arr.raw_error() - i128::from(best.0));
            }
        }
    }

    /// A polished arrangement: exact error, valid permutations, never worse, and no swap,
    /// reversal or block relocation (up to the block limit) of either axis improves it.
    #[test]
    fn polish_is_exact_and_a_local_minimum(
        seed in 0u64..1_000_000,
        m in 2usize..22,
        n in 2usize..22,
        colours in 1usize..3,
        density in 0.2f64..0.7,
        kr in 0usize..4,
        zero in any::<bool>(),
    ) {
        let padding = if zero { Padding::Zero } else { Padding::ZerosAndOnes };
        let mut arr = random_arr(seed, (m, n), colours, density, Kernel::new(KernelKind::Gbs, 2 * kr + 1, 2 * kr + 1).unwrap(), padding);
        let before = arr.raw_error();
        let cancel = AtomicBool::new(false);
        let rep = polish(&mut arr, &[0, 1], 3, usize::MAX, None, &cancel).unwrap();
        prop_assert!(arr.raw_error() <= before);
        prop_assert_eq!(arr.raw_error(), arr.full_raw(0));
        prop_assert_eq!(arr.raw_error(), arr.full_raw(1));
        if rep.moves.iter().sum::<usize>() > 0 {
            prop_assert!(arr.raw_error() < before);
        }
        for axis in 0..2 {
            let mut seen = arr.order(axis);
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..arr.len(axis)).collect::<Vec<_>>());
            let t = PairTable::build(&arr, axis).unwrap();
            let o: Vec<u32> = arr.order(axis).iter().map(|&x| x as u32).collect();
            let len = o.len();
            for a in 0..len {
                for b in a + 1..len {
                    prop_assert!(t.delta_swap(&o, a, b) <= 0);
                    prop_assert!(t.delta_reverse(&o, a, b) <= 0);
                }
            }
            for blk in 1..=3.min(len - 1) {
                for i in 0..=len - blk {
                    prop_assert!(t.best_relocation(&o, i, blk).unwrap().0 <= 0);
                }
            }
        }
    }
}

/// Objectives that are not of the pair form are left unchanged.
#[test]
fn polish_skips_other_objectives() {
    let mut arr = random_arr(
        1,
        (12, 10),
        1,
        0.4,
        Kernel::new(KernelKind::Gbs, 3, 3).unwrap(),
        Padding::Cyclic,
    );
    assert!(!table_fits(&arr, 0));
    assert!(PairTable::build(&arr, 0).is_err());
    let (r, c, e) = (arr.order(0), arr.order(1), arr.raw_error());
    let rep = polish(
        &mut arr,
        &[0, 1],
        8,
        usize::MAX,
        None,
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(rep.passes, 0);
    assert_eq!((arr.order(0), arr.order(1), arr.raw_error()), (r, c, e));
}

/// P-LS with restart rounds (whose first kick flips the display) and the final polish: never
/// worse than the plain run with the same seed, exact, reproducible.
#[test]
fn pls_with_flip_rounds_and_polish() {
    let cancel = AtomicBool::new(false);
    let arr = random_arr(
        5,
        (40, 36),
        1,
        0.35,
        Kernel::new(KernelKind::Gbs, 7, 7).unwrap(),
        Padding::ZerosAndOnes,
    );
    let params = |restarts, polish| PlsParams {
        search: SearchParams {
            max_iter: 800,
            segment: 100,
            seed: 3,
            ..SearchParams::default()
        },
        restarts,
        polish,
        ..PlsParams::default()
    };
    let mut plain = arr.clone();
    pls(&mut plain, &params(0, None), &cancel).unwrap();
    let run = || {
        let mut a = arr.clone();
        let rep = pls(&mut a, &params(4, Some(4)), &cancel).unwrap();
        (a, rep)
    };
    let (a, rep) = run();
    assert_eq!(rep.history.last().unwrap().0, "polish");
    assert!(a.raw_error() <= plain.raw_error());
    assert_eq!(a.raw_error(), a.full_raw(0));
    assert_eq!(a.raw_error(), a.full_raw(1));
    let best = rep
        .history
        .iter()
        .map(|h| h.1)
        .fold(f64::INFINITY, f64::min);
    assert!((a.error() - best).abs() < 1e-9);
    let (b, _) = run();
    assert_eq!((a.order(0), a.order(1)), (b.order(0), b.order(1)));
}

/// A deadline already passed stops the polish before its first pass; a later one keeps
/// the moves applied until then (the result is still exact).
#[test]
fn polish_deadline() {
    let cancel = AtomicBool::new(false);
    let arr = random_arr(
        9,
        (30, 30),
        1,
        0.4,
        Kernel::new(KernelKind::Gbs, 5, 5).unwrap(),
        Padding::ZerosAndOnes,
    );
    let mut a = arr.clone();
    let past = std::time::Instant::now();
    let rep = polish(&mut a, &[0, 1], 4, usize::MAX, Some(past), &cancel).unwrap();
    assert_eq!(rep.passes, 0);
    assert_eq!((a.order(0), a.order(1)), (arr.order(0), arr.order(1)));
    let mut b = arr.clone();
    let later = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    let rep = polish(&mut b, &[0, 1], 4, usize::MAX, Some(later), &cancel).unwrap();
    assert!(rep.passes >= 2 && b.raw_error() < arr.raw_error());
    assert_eq!(b.raw_error(), b.full_raw(0));
}
