//! Branch and bound returns the same order whatever the thread count and timing: among
//! optimal orders, the initial one if it is optimal, else one whose first row is the
//! smallest first row of any optimal order (the subtree tie-break), checked against an
//! enumeration of all orders; and the same order run after run on 1, 2 and 8 threads, with
//! busy threads competing for the cores.

mod common;
use common::{lcg, under_load};
use vastml_order::bnb::{Bound, PairCosts, branch_and_bound};
use vastml_order::{Control, ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding};

/// Symmetric costs in {0, 1, 2} at distances 1 and 2: many orders tie.
fn tie_heavy(n: usize, seed: u64) -> PairCosts {
    let mut x = seed;
    let tables = (0..2)
        .map(|_| {
            let mut c = vec![0u64; n * n];
            for a in 0..n {
                for b in a + 1..n {
                    let v = lcg(&mut x) % 3;
                    c[a * n + b] = v;
                    c[b * n + a] = v;
                }
            }
            c
        })
        .collect();
    PairCosts::new(n, tables).unwrap()
}

/// ConvoMap costs of rows drawn from a few distinct patterns (duplicate rows tie).
fn duplicate_rows(n: usize, seed: u64) -> PairCosts {
    let mut x = seed;
    let patterns: Vec<Vec<u8>> = (0..4)
        .map(|_| (0..12).map(|_| u8::from(lcg(&mut x) % 2 == 0)).collect())
        .collect();
    let v: Vec<u8> = (0..n)
        .flat_map(|_| patterns[(lcg(&mut x) % 4) as usize].clone())
        .collect();
    let m = Matrix::binary(n, 12, &v).unwrap();
    let obj = Objective {
        kernel: Kernel::new(KernelKind::CrossGbs, 3, 3).unwrap(),
        padding: Padding::Zero,
        kind: ErrorKind::Abs,
    };
    PairCosts::convomap(&m, &obj, None).unwrap()
}

/// (optimal cost, smallest first row of an optimal order read from its smaller end), by
/// enumerating every order.
fn enumerate(pc: &PairCosts) -> (u64, usize) {
    fn rec(pc: &PairCosts, order: &mut Vec<usize>, used: &mut [bool], best: &mut (u64, usize)) {
        let n = pc.n();
        if order.len() == n {
            let key = (pc.order_cost(order), order[0].min(order[n - 1]));
            *best = (*best).min(key);
            return;
        }
        for u in 0..n {
            if !used[u] {
                used[u] = true;
                order.push(u);
                rec(pc, order, used, best);
                order.pop();
                used[u] = false;
            }
        }
    }
    let mut best = (u64::MAX, usize::MAX);
    rec(pc, &mut Vec::new(), &mut vec![false; pc.n()], &mut best);
    best
}

fn run_on(threads: usize, pc: &PairCosts, initial: Option<&[usize]>, bound: Bound) -> Vec<usize> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| branch_and_bound(pc, initial, bound, Control::none()))
        .unwrap()
        .order
}

#[test]
fn the_tie_break_is_the_initial_order_else_the_smallest_first_row() {
    for seed in 0..24 {
        let pc = tie_heavy(8, seed);
        let (opt, first) = enumerate(&pc);
        for bound in [Bound::Fast, Bound::Slow] {
            // the identity as the initial order: it wins only when it is optimal
            let identity: Vec<usize> = (0..8).collect();
            let order = run_on(2, &pc, Some(&identity), bound);
            assert_eq!(pc.order_cost(&order), opt, "seed {seed}");
            if pc.order_cost(&identity) == opt {
                assert_eq!(order, identity, "seed {seed}");
            } else {
                assert_eq!(order[0], first, "seed {seed} {bound:?}: {order:?}");
                assert!(order[0] < order[7]);
            }
        }
    }
}

#[test]
fn same_order_on_any_thread_count_and_under_load() {
    let cases: Vec<(PairCosts, Bound)> = (0..6)
        .flat_map(|seed| {
            [
                (tie_heavy(12, seed), Bound::Slow),
                (tie_heavy(10, 100 + seed), Bound::Fast),
                (duplicate_rows(14, 200 + seed), Bound::Slow),
            ]
        })
        .collect();
    for (i, (pc, bound)) in cases.iter().enumerate() {
        let start: Vec<usize> = (0..pc.n()).rev().collect();
        for initial in [None, Some(start.as_slice())] {
            let want = run_on(1, pc, initial, *bound);
            for threads in [1, 2, 8] {
                for _ in 0..4 {
                    assert_eq!(run_on(threads, pc, initial, *bound), want, "case {i}");
                }
            }
            let loaded = under_load(3, || {
                (0..4)
                    .map(|_| run_on(8, pc, initial, *bound))
                    .collect::<Vec<_>>()
            });
            assert!(loaded.iter().all(|o| *o == want), "case {i} under load");
        }
    }
}
