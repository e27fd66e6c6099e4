//! AROW: adaptive regularisation of weight vectors (Crammer, Kulesza & Dredze 2009; thesis
//! sec. 6.2, eqs. 6.4-6.6), binary, with full or diagonal covariance.
//!
//! The model is a Gaussian `N(mu, Sigma)` over weight vectors, from `mu = 0`, `Sigma = I`.
//! On example `(x, y)`, `y in {-1, +1}`, with margin `m = y mu.x` and confidence `v = x' Sigma x`:
//! `beta = 1 / (v + r)`, `alpha = beta max(0, 1 - m)`, `mu += alpha y Sigma x`,
//! `Sigma -= beta (Sigma x)(Sigma x)'`. By default it updates whenever `m < 1` (the hinge is
//! positive), as in the AROW paper; `UpdateOn::Mistake` updates only when `m <= 0`.
//!
//! The diagonal variant keeps the diagonal of the exact update: `s_j -= beta s_j^2 x_j^2`
//! (with `v = sum_j s_j x_j^2`). A bias is an extra constant feature `bias` (0 disables it).

use std::sync::atomic::{AtomicBool, Ordering};

use rand::SeedableRng;
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::amm::{CANCEL_EVERY, permutation};
use crate::data::{Examples, Gathered, Row, check_positive};
use crate::error::{SvmError, invalid, shape};

/// When AROW updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOn {
    /// Whenever the margin `y mu.x` is below 1 (the AROW paper; default).
    Margin,
    /// Only on mistakes, `y mu.x <= 0` (the thesis's wording).
    Mistake,
}

/// One binary AROW model.
#[derive(Debug, Clone, PartialEq)]
pub struct Arow {
    dim: usize,
    /// `r = 1 / (2 lambda_1)`.
    r: f64,
    bias: f64,
    update_on: UpdateOn,
    /// Mean, `dim + 1` values (bias last).
    mean: Vec<f64>,
    /// Full covariance `(dim + 1)^2` row-major, or its diagonal (`dim + 1` values).
    cov: Vec<f64>,
    diagonal: bool,
    sx: Vec<f64>,
}

impl Arow {
    /// A fresh model: `mu = 0`, `Sigma = I`.
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] for `dim == 0`, `r <= 0` or a non-finite bias.
    pub fn new(
        dim: usize,
        r: f64,
        bias: f64,
        diagonal: bool,
        update_on: UpdateOn,
    ) -> Result<Self, SvmError> {
        let w = dim + 1;
        let cov = if diagonal {
            vec![1.0; w]
        } else {
            let mut c = vec![0.0; w * w];
            (0..w).for_each(|i| c[i * w + i] = 1.0);
            c
        };
        Self::from_parts(dim, r, bias, update_on, vec![0.0; w], cov, diagonal)
    }

    /// A model from its mean (`dim + 1` values, bias last) and covariance (`(dim+1)^2`
    /// row-major when full, `dim + 1` when diagonal).
    ///
    /// # Errors
    /// Parameter and shape errors; [`SvmError::NonFinite`] for non-finite parts.
    pub fn from_parts(
        dim: usize,
        r: f64,
        bias: f64,
        update_on: UpdateOn,
        mean: Vec<f64>,
        cov: Vec<f64>,
        diagonal: bool,
    ) -> Result<Self, SvmError> {
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        check_positive(r, "r")?;
        if !bias.is_finite() {
            return Err(invalid("bias", "must be finite"));
        }
        let w = dim + 1;
        if mean.len() != w {
            return Err(shape(
                "mean",
                format!("expected {w} values, got {}", mean.len()),
            ));
        }
        let expect = if diagonal { w } else { w * w };
        if cov.len() != expect {
            return Err(shape(
                "covariance",
                format!("expected {expect} values, got {}", cov.len()),
            ));
        }
        if !mean.iter().chain(&cov).all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite {
                name: "mean/covariance",
            });
        }
        Ok(Arow {
            dim,
            r,
            bias,
            update_on,
            mean,
            cov,
            diagonal,
            sx: vec![0.0; w],
        })
    }

    /// The mean `mu` (`dim + 1` values, bias last).
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The covariance: `(dim + 1)^2` row-major, or its diagonal.
    pub fn covariance(&self) -> &[f64] {
        &self.cov
    }

    /// Whether the covariance is diagonal.
    pub fn is_diagonal(&self) -> bool {
        self.diagonal
    }

    /// `mu . [x; bias]`.
    pub fn margin(&self, x: Row<'_>) -> f64 {
        x.dot(&self.mean[..self.dim]) + self.bias * self.mean[self.dim]
    }

    /// `[x; bias]' Sigma [x; bias]`, the variance of the margin.
    pub fn variance(&mut self, x: Row<'_>) -> f64 {
        if self.diagonal {
            let d = self.dim;
            let mut v = self.bias * self.bias * self.cov[d];
            match x {
                Row::Dense(xs) => xs.iter().zip(&self.cov).for_each(|(a, s)| v += s * a * a),
                Row::Sparse(idx, val) => idx
                    .iter()
                    .zip(val)
                    .for_each(|(&j, a)| v += self.cov[j as usize] * a * a),
            }
            v
        } else {
            self.sigma_x(x);
            let d = self.dim;
            x.dot(&self.sx[..d]) + self.bias * self.sx[d]
        }
    }

    /// `self.sx = Sigma [x; bias]` (full covariance; Sigma symmetric, so rows = columns).
    fn sigma_x(&mut self, x: Row<'_>) {
        let w = self.dim + 1;
        let d = self.dim;
        for (i, out) in self.sx.iter_mut().enumerate() {
            let row = &self.cov[i * w..(i + 1) * w];
            *out = x.dot(&row[..d]) + self.bias * row[d];
        }
    }

    /// One AROW step on `(x, y)`, `y` = +1 or -1. Returns whether it updated.
    pub fn update(&mut self, x: Row<'_>, y: f64) -> bool {
        let m = y * self.margin(x);
        let go = match self.update_on {
            UpdateOn::Margin => m < 1.0,
            UpdateOn::Mistake => m <= 0.0,
        };
        if !go {
            return false;
        }
        let d = self.dim;
        let v = self.variance(x);
        let beta = 1.0 / (v + self.r);
        let alpha = beta * (1.0 - m).max(0.0);
        if self.diagonal {
            // Sigma x is s_j x_j; update mean with the old s, then shrink s.
            let bias = self.bias;
            let mut upd = |j: usize, xj: f64| {
                let s = self.cov[j];
                self.mean[j] += alpha * y * s * xj;
                self.cov[j] = s - beta * s * s * xj * xj;
            };
            match x {
                Row::Dense(xs) => xs.iter().enumerate().for_each(|(j, &a)| upd(j, a)),
                Row::Sparse(idx, val) => {
                    idx.iter().zip(val).for_each(|(&j, &a)| upd(j as usize, a))
                }
            }
            upd(d, bias);
        } else {
            // variance() left Sigma x in self.sx.
            let w = d + 1;
            for (m, s) in self.mean.iter_mut().zip(&self.sx) {
                *m += alpha * y * s;
            }
            for i in 0..w {
                let si = self.sx[i] * beta;
                if si == 0.0 {
                    continue;
                }
                let row = &mut self.cov[i * w..(i + 1) * w];
                row.iter_mut()
                    .zip(&self.sx)
                    .for_each(|(c, sj)| *c -= si * sj);
            }
        }
        true
    }

    /// One pass over the examples; `targets[i]` is +1 or -1. Returns the number of updates.
    ///
    /// # Errors
    /// Shape errors; [`SvmError::Cancelled`] when `cancel` is raised.
    pub fn epoch(
        &mut self,
        data: &Examples<'_>,
        targets: &[f64],
        order: &[usize],
        cancel: &AtomicBool,
    ) -> Result<usize, SvmError> {
        if data.dim() != self.dim {
            return Err(shape(
                "X",
                format!("{} features, the model has {}", data.dim(), self.dim),
            ));
        }
        if targets.len() != data.len() {
            return Err(shape("y", "one target per example"));
        }
        let mut n = 0;
        for (k, &i) in order.iter().enumerate() {
            if k % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return Err(SvmError::Cancelled);
            }
            n += usize::from(self.update(data.row(i), targets[i]));
        }
        Ok(n)
    }
}

