//! AMM / Pegasos / GAMM against a naive dense implementation and the spec's hand-computed steps.

use std::sync::atomic::AtomicBool;
use vastml_core::Control;

use proptest::prelude::*;
use vastml_svm::{Amm, AmmParams, Examples, argmax_rows};

/// Naive dense AMM in the same conventions (explicit shrink of every weight, no scale trick).
struct Naive {
    lambda: f64,
    cap: usize,
    bias: f64,
    w: Vec<(usize, Vec<f64>)>,
    t: u64,
}

impl Naive {
    fn score(&self, w: &[f64], x: &[f64]) -> f64 {
        x.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() + self.bias * w[x.len()]
    }
    fn step(&mut self, x: &[f64], y: usize, n_classes: usize) {
        self.t += 1;
        let eta = 1.0 / (self.lambda * self.t as f64);
        let count =
            |w: &Vec<(usize, Vec<f64>)>, c: usize| w.iter().filter(|(k, _)| *k == c).count();
        let floor = |c: usize| {
            if count(&self.w, c) < self.cap {
                0.0
            } else {
                f64::NEG_INFINITY
            }
        };
        // true class: zero weight (while there is room) first, strict improvements
        let (mut sp, mut jp) = (floor(y), None);
        for (j, (c, w)) in self.w.iter().enumerate() {
            let s = self.score(w, x);
            if *c == y && (s > sp || jp.is_none() && sp == f64::NEG_INFINITY) {
                sp = s;
                jp = Some(j);
            }
        }
        let (mut sm, mut im, mut jm) = (f64::NEG_INFINITY, usize::MAX, None);
        for c in (0..n_classes).filter(|&c| c != y) {
            let (mut best, mut bj) = (floor(c), None);
            for (j, (cc, w)) in self.w.iter().enumerate() {
                let s = self.score(w, x);
                if *cc == c && (s > best || bj.is_none() && best == f64::NEG_INFINITY) {
                    best = s;
                    bj = Some(j);
                }
            }
            if best > sm || im == usize::MAX {
                sm = best;
                im = c;
                jm = bj;
            }
        }
        let loss = 1.0 + sm - sp;
        let f = 1.0 - 1.0 / self.t as f64;
        for (_, w) in &mut self.w {
            w.iter_mut().for_each(|v| *v *= f);
        }
        if loss > 0.0 {
            let d = x.len();
            let mut xb: Vec<f64> = x.to_vec();
            xb.push(self.bias);
            let count =
                |w: &Vec<(usize, Vec<f64>)>, c: usize| w.iter().filter(|(k, _)| *k == c).count();
            match jm {
                Some(j) => self.w[j]
                    .1
                    .iter_mut()
                    .zip(&xb)
                    .for_each(|(a, b)| *a -= eta * b),
                None => {
                    if count(&self.w, im) < self.cap {
                        self.w.push((im, xb.iter().map(|v| -eta * v).collect()));
                    }
                }
            }
            match jp {
                Some(j) => self.w[j]
                    .1
                    .iter_mut()
                    .zip(&xb)
                    .for_each(|(a, b)| *a += eta * b),
                None => {
                    if count(&self.w, y) < self.cap {
                        self.w.push((y, xb.iter().map(|v| eta * v).collect()));
                    }
                }
            }
            let _ = d;
        }
    }
}

fn lcg(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed.wrapping_add(0x9E3779B97F4A7C15);
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Dense values, CSR indptr / indices / values of the same, labels.
type Data = (Vec<f64>, Vec<i64>, Vec<i64>, Vec<f64>, Vec<usize>);

/// Random sparse-ish data: dense values with ~half zeros, plus CSR arrays of the same.
fn data(n: usize, d: usize, c: usize, seed: u64) -> Data {
    let mut r = lcg(seed);
    let mut dense = vec![0.0; n * d];
    let (mut indptr, mut idx, mut val) = (vec![0i64], Vec::new(), Vec::new());
    let mut y = Vec::new();
    for i in 0..n {
        for j in 0..d {
            // Row 0 of every example is non-zero, so exact score ties (which rounding would
            // break differently in the two implementations) have probability zero.
            if j == 0 || r() < 0.5 {
                let v = 2.0 * r() - 1.0;
                dense[i * d + j] = v;
                idx.push(j as i64);
                val.push(v);
            }
        }
        indptr.push(idx.len() as i64);
        y.push((r() * c as f64) as usize % c);
    }
    (dense, indptr, idx, val, y)
}

fn params(lambda: f64, cap: usize) -> AmmParams {
    AmmParams {
        lambda,
        max_weights_per_class: cap,
        prune_every: 0,
        prune_c: 10.0,
        bias: 1.0,
        clone_probability: 0.0,
        clone_decay: 0.99,
        budgetedsvm: false,
    }
}

fn naive_weights(nv: &Naive) -> (Vec<usize>, Vec<f64>) {
    (
        nv.w.iter().map(|(c, _)| *c).collect(),
        nv.w.iter().flat_map(|(_, w)| w.clone()).collect(),
    )
}

fn assert_close(a: &[f64], b: &[f64], rel: f64) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= rel * scale, "{x} vs {y} (scale {scale})");
    }
}

