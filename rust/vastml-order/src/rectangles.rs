//! The rectangle finder of swap-rectangles (spec §9.5, Algorithms 1-4), with noise tolerance.

/// How many zeros a rectangle may swallow (spec §9.5, "noise tolerance").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Zeros that may be crossed along a column (t).
    pub zeros: usize,
    /// Extra zeros allowed ... (z)
    pub extra_zeros: usize,
    /// ... per this many ones crossed (u).
    pub per_ones: usize,
    /// Rows at the top and bottom with a lower density of ones are trimmed.
    pub min_density: f64,
}

impl Default for Tolerance {
    /// The thesis values: t = 2, z = 1, u = 4, trim below 80 %.
    fn default() -> Self {
        Self {
            zeros: 2,
            extra_zeros: 1,
            per_ones: 4,
            min_density: 0.8,
        }
    }
}

impl Tolerance {
    /// No tolerance: rectangles are all ones.
    pub fn exact() -> Self {
        Self {
            zeros: 0,
            extra_zeros: 0,
            per_ones: 1,
            min_density: 1.0,
        }
    }
}

/// An inclusive rectangle of displayed positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// First row.
    pub top: usize,
    /// Last row.
    pub bottom: usize,
    /// First column.
    pub left: usize,
    /// Last column.
    pub right: usize,
}

/// Where rectangles are searched: rows `lo..hi` of a grid of `n_cols` columns, with the
/// noise tolerance `tol`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    /// First row searched.
    pub lo: usize,
    /// One past the last row searched.
    pub hi: usize,
    /// Number of columns.
    pub n_cols: usize,
    /// How many zeros a rectangle may swallow.
    pub tol: Tolerance,
}

impl Area {
    /// Rows `lo..hi` of a grid of `n_cols` columns, with tolerance `tol`.
    pub fn new(lo: usize, hi: usize, n_cols: usize, tol: Tolerance) -> Self {
        Area {
            lo,
            hi,
            n_cols,
            tol,
        }
    }
}

/// Alg. 1 with tolerance: the span of rows around `r` in column `c`, within `[lo_b, hi_b]`.
fn boundary(
    cell: &impl Fn(usize, usize) -> bool,
    r: usize,
    c: usize,
    lo_b: usize,
    hi_b: usize,
    tol: &Tolerance,
) -> (usize, usize) {
    let walk = |up: bool| -> usize {
        let (mut i, mut end) = (r, r);
        let (mut budget, mut ones) = (tol.zeros, 0usize);
        loop {
            let next = if up {
                if i == lo_b {
                    break;
                }
                i - 1
            } else {
                if i == hi_b {
                    break;
                }
                i + 1
            };
            if cell(next, c) {
                ones += 1;
                if tol.per_ones > 0 && ones % tol.per_ones == 0 {
                    budget += tol.extra_zeros;
                }
            } else if budget > 0 {
                budget -= 1;
            } else {
                break;
            }
            i = next;
            end = next;
        }
        end
    };
    (walk(true), walk(false))
}

/// Alg. 2: along row `r` from column `c` in one direction, the distinct row spans
/// (farthest column for each span), starting with column `c` itself.
fn limits(
    cell: &impl Fn(usize, usize) -> bool,
    area: &Area,
    (r, c): (usize, usize),
    right: bool,
) -> Vec<(usize, (usize, usize))> {
    let Area {
        lo, hi, n_cols: n, ..
    } = *area;
    let tol = &area.tol;
    let mut cur = boundary(cell, r, c, lo, hi - 1, tol);
    let mut out = Vec::new();
    let mut pc = c;
    loop {
        let nc = if right {
            if pc + 1 >= n {
                break;
            }
            pc + 1
        } else {
            if pc == 0 {
                break;
            }
            pc - 1
        };
        if !cell(r, nc) {
            break;
        }
        let prev = cur;
        let b = boundary(cell, r, nc, prev.0, prev.1, tol);
        cur = (b.0.max(prev.0), b.1.min(prev.1));
        if cur != prev {
            out.push((pc, prev));
        }
        pc = nc;
    }
    out.push((pc, cur));
    out
}

/// Alg. 3: the best rectangle of `area` containing cell `(r, c)`. The score is
/// width·√height, or √height · (column overlap with `overlap`) when given.
pub fn max_rectangle(
    cell: &impl Fn(usize, usize) -> bool,
    area: &Area,
    (r, c): (usize, usize),
    overlap: Option<(usize, usize)>,
) -> Rect {
    let left = limits(cell, area, (r, c), false);
    let right = limits(cell, area, (r, c), true);
    let mut best = Rect {
        top: r,
        bottom: r,
        left: c,
        right: c,
    };
    let mut best_score = f64::NEG_INFINITY;
    for &(rc, rb) in &right {
        for &(lc, lb) in &left {
            let (top, bottom) = (lb.0.max(rb.0), lb.1.min(rb.1));
            let h = (bottom - top + 1) as f64;
            let width = match overlap {
                None => rc - lc + 1,
                Some((a, b)) => (rc.min(b) + 1).saturating_sub(lc.max(a)),
            } as f64;
            let score = width * h.sqrt();
            if score > best_score {
                best_score = score;
                best = Rect {
                    top,
                    bottom,
                    left: lc,
                    right: rc,
                };
            }
        }
    }
    let density = |row: usize| {
        let ones = (best.left..=best.right).filter(|&j| cell(row, j)).count();
        ones as f64 / (best.right - best.left + 1) as f64
    };
    while best.top < r && density(best.top) < area.tol.min_density {
        best.top += 1;
    }
    while best.bottom > r && density(best.bottom) < area.tol.min_density {
        best.bottom -= 1;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid<'a>(rows: &'a [&'a str]) -> impl Fn(usize, usize) -> bool + 'a {
        move |r, c| rows[r].as_bytes()[c] == b'1'
    }

    #[test]
    fn noise_examples() {
        let g = ["101", "111", "111"];
        let cell = grid(&g);
        let exact = max_rectangle(&cell, &Area::new(0, 3, 3, Tolerance::exact()), (2, 2), None);
        assert_eq!(
            (exact.top, exact.bottom, exact.left, exact.right),
            (1, 2, 0, 2)
        );
        let tol = Tolerance {
            zeros: 1,
            extra_zeros: 0,
            per_ones: 4,
            min_density: 0.6,
        };
        let loose = max_rectangle(&cell, &Area::new(0, 3, 3, tol), (2, 2), None);
        assert_eq!((loose.top, loose.bottom), (0, 2));
        let g = ["000", "111", "111"];
        let cell = grid(&g);
        let t = Tolerance {
            zeros: 1,
            ..Tolerance::default()
        };
        let rect = max_rectangle(&cell, &Area::new(0, 3, 3, t), (2, 1), None);
        assert_eq!(rect.top, 1);
    }

    #[test]
    fn figure_5_6_lists() {
        // A staircase in which the right and left lists of the red point are known.
        let g = ["11111", "11111", "11111", "01111", "00111"];
        let cell = grid(&g);
        let l = limits(
            &cell,
            &Area::new(0, 5, 5, Tolerance::exact()),
            (2, 4),
            false,
        );
        assert_eq!(l, vec![(2, (0, 4)), (1, (0, 3)), (0, (0, 2))]);
        let rect = max_rectangle(&cell, &Area::new(0, 5, 5, Tolerance::exact()), (2, 4), None);
        // candidates: 3x5 (w 3, h 5) = 6.7, 4x4 = 8, 5x3 = 8.66
        assert_eq!((rect.left, rect.right, rect.top, rect.bottom), (0, 4, 0, 2));
    }
}
