//! Convolution kernels (spec §3) with exact integer weights.
//!
//! Every kernel is stored as non-negative integer weights `raw[r * cols + c]` whose sum is
//! [`Kernel::sum`]; the normalised kernel is `raw / sum`. Integer weights make the error
//! arithmetic exact, so incremental updates equal full recomputation bit for bit.

use crate::error::parse_option;
use crate::error::{OrderError, invalid};

/// Kernel families of the thesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// Gaussian Blur Smooth: the Chebyshev pyramid `c_max - max(|dr|, |dc|) + 1` (eq. 3.3).
    Gbs,
    /// Gaussian Blur Exponential: `2^(2 c_max - |dr| - |dc|)` (eq. 3.2).
    Gbe,
    /// All weights equal.
    Uniform,
    /// GBS restricted to the middle row and column.
    CrossGbs,
    /// GBE restricted to the middle row and column (the "CGBS" of the thesis tables).
    CrossGbe,
}

parse_option!(KernelKind, "kernel", {
    "gbs" => Self::Gbs,
    "gbe" => Self::Gbe,
    "uniform" => Self::Uniform,
    "cross_gbs" => Self::CrossGbs,
    "cross_gbe" => Self::CrossGbe,
    "cgbs_thesis_tables" => Self::CrossGbe,
});

/// A row- and column-symmetric kernel with odd sizes and integer weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    rows: usize,
    cols: usize,
    raw: Vec<u64>,
    sum: u64,
    cross: bool,
}

impl Kernel {
    /// A named kernel of `rows` x `cols` (both odd).
    ///
    /// # Errors
    /// [`OrderError::InvalidParameter`] for even or zero sizes, more than
    /// `MAX_KERNEL_WEIGHTS` (2^24) weights, or a GBE too large for 64-bit integer weights
    /// (`max(rows, cols) > 61`).
    pub fn new(kind: KernelKind, rows: usize, cols: usize) -> Result<Self, OrderError> {
        check_size(rows, cols)?;
        let (hr, hc) = (rows / 2, cols / 2);
        let cmax = hr.max(hc);
        if matches!(kind, KernelKind::Gbe | KernelKind::CrossGbe) && cmax > 30 {
            return Err(invalid(
                "kernel_size",
                format!("exponential kernels are limited to 61 x 61 (got {rows} x {cols})"),
            ));
        }
        let mut raw = vec![0u64; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                let dr = r.abs_diff(hr);
                let dc = c.abs_diff(hc);
                let on_cross = dr == 0 || dc == 0;
                raw[r * cols + c] = match kind {
                    KernelKind::Uniform => 1,
                    KernelKind::Gbs => (cmax - dr.max(dc) + 1) as u64,
                    KernelKind::Gbe => 1u64 << (2 * cmax - dr - dc),
                    KernelKind::CrossGbs if on_cross => (cmax - dr.max(dc) + 1) as u64,
                    KernelKind::CrossGbe if on_cross => 1u64 << (2 * cmax - dr - dc),
                    _ => 0,
                };
            }
        }
        let cross = matches!(kind, KernelKind::CrossGbs | KernelKind::CrossGbe);
        Self::from_raw(rows, cols, raw).map(|mut k| {
            k.cross |= cross;
            k
        })
    }

    /// A kernel from non-negative integer weights (row-major, `rows` x `cols`).
    ///
    /// # Errors
    /// Even sizes, a length mismatch, an all-zero kernel, or weights that are not symmetric
    /// under row reversal and under column reversal (needed by transpose and reverse moves).
    pub fn from_raw(rows: usize, cols: usize, raw: Vec<u64>) -> Result<Self, OrderError> {
        check_size(rows, cols)?;
        if raw.len() != rows * cols {
            return Err(OrderError::ShapeMismatch(format!(
                "kernel has {} weights, expected {rows} x {cols}",
                raw.len()
            )));
        }
        let mut sum: u64 = 0;
        for &w in &raw {
            sum = sum
                .checked_add(w)
                .ok_or_else(|| invalid("kernel", "weights overflow 64-bit integers"))?;
        }
        if sum == 0 {
            return Err(invalid("kernel", "all weights are zero"));
        }
        for r in 0..rows {
            for c in 0..cols {
                let w = raw[r * cols + c];
                if w != raw[(rows - 1 - r) * cols + c] || w != raw[r * cols + cols - 1 - c] {
                    return Err(invalid(
                        "kernel",
                        "weights must be symmetric under row reversal and under column reversal",
                    ));
                }
            }
        }
        let hr = rows / 2;
        let hc = cols / 2;
        let cross =
            (0..rows).all(|r| (0..cols).all(|c| r == hr || c == hc || raw[r * cols + c] == 0));
        Ok(Self {
            rows,
            cols,
            raw,
            sum,
            cross,
        })
    }

    /// A kernel from real non-negative weights, quantised to integers (relative resolution 2^-40).
    ///
    /// # Errors
    /// Negative or non-finite weights, even sizes, asymmetric weights.
    pub fn from_weights(rows: usize, cols: usize, weights: &[f64]) -> Result<Self, OrderError> {
        check_size(rows, cols)?;
        if weights.len() != rows * cols {
            return Err(OrderError::ShapeMismatch(format!(
                "kernel has {} weights, expected {rows} x {cols}",
                weights.len()
            )));
        }
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err(invalid(
                "kernel",
                "weights must be finite and non-negative (negative weights are not supported)",
            ));
        }
        let max = weights.iter().cloned().fold(0.0, f64::max);
        if max <= 0.0 {
            return Err(invalid("kernel", "all weights are zero"));
        }
        let scale = (1u64 << 40) as f64 / max;
        let raw = weights.iter().map(|w| (w * scale).round() as u64).collect();
        Self::from_raw(rows, cols, raw)
    }

    /// Number of kernel rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of kernel columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Integer weight at (r, c).
    pub fn raw(&self, r: usize, c: usize) -> u64 {
        self.raw[r * self.cols + c]
    }
    /// Sum of the integer weights (the normaliser).
    pub fn sum(&self) -> u64 {
        self.sum
    }
    /// Whether every weight off the middle row and column is zero.
    pub fn is_cross(&self) -> bool {
        self.cross
    }
    /// Normalised weights (sum 1), row-major.
    pub fn weights(&self) -> Vec<f64> {
        let s = self.sum as f64;
        self.raw.iter().map(|&w| w as f64 / s).collect()
    }
    /// The transposed kernel (used when the search works on columns).
    pub fn transposed(&self) -> Self {
        let mut raw = vec![0; self.raw.len()];
        for r in 0..self.rows {
            for c in 0..self.cols {
                raw[c * self.rows + r] = self.raw[r * self.cols + c];
            }
        }
        Self {
            rows: self.cols,
            cols: self.rows,
            raw,
            sum: self.sum,
            cross: self.cross,
        }
    }
}