/// Trains several binary AROW models (one-vs-rest columns) over the same examples in parallel.
///
/// `labels[i]` is the class of example i; model k treats class `classes[k]` as +1 and the rest
/// as -1. All models see the same (seeded) order. Returns the updates per model.
///
/// # Errors
/// Shape errors; [`SvmError::Cancelled`].
pub fn arow_one_vs_rest(
    models: &mut [Arow],
    classes: &[usize],
    data: &Examples<'_>,
    labels: &[usize],
    shuffle: bool,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Vec<usize>, SvmError> {
    if models.len() != classes.len() {
        return Err(shape("classes", "one positive class per model"));
    }
    if labels.len() != data.len() {
        return Err(shape("y", "one label per example"));
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    let order = permutation(data.len(), shuffle, &mut rng);
    // One gathered copy in the shuffled order, shared by all models (streams, no cache miss
    // per row); then every model walks it in sequence.
    let gathered = if shuffle {
        Gathered::new(data, &order)
    } else {
        None
    };
    let (data, labels, order): (Examples<'_>, Vec<usize>, Vec<usize>) = match &gathered {
        Some(g) => (
            g.view(),
            order.iter().map(|&i| labels[i]).collect(),
            (0..order.len()).collect(),
        ),
        None => (*data, labels.to_vec(), order),
    };
    let (data, labels) = (&data, &labels);
    models
        .par_iter_mut()
        .zip(classes.par_iter())
        .map(|(m, &c)| {
            let targets: Vec<f64> = labels
                .iter()
                .map(|&l| if l == c { 1.0 } else { -1.0 })
                .collect();
            m.epoch(data, &targets, &order, cancel)
        })
        .collect()
}

/// Margins `mu_k . x` of several models, row-major `(n, models.len())`, parallel over examples.
///
/// # Errors
/// A shape error if a model's dimension differs from the data's.
pub fn arow_decision(models: &[Arow], data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
    if models.iter().any(|m| m.dim != data.dim()) {
        return Err(shape("X", "feature count differs from the model's"));
    }
    let k = models.len().max(1);
    let mut out = vec![0.0; data.len() * models.len()];
    out.par_chunks_mut(k).enumerate().for_each(|(i, o)| {
        let x = data.row(i);
        for (v, m) in o.iter_mut().zip(models) {
            *v = m.margin(x);
        }
    });
    Ok(out)
}