#[test]
fn hand_computed_first_steps() {
    // Spec oracle 21: lambda = 0.1, x = (1, 0), y = 0, two classes, eta = 10.
    let x = [1.0, 0.0];
    let data = Examples::dense(&x, 2).unwrap();
    let mut p = params(0.1, 5);
    p.bias = 0.0;
    let mut amm = Amm::new(p, 2, 2).unwrap();
    let cancel = AtomicBool::new(false);
    amm.epoch(&data, &[0], false, 0, false, Control::new(&cancel))
        .unwrap();
    assert_eq!(amm.weight_classes(), &[1, 0]);
    assert_eq!(amm.weights(), vec![-10.0, 0.0, 0.0, 10.0, 0.0, 0.0]);
    // t = 2: loss = 1 + 0 (class 1 has its zero weight) - 10 < 0: only the shrink by 1/2.
    amm.epoch(&data, &[0], false, 0, false, Control::new(&cancel))
        .unwrap();
    assert_eq!(amm.steps(), 2);
    assert_eq!(amm.weights(), vec![-5.0, 0.0, 0.0, 5.0, 0.0, 0.0]);
}

#[test]
fn one_weight_per_class_is_multiclass_pegasos() {
    // Spec oracle 19: AMM with one weight per class and no pruning == CS-Pegasos.
    let (dense, _, _, _, y) = data(300, 6, 3, 1);
    let ex = Examples::dense(&dense, 6).unwrap();
    let mut amm = Amm::new(params(0.01, 1), 6, 3).unwrap();
    let cancel = AtomicBool::new(false);
    for _ in 0..2 {
        amm.epoch(&ex, &y, false, 0, false, Control::new(&cancel))
            .unwrap();
    }
    let mut nv = Naive {
        lambda: 0.01,
        cap: 1,
        bias: 1.0,
        w: (0..3).map(|c| (c, vec![0.0; 7])).collect(),
        t: 0,
    };
    for _ in 0..2 {
        for i in 0..300 {
            nv.step(&dense[i * 6..(i + 1) * 6], y[i], 3);
        }
    }
    let (cls, w) = naive_weights(&nv);
    assert_eq!(amm.weight_classes(), cls.as_slice());
    assert_close(&amm.weights(), &w, 1e-9);
}

#[test]
fn binary_pegasos_equivalence() {
    // Spec oracle 20: CS-Pegasos(lambda) on (w1, w2) == binary Pegasos(lambda/2) on u = w1 - w2.
    let (dense, _, _, _, y) = data(200, 4, 2, 2);
    let ex = Examples::dense(&dense, 4).unwrap();
    let lambda = 0.05;
    let mut amm = Amm::new(params(lambda, 1), 4, 2).unwrap();
    amm.epoch(&ex, &y, false, 0, false, Control::none())
        .unwrap();
    let w = amm.weights();
    let (c0, c1) = if amm.weight_classes()[0] == 0 {
        (0, 1)
    } else {
        (1, 0)
    };
    let diff: Vec<f64> = (0..5).map(|k| w[c1 * 5 + k] - w[c0 * 5 + k]).collect();
    // binary Pegasos with lambda' = lambda/2, label +1 for class 1, hinge max(0, 1 - y u.x)
    // and step 1/(lambda' t) = 2 eta; the CS update moves u by 2 eta y x.
    let lp = lambda / 2.0;
    let mut u = vec![0.0; 5];
    for (i, &yi) in y.iter().enumerate() {
        let t = (i + 1) as f64;
        let mut xb = dense[i * 4..(i + 1) * 4].to_vec();
        xb.push(1.0);
        let s = if yi == 1 { 1.0 } else { -1.0 };
        let m = s * xb.iter().zip(&u).map(|(a, b)| a * b).sum::<f64>();
        u.iter_mut().for_each(|v| *v *= 1.0 - 1.0 / t);
        if 1.0 - m > 0.0 {
            let eta = 1.0 / (lp * t);
            u.iter_mut().zip(&xb).for_each(|(a, b)| *a += eta * s * b);
        }
    }
    assert_close(&diff, &u, 1e-9);
}

