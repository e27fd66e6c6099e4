use super::weights::sqdist;
use super::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::sync::atomic::AtomicBool;
use vastml_core::Control;

/// The checked N×N CSR view of the three arrays.
fn square<'a, I: CsrIndex>(indptr: &'a [I], indices: &'a [I], data: &'a [f64]) -> Csr<'a, I> {
    Csr::new("M", indptr, indices, data, indptr.len() - 1).unwrap()
}

fn uniform(rng: &mut Pcg64, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect()
}

/// Dense Z (L×N) from the weights.
fn dense(z: &Weights, l: usize) -> Vec<f64> {
    let n = z.n_points();
    let mut d = vec![0.0; l * n];
    for p in 0..n {
        let (ix, vs) = z.column(p);
        for (&i, &v) in ix.iter().zip(vs) {
            d[i as usize * n + p] += v;
        }
    }
    d
}

#[test]
fn weights_sum_to_one_use_nearest_landmarks_and_reconstruct() {
    let mut rng = Pcg64::seed_from_u64(1);
    let (n, l, dim, k) = (700, 40, 3, 4);
    let x = uniform(&mut rng, n * dim);
    let lm = uniform(&mut rng, l * dim);
    let z = reconstruction_weights(&x, &lm, dim, k, 0.0, Control::none()).unwrap();
    for p in 0..n {
        let (ix, vs) = z.column(p);
        assert!((vs.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // nearest k by brute force
        let xp = &x[p * dim..(p + 1) * dim];
        let mut d: Vec<(f64, usize)> = (0..l)
            .map(|j| (sqdist(xp, &lm[j * dim..(j + 1) * dim]), j))
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0));
        let want: Vec<u32> = d[..k].iter().map(|v| v.1 as u32).collect();
        assert_eq!(ix, &want[..]);
        // K_Z = D + 1 and reg = 0: exact affine reconstruction
        for c in 0..dim {
            let r: f64 = ix
                .iter()
                .zip(vs)
                .map(|(&i, &w)| w * lm[i as usize * dim + c])
                .sum();
            // the 1e-12 tr(G) ridge on the singular G leaves ~1e-7
            assert!(
                (r - xp[c]).abs() < 1e-5,
                "point {p} coord {c}: {r} vs {}",
                xp[c]
            );
        }
    }
}

#[test]
fn coincident_point_gets_its_landmark() {
    let mut rng = Pcg64::seed_from_u64(2);
    let x = uniform(&mut rng, 30 * 2);
    let lm = x[10..30].to_vec(); // points 5..15 are landmarks 0..10
    let z = reconstruction_weights(&x, &lm, 2, 3, 1e-3, Control::none()).unwrap();
    for p in 5..15 {
        let (ix, vs) = z.column(p);
        assert_eq!(ix[0] as usize, p - 5);
        assert_eq!(vs, &[1.0, 0.0, 0.0]);
    }
}

#[test]
fn sandwich_matches_dense_products_for_any_thread_count() {
    let mut rng = Pcg64::seed_from_u64(3);
    let (n, l, dim, k) = (2500, 60, 4, 6);
    let x = uniform(&mut rng, n * dim);
    let lm = uniform(&mut rng, l * dim);
    let z = reconstruction_weights(&x, &lm, dim, k, 1e-3, Control::none()).unwrap();
    // random sparse M with ~8 entries per row, and a diagonal
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    let mut data = Vec::new();
    for _ in 0..n {
        for _ in 0..8 {
            indices.push(rng.random_range(0..n as i64));
            data.push(rng.random::<f64>());
        }
        indptr.push(indices.len() as i64);
    }
    let v = uniform(&mut rng, n);
    let zd = dense(&z, l);
    let mut want = vec![0.0; l * l];
    for i in 0..l {
        for p in 0..n {
            let zi = zd[i * n + p];
            if zi == 0.0 {
                continue;
            }
            // (M Zᵀ)_{p j} + v_p Z_{j p}
            for j in 0..l {
                let mut t = v[p] * zd[j * n + p];
                for q in indptr[p] as usize..indptr[p + 1] as usize {
                    t += data[q] * zd[j * n + indices[q] as usize];
                }
                want[i * l + j] += zi * t;
            }
        }
    }
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                z_m_zt(
                    &z,
                    l,
                    Some(&v),
                    Some(square(&indptr, &indices, &data)),
                    Control::none(),
                )
                .unwrap()
            })
    };
    let got1 = run(1);
    let got3 = run(3);
    assert_eq!(got1, got3);
    // SciPy's int32 layout gives the same numbers as int64
    let indptr32: Vec<i32> = indptr.iter().map(|&p| p as i32).collect();
    let indices32: Vec<i32> = indices.iter().map(|&j| j as i32).collect();
    let got32 = z_m_zt(
        &z,
        l,
        Some(&v),
        Some(square(&indptr32, &indices32, &data)),
        Control::none(),
    )
    .unwrap();
    assert_eq!(got1, got32);
    // the kept rows are (diag(v) + M) Zᵀ, and the product is unchanged
    let (got_k, t) = z_m_zt_keep(
        &z,
        l,
        Some(&v),
        Some(square(&indptr, &indices, &data)),
        Control::none(),
    )
    .unwrap();
    assert_eq!(got_k, got1);
    assert_eq!(t.start.len(), n + 1);
    for p in 0..n {
        let mut row = vec![0.0; l];
        for e in t.start[p]..t.start[p + 1] {
            row[t.index[e] as usize] += t.value[e];
        }
        for (j, &got) in row.iter().enumerate() {
            let mut want_pj = v[p] * zd[j * n + p];
            for q in indptr[p] as usize..indptr[p + 1] as usize {
                want_pj += data[q] * zd[j * n + indices[q] as usize];
            }
            assert!((got - want_pj).abs() < 1e-12, "{got} vs {want_pj}");
        }
    }
    let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (g, w) in got1.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
    }
}

