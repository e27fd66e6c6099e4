//! The planted test matrices of the thesis (spec §15.1-§15.2), drawn with `java.util.Random`
//! exactly as the reference generator does, so the published "Original" errors reproduce.

use crate::error::parse_option;
use crate::error::{OrderError, checked_cells, invalid, try_filled};

/// `java.util.Random`: the 48-bit linear congruential generator.
#[derive(Debug, Clone)]
pub struct JavaRandom {
    seed: u64,
}

const MULT: u64 = 0x5_DEEC_E66D;
const MASK: u64 = (1 << 48) - 1;

impl JavaRandom {
    /// `new Random(seed)`.
    pub fn new(seed: i64) -> Self {
        Self {
            seed: (seed as u64 ^ MULT) & MASK,
        }
    }
    fn next(&mut self, bits: u32) -> i32 {
        self.seed = (self.seed.wrapping_mul(MULT).wrapping_add(0xB)) & MASK;
        (self.seed >> (48 - bits)) as i64 as i32
    }
    /// `nextDouble()`.
    pub fn next_double(&mut self) -> f64 {
        let hi = i64::from(self.next(26));
        let lo = i64::from(self.next(27));
        ((hi << 27) + lo) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// `nextInt(bound)` with Java's rejection rule.
    pub fn next_int(&mut self, bound: i32) -> i32 {
        if bound & (-bound) == bound {
            return ((i64::from(bound) * i64::from(self.next(31))) >> 31) as i32;
        }
        loop {
            let bits = self.next(31);
            let v = bits % bound;
            if bits.wrapping_sub(v).wrapping_add(bound - 1) >= 0 {
                return v;
            }
        }
    }
}

/// The seed of the thesis's generator.
pub const THESIS_SEED: i64 = 545_173_132;

/// The four planted binary patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// 1 iff i + j < n.
    Nested,
    /// 1 iff |i - j| < 0.2 n.
    Banded,
    /// Four overlapping rectangles.
    Blocks,
    /// Ten overlapping diagonal squares.
    BandedBlocks,
}

parse_option!(Pattern, "pattern", {
    "nested" => Self::Nested,
    "banded" => Self::Banded,
    "blocks" => Self::Blocks,
    "banded_blocks" => Self::BandedBlocks,
});

/// A planted `size` x `size` binary matrix (row-major) with each bit flipped with probability
/// `noise`, drawn as the reference generator does (spec §15.1). `size = 300` with the thesis
/// seed gives the matrices of Tables A.1-A.9.
///
/// # Errors
/// `noise` outside [0, 1] or `size` == 0; [`OrderError::OutOfMemory`] when `size` x `size`
/// bytes cannot be allocated.
pub fn planted(
    pattern: Pattern,
    size: usize,
    noise: f64,
    seed: i64,
) -> Result<Vec<u8>, OrderError> {
    if !(0.0..=1.0).contains(&noise) {
        return Err(invalid(
            "noise",
            format!("must lie in [0, 1] (got {noise})"),
        ));
    }
    if size == 0 {
        return Err(invalid("size", "must be positive"));
    }
    let n = size;
    let mut out = try_filled(checked_cells(n, n, "size")?, 0u8, "size")?;
    let mut rng = JavaRandom::new(seed);
    let band = (0.2 * n as f64) as usize;
    let inside = |i: usize, j: usize| match pattern {
        Pattern::Nested => i + j < n,
        Pattern::Banded => i.abs_diff(j) < band,
        _ => false,
    };
    let draw = |rng: &mut JavaRandom, on: bool| -> u8 {
        let u = rng.next_double();
        u8::from((u < 1.0 - noise) == on)
    };
    for c in 0..n {
        for r in 0..n {
            out[r * n + c] = draw(&mut rng, inside(r, c));
        }
    }
    let frac = |x: f64| (x * n as f64) as usize;
    let rects: Vec<(usize, usize, usize, usize)> = match pattern {
        Pattern::Blocks => [
            (0.1, 0.1, 0.2, 0.3),
            (0.2, 0.25, 0.4, 0.5),
            (0.5, 0.1, 0.2, 0.2),
            (0.65, 0.8, 0.2, 0.1),
        ]
        .iter()
        .map(|&(r, c, h, w)| (frac(r), frac(c), frac(r) + frac(h), frac(c) + frac(w)))
        .collect(),
        Pattern::BandedBlocks => {
            // k = 0..9 as in the reference generator; blocks past the edge are clipped
            // (for n = 300 the sixth is the 2 x 2 block at 297..299, which still draws).
            let side = frac(0.2);
            (0..10)
                .filter_map(|k| {
                    let x = k * side;
                    let a = x.saturating_sub(3);
                    let b = (x + side).min(n - 1);
                    (a < b).then(|| (a, a, b - 1, b - 1))
                })
                .collect()
        }
        _ => Vec::new(),
    };
    for (r0, c0, r1, c1) in rects {
        for r in r0..=r1.min(n - 1) {
            for c in c0..=c1.min(n - 1) {
                out[r * n + c] = draw(&mut rng, true);
            }
        }
    }
    Ok(out)
}

/// The categorical planted matrix (spec §15.2): a 120 x 120 block of six 20-column stripes at
/// rows and columns 100..220 of a 300 x 300 matrix, uniform random colours elsewhere.
/// Returned row-major with codes 0..6. `size` scales the layout (300 reproduces the thesis).
///
/// # Errors
/// `size` < 10.
pub fn planted_categorical(size: usize, seed: i64) -> Result<Vec<u32>, OrderError> {
    if size < 10 {
        return Err(invalid("size", "must be at least 10"));
    }
    let n = size;
    let (lo, hi) = (n / 3, n / 3 + 2 * n / 5);
    let stripe = (2 * n / 5).div_ceil(6);
    let mut out = try_filled(checked_cells(n, n, "size")?, 0u32, "size")?;
    let mut rng = JavaRandom::new(seed);
    for c in 0..n {
        for r in 0..n {
            out[r * n + c] = if (lo..hi).contains(&r) && (lo..hi).contains(&c) {
                ((c - lo) / stripe) as u32
            } else {
                rng.next_int(6) as u32
            };
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_random_matches_known_values() {
        // new Random(42): nextInt() = -1170105035, nextDouble() from a fresh Random(42) = 0.7275636800328681
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next(32), -1_170_105_035);
        let mut r = JavaRandom::new(42);
        assert!((r.next_double() - 0.727_563_680_032_868_1).abs() < 1e-16);
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next_int(10), 0);
    }
}