#[test]
fn csr_equals_dense() {
    let (dense, p, i, v, y) = data(400, 8, 3, 3);
    let cancel = AtomicBool::new(false);
    let mut a = Amm::new(params(0.001, 10), 8, 3).unwrap();
    let mut b = a.clone();
    a.epoch(
        &Examples::dense(&dense, 8).unwrap(),
        &y,
        true,
        5,
        false,
        Control::new(&cancel),
    )
    .unwrap();
    b.epoch(
        &Examples::csr(&p, &i, &v, 8).unwrap(),
        &y,
        true,
        5,
        false,
        Control::new(&cancel),
    )
    .unwrap();
    assert_eq!(a.weight_classes(), b.weight_classes());
    assert_close(&a.weights(), &b.weights(), 1e-12);
}

#[test]
fn pruning_removes_within_threshold_and_keeps_a_weight_per_class() {
    let (dense, _, _, _, y) = data(600, 5, 3, 4);
    let ex = Examples::dense(&dense, 5).unwrap();
    let cancel = AtomicBool::new(false);
    let mut p = params(0.01, 8);
    let mut amm = Amm::new(p.clone(), 5, 3).unwrap();
    amm.epoch(&ex, &y, false, 0, false, Control::new(&cancel))
        .unwrap();
    for c in [0.0, 0.5, 5.0, 1e6] {
        p.prune_c = c;
        let mut m = Amm::from_parts(
            p.clone(),
            5,
            3,
            &amm.weights(),
            amm.weight_classes(),
            amm.steps(),
        )
        .unwrap();
        let before = m.weights();
        let classes_before = m.weight_classes().to_vec();
        let n_before = m.n_weights();
        let removed = m.prune();
        assert_eq!(m.n_weights(), n_before - removed);
        // The removed set: weights of `before` absent from the survivors.
        let after = m.weights();
        let mut removed_sq = 0.0;
        let mut kept = 0;
        let mut norms = vec![];
        for (j, wj) in before.chunks(6).enumerate() {
            let nrm: f64 = wj.iter().map(|v| v * v).sum();
            norms.push(nrm);
            if kept < m.n_weights() && after[kept * 6..(kept + 1) * 6] == *wj {
                kept += 1;
            } else {
                removed_sq += nrm;
                let _ = classes_before[j];
            }
        }
        let threshold = c / ((amm.steps() - 1) as f64 * 0.01);
        assert!(removed_sq.sqrt() <= threshold * (1.0 + 1e-12));
        for cl in 0..3 {
            let had = classes_before.contains(&cl);
            let has = m.weight_classes().contains(&cl);
            assert_eq!(had, has, "class {cl} lost its last weight");
        }
        if c == 0.0 {
            assert_eq!(removed, 0);
        }
        if c == 1e6 {
            // everything prunable goes: one weight per (represented) class is left
            let represented = (0..3).filter(|cl| classes_before.contains(cl)).count();
            assert_eq!(m.n_weights(), represented);
        }
    }
}

#[test]
fn gamm_with_zero_probability_is_amm_and_clones_are_bounded() {
    let (dense, _, _, _, y) = data(500, 4, 2, 5);
    let ex = Examples::dense(&dense, 4).unwrap();
    let cancel = AtomicBool::new(false);
    let mut a = Amm::new(params(0.001, 30), 4, 2).unwrap();
    let mut p = params(0.001, 30);
    p.clone_probability = 0.0;
    let mut b = Amm::new(p.clone(), 4, 2).unwrap();
    a.epoch(&ex, &y, true, 9, false, Control::new(&cancel))
        .unwrap();
    b.epoch(&ex, &y, true, 9, false, Control::new(&cancel))
        .unwrap();
    assert_eq!(a.weights(), b.weights());
    p.clone_probability = 0.5;
    p.clone_decay = 0.9;
    let mut g = Amm::new(p, 4, 2).unwrap();
    let mut clones = 0;
    for e in 0..3 {
        clones += g
            .epoch(&ex, &y, true, e, false, Control::new(&cancel))
            .unwrap()
            .n_cloned;
    }
    assert!(clones > 0);
    // p_k = 0.5 * 0.9^k: after k clones p = 0.5 * 0.9^k.
    assert!((g.clone_probability() - 0.5 * 0.9f64.powi(clones as i32)).abs() < 1e-12);
}