#[test]
fn block_product_matches_a_dense_loop_for_any_thread_count() {
    let mut rng = Pcg64::seed_from_u64(5);
    let (n, k) = (1000, 7);
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    let mut data = Vec::new();
    for p in 0..n {
        for _ in 0..(p % 13) {
            indices.push(rng.random_range(0..n as i64));
            data.push(rng.random::<f64>() - 0.3);
        }
        indptr.push(indices.len() as i64);
    }
    let x = uniform(&mut rng, n * k);
    let mut want = vec![0.0; n * k];
    for p in 0..n {
        for q in indptr[p] as usize..indptr[p + 1] as usize {
            for t in 0..k {
                want[p * k + t] += data[q] * x[indices[q] as usize * k + t];
            }
        }
    }
    let m = square(&indptr, &indices, &data);
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| csr_dense_product(m, &x, k, &AtomicBool::new(false)).unwrap())
    };
    let got1 = run(1);
    assert_eq!(got1, run(3));
    assert_eq!(got1, want);
    let indptr32: Vec<i32> = indptr.iter().map(|&p| p as i32).collect();
    let indices32: Vec<i32> = indices.iter().map(|&j| j as i32).collect();
    let m32 = square(&indptr32, &indices32, &data);
    assert_eq!(
        csr_dense_product(m32, &x, k, &AtomicBool::new(false)).unwrap(),
        want
    );
    let c = AtomicBool::new(false);
    assert!(csr_dense_product(m, &x[1..], k, &c).is_err());
    let bad = [0i64, 1];
    // a column out of range is refused when M is built; a 1×6 M does not fit one point
    assert!(Csr::new("M", &bad, &[5i64], &[1.0], 1).is_err());
    let m_bad = Csr::new("M", &bad, &[5i64], &[1.0], 6).unwrap();
    assert!(csr_dense_product(m_bad, &[1.0], 1, &c).is_err());
}

#[test]
fn f32_screening_falls_back_to_exact_ranking_on_near_ties() {
    // landmarks on a sphere about each point, radii differing by 1e-9 relative: the f32
    // screening cannot order them, the exhaustive f64 ranking must
    let mut rng = Pcg64::seed_from_u64(7);
    let (dim, l, k) = (8, 40, 3);
    let centre = uniform(&mut rng, dim);
    let mut lm = Vec::new();
    for j in 0..l {
        let dir = uniform(&mut rng, dim);
        let nrm = dir.iter().map(|v| v * v).sum::<f64>().sqrt();
        let r = 1.0 + 1e-9 * j as f64;
        lm.extend(dir.iter().zip(&centre).map(|(d, c)| c + r * d / nrm));
    }
    let z = reconstruction_weights(&centre, &lm, dim, k, 1e-3, Control::none()).unwrap();
    let mut d: Vec<(f64, u32)> = (0..l)
        .map(|j| (sqdist(&centre, &lm[j * dim..(j + 1) * dim]), j as u32))
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let want: Vec<u32> = d[..k].iter().map(|v| v.1).collect();
    assert_eq!(z.indices, want);
}

