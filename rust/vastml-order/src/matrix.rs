//! The input matrix (bit layers in original order), paddings, error kinds, and the dense
//! oracle of the objective (spec §4).

use crate::error::parse_option;
use crate::error::{OrderError, invalid};
use crate::kernel::Kernel;

/// Values given to cells outside the matrix (spec §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// 1 where row < 0 or column < 0, else 0 (the thesis default).
    ZerosAndOnes,
    /// Clamp row and column to the matrix ("Boundary").
    Extension,
    /// 0 everywhere ("cropping").
    Zero,
    /// Wrap around.
    Cyclic,
}

parse_option!(Padding, "padding", {
    "zeros_and_ones" => Self::ZerosAndOnes,
    "extension" => Self::Extension,
    "zero" => Self::Zero,
    "cyclic" => Self::Cyclic,
});

/// Per-cell error of a one: `|1 - conv|` or `(1 - conv)^2` (spec §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Absolute error (the thesis default).
    Abs,
    /// Squared error.
    Quadratic,
}

parse_option!(ErrorKind, "error", { "abs" => Self::Abs, "quadratic" => Self::Quadratic });

/// Number of u64 words for `bits` bits.
pub(crate) fn words(bits: usize) -> usize {
    bits.div_ceil(64)
}

/// Positions of the set bits of a bit row, in increasing order.
pub(crate) fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &x)| {
        let mut x = x;
        std::iter::from_fn(move || {
            (x != 0).then(|| {
                let b = x.trailing_zeros() as usize;
                x &= x - 1;
                w * 64 + b
            })
        })
    })
}

/// A binary or categorical matrix stored as one bit layer per colour, rows in original order.
///
/// A binary matrix is one layer (its ones); a categorical matrix with k colours has k layers
/// and every cell is set in exactly one of them (spec §4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    n_rows: usize,
    n_cols: usize,
    n_layers: usize,
    row_words: usize,
    bits: Vec<u64>,
}

impl Matrix {
    /// A binary matrix from row-major 0/1 values.
    ///
    /// # Errors
    /// A length mismatch, an empty matrix or a value other than 0 and 1 (named with its cell).
    pub fn binary(n_rows: usize, n_cols: usize, values: &[u8]) -> Result<Self, OrderError> {
        check_shape(n_rows, n_cols, values.len())?;
        if let Some(i) = values.iter().position(|&v| v > 1) {
            return Err(invalid(
                "matrix",
                format!(
                    "binary matrices hold only 0 and 1; found {} at row {}, column {}",
                    values[i],
                    i / n_cols,
                    i % n_cols
                ),
            ));
        }
        let mut m = Self::empty(n_rows, n_cols, 1);
        for (i, &v) in values.iter().enumerate() {
            if v == 1 {
                m.set(0, i / n_cols, i % n_cols);
            }
        }
        Ok(m)
    }

    /// A categorical matrix from row-major colour codes `0..n_colours`.
    ///
    /// # Errors
    /// A length mismatch, an empty matrix, more than 255 colours or a code out of range.
    pub fn categorical(
        n_rows: usize,
        n_cols: usize,
        codes: &[u32],
        n_colours: usize,
    ) -> Result<Self, OrderError> {
        check_shape(n_rows, n_cols, codes.len())?;
        if n_colours == 0 || n_colours > 255 {
            return Err(invalid(
                "matrix",
                format!("1 to 255 colours are supported (got {n_colours})"),
            ));
        }
        let mut m = Self::empty(n_rows, n_cols, n_colours);
        for (i, &v) in codes.iter().enumerate() {
            if v as usize >= n_colours {
                return Err(invalid("matrix", format!("colour code {v} >= {n_colours}")));
            }
            m.set(v as usize, i / n_cols, i % n_cols);
        }
        Ok(m)
    }

    fn empty(n_rows: usize, n_cols: usize, n_layers: usize) -> Self {
        let row_words = words(n_cols);
        Self {
            n_rows,
            n_cols,
            n_layers,
            row_words,
            bits: vec![0; n_layers * n_rows * row_words],
        }
    }