#[test]
fn batch_amm_reassignment_counts_changes() {
    let (dense, _, _, _, y) = data(400, 3, 2, 6);
    let ex = Examples::dense(&dense, 3).unwrap();
    let cancel = AtomicBool::new(false);
    let mut m = Amm::new(params(0.001, 10), 3, 2).unwrap();
    m.epoch(&ex, &y, true, 0, false, Control::new(&cancel))
        .unwrap();
    let changed = m.reassign(&ex, &y).unwrap();
    assert_eq!(changed, 400);
    m.epoch(&ex, &y, true, 1, true, Control::new(&cancel))
        .unwrap();
    m.reassign(&ex, &y).unwrap();
    // Without training in between, re-assigning changes nothing.
    assert_eq!(m.reassign(&ex, &y).unwrap(), 0);
    // A model trained on other labels assigns differently.
    let flipped: Vec<usize> = y.iter().map(|&c| 1 - c).collect();
    m.epoch(&ex, &flipped, true, 2, true, Control::new(&cancel))
        .unwrap();
    assert!(m.reassign(&ex, &y).unwrap() > 0);
}

#[test]
fn theorem4_tangent_construction_is_one_nearest_neighbour() {
    // Spec oracle 24: weights [2 x_t; -||x_t||^2] with bias feature 1 reproduce 1-NN labels.
    let (pts, _, _, _, lab) = data(40, 2, 3, 7);
    let mut w = Vec::new();
    for i in 0..40 {
        let x = &pts[i * 2..i * 2 + 2];
        w.extend([2.0 * x[0], 2.0 * x[1], -(x[0] * x[0] + x[1] * x[1])]);
    }
    let counts: Vec<usize> = (0..3)
        .map(|c| lab.iter().filter(|&&l| l == c).count())
        .collect();
    let mut p = params(0.01, *counts.iter().max().unwrap());
    p.max_weights_per_class = p.max_weights_per_class.max(2);
    let m = Amm::from_parts(p, 2, 3, &w, &lab, 0).unwrap();
    let (q, _, _, _, _) = data(100, 2, 3, 8);
    // Scores of the tangent weights are ||q||^2 - ||q - x_t||^2; subtracting ||q||^2 makes
    // them negative, so compare on queries shifted far enough that the zero weight never wins.
    let scores = m.decision(&Examples::dense(&q, 2).unwrap()).unwrap();
    let pred = argmax_rows(&scores, 3);
    let mut checked = 0;
    for (k, qq) in q.chunks(2).enumerate() {
        let qn = qq[0] * qq[0] + qq[1] * qq[1];
        let nn = (0..40)
            .min_by(|&a, &b| {
                let da = (qq[0] - pts[2 * a]).powi(2) + (qq[1] - pts[2 * a + 1]).powi(2);
                let db = (qq[0] - pts[2 * b]).powi(2) + (qq[1] - pts[2 * b + 1]).powi(2);
                da.total_cmp(&db)
            })
            .unwrap();
        let dmin = (qq[0] - pts[2 * nn]).powi(2) + (qq[1] - pts[2 * nn + 1]).powi(2);
        if qn - dmin > 0.0 {
            assert_eq!(pred[k], lab[nn]);
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} queries were checked");
}

#[test]
fn bad_parameters_and_inputs_are_errors() {
    let mut p = params(0.0, 3);
    assert!(Amm::new(p.clone(), 2, 2).is_err());
    p.lambda = 1.0;
    assert!(Amm::new(p.clone(), 2, 1).is_err());
    assert!(Amm::new(p.clone(), 0, 2).is_err());
    p.clone_probability = 2.0;
    assert!(Amm::new(p.clone(), 2, 2).is_err());
    p.clone_probability = 0.0;
    let mut m = Amm::new(p, 2, 2).unwrap();
    let x = [1.0, 2.0];
    let cancel = AtomicBool::new(false);
    let one = Examples::dense(&x, 2).unwrap();
    assert!(
        m.epoch(&one, &[2], false, 0, false, Control::new(&cancel))
            .is_err()
    );
    assert!(
        m.epoch(&one, &[0, 1], false, 0, false, Control::new(&cancel))
            .is_err()
    );
    assert!(Examples::dense(&[f64::NAN, 1.0], 2).is_err());
    assert!(Examples::csr(&[0, 2], &[0, 5], &[1.0, 1.0], 3).is_err());
    assert!(Examples::csr(&[0, 3], &[0, 1], &[1.0, 1.0], 3).is_err());
    let cancel = AtomicBool::new(true);
    assert!(
        m.epoch(&one, &[0], false, 0, false, Control::new(&cancel))
            .is_err()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Scaled representation == naive dense AMM (spec oracle 22), weights per class <= cap,
    /// and the norm bound ||W|| <= 2/lambda (no pruning) for ||x|| <= 1.
    #[test]
    fn scaled_equals_naive(seed in 0u64..1000, cap in 1usize..6, n_classes in 2usize..5, lambda in 0.01f64..1.0) {
        let d = 4;
        let (mut dense, _, _, _, y) = data(120, d, n_classes, seed);
        for row in dense.chunks_mut(d) {
            let nrm: f64 = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            // Only shrink (normalising would make one-feature rows identical: exact ties).
            if nrm > 1.0 { row.iter_mut().for_each(|v| *v /= nrm); }
        }
        let mut p = params(lambda, cap);
        p.bias = 0.5;
        let mut m = Amm::new(p, d, n_classes).unwrap();
        m.epoch(&Examples::dense(&dense, d).unwrap(), &y, false, 0, false, Control::none()).unwrap();
        let mut nv = Naive { lambda, cap, bias: 0.5, w: if cap == 1 { (0..n_classes).map(|c| (c, vec![0.0; d + 1])).collect() } else { vec![] }, t: 0 };
        for i in 0..120 { nv.step(&dense[i * d..(i + 1) * d], y[i], n_classes); }
        let (cls, w) = naive_weights(&nv);
        prop_assert_eq!(m.weight_classes(), cls.as_slice());
        let got = m.weights();
        let scale = w.iter().fold(1e-300f64, |a, v| a.max(v.abs()));
        for (a, b) in got.iter().zip(&w) { prop_assert!((a - b).abs() <= 1e-9 * scale); }
        for c in 0..n_classes { prop_assert!(cls.iter().filter(|&&k| k == c).count() <= cap); }
        let norm: f64 = got.iter().map(|v| v * v).sum::<f64>().sqrt();
        prop_assert!(norm <= 2.0 / lambda * (1.0 + 1e-9) + 1e-9, "norm {} > 2/lambda", norm);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Theorem 3's invariant with pruning: ||W^(t)|| <= (2 + c) / lambda when ||x|| <= 1, and
    /// the per-class cap holds.
    #[test]
    fn norm_bound_with_pruning(seed in 0u64..1000, c in 0.0f64..20.0, every in 3u64..50, lambda in 0.01f64..1.0) {
        let d = 3;
        let (mut dense, _, _, _, y) = data(200, d, 3, seed);
        for row in dense.chunks_mut(d) {
            let nrm: f64 = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            if nrm > 1.0 { row.iter_mut().for_each(|v| *v /= nrm); }
        }
        let mut p = params(lambda, 6);
        p.bias = 0.0;
        p.prune_every = every;
        p.prune_c = c;
        let mut m = Amm::new(p, d, 3).unwrap();
        let ex = Examples::dense(&dense, d).unwrap();
        for e in 0..2 {
            m.epoch(&ex, &y, true, e, false, Control::none()).unwrap();
            let norm: f64 = m.weights().iter().map(|v| v * v).sum::<f64>().sqrt();
            prop_assert!(norm <= (2.0 + c) / lambda * (1.0 + 1e-9), "{} > {}", norm, (2.0 + c) / lambda);
            for cl in 0..3 { prop_assert!(m.weight_classes().iter().filter(|&&k| k == cl).count() <= 6); }
        }
    }
}
