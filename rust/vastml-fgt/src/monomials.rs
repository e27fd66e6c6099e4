//! Graded multivariate monomials (section 2.4.2 of the thesis).
//!
//! All monomials x^alpha of degree |alpha| <= n in d variables, stored in graded order
//! (degree 0, then degree 1 as x_1..x_d, then degree 2, ...), so that truncating at a lower
//! degree keeps a *prefix* of the array. Every term after the first is one variable times an
//! earlier term (the Horner-like scheme of Fig. 2.4), so evaluating all
//! `C(n + d, d)` terms costs `C(n + d, d) - 1` multiplications.

/// Binomial coefficient C(n, k) as f64 (exact below 2^53).
pub fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k.min(n));
    let mut c = 1.0f64;
    for i in 0..k {
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    c.round()
}

/// Number of d-variate monomials of degree <= `degree`: C(degree + d, d) (eq. 2.13).
pub fn n_terms(dim: usize, degree: usize) -> f64 {
    binomial(degree + dim, dim)
}

/// Multiplications to evaluate all monomials of degree <= n one by one (Table 2.1, "direct").
pub fn multiplications_direct(dim: usize, degree: usize) -> f64 {
    (0..=degree)
        .map(|k| k as f64 * binomial(k + dim - 1, dim - 1))
        .sum()
}

/// Multiplications with the graded scheme (Table 2.1, "efficient"): C(n + d, d) - 1.
pub fn multiplications_graded(dim: usize, degree: usize) -> f64 {
    n_terms(dim, degree) - 1.0
}

/// Cost constant d p^(d+1) (2n+1)^d (sqrt(2) r h)^(-d/2)-style of the original
/// Greengard-Strain FGT translations for n = 2 neighbour boxes and N_side = 3 (section 2.9):
/// d p^(d+1) 5^d 3^(d/2), as in Table 2.2 of the thesis -- kept to compare term counts with
/// the IFGT's C(p - 1 + d, d).
pub fn fgt_translation_constant(dim: usize, p: usize) -> f64 {
    let d = dim as f64;
    d * (p as f64).powi(dim as i32 + 1) * 5f64.powi(dim as i32) * 3f64.powf(d / 2.0)
}

/// The graded monomials of degree <= `max_degree` in `dim` variables, with the IFGT
/// constants 2^|alpha| / alpha! in the same order.
#[derive(Clone, Debug)]
pub struct Monomials {
    dim: usize,
    max_degree: usize,
    /// Term t (t >= 1) is one variable times an earlier term, given as runs: terms
    /// `start..start + len` are `u[var]` times the terms `parent..parent + len` (each degree
    /// block is one run per variable), so evaluation streams over contiguous terms instead of
    /// looking up two indices per term.
    runs: Vec<Run>,
    constants: Vec<f64>,
}

/// Terms `start..start + len` are `u[var]` times the terms `parent..parent + len`.
#[derive(Clone, Copy, Debug)]
struct Run {
    var: usize,
    start: usize,
    parent: usize,
    len: usize,
}

impl Monomials {
    /// The recipe for all monomials of degree <= `max_degree`.
    ///
    /// The caller keeps `C(max_degree + dim, dim)` reasonable (it is checked by the IFGT
    /// parameter choice).
    pub fn new(dim: usize, max_degree: usize) -> Self {
        let len = n_terms(dim, max_degree) as usize;
        let mut constants = Vec::with_capacity(len);
        // exponent of the term's own "leading" variable, needed for alpha!
        let mut lead_exp: Vec<u32> = Vec::with_capacity(len);
        constants.push(1.0);
        lead_exp.push(0);
        // heads[i]: first term of the previous degree block that x_i may multiply.
        let mut heads = vec![0usize; dim];
        let mut lead_var: Vec<u32> = vec![0];
        let mut prev_end = 1;
        let mut runs = Vec::new();
        for _degree in 1..=max_degree {
            let mut new_heads = vec![0usize; dim];
            for (i, head) in heads.iter().enumerate() {
                new_heads[i] = constants.len();
                runs.push(Run {
                    var: i,
                    start: constants.len(),
                    parent: *head,
                    len: prev_end - head,
                });
                for j in *head..prev_end {
                    // exponent of x_i in the new term: one more if the parent's leading
                    // variable is i (the parent then carries x_i already), else 1.
                    let e = if j > 0 && lead_var[j] as usize == i {
                        lead_exp[j] + 1
                    } else {
                        1
                    };
                    constants.push(2.0 * constants[j] / e as f64);
                    lead_exp.push(e);
                    lead_var.push(i as u32);
                }
            }
            heads = new_heads;
            prev_end = constants.len();
        }
        debug_assert_eq!(constants.len(), len);
        Monomials {
            dim,
            max_degree,
            runs,
            constants,
        }
    }

    /// Number of variables.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Highest degree held.
    pub fn max_degree(&self) -> usize {
        self.max_degree
    }

    /// Number of terms held: C(max_degree + dim, dim).
    pub fn len(&self) -> usize {
        self.constants.len()
    }

