//! KMax (spec §9.6) against its definition: the cuts are the largest-error rows outside the
//! exclusion zones, the block order is the best of all block orders (brute force), and the
//! junction-cost prediction equals the exact error change.

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_order::kmax::{kmax_cuts, kmax_step};
use vastml_order::{Arrangement, ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding};

const PADDINGS: [Padding; 4] = [
    Padding::ZerosAndOnes,
    Padding::Extension,
    Padding::Zero,
    Padding::Cyclic,
];

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

fn check(seed: u64) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let m = rng.random_range(12..=40);
    let n = rng.random_range(2..=20);
    let colours = if rng.random_bool(0.7) { 1 } else { 3 };
    let matrix = if colours == 1 {
        let v: Vec<u8> = (0..m * n).map(|_| u8::from(rng.random_bool(0.4))).collect();
        Matrix::binary(m, n, &v).unwrap()
    } else {
        let v: Vec<u32> = (0..m * n).map(|_| rng.random_range(0..3)).collect();
        Matrix::categorical(m, n, &v, 3).unwrap()
    };
    let kr = 2 * rng.random_range(0..=2) + 1;
    let kc = 2 * rng.random_range(0..=2) + 1;
    let kind = [KernelKind::Gbs, KernelKind::Gbe, KernelKind::CrossGbs][rng.random_range(0..3)];
    let padding = PADDINGS[rng.random_range(0..4)];
    let obj = Objective {
        kernel: Kernel::new(kind, kr, kc).unwrap(),
        padding,
        kind: ErrorKind::Abs,
    };
    let axis = rng.random_range(0..2);
    let mut arr = Arrangement::new(matrix, obj, None, None).unwrap();
    let k = rng.random_range(1..=4);
    let len = arr.len(axis);
    let krow = arr.kernel_rows(axis);

    // cuts: eligible, spaced, and greedy by error
    let cuts = kmax_cuts(&arr, axis, k);
    let errs: Vec<i128> = (0..len).map(|p| arr.row_raw_error(axis, p)).collect();
    let eligible = |p: usize, picked: &[usize]| {
        p >= krow && len - p >= krow && picked.iter().all(|&q| p.abs_diff(q) > krow)
    };
    assert!(cuts.len() <= k);
    for (i, &c) in cuts.iter().enumerate() {
        let others: Vec<usize> = cuts.iter().copied().filter(|&q| q != c).collect();
        assert!(
            eligible(c, &others),
            "cut {c} of {cuts:?} breaks the spacing ({i})"
        );
    }
    let mut by_err = cuts.clone();
    by_err.sort_by(|&a, &b| errs[b].cmp(&errs[a]).then(a.cmp(&b)));
    for (i, &c) in by_err.iter().enumerate() {
        // no eligible position (given the earlier picks) had a larger error
        for p in 0..len {
            if eligible(p, &by_err[..i]) {
                assert!(
                    errs[p] < errs[c] || (errs[p] == errs[c] && p >= c),
                    "pick {i} is {c} but {p} was eligible with a larger error"
                );
            }
        }
    }
    if cuts.len() < k {
        assert!((0..len).all(|p| !eligible(p, &cuts)), "stopped early");
    }

    // block order: the best of all orders, and the prediction is exact
    let before = arr.clone();
    let start = arr.raw_error();
    let res = kmax_step(&mut arr, axis, k).unwrap();
    assert_eq!(res.cuts, cuts);
    assert_eq!(arr.raw_error(), arr.full_raw(0));
    assert_eq!(arr.raw_error(), start + res.delta);
    assert!(res.delta <= 0);
    assert_eq!(res.predicted, res.delta, "{padding:?} kernel {kr}x{kc}");
    let order0 = before.order(axis);
    let mut best = i128::MAX;
    for perm in permutations(res.blocks.len()) {
        let o: Vec<usize> = perm
            .iter()
            .flat_map(|&b| order0[res.blocks[b].0..res.blocks[b].1].iter().copied())
            .collect();
        let mut t = before.clone();
        t.set_order(axis, &o).unwrap();
        best = best.min(t.raw_error());
    }
    assert_eq!(arr.raw_error(), best, "not the best block order");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(80))]
    #[test]
    fn kmax_matches_its_definition(seed in any::<u64>()) {
        check(seed);
    }
}