/// Dense `Z M Zᵀ` (the oracle of the sparse kernels).
fn dense_z_m_zt(z: &Weights, l: usize, indptr: &[i64], indices: &[i64], data: &[f64]) -> Vec<f64> {
    let n = z.n_points();
    let zd = dense(z, l);
    let mut zm = vec![0.0; l * n]; // Z M
    for p in 0..n {
        for q in indptr[p] as usize..indptr[p + 1] as usize {
            let j = indices[q] as usize;
            for i in 0..l {
                zm[i * n + j] += zd[i * n + p] * data[q];
            }
        }
    }
    let mut out = vec![0.0; l * l];
    for i in 0..l {
        for j in 0..l {
            out[i * l + j] = (0..n).map(|p| zm[i * n + p] * zd[j * n + p]).sum();
        }
    }
    out
}

#[test]
fn symmetric_kernel_equals_the_dense_product_for_any_thread_count() {
    let mut rng = Pcg64::seed_from_u64(11);
    let (n, l, dim, k) = (5000, 30, 3, 2);
    let x = uniform(&mut rng, n * dim);
    let lm = uniform(&mut rng, l * dim);
    let z = reconstruction_weights(&x, &lm, dim, k, 1e-3, Control::none()).unwrap();
    // a random symmetric M with a diagonal, rows sorted (SciPy's layout) ...
    let mut rows: Vec<Vec<(i64, f64)>> = vec![Vec::new(); n];
    for p in 0..n {
        for _ in 0..6 {
            let j = rng.random_range(0..n);
            let v = rng.random::<f64>();
            rows[p].push((j as i64, v));
            if j != p {
                rows[j].push((p as i64, v));
            }
        }
    }
    let csr = |rows: &[Vec<(i64, f64)>], sort: bool| {
        let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
        for r in rows {
            let mut r = r.clone();
            if sort {
                r.sort_by_key(|e| e.0);
                r.dedup_by(|a, b| {
                    if a.0 == b.0 {
                        b.1 += a.1;
                        true
                    } else {
                        false
                    }
                });
            }
            indices.extend(r.iter().map(|e| e.0));
            data.extend(r.iter().map(|e| e.1));
            indptr.push(indices.len() as i64);
        }
        (indptr, indices, data)
    };
    let (ip, ix, dv) = csr(&rows, true);
    let want = dense_z_m_zt(&z, l, &ip, &ix, &dv);
    let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let m = square(&ip, &ix, &dv);
    let run = |threads: usize, m: Csr<'_, i64>| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| z_m_zt_sym(&z, l, m, Control::none()).unwrap())
    };
    let got = run(1, m);
    assert_eq!(got, run(3, m));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
    }
    // ... and the same matrix with unsorted rows (filtered entry by entry)
    let mut shuffled = rows.clone();
    for r in shuffled.iter_mut() {
        r.reverse();
    }
    let (ip2, ix2, dv2) = csr(&shuffled, false);
    let got2 = run(2, square(&ip2, &ix2, &dv2));
    for (g, w) in got2.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
    }
    // bad input
    let c = AtomicBool::new(false);
    let bad = [0i64, 1];
    // a column out of range is refused when M is built; a 1×6 M does not fit one point
    assert!(Csr::new("M", &bad, &[5i64], &[1.0], 1).is_err());
    let m_bad = Csr::new("M", &bad, &[5i64], &[1.0], 6).unwrap();
    let z1 = Weights {
        k: 1,
        indices: vec![0],
        values: vec![1.0],
    };
    assert!(z_m_zt_sym(&z1, 1, m_bad, Control::new(&c)).is_err());
    // row pointers that do not start at 0 are refused when M is built
    assert!(Csr::new("M", &ip[1..], &ix, &dv, ip.len() - 2).is_err());
}

