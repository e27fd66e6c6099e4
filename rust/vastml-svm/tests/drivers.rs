//! The reporting drivers (`Amm::fit`, `Bsgd::fit`, `arow_one_vs_rest`, `llsvm_fit`) against the
//! single-pass calls they replace, their hooks, stops and cancellation.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use vastml_core::Control;
use vastml_svm::{
    Amm, AmmParams, Bsgd, BsgdParams, DcdOptions, Examples, FitOutcome, Kernel, LlsvmModel,
    LlsvmParams, Maintenance, Nystrom, Pass, Schedule, SvmError, dual_cd, llsvm_decision,
    llsvm_fit,
};

fn lcg(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed.wrapping_add(0x9E3779B97F4A7C15);
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `n` points in 3-D, three classes by the largest coordinate (noisy).
fn data(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut r = lcg(seed);
    let x: Vec<f64> = (0..n * 3).map(|_| 2.0 * r() - 1.0).collect();
    let y = x
        .chunks(3)
        .map(|p| {
            let q = [p[0] + 0.2 * r(), p[1], p[2]];
            (0..3).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap()
        })
        .collect();
    (x, y)
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|a| a.to_bits()).collect()
}

#[test]
fn amm_fit_equals_the_passes_it_schedules_and_reports_each() {
    let (x, y) = data(400, 1);
    let ex = Examples::dense(&x, 3).unwrap();
    let params = AmmParams {
        lambda: 1e-3,
        max_weights_per_class: 4,
        prune_every: 100,
        budgetedsvm: true,
        ..AmmParams::default()
    };
    let seeds = [5, 6, 7, 8];
    let seen = Mutex::new(Vec::new());
    let hook = |it: usize, obj: f64, n: &usize| {
        seen.lock().unwrap().push((it, obj.is_nan(), *n));
        false
    };
    let mut fitted = Amm::new(params.clone(), 3, 3).unwrap();
    let schedule = Schedule {
        seeds: &seeds,
        shuffle: true,
        online: false,
    };
    let out = fitted
        .fit(&ex, &y, &schedule, Control::none().with_hook(&hook, 1))
        .unwrap();
    assert_eq!(out, FitOutcome::ran(4));
    // the schedule by hand: BudgetedSVM's batch AMM (initial pass, then batch passes with a
    // reassignment before all but the first)
    let mut by_hand = Amm::new(params.clone(), 3, 3).unwrap();
    let kind = |e: usize| match e {
        0 => Pass::Initial,
        _ => Pass::Batch,
    };
    for (e, &s) in seeds.iter().enumerate() {
        if e > 1 {
            by_hand.reassign(&ex, &y).unwrap();
        }
        by_hand
            .epoch_with(&ex, &y, true, s, kind(e), Control::none())
            .unwrap();
    }
    assert_eq!(bits(&fitted.weights()), bits(&by_hand.weights()));
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert!(seen.iter().all(|s| s.1));
    assert_eq!(seen[3].2, fitted.n_weights());
}

#[test]
fn a_hook_stops_cleanly_and_a_raised_flag_cancels() {
    let (x, y) = data(300, 2);
    let ex = Examples::dense(&x, 3).unwrap();
    let params = BsgdParams {
        lambda: 1e-3,
        budget: 15,
        kernel: Kernel::Gaussian { gamma: 1.0 },
        maintenance: Maintenance::Merge,
    };
    let seeds = [1, 2, 3];
    let schedule = Schedule {
        seeds: &seeds,
        shuffle: true,
        online: false,
    };
    let stop = |it: usize, _: f64, _: &usize| it >= 2;
    let mut m = Bsgd::new(params.clone(), 3, 3).unwrap();
    let out = m
        .fit(&ex, &y, &schedule, Control::none().with_hook(&stop, 1))
        .unwrap();
    assert_eq!(
        out,
        FitOutcome {
            n_iter: 2,
            stopped: true
        }
    );
    let mut two = Bsgd::new(params.clone(), 3, 3).unwrap();
    for &s in &seeds[..2] {
        two.epoch(&ex, &y, true, s, Control::none()).unwrap();
    }
    assert_eq!(bits(&m.alphas()), bits(&two.alphas()));
    let cancel = AtomicBool::new(true);
    let mut c = Bsgd::new(params.clone(), 3, 3).unwrap();
    assert_eq!(
        c.fit(&ex, &y, &schedule, Control::new(&cancel)),
        Err(SvmError::Cancelled)
    );
}

#[test]
fn llsvm_fit_equals_one_dual_cd_per_class_on_the_nystrom_features() {
    // The previous behaviour: the map, then dual_cd on +1/-1 targets per class, one at a time.
    let (x, y) = data(500, 3);
    let ex = Examples::dense(&x, 3).unwrap();
    let landmarks: Vec<f64> = x[..3 * 25].to_vec();
    let kernel = Kernel::Gaussian { gamma: 0.8 };
    let dcd = DcdOptions {
        c: 10.0,
        max_iter: 40,
        tol: 1e-4,
        seed: 9,
    };
    let params = LlsvmParams { kernel, dcd };
    let objectives = Mutex::new(Vec::new());
    let hook = |_: usize, obj: f64, _: &usize| {
        objectives.lock().unwrap().push(obj);
        false
    };
    let classes = [0, 1, 2];
    let fit = llsvm_fit(
        &ex,
        &y,
        &classes,
        &landmarks,
        &params,
        Control::none().with_hook(&hook, 1),
    )
    .unwrap();
    let ny = Nystrom::new(kernel, &landmarks, 3).unwrap();
    let feats = ny.transform(&ex).unwrap();
    assert_eq!(bits(&fit.map_matrix), bits(ny.map_matrix()));
    assert_eq!(fit.rank, ny.rank());
    for (k, &cl) in classes.iter().enumerate() {
        let t: Vec<f64> = y
            .iter()
            .map(|&l| if l == cl { 1.0 } else { -1.0 })
            .collect();
        let (w, it) = dual_cd(&feats, ny.rank(), &t, dcd, Control::none()).unwrap();
        let r = fit.rank;
        assert_eq!(bits(&fit.models.coef[k * r..(k + 1) * r]), bits(&w));
        assert_eq!(fit.models.n_iter[k], it);
    }
    let objectives = objectives.into_inner().unwrap();
    assert_eq!(objectives.len(), *fit.models.n_iter.iter().max().unwrap());
    assert!(
        objectives
            .windows(2)
            .all(|w| w[1] <= w[0] + 1e-9 * w[0].abs())
    );
    // scores: the folded map equals coef . (M g(x)) computed the long way
    let model = LlsvmModel {
        kernel,
        landmarks: &landmarks,
        map_matrix: &fit.map_matrix,
        coef: &fit.models.coef,
        rank: fit.rank,
    };
    let scores = llsvm_decision(&ex, &model, Control::none()).unwrap();
    let r = fit.rank;
    for (i, phi) in feats.chunks(r).enumerate() {
        for k in 0..3 {
            let want: f64 = phi
                .iter()
                .zip(&fit.models.coef[k * r..(k + 1) * r])
                .map(|(a, b)| a * b)
                .sum();
            let got = scores[i * 3 + k];
            assert!(
                (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                "{got} vs {want}"
            );
        }
    }
}