/// The most weights a kernel may have (4,095 x 4,095): far beyond any useful kernel, and
/// small enough that its weights and per-cell work stay bounded.
pub const MAX_KERNEL_WEIGHTS: usize = 1 << 24;

fn check_size(rows: usize, cols: usize) -> Result<(), OrderError> {
    if rows == 0 || cols == 0 || rows % 2 == 0 || cols % 2 == 0 {
        return Err(invalid(
            "kernel_size",
            format!("kernel sizes must be odd and positive (got {rows} x {cols})"),
        ));
    }
    if rows
        .checked_mul(cols)
        .is_none_or(|n| n > MAX_KERNEL_WEIGHTS)
    {
        return Err(invalid(
            "kernel_size",
            format!("{rows} x {cols} is too large (at most {MAX_KERNEL_WEIGHTS} weights)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_values() {
        let g = Kernel::new(KernelKind::Gbs, 3, 3).unwrap();
        assert_eq!(g.raw, vec![1, 1, 1, 1, 2, 1, 1, 1, 1]);
        assert_eq!(g.sum(), 10);
        let e = Kernel::new(KernelKind::Gbe, 3, 3).unwrap();
        assert_eq!(e.raw, vec![1, 2, 1, 2, 4, 2, 1, 2, 1]);
        let g5 = Kernel::new(KernelKind::Gbs, 5, 5).unwrap();
        assert_eq!(g5.sum(), 35);
        assert_eq!(g5.raw(2, 2), 3);
        let g113 = Kernel::new(KernelKind::Gbs, 11, 3).unwrap();
        let col0: Vec<u64> = (0..11).map(|r| g113.raw(r, 0)).collect();
        assert_eq!(col0, vec![1, 2, 3, 4, 5, 5, 5, 4, 3, 2, 1]);
        assert_eq!(g113.raw(5, 1), 6);
        assert!(Kernel::new(KernelKind::CrossGbe, 5, 5).unwrap().is_cross());
        assert!(!g5.is_cross());
        assert!(Kernel::new(KernelKind::Gbs, 4, 3).is_err());
        assert!(Kernel::from_weights(1, 3, &[1.0, -1.0, 1.0]).is_err());
        assert!(Kernel::from_raw(1, 3, vec![1, 2, 3]).is_err());
    }
}
