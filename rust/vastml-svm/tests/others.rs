//! AROW, BSGD and LLSVM against hand-computed steps, closed forms and naive versions.

use std::sync::atomic::AtomicBool;
use vastml_core::Control;

use proptest::prelude::*;
use vastml_svm::{
    Arow, Bsgd, BsgdParams, DcdOptions, Examples, Kernel, Maintenance, Nystrom, SvmError, UpdateOn,
    argmax_rows, arow_decision, dual_cd, dual_cd_full, golden_section, merge_pair, symmetric_eigen,
    symmetric_eigen_with,
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

#[test]
fn arow_hand_case() {
    // Spec oracle 33: mu = 0, Sigma = I, r = 1, x = (1, 0), y = +1.
    for diagonal in [false, true] {
        let mut m = Arow::new(2, 1.0, 0.0, diagonal, UpdateOn::Margin).unwrap();
        let x = [1.0, 0.0];
        let row = Examples::dense(&x, 2).unwrap().row(0);
        assert!(m.update(row, 1.0));
        assert!((m.mean()[0] - 0.5).abs() < 1e-15);
        let s11 = m.covariance()[0];
        assert!((s11 - 0.5).abs() < 1e-15);
        let s22 = if diagonal {
            m.covariance()[1]
        } else {
            m.covariance()[4]
        };
        assert_eq!(s22, 1.0);
        assert!(m.update(row, 1.0));
        assert!((m.mean()[0] - 2.0 / 3.0).abs() < 1e-15);
        assert!((m.covariance()[0] - 1.0 / 3.0).abs() < 1e-15);
    }
    // No update when y mu.x >= 1 (margin mode); mistake mode skips 0 < margin.
    let mean = vec![2.0, 0.0, 0.0];
    let cov = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let mut m = Arow::from_parts(
        2,
        1.0,
        0.0,
        UpdateOn::Margin,
        mean.clone(),
        cov.clone(),
        false,
    )
    .unwrap();
    let x = [1.0, 0.0];
    let row = Examples::dense(&x, 2).unwrap().row(0);
    assert!(!m.update(row, 1.0));
    let mut m = Arow::from_parts(
        2,
        1.0,
        0.0,
        UpdateOn::Mistake,
        vec![0.5, 0.0, 0.0],
        cov,
        false,
    )
    .unwrap();
    assert!(!m.update(row, 1.0));
    assert!(m.update(row, -1.0));
}

/// Naive full AROW with explicit matrices.
fn naive_arow(x: &[f64], y: &[f64], d: usize, r: f64) -> (Vec<f64>, Vec<f64>) {
    let mut mu = vec![0.0; d];
    let mut s = vec![0.0; d * d];
    (0..d).for_each(|i| s[i * d + i] = 1.0);
    for (xi, &yi) in x.chunks(d).zip(y) {
        let m: f64 = yi * xi.iter().zip(&mu).map(|(a, b)| a * b).sum::<f64>();
        if m >= 1.0 {
            continue;
        }
        let sx: Vec<f64> = (0..d)
            .map(|i| (0..d).map(|j| s[i * d + j] * xi[j]).sum())
            .collect();
        let v: f64 = xi.iter().zip(&sx).map(|(a, b)| a * b).sum();
        let beta = 1.0 / (v + r);
        let alpha = beta * (1.0 - m);
        for i in 0..d {
            mu[i] += alpha * yi * sx[i];
            for j in 0..d {
                s[i * d + j] -= beta * sx[i] * sx[j];
            }
        }
    }
    (mu, s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn arow_full_matches_naive_and_stays_spd(seed in 0u64..500, r in 0.1f64..5.0) {
        let d = 4;
        let mut rnd = lcg(seed);
        let x: Vec<f64> = (0..60 * d).map(|_| 2.0 * rnd() - 1.0).collect();
        let y: Vec<f64> = x.chunks(d).map(|v| if v[0] + 0.3 * v[1] > 0.0 { 1.0 } else { -1.0 }).collect();
        // bias 1 in the model equals a constant last column in the naive version
        let xb: Vec<f64> = x.chunks(d).flat_map(|v| v.iter().cloned().chain([1.0])).collect();
        let (mu, s) = naive_arow(&xb, &y, d + 1, r);
        let mut m = Arow::new(d, r, 1.0, false, UpdateOn::Margin).unwrap();
        let order: Vec<usize> = (0..60).collect();
        m.epoch(&Examples::dense(&x, d).unwrap(), &y, &order, Control::none()).unwrap();
        for (a, b) in m.mean().iter().zip(&mu) { prop_assert!((a - b).abs() < 1e-10); }
        for (a, b) in m.covariance().iter().zip(&s) { prop_assert!((a - b).abs() < 1e-10); }
        // symmetric, and SPD via a Cholesky attempt
        let w = d + 1;
        let c = m.covariance();
        let mut l = vec![0.0; w * w];
        for i in 0..w {
            for j in 0..w {
                prop_assert!((c[i * w + j] - c[j * w + i]).abs() < 1e-12);
            }
            for j in 0..=i {
                let mut sum = c[i * w + j];
                for k in 0..j { sum -= l[i * w + k] * l[j * w + k]; }
                if i == j { prop_assert!(sum > 0.0); l[i * w + i] = sum.sqrt(); } else { l[i * w + j] = sum / l[j * w + j]; }
            }
        }
    }

    #[test]
    fn arow_diagonal_equals_full_on_axis_aligned_data(seed in 0u64..500) {
        // One non-zero per example: Sigma stays diagonal, so both variants agree exactly.
        let d = 3;
        let mut rnd = lcg(seed);
        let mut idx = vec![];
        let mut val = vec![];
        let mut ptr = vec![0i64];
        let mut y = vec![];
        for _ in 0..50 {
            idx.push(((rnd() * d as f64) as i64).min(d as i64 - 1));
            val.push(2.0 * rnd() - 1.0);
            ptr.push(idx.len() as i64);
            y.push(if rnd() < 0.5 { 1.0 } else { -1.0 });
        }
        let ex = Examples::csr(&ptr, &idx, &val, d).unwrap();
        let order: Vec<usize> = (0..50).collect();
        let mut full = Arow::new(d, 0.5, 0.0, false, UpdateOn::Margin).unwrap();
        let mut diag = Arow::new(d, 0.5, 0.0, true, UpdateOn::Margin).unwrap();
        let cancel = AtomicBool::new(false);
        full.epoch(&ex, &y, &order, Control::new(&cancel)).unwrap();
        diag.epoch(&ex, &y, &order, Control::new(&cancel)).unwrap();
        for (a, b) in full.mean().iter().zip(diag.mean()) { prop_assert!((a - b).abs() < 1e-12); }
        for i in 0..=d { prop_assert!((full.covariance()[i * (d + 1) + i] - diag.covariance()[i]).abs() < 1e-12); }
    }
}

#[test]
fn merge_oracle() {
    // Spec oracle 28: one class, alpha_m = alpha_n = 1, k_mn = 0.5.
    let m = merge_pair(&[1.0], &[1.0], 0.5);
    assert!((m.h - 0.5).abs() < 1e-4);
    assert!((m.alpha[0] - 1.681793).abs() < 1e-6);
    assert!((m.degradation - 0.171573).abs() < 1e-6);
    // Golden section vs a grid search on a few asymmetric cases.
    for (am, an, k) in [
        (0.3, 0.7, 0.2),
        (0.9, 0.1, 0.8),
        (2.0, -0.5, 0.6),
        (-1.0, 0.4, 0.3),
    ] {
        let (lo, hi) = if am * an > 0.0 {
            (0.0, 1.0)
        } else if am > 0.0 {
            (1.0, 6.0)
        } else {
            (-5.0, 0.0)
        };
        let h = golden_section(am, an, k, lo, hi);
        let f = |h: f64| am * f64::powf(k, (1.0 - h) * (1.0 - h)) + an * f64::powf(k, h * h);
        let best = (0..=100_000)
            .map(|i| lo + (hi - lo) * i as f64 / 100_000.0)
            .map(f)
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(f(h) >= best - 1e-6, "{am} {an} {k}: {} < {best}", f(h));
    }
}

fn blobs(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut r = lcg(seed);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = (2.0 * r() - 1.0, 2.0 * r() - 1.0);
        x.extend([a, b]);
        // XOR: not linearly separable
        y.push(usize::from((a > 0.0) != (b > 0.0)));
    }
    (x, y)
}

#[test]
fn bsgd_without_maintenance_is_kernel_pegasos() {
    // Spec oracle 30: B >= N gives exact kernelised multi-class Pegasos.
    let (x, y) = blobs(80, 1);
    let gamma = 2.0;
    let lambda = 0.05;
    let params = BsgdParams {
        lambda,
        budget: 1000,
        kernel: Kernel::Gaussian { gamma },
        maintenance: Maintenance::Merge,
    };
    let mut m = Bsgd::new(params, 2, 2).unwrap();
    m.epoch(
        &Examples::dense(&x, 2).unwrap(),
        &y,
        false,
        0,
        Control::none(),
    )
    .unwrap();
    // naive: alpha per training example
    let k = |i: usize, j: usize| {
        (-gamma * ((x[2 * i] - x[2 * j]).powi(2) + (x[2 * i + 1] - x[2 * j + 1]).powi(2))).exp()
    };
    let mut alpha = vec![[0.0f64; 2]; 80];
    for t in 0..80 {
        let eta = 1.0 / (lambda * (t + 1) as f64);
        let mut g = [0.0; 2];
        for (j, aj) in alpha.iter().enumerate().take(t) {
            for c in 0..2 {
                g[c] += aj[c] * k(t, j);
            }
        }
        let yt = y[t];
        let w = 1 - yt;
        let loss = 1.0 + g[w] - g[yt];
        let f = 1.0 - 1.0 / (t + 1) as f64;
        alpha.iter_mut().for_each(|a| {
            a[0] *= f;
            a[1] *= f;
        });
        if loss > 0.0 {
            alpha[t][yt] += eta;
            alpha[t][w] -= eta;
        }
    }
    let q: Vec<f64> = (0..40).map(|i| (i as f64 / 20.0) - 1.0).collect();
    let qs = Examples::dense(&q, 2).unwrap();
    let got = m.decision(&qs).unwrap();
    for (p, qq) in q.chunks(2).enumerate() {
        for c in 0..2 {
            let want: f64 = (0..80)
                .map(|j| {
                    alpha[j][c]
                        * (-gamma * ((qq[0] - x[2 * j]).powi(2) + (qq[1] - x[2 * j + 1]).powi(2)))
                            .exp()
                })
                .sum();
            assert!((got[p * 2 + c] - want).abs() < 1e-9 * (1.0 + want.abs()));
        }
    }
}

#[test]
fn bsgd_keeps_budget_and_norms_and_learns_xor() {
    let (x, y) = blobs(2000, 2);
    let ex = Examples::dense(&x, 2).unwrap();
    for maintenance in [
        Maintenance::Merge,
        Maintenance::RemoveSmallest,
        Maintenance::RemoveRandom,
    ] {
        let params = BsgdParams {
            lambda: 1e-3,
            budget: 30,
            kernel: Kernel::Gaussian { gamma: 2.0 },
            maintenance,
        };
        let mut m = Bsgd::new(params, 2, 2).unwrap();
        for e in 0..3 {
            m.epoch(&ex, &y, true, e, Control::none()).unwrap();
            assert!(m.n_support() <= 30);
        }
        for (z, &sq) in m.support_vectors().chunks(2).zip(m.support_sq_norms()) {
            assert!((z[0] * z[0] + z[1] * z[1] - sq).abs() < 1e-9);
        }
        let pred = argmax_rows(&m.decision(&ex).unwrap(), 2);
        let err = pred.iter().zip(&y).filter(|(a, b)| a != b).count() as f64 / 2000.0;
        if maintenance == Maintenance::Merge {
            assert!(m.n_merged() > 0);
            assert!(err < 0.1, "merge error {err}");
        }
        assert!(err < 0.3, "{maintenance:?} error {err}");
    }
    let bad = BsgdParams {
        lambda: 1e-3,
        budget: 30,
        kernel: Kernel::Linear,
        maintenance: Maintenance::Merge,
    };
    assert!(Bsgd::new(bad, 2, 2).is_err());
}

#[test]
fn eigen_reconstructs() {
    let n = 7;
    let mut r = lcg(3);
    let b: Vec<f64> = (0..n * n).map(|_| r() - 0.5).collect();
    let a: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            (0..n).map(|l| b[i * n + l] * b[j * n + l]).sum()
        })
        .collect();
    let (vals, vecs) = symmetric_eigen(&a, n);
    for i in 0..n {
        for j in 0..n {
            let rec: f64 = (0..n)
                .map(|k| vecs[i * n + k] * vals[k] * vecs[j * n + k])
                .sum();
            assert!((rec - a[i * n + j]).abs() < 1e-10);
        }
    }
}

