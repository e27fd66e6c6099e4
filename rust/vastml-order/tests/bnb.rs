//! Branch and bound == exhaustive search (spec §18 oracles 7, 8 and 10).

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use vastml_order::bnb::{
    Bound, PairCosts, branch_and_bound, branch_and_bound_until, convomap_row_order, exhaustive,
};
use vastml_order::{
    Arrangement, Control, ErrorKind, Kernel, KernelKind, Matrix, Objective, OrderError, Padding,
    usable_kernel_side,
};

fn objective(kind: KernelKind, rows: usize, cols: usize) -> Objective {
    Objective {
        kernel: Kernel::new(kind, rows, cols).unwrap(),
        padding: Padding::Zero,
        kind: ErrorKind::Abs,
    }
}

fn error_of(m: &Matrix, obj: &Objective, order: &[usize]) -> f64 {
    Arrangement::new(m.clone(), obj.clone(), Some(order), None)
        .unwrap()
        .error()
}

#[test]
fn staircase_oracle() {
    let rows = [
        "0000001", "0000011", "0000110", "0001110", "0011100", "0111000", "1110000", "1100000",
    ];
    let shuffled = [3, 6, 1, 7, 0, 5, 2, 4];
    let vals: Vec<u8> = shuffled
        .iter()
        .flat_map(|&i| rows[i].bytes().map(|b| b - b'0'))
        .collect();
    let m = Matrix::binary(8, 7, &vals).unwrap();
    let obj = objective(KernelKind::Gbs, 3, 3);
    let pc = PairCosts::convomap(&m, &obj, None).unwrap();
    for bound in [Bound::Fast, Bound::Slow] {
        let r = branch_and_bound(&pc, None, bound, Control::none()).unwrap();
        let want = [4, 2, 6, 0, 7, 5, 1, 3];
        let mut rev = want;
        rev.reverse();
        assert!(r.order == want || r.order == rev, "{:?}", r.order);
        assert!((error_of(&m, &obj, &r.order) - 6.4).abs() < 1e-9);
    }
}

#[test]
fn convomap_row_order_is_the_search_and_the_error_of_its_order() {
    let vals: Vec<u8> = (0..6 * 5)
        .map(|i| ((i * 7 + i / 5) % 3 == 0) as u8)
        .collect();
    let m = Matrix::binary(6, 5, &vals).unwrap();
    let obj = objective(KernelKind::Gbs, 3, 3);
    let cols = [4, 2, 0, 1, 3];
    let pc = PairCosts::convomap(&m, &obj, Some(&cols)).unwrap();
    let want = branch_and_bound(&pc, None, Bound::Slow, Control::none()).unwrap();
    let (r, err) = convomap_row_order(
        m.clone(),
        obj.clone(),
        Some(&cols),
        None,
        Bound::Slow,
        Control::none(),
    )
    .unwrap();
    assert_eq!(r.order, want.order);
    let direct = Arrangement::new(m, obj, Some(&r.order), Some(&cols))
        .unwrap()
        .error();
    assert_eq!(err, direct);
}

#[test]
fn hampath_reduction() {
    // incidence matrices: path P5 (Hamiltonian path) and star K1,3 (none); cross 3x1 kernel
    // counts vertical transitions only.
    let path: Vec<(usize, usize)> = vec![(0, 1), (1, 2), (2, 3), (3, 4)];
    let star: Vec<(usize, usize)> = vec![(0, 1), (0, 2), (0, 3)];
    for (edges, nv, has_path) in [(path, 5, true), (star, 4, false)] {
        let ne = edges.len();
        let mut v = vec![0u8; nv * ne];
        for (e, &(a, b)) in edges.iter().enumerate() {
            v[a * ne + e] = 1;
            v[b * ne + e] = 1;
        }
        let m = Matrix::binary(nv, ne, &v).unwrap();
        let obj = objective(KernelKind::CrossGbs, 3, 1);
        let pc = PairCosts::convomap(&m, &obj, None).unwrap();
        let r = branch_and_bound(&pc, None, Bound::Slow, Control::none()).unwrap();
        // vertical transitions: for each column, count 1-0 changes including the zero padding
        let order = r.order;
        let mut trans = 0;
        for e in 0..ne {
            let col: Vec<u8> = order.iter().map(|&p| v[p * ne + e]).collect();
            let mut prev = 0;
            for &x in col.iter().chain(std::iter::once(&0)) {
                trans += usize::from(x != prev);
                prev = x;
            }
        }
        let target = 4 * ne - 2 * (nv - 1);
        if has_path {
            assert_eq!(trans, target);
        } else {
            assert!(trans > target);
        }
    }
}

/// Pseudo-random binary rows (an LCG: no structure for the bound to exploit).
fn random_rows(rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut x = seed;
    let v: Vec<u8> = (0..rows * cols)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            u8::from(x >> 62 == 0)
        })
        .collect();
    Matrix::binary(rows, cols, &v).unwrap()
}

#[test]
fn deadline_keeps_a_valid_order_and_says_it_is_not_proven() {
    let m = random_rows(30, 40, 7);
    let pc = PairCosts::convomap(&m, &objective(KernelKind::CrossGbs, 3, 3), None).unwrap();
    let start: Vec<usize> = (0..30).collect();
    let cancel = AtomicBool::new(false);
    let past = Some(std::time::Instant::now());
    let (r, exact) = branch_and_bound_until(&pc, Some(&start), Bound::Slow, past, &cancel).unwrap();
    assert!(!exact, "30 random rows cannot be solved in 256 nodes");
    let mut sorted = r.order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, start);
    assert_eq!(pc.order_cost(&r.order), r.cost);
    assert!(r.cost <= pc.order_cost(&start));
    // a deadline that does not bind changes nothing
    let m = random_rows(9, 12, 3);
    let pc = PairCosts::convomap(&m, &objective(KernelKind::CrossGbs, 3, 3), None).unwrap();
    let later = std::time::Instant::now().checked_add(std::time::Duration::from_secs(3600));
    let (r, exact) = branch_and_bound_until(&pc, None, Bound::Slow, later, &cancel).unwrap();
    assert!(exact);
    assert_eq!(r.cost, exhaustive(&pc).cost);
}