#[test]
fn symmetric_quadratic_form_equals_the_dense_one() {
    let mut rng = Pcg64::seed_from_u64(13);
    let n = 3000;
    let mut rows: Vec<Vec<(i64, f64)>> = vec![Vec::new(); n];
    for p in 0..n {
        for _ in 0..5 {
            let j = rng.random_range(0..n);
            let v = rng.random::<f64>();
            rows[p].push((j as i64, v));
            if j != p {
                rows[j].push((p as i64, v));
            }
        }
    }
    for (sorted, k) in [(true, 9usize), (false, 3), (true, 20)] {
        let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
        for r in &rows {
            let mut r = r.clone();
            if sorted {
                r.sort_by_key(|e| e.0);
            } else {
                r.reverse();
            }
            indices.extend(r.iter().map(|e| e.0));
            data.extend(r.iter().map(|e| e.1));
            indptr.push(indices.len() as i64);
        }
        let v = uniform(&mut rng, n * k);
        let mut want = vec![0.0; k * k];
        for p in 0..n {
            for q in indptr[p] as usize..indptr[p + 1] as usize {
                let j = indices[q] as usize;
                for a in 0..k {
                    for b in 0..k {
                        want[a * k + b] += v[p * k + a] * data[q] * v[j * k + b];
                    }
                }
            }
        }
        let m = square(&indptr, &indices, &data);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| sym_quadratic_form(m, &v, k, &AtomicBool::new(false)).unwrap())
        };
        let got = run(1);
        assert_eq!(got, run(3));
        let scale = want.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-11 * scale, "{g} vs {w}");
        }
    }
    let c = AtomicBool::new(false);
    let bad = [0i64, 1];
    // a column out of range is refused when M is built; a 1×6 M does not fit one point
    assert!(Csr::new("M", &bad, &[5i64], &[1.0], 1).is_err());
    let m_bad = Csr::new("M", &bad, &[5i64], &[1.0], 6).unwrap();
    assert!(sym_quadratic_form(m_bad, &[1.0], 1, &c).is_err());
}

#[test]
fn rejects_bad_input() {
    let c = AtomicBool::new(false);
    assert!(reconstruction_weights(&[0.0; 4], &[0.0; 2], 2, 2, 0.0, Control::new(&c)).is_err());
    assert!(reconstruction_weights(&[0.0; 4], &[0.0; 4], 2, 1, -1.0, Control::new(&c)).is_err());
    assert!(
        reconstruction_weights(&[f64::NAN; 4], &[0.0; 4], 2, 1, 0.0, Control::new(&c)).is_err()
    );
    let z = Weights {
        k: 1,
        indices: vec![3],
        values: vec![1.0],
    };
    assert!(z_m_zt::<i64>(&z, 2, None, None, Control::new(&c)).is_err());
}

#[test]
fn long_loops_report_in_order_and_stop_on_request() {
    use std::sync::Mutex;
    let mut rng = Pcg64::seed_from_u64(9);
    let (n, l, dim, k) = (40_000, 30, 2, 3);
    let x = uniform(&mut rng, n * dim);
    let lm = uniform(&mut rng, l * dim);
    let seen = Mutex::new(Vec::new());
    let record = |it: usize, obj: f64, _: &()| {
        assert!(obj.is_nan());
        seen.lock().unwrap().push(it);
        false
    };
    let cancel = AtomicBool::new(false);
    let control = Control::new(&cancel).with_hook(&record, 1);
    let z = reconstruction_weights(&x, &lm, dim, k, 1e-3, control).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]); // 16,384 points per chunk
    assert_eq!(
        z,
        reconstruction_weights(&x, &lm, dim, k, 1e-3, Control::none()).unwrap()
    );
    // a ring graph: symmetric, two entries per row
    let indptr: Vec<i64> = (0..=n as i64).map(|p| 2 * p).collect();
    let indices: Vec<i64> = (0..n as i64)
        .flat_map(|p| [(p + n as i64 - 1) % n as i64, (p + 1) % n as i64])
        .collect();
    let data = vec![1.0; 2 * n];
    let m = square(&indptr, &indices, &data);
    for sym in [false, true] {
        seen.lock().unwrap().clear();
        let out = if sym {
            z_m_zt_sym(&z, l, m, control).unwrap()
        } else {
            z_m_zt(&z, l, None, Some(m), control).unwrap()
        };
        let want = z_m_zt(&z, l, None, Some(m), Control::none()).unwrap();
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() < 1e-9 * (1.0 + b.abs()));
        }
        let got = seen.lock().unwrap().clone();
        assert!(!got.is_empty());
        assert_eq!(got, (1..=got.len()).collect::<Vec<_>>());
    }
    let stop = |it: usize, _: f64, _: &()| it == 2;
    let stopping = Control::new(&cancel).with_hook(&stop, 1);
    assert!(matches!(
        reconstruction_weights(&x, &lm, dim, k, 1e-3, stopping),
        Err(EmbedError::Stopped)
    ));
    assert!(matches!(
        z_m_zt(&z, l, None, Some(m), stopping),
        Err(EmbedError::Stopped)
    ));
    assert!(matches!(
        z_m_zt_sym(&z, l, m, stopping),
        Err(EmbedError::Stopped)
    ));
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        z_m_zt(&z, l, None, Some(m), Control::new(&cancel)),
        Err(EmbedError::Cancelled)
    ));
}