#[test]
fn nystrom_reproduces_kernel_on_landmarks() {
    // Spec oracle 31: phi(z_i) . phi(z_j) = k(z_i, z_j) on the landmarks.
    let (x, _) = blobs(12, 4);
    let kern = Kernel::Gaussian { gamma: 6.0 };
    let ny = Nystrom::new(kern, &x, 2).unwrap();
    let phi = ny.transform(&Examples::dense(&x, 2).unwrap()).unwrap();
    let r = ny.rank();
    for i in 0..12 {
        for j in 0..12 {
            let dot: f64 = (0..r).map(|k| phi[i * r + k] * phi[j * r + k]).sum();
            let d2 = (x[2 * i] - x[2 * j]).powi(2) + (x[2 * i + 1] - x[2 * j + 1]).powi(2);
            assert!((dot - (-6.0 * d2).exp()).abs() < 1e-8, "{dot}");
        }
    }
}

#[test]
fn dual_cd_satisfies_kkt_and_separates() {
    // KKT conditions of the hinge-loss SVM checked from the returned dual variables:
    // w = sum a_i y_i x_i; a_i = 0 => y w.x >= 1; a_i = C => y w.x <= 1; else y w.x = 1.
    let mut r = lcg(5);
    let n = 200;
    let x: Vec<f64> = (0..n * 3).map(|_| 2.0 * r() - 1.0).collect();
    let y: Vec<f64> = x
        .chunks(3)
        .map(|v| {
            if v[0] - v[1] + 0.2 * v[2] + 0.3 * (r() - 0.5) > 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let c = 2.0;
    let opts = DcdOptions {
        c,
        max_iter: 5000,
        tol: 1e-9,
        seed: 0,
    };
    let (w, alpha, _) = dual_cd_full(&x, 3, &y, opts, Control::none()).unwrap();
    for k in 0..3 {
        let s: f64 = (0..n).map(|i| alpha[i] * y[i] * x[i * 3 + k]).sum();
        assert!((s - w[k]).abs() < 1e-9);
    }
    let (mut at_zero, mut at_c, mut free) = (0, 0, 0);
    for i in 0..n {
        let m = y[i] * (0..3).map(|k| w[k] * x[i * 3 + k]).sum::<f64>();
        assert!((0.0..=c).contains(&alpha[i]));
        if alpha[i] == 0.0 {
            assert!(m >= 1.0 - 1e-6, "a = 0 but margin {m}");
            at_zero += 1;
        } else if alpha[i] == c {
            assert!(m <= 1.0 + 1e-6, "a = C but margin {m}");
            at_c += 1;
        } else {
            assert!((m - 1.0).abs() < 1e-6, "free a but margin {m}");
            free += 1;
        }
    }
    assert!(
        at_zero > 0 && at_c > 0 && free > 0,
        "{at_zero} {at_c} {free}"
    );
    let (w2, _) = dual_cd(&x, 3, &y, opts, Control::none()).unwrap();
    assert_eq!(w, w2);
    assert!(
        dual_cd(
            &x,
            3,
            &y,
            DcdOptions {
                c: -1.0,
                max_iter: 10,
                tol: 0.1,
                seed: 0
            },
            Control::none()
        )
        .is_err()
    );
}

#[test]
fn projection_is_exact_when_the_span_is_kept() {
    // Linear kernel in 2-D: any removed SV lies in the span of two remaining independent
    // ones, so projecting it out leaves the decision function unchanged.
    let sv = [1.0, 0.0, 0.0, 1.0, 0.7, 0.4];
    let alpha = [0.5, -0.5, -0.2, 0.2, 0.01, -0.01];
    let params = |maintenance| BsgdParams {
        lambda: 0.1,
        budget: 3,
        kernel: Kernel::Linear,
        maintenance,
    };
    let m = Bsgd::from_parts(params(Maintenance::Project), 2, 2, &sv, &alpha, 10).unwrap();
    let q = [0.3, -0.8, 1.5, 0.2, -0.4, -0.9];
    let qs = Examples::dense(&q, 2).unwrap();
    let before = m.decision(&qs).unwrap();
    // One more SV triggers maintenance: compare with the same step on a model with a huge
    // budget (no maintenance): the projected model must give the same scores.
    let x = [0.2, 0.9];
    let mut proj = m.clone();
    let mut free = Bsgd::from_parts(
        BsgdParams {
            lambda: 0.1,
            budget: 100,
            kernel: Kernel::Linear,
            maintenance: Maintenance::Project,
        },
        2,
        2,
        &sv,
        &alpha,
        10,
    )
    .unwrap();
    let cancel = AtomicBool::new(false);
    let ex = Examples::dense(&x, 2).unwrap();
    proj.epoch(&ex, &[0], false, 0, Control::new(&cancel))
        .unwrap();
    free.epoch(&ex, &[0], false, 0, Control::new(&cancel))
        .unwrap();
    assert_eq!(proj.n_support(), 3);
    assert_eq!(free.n_support(), 4);
    let (a, b) = (proj.decision(&qs).unwrap(), free.decision(&qs).unwrap());
    for (u, v) in a.iter().zip(&b) {
        assert!((u - v).abs() < 1e-8, "{u} vs {v}");
    }
    assert_ne!(before, a);
    // Removal instead loses the contribution.
    let mut rem =
        Bsgd::from_parts(params(Maintenance::RemoveSmallest), 2, 2, &sv, &alpha, 10).unwrap();
    rem.epoch(&ex, &[0], false, 0, Control::new(&cancel))
        .unwrap();
    let r = rem.decision(&qs).unwrap();
    assert!(r.iter().zip(&b).any(|(u, v)| (u - v).abs() > 1e-4));
}

#[test]
fn projection_keeps_budget_on_xor() {
    let (x, y) = blobs(1500, 7);
    let ex = Examples::dense(&x, 2).unwrap();
    let params = BsgdParams {
        lambda: 1e-3,
        budget: 25,
        kernel: Kernel::Gaussian { gamma: 2.0 },
        maintenance: Maintenance::Project,
    };
    let mut m = Bsgd::new(params, 2, 2).unwrap();
    for e in 0..2 {
        m.epoch(&ex, &y, true, e, Control::none()).unwrap();
        assert!(m.n_support() <= 25);
    }
    let pred = argmax_rows(&m.decision(&ex).unwrap(), 2);
    let err = pred.iter().zip(&y).filter(|(a, b)| a != b).count() as f64 / 1500.0;
    assert!(err < 0.1, "projection error {err}");
}

#[test]
fn nystrom_transform_equals_naive_map_on_dense_and_csr() {
    // The blocked transform (transposed landmarks, axpy over rank) against M g(x) computed
    // element by element, for a sparse-ish data set given dense and as CSR, for kernels with
    // and without the fused Gaussian path, and for a few-output map (the prediction path).
    let mut next = lcg(21);
    let (n, d, b) = (150, 7, 9);
    let x: Vec<f64> = (0..n * d)
        .map(|_| if next() < 0.6 { 0.0 } else { next() - 0.5 })
        .collect();
    let lm: Vec<f64> = (0..b * d).map(|_| next() - 0.5).collect();
    let (mut ip, mut ix, mut dv) = (vec![0i64], vec![], vec![]);
    for row in x.chunks(d) {
        for (j, &v) in row.iter().enumerate() {
            if v != 0.0 {
                ix.push(j as i64);
                dv.push(v);
            }
        }
        ip.push(ix.len() as i64);
    }
    let dense = Examples::dense(&x, d).unwrap();
    let csr = Examples::csr(&ip, &ix, &dv, d).unwrap();
    for kern in [
        Kernel::Gaussian { gamma: 0.7 },
        Kernel::Polynomial {
            degree: 2,
            coef: 1.0,
        },
        Kernel::Exponential { gamma: 0.3 },
    ] {
        let full = Nystrom::new(kern, &lm, d).unwrap();
        let few: Vec<f64> = full.map_matrix()[..2 * b].to_vec();
        for ny in [
            full.clone(),
            Nystrom::from_parts(kern, &lm, d, &few).unwrap(),
        ] {
            let (r, m) = (ny.rank(), ny.map_matrix());
            let want: Vec<f64> = x
                .chunks(d)
                .flat_map(|xi| {
                    let g: Vec<f64> = lm
                        .chunks(d)
                        .map(|z| {
                            let dot: f64 = xi.iter().zip(z).map(|(a, c)| a * c).sum();
                            let xx: f64 = xi.iter().map(|a| a * a).sum();
                            let zz: f64 = z.iter().map(|a| a * a).sum();
                            kern.eval(dot, xx, zz)
                        })
                        .collect();
                    (0..r)
                        .map(|q| (0..b).map(|j| m[q * b + j] * g[j]).sum::<f64>())
                        .collect::<Vec<f64>>()
                })
                .collect();
            for data in [&dense, &csr] {
                let got = ny.transform(data).unwrap();
                assert_eq!(got.len(), n * r);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-10 * (1.0 + w.abs()),
                        "{kern:?}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn kmeans_landmarks_centres_are_cluster_means_and_csr_equals_dense() {
    let (x, _) = blobs(300, 8);
    let d = 2;
    let dense = Examples::dense(&x, d).unwrap();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let (c, l) = vastml_svm::kmeans_landmarks(&dense, 4, 10, 3, Control::new(&cancel)).unwrap();
    for k in 0..4 {
        let members: Vec<usize> = (0..300).filter(|&i| l[i] == k).collect();
        assert!(!members.is_empty());
        for f in 0..d {
            let mean = members.iter().map(|&i| x[i * d + f]).sum::<f64>() / members.len() as f64;
            assert!((c[k * d + f] - mean).abs() < 1e-12);
        }
    }
    let (mut ip, mut ix, mut dv) = (vec![0i64], vec![], vec![]);
    for row in x.chunks(d) {
        for (j, &v) in row.iter().enumerate() {
            ix.push(j as i64);
            dv.push(v);
        }
        ip.push(ix.len() as i64);
    }
    let csr = Examples::csr(&ip, &ix, &dv, d).unwrap();
    let (c2, l2) = vastml_svm::kmeans_landmarks(&csr, 4, 10, 3, Control::new(&cancel)).unwrap();
    assert_eq!(l, l2);
    assert!(c.iter().zip(&c2).all(|(a, b)| (a - b).abs() < 1e-12));
    assert!(vastml_svm::kmeans_landmarks(&dense, 0, 10, 3, Control::new(&cancel)).is_err());
    assert!(vastml_svm::kmeans_landmarks(&dense, 301, 10, 3, Control::new(&cancel)).is_err());
}

/// The Nystrom eigendecomposition and AROW's decision poll the cancel flag: raised, they stop
/// with `Cancelled`; lowered, they give the plain functions' results bit for bit.
#[test]
fn a_raised_cancel_flag_stops_the_eigendecomposition_and_arow_decision() {
    let n = 40;
    let mut r = lcg(11);
    let a: Vec<f64> = {
        let b: Vec<f64> = (0..n * n).map(|_| r() - 0.5).collect();
        (0..n * n)
            .map(|k| {
                (0..n)
                    .map(|l| b[(k / n) * n + l] * b[(k % n) * n + l])
                    .sum()
            })
            .collect()
    };
    let raised = AtomicBool::new(true);
    let lowered = AtomicBool::new(false);
    assert!(symmetric_eigen_with(&a, n, Control::new(&raised)).is_err());
    assert_eq!(
        symmetric_eigen_with(&a, n, Control::new(&lowered)).unwrap(),
        symmetric_eigen(&a, n)
    );
    let (x, _) = blobs(30, 4);
    let kern = Kernel::Gaussian { gamma: 6.0 };
    assert!(matches!(
        Nystrom::new_with(kern, &x, 2, Control::new(&raised)),
        Err(SvmError::Cancelled)
    ));
    let xs: Vec<f64> = (0..5000 * 3).map(|_| r() - 0.5).collect();
    let data = Examples::dense(&xs, 3).unwrap();
    let mut models = vec![Arow::new(3, 1.0, 0.0, false, UpdateOn::Margin).unwrap(); 2];
    for (i, m) in models.iter_mut().enumerate() {
        for t in 0..50 {
            m.update(data.row(t), if (t + i) % 3 == 0 { 1.0 } else { -1.0 });
        }
    }
    assert!(matches!(
        arow_decision(&models, &data, Control::new(&raised)),
        Err(SvmError::Cancelled)
    ));
    let margins = arow_decision(&models, &data, Control::new(&lowered)).unwrap();
    assert_eq!(margins.len(), 5000 * 2);
    for i in [0, 1023, 1024, 4999] {
        for (k, m) in models.iter().enumerate() {
            assert_eq!(margins[i * 2 + k], m.margin(data.row(i)));
        }
    }
}