    fn set(&mut self, layer: usize, r: usize, c: usize) {
        let i = (layer * self.n_rows + r) * self.row_words + c / 64;
        self.bits[i] |= 1u64 << (c % 64);
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    /// Number of bit layers (1 for binary).
    pub fn n_layers(&self) -> usize {
        self.n_layers
    }
    /// Whether cell (r, c) is set in `layer`.
    #[inline]
    pub fn get(&self, layer: usize, r: usize, c: usize) -> bool {
        let i = (layer * self.n_rows + r) * self.row_words + c / 64;
        (self.bits[i] >> (c % 64)) & 1 == 1
    }
    /// The layer of cell (r, c), if any (binary zeros have none).
    pub fn layer_of(&self, r: usize, c: usize) -> Option<usize> {
        (0..self.n_layers).find(|&l| self.get(l, r, c))
    }
    /// Swaps two colours inside one original column (a relabelling of that attribute).
    pub fn swap_colours_in_column(&mut self, col: usize, a: usize, b: usize) {
        for r in 0..self.n_rows {
            let ga = self.get(a, r, col);
            let gb = self.get(b, r, col);
            if ga != gb {
                for (l, on) in [(a, gb), (b, ga)] {
                    let i = (l * self.n_rows + r) * self.row_words + col / 64;
                    if on {
                        self.bits[i] |= 1u64 << (col % 64);
                    } else {
                        self.bits[i] &= !(1u64 << (col % 64));
                    }
                }
            }
        }
    }
    /// Bits of original row `r` in `layer` (original column order).
    pub fn row_bits(&self, layer: usize, r: usize) -> &[u64] {
        let base = (layer * self.n_rows + r) * self.row_words;
        &self.bits[base..base + self.row_words]
    }
    /// The transposed matrix.
    pub fn transposed(&self) -> Self {
        let mut t = Self::empty(self.n_cols, self.n_rows, self.n_layers);
        for l in 0..self.n_layers {
            for r in 0..self.n_rows {
                for c in 0..self.n_cols {
                    if self.get(l, r, c) {
                        t.set(l, c, r);
                    }
                }
            }
        }
        t
    }
    /// Memory held by the bits, in bytes.
    pub fn nbytes(&self) -> usize {
        self.bits.len() * 8
    }
}

fn check_shape(n_rows: usize, n_cols: usize, len: usize) -> Result<(), OrderError> {
    if n_rows == 0 || n_cols == 0 {
        return Err(invalid("matrix", "the matrix is empty"));
    }
    if n_rows.checked_mul(n_cols) != Some(len) {
        return Err(OrderError::ShapeMismatch(format!(
            "{len} values for a {n_rows} x {n_cols} matrix"
        )));
    }
    Ok(())
}

/// Value of the padded displayed layer at (r, c), r and c possibly outside the matrix.
pub(crate) fn padded_value(
    cell: impl Fn(usize, usize) -> bool,
    m: usize,
    n: usize,
    padding: Padding,
    r: isize,
    c: isize,
) -> bool {
    let inside = r >= 0 && c >= 0 && (r as usize) < m && (c as usize) < n;
    if inside {
        return cell(r as usize, c as usize);
    }
    match padding {
        Padding::ZerosAndOnes => r < 0 || c < 0,
        Padding::Zero => false,
        Padding::Extension => cell(
            r.clamp(0, m as isize - 1) as usize,
            c.clamp(0, n as isize - 1) as usize,
        ),
        Padding::Cyclic => cell(
            r.rem_euclid(m as isize) as usize,
            c.rem_euclid(n as isize) as usize,
        ),
    }
}

/// The dense oracle: the ones-only error of `matrix` displayed in `row_order` x `col_order`,
/// summed over layers, computed cell by cell with the kernel in floating point (spec §4.2).
///
/// With `all_cells`, the error of every cell (zeros included, binary only) is summed instead:
/// the full `E_abs` of eq. 3.7 used for the identity 3.14.
pub fn dense_error(
    matrix: &Matrix,
    row_order: &[usize],
    col_order: &[usize],
    kernel: &Kernel,
    padding: Padding,
    kind: ErrorKind,
    all_cells: bool,
) -> f64 {
    let (m, n) = (matrix.n_rows(), matrix.n_cols());
    let w = kernel.weights();
    let (hr, hc) = (kernel.rows() as isize / 2, kernel.cols() as isize / 2);
    let mut total = 0.0;
    for layer in 0..matrix.n_layers() {
        let cell = |r: usize, c: usize| matrix.get(layer, row_order[r], col_order[c]);
        for r in 0..m {
            for c in 0..n {
                let v = cell(r, c);
                if !v && !all_cells {
                    continue;
                }
                let mut conv = 0.0;
                for kr in 0..kernel.rows() {
                    for kc in 0..kernel.cols() {
                        let rr = r as isize + kr as isize - hr;
                        let cc = c as isize + kc as isize - hc;
                        if padded_value(cell, m, n, padding, rr, cc) {
                            conv += w[kr * kernel.cols() + kc];
                        }
                    }
                }
                let diff = if v { 1.0 - conv } else { conv };
                total += match kind {
                    ErrorKind::Abs => diff.abs(),
                    ErrorKind::Quadratic => diff * diff,
                };
            }
        }
    }
    total
}