    /// Always false: the constant term is always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of terms of degree <= `degree` (a prefix of the graded order).
    pub fn prefix_len(&self, degree: usize) -> usize {
        n_terms(self.dim, degree.min(self.max_degree)) as usize
    }

    /// 2^|alpha| / alpha! for every term, in graded order.
    pub fn constants(&self) -> &[f64] {
        &self.constants
    }

    /// Writes the first `out.len()` monomials of `u` (a prefix of the graded order) into `out`.
    #[inline]
    pub fn evaluate(&self, u: &[f64], out: &mut [f64]) {
        debug_assert_eq!(u.len(), self.dim);
        self.evaluate_runs(out, 1.0, |o, &b, var| *o = u[var] * b);
    }

    /// Sets `out[0] = one` and then every later term of the prefix `out` with `mul(term,
    /// parent, var)`, run by run.
    #[inline(always)]
    fn evaluate_runs<T: Copy>(&self, out: &mut [T], one: T, mul: impl Fn(&mut T, &T, usize)) {
        let n = out.len();
        if n == 0 {
            return;
        }
        out[0] = one;
        for r in &self.runs {
            if r.start >= n {
                break;
            }
            let len = r.len.min(n - r.start);
            // a run's parents all come before it
            let (done, rest) = out.split_at_mut(r.start);
            for (o, b) in rest[..len].iter_mut().zip(&done[r.parent..r.parent + len]) {
                mul(o, b, r.var);
            }
        }
    }
}