#[test]
fn the_hook_sees_each_better_incumbent_and_a_true_stops_with_the_best_so_far() {
    let m = random_rows(10, 14, 5);
    let pc = PairCosts::convomap(&m, &objective(KernelKind::CrossGbs, 3, 3), None).unwrap();
    let start: Vec<usize> = (0..10).collect();
    let seen = std::sync::Mutex::new(Vec::new());
    let hook = |it: usize, cost: f64, order: &[usize]| {
        assert_eq!(pc.order_cost(order) as f64, cost);
        seen.lock().unwrap().push((it, cost));
        false
    };
    // one thread: how far the other subtrees get before they see a stop depends on timing,
    // so the node counts compared below are only deterministic on one
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let full = one.install(|| {
        branch_and_bound(
            &pc,
            Some(&start),
            Bound::Slow,
            Control::none().with_hook(&hook, 1),
        )
    });
    let full = full.unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(!seen.is_empty() && !full.stopped);
    assert_eq!(full.cost, exhaustive(&pc).cost);
    // iterations 1..k in order; each report beats the incumbent of the ones before it
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        (1..=seen.len()).collect::<Vec<_>>()
    );
    assert!(seen.iter().all(|s| s.1 < pc.order_cost(&start) as f64));
    let stop = |_: usize, _: f64, _: &[usize]| true;
    let r = one.install(|| {
        branch_and_bound(
            &pc,
            Some(&start),
            Bound::Slow,
            Control::none().with_hook(&stop, 1),
        )
    });
    let r = r.unwrap();
    assert!(r.stopped && r.nodes < full.nodes);
    // on the shared pool too a true stops the search with a valid order
    let r2 = branch_and_bound(
        &pc,
        Some(&start),
        Bound::Slow,
        Control::none().with_hook(&stop, 1),
    )
    .unwrap();
    assert!(r2.stopped);
    let mut sorted2 = r2.order.clone();
    sorted2.sort_unstable();
    assert_eq!(sorted2, start);
    assert_eq!(pc.order_cost(&r2.order), r2.cost);
    let mut sorted = r.order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, start);
    assert_eq!(pc.order_cost(&r.order), r.cost);
    let cancel = AtomicBool::new(true);
    let e = branch_and_bound(&pc, Some(&start), Bound::Slow, Control::new(&cancel)).unwrap_err();
    assert_eq!(e, OrderError::Cancelled);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]
    #[test]
    fn bnb_equals_exhaustive(
        rows in 1usize..=8,
        cols in 1usize..=7,
        bits in proptest::collection::vec(any::<bool>(), 56),
        kernel in 0usize..4,
        colours in 1usize..=3,
    ) {
        let (m, obj) = {
            let obj = match kernel {
                0 => objective(KernelKind::CrossGbs, 3, 3),
                1 => objective(KernelKind::CrossGbe, 5, 5),
                2 => objective(KernelKind::Gbs, 3, 3),
                _ => objective(KernelKind::Gbs, 5, 3),
            };
            let m = if colours == 1 {
                let v: Vec<u8> = bits[..rows * cols].iter().map(|&b| u8::from(b)).collect();
                Matrix::binary(rows, cols, &v).unwrap()
            } else {
                let v: Vec<u32> = (0..rows * cols)
                    .map(|i| (u32::from(bits[i]) + u32::from(bits[(i * 7 + 3) % 56])) % colours as u32)
                    .collect();
                Matrix::categorical(rows, cols, &v, colours).unwrap()
            };
            (m, obj)
        };
        let pc = PairCosts::convomap(&m, &obj, None).unwrap();
        let ex = exhaustive(&pc);
        for bound in [Bound::Fast, Bound::Slow] {
            let r = branch_and_bound(&pc, None, bound, Control::none()).unwrap();
            prop_assert_eq!(r.cost, ex.cost);
            prop_assert_eq!(pc.order_cost(&r.order), r.cost);
            // the cost is the error up to a constant: same error as the exhaustive optimum
            let (e1, e2) = (error_of(&m, &obj, &r.order), error_of(&m, &obj, &ex.order));
            prop_assert!((e1 - e2).abs() < 1e-9, "{} vs {}", e1, e2);
        }
    }
}

#[test]
fn absurd_kernels_are_refused_before_any_work() {
    // 63 rows is within the weight cap but longer than a 24-row matrix can use (2 * 24 + 1, or 61).
    let m = Matrix::binary(24, 18, &[0u8; 24 * 18]).unwrap();
    let err =
        Arrangement::new(m.clone(), objective(KernelKind::Gbs, 63, 3), None, None).unwrap_err();
    assert!(
        matches!(
            err,
            OrderError::InvalidParameter {
                name: "kernel_size",
                ..
            }
        ),
        "{err}"
    );
    assert!(Arrangement::new(m, objective(KernelKind::Gbs, 49, 37), None, None).is_ok());
    // a billion-wide kernel is refused by its size alone, without allocating its weights
    let err = Kernel::new(KernelKind::Gbs, 1_000_000_001, 3).unwrap_err();
    assert!(matches!(
        err,
        OrderError::InvalidParameter {
            name: "kernel_size",
            ..
        }
    ));
    assert_eq!(usable_kernel_side(1), 61);
    assert_eq!(usable_kernel_side(100), 201);
}