impl Monomials {
    /// [`Monomials::evaluate`] for `L` points at once (`u[k][lane]`), writing the first
    /// `out.len()` terms (a prefix of the graded order) into `out[t][lane]`; the loop over
    /// lanes vectorises.
    #[inline(always)]
    pub fn evaluate_lanes<const L: usize>(&self, u: &[[f64; L]], out: &mut [[f64; L]]) {
        debug_assert!(out.len() <= self.len());
        self.evaluate_runs(out, [1.0; L], |o, b, var| {
            let a = &u[var];
            for l in 0..L {
                o[l] = a[l] * b[l];
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 2.1 of the thesis, reproduced exactly.
    #[test]
    fn table_2_1() {
        let ns = [2, 4, 6, 8, 10, 12, 15, 20];
        let rows: [(usize, [f64; 8], [f64; 8]); 4] = [
            (
                2,
                [8., 40., 112., 240., 440., 728., 1360., 3080.],
                [5., 14., 27., 44., 65., 90., 135., 230.],
            ),
            (
                3,
                [15., 105., 378., 990., 2145., 4095., 9180., 26565.],
                [9., 34., 83., 164., 285., 454., 815., 1770.],
            ),
            (
                6,
                [48., 720., 4752., 20592., 68640., 190944., 697680., 3946800.],
                [27., 209., 923., 3002., 8007., 18563., 54263., 230229.],
            ),
            (
                10,
                [
                    120., 3640., 43680., 318240., 1679600., 7054320., 44574000., 546273000.,
                ],
                [
                    65., 1000., 8007., 43757., 184755., 646645., 3268759., 30045014.,
                ],
            ),
        ];
        for (d, direct, efficient) in rows {
            for (i, &n) in ns.iter().enumerate() {
                assert_eq!(
                    multiplications_direct(d, n),
                    direct[i],
                    "direct d={d} n={n}"
                );
                assert_eq!(
                    multiplications_graded(d, n),
                    efficient[i],
                    "graded d={d} n={n}"
                );
            }
        }
    }

    fn exponents(m: &Monomials) -> Vec<Vec<u32>> {
        let mut ex = vec![vec![0u32; m.dim]; m.len()];
        for r in &m.runs {
            for j in 0..r.len {
                let mut e = ex[r.parent + j].clone();
                e[r.var] += 1;
                ex[r.start + j] = e;
            }
        }
        ex
    }

    #[test]
    fn table_2_2_term_counts_and_fgt_constants() {
        // (d, FGT p, FGT constant, IFGT p, IFGT #terms) from Table 2.2
        let rows = [
            (1usize, 9usize, 7.014806e2, 9usize, 9.0),
            (2, 10, 1.500000e5, 15, 120.0),
            (3, 10, 1.948557e7, 16, 816.0),
            (4, 11, 3.623648e9, 17, 4845.0),
            (5, 11, 4.314985e11, 20, 42504.0),
            (6, 12, 9.069926e13, 20, 177100.0),
            (7, 14, 3.774303e16, 22, 1184040.0),
        ];
        for (d, p_fgt, constant, p_ifgt, terms) in rows {
            let c = fgt_translation_constant(d, p_fgt);
            assert!(
                (c - constant).abs() <= 5e-7 * constant,
                "d={d}: {c:e} vs {constant:e}"
            );
            assert_eq!(n_terms(d, p_ifgt - 1), terms, "d={d}");
        }
    }

    #[test]
    fn graded_order_is_complete_unique_and_sorted_by_degree() {
        for d in 1..6 {
            for deg in 0..7 {
                let m = Monomials::new(d, deg);
                assert_eq!(m.len() as f64, n_terms(d, deg));
                let ex = exponents(&m);
                let mut seen = std::collections::HashSet::new();
                let mut last_deg = 0;
                for e in &ex {
                    let s: u32 = e.iter().sum();
                    assert!(s >= last_deg && s as usize <= deg);
                    last_deg = s;
                    assert!(seen.insert(e.clone()), "duplicate {e:?}");
                }
                for g in 0..=deg {
                    let count = ex
                        .iter()
                        .filter(|e| e.iter().sum::<u32>() as usize <= g)
                        .count();
                    assert_eq!(count, m.prefix_len(g));
                }
            }
        }
    }

    /// Every prefix of the evaluation, whole degrees or cut inside a run, equals the products
    /// of powers its exponents give.
    #[test]
    fn every_prefix_equals_the_products_of_powers() {
        for dim in 1..5 {
            let m = Monomials::new(dim, 5);
            let ex = exponents(&m);
            let u: Vec<f64> = (0..dim).map(|k| 0.9 - 0.55 * k as f64).collect();
            for n in 0..=m.len() {
                let mut out = vec![f64::NAN; n];
                m.evaluate(&u, &mut out);
                for (t, &v) in out.iter().enumerate() {
                    let want: f64 = ex[t]
                        .iter()
                        .zip(&u)
                        .map(|(&a, &x)| x.powi(a as i32))
                        .product();
                    assert!(
                        (v - want).abs() <= 1e-14 * want.abs().max(1.0),
                        "d={dim} n={n} t={t}"
                    );
                }
            }
        }
    }

    #[test]
    fn lanes_agree_with_single_evaluation() {
        let m = Monomials::new(3, 6);
        let u = [
            [0.1, -0.5, 0.7, 1.2],
            [0.3, 0.0, -1.1, 0.4],
            [2.0, 0.5, 0.25, -0.3],
        ];
        let mut lanes = vec![[0.0; 4]; m.len()];
        m.evaluate_lanes(&u, &mut lanes);
        let mut single = vec![0.0; m.len()];
        for l in 0..4 {
            m.evaluate(&[u[0][l], u[1][l], u[2][l]], &mut single);
            for t in 0..m.len() {
                assert_eq!(lanes[t][l], single[t]);
            }
        }
    }

    #[test]
    fn example_order_for_three_variables() {
        // a b c | a^2 ab ac b^2 bc c^2 | a^3 a^2b a^2c ab^2 abc ac^2 b^3 b^2c bc^2 c^3
        let m = Monomials::new(3, 3);
        let ex = exponents(&m);
        let expect: Vec<[u32; 3]> = vec![
            [0, 0, 0],
            [1, 0, 0],
            [0, 1, 0],
            [0, 0, 1],
            [2, 0, 0],
            [1, 1, 0],
            [1, 0, 1],
            [0, 2, 0],
            [0, 1, 1],
            [0, 0, 2],
            [3, 0, 0],
            [2, 1, 0],
            [2, 0, 1],
            [1, 2, 0],
            [1, 1, 1],
            [1, 0, 2],
            [0, 3, 0],
            [0, 2, 1],
            [0, 1, 2],
            [0, 0, 3],
        ];
        for (e, x) in ex.iter().zip(&expect) {
            assert_eq!(e.as_slice(), x.as_slice());
        }
    }

    #[test]
    fn constants_are_two_pow_degree_over_factorials() {
        let fact = |n: u32| (1..=n).map(|v| v as f64).product::<f64>();
        for d in 1..5 {
            let m = Monomials::new(d, 8);
            for (e, c) in exponents(&m).iter().zip(m.constants()) {
                let s: u32 = e.iter().sum();
                let brute = 2f64.powi(s as i32) / e.iter().map(|&a| fact(a)).product::<f64>();
                assert!((c - brute).abs() <= 1e-14 * brute, "{e:?}: {c} vs {brute}");
            }
        }
    }

    /// sum_{|a| <= p-1} 2^|a|/a! x^a y^a == sum_{n<p} (2 x.y)^n / n!
    #[test]
    fn truncated_exponential_identity() {
        let x = [0.3, -0.7, 0.2];
        let y = [-0.4, 0.5, 0.9];
        let m = Monomials::new(3, 9);
        let mut mx = vec![0.0; m.len()];
        let mut my = vec![0.0; m.len()];
        m.evaluate(&x, &mut mx);
        m.evaluate(&y, &mut my);
        for p in 1..=10 {
            let len = m.prefix_len(p - 1);
            let lhs: f64 = (0..len).map(|t| m.constants()[t] * mx[t] * my[t]).sum();
            let dot: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            let mut rhs = 0.0;
            let mut term = 1.0;
            for n in 0..p {
                if n > 0 {
                    term *= 2.0 * dot / n as f64;
                }
                rhs += term;
            }
            assert!((lhs - rhs).abs() < 1e-14, "p={p}: {lhs} vs {rhs}");
        }
    }
}
