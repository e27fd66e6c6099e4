//! The moves of the thesis (spec §9.2-§9.5) as permutations of displayed positions.

use rand::{Rng, RngExt};

use crate::arrangement::{Arrangement, Segment};
use crate::error::{OrderError, invalid};
use crate::rectangles::{Tolerance, max_rectangle};

/// The move types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoveKind {
    /// Swap a row with one of its 20 nearest positions.
    Swap,
    /// Swap two adjacent rows.
    AdjacentSwap,
    /// Swap two non-overlapping blocks of equal size.
    BlockSwap,
    /// Move a block of up to 50 rows by a random distance (adjacent-block swap).
    Relocate,
    /// Reverse a block of up to 50 rows.
    Reverse,
    /// Bring two all-ones rectangles sharing a column next to each other.
    SwapRectangles,
}

impl MoveKind {
    /// All move kinds, in the thesis's order.
    pub const ALL: [MoveKind; 6] = [
        MoveKind::SwapRectangles,
        MoveKind::Swap,
        MoveKind::AdjacentSwap,
        MoveKind::Reverse,
        MoveKind::Relocate,
        MoveKind::BlockSwap,
    ];
    /// The name used in the Python API.
    pub fn name(self) -> &'static str {
        match self {
            MoveKind::Swap => "swap",
            MoveKind::AdjacentSwap => "adjacent_swap",
            MoveKind::BlockSwap => "block_swap",
            MoveKind::Relocate => "relocate",
            MoveKind::Reverse => "reverse",
            MoveKind::SwapRectangles => "swap_rectangles",
        }
    }
}

impl std::str::FromStr for MoveKind {
    type Err = OrderError;
    fn from_str(s: &str) -> Result<Self, OrderError> {
        MoveKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                invalid(
                    "moves",
                    format!(
                        "unknown move {s:?}; expected swap, adjacent_swap, block_swap, relocate, reverse or swap_rectangles"
                    ),
                )
            })
    }
}

/// A concrete move on the displayed positions of one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// Swap positions a and b.
    Swap(usize, usize),
    /// Swap the equal blocks [a, a+len) and [b, b+len) (non-overlapping).
    BlockSwap {
        /// First block start.
        a: usize,
        /// Second block start.
        b: usize,
        /// Block length.
        len: usize,
    },
    /// Swap the adjacent blocks [start, start+first) and [start+first, start+first+second).
    AdjacentBlocks {
        /// Start of the first block.
        start: usize,
        /// Length of the first block.
        first: usize,
        /// Length of the second block.
        second: usize,
    },
    /// Reverse positions a..=b.
    Reverse(usize, usize),
}

impl Move {
    /// The move as segments (empty for an identity move).
    pub fn segments(&self) -> Vec<Segment> {
        let seg = |dst, src, len, mirrored| Segment {
            dst,
            src,
            len,
            mirrored,
        };
        match *self {
            Move::Swap(a, b) if a != b => vec![seg(a, b, 1, false), seg(b, a, 1, false)],
            Move::BlockSwap { a, b, len } if a != b && len > 0 => {
                vec![seg(a, b, len, false), seg(b, a, len, false)]
            }
            Move::AdjacentBlocks {
                start,
                first,
                second,
            } if first > 0 && second > 0 => vec![
                seg(start, start + first, second, false),
                seg(start + second, start, first, false),
            ],
            Move::Reverse(a, b) if b > a => vec![seg(a, a, b - a + 1, true)],
            _ => Vec::new(),
        }
    }
}

/// Where and how moves are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoveConfig {
    /// A swap partner lies within this distance (10: the 20 nearest positions).
    pub swap_radius: usize,
    /// Longest block for relocate and reverse (50 in the reference code).
    pub max_block: usize,
    /// Noise tolerance of the rectangle finder.
    pub tolerance: Tolerance,
}

impl Default for MoveConfig {
    fn default() -> Self {
        Self {
            swap_radius: 10,
            max_block: 50,
            tolerance: Tolerance::default(),
        }
    }
}

fn offset(rng: &mut impl Rng, a: usize, radius: usize, lo: usize, hi: usize) -> usize {
    let d = rng.random_range(0..=radius);
    if rng.random_bool(0.5) {
        (a + d).min(hi - 1)
    } else {
        a.saturating_sub(d).max(lo)
    }
}

/// Draws a move of `kind` on `axis` inside positions `lo..hi` (None when none applies).
pub fn random_move(
    arr: &Arrangement,
    axis: usize,
    kind: MoveKind,
    lo: usize,
    hi: usize,
    cfg: &MoveConfig,
    rng: &mut impl Rng,
) -> Option<Move> {
    let m = hi - lo;
    if m < 2 {
        return None;
    }
    Some(match kind {
        MoveKind::Swap => {
            let a = rng.random_range(lo..hi);
            Move::Swap(a, offset(rng, a, cfg.swap_radius, lo, hi))
        }
        MoveKind::AdjacentSwap => {
            let a = rng.random_range(lo..hi - 1);
            Move::Swap(a, a + 1)
        }
        MoveKind::BlockSwap => {
            let len = rng.random_range(1..=(m / 2).min(cfg.max_block).max(1));
            let a = rng.random_range(lo..=hi - 2 * len);
            let b = rng.random_range(a + len..=hi - len);
            Move::BlockSwap { a, b, len }
        }
        MoveKind::Relocate => {
            let a = rng.random_range(lo..hi);
            let b = offset(rng, a, cfg.max_block.saturating_sub(1), lo, hi);
            if a <= b {
                let k = rng.random_range(0..hi - b);
                Move::AdjacentBlocks {
                    start: a,
                    first: b - a + 1,
                    second: k,
                }
            } else {
                let k = rng.random_range(0..=(b - lo));
                Move::AdjacentBlocks {
                    start: b - k,
                    first: k,
                    second: a - b + 1,
                }
            }
        }
        MoveKind::Reverse => {
            let a = rng.random_range(lo..hi);
            let b = offset(rng, a, cfg.max_block.saturating_sub(1), lo, hi);
            Move::Reverse(a.min(b), a.max(b))
        }
        MoveKind::SwapRectangles => return swap_rectangles(arr, axis, lo, hi, cfg, rng),
    })
}

/// Swap-rectangles (spec §9.5): a random 1, its best rectangle R1 (score width·√height),
/// another 1 in the same column outside R1, its rectangle R2 (score √height · column overlap
/// with R1); the lower rectangle's rows are moved up to touch the upper one.
fn swap_rectangles(
    arr: &Arrangement,
    axis: usize,
    lo: usize,
    hi: usize,
    cfg: &MoveConfig,
    rng: &mut impl Rng,
) -> Option<Move> {
    let n = arr.len(1 - axis);
    let layers = arr.matrix().n_layers();
    let mut p1 = None;
    for _ in 0..100 {
        let (r, c, l) = (
            rng.random_range(lo..hi),
            rng.random_range(0..n),
            rng.random_range(0..layers),
        );
        if arr.cell(axis, l, r, c) {
            p1 = Some((r, c, l));
            break;
        }
    }
    let (r1, c, l) = p1?;
    let cell = |r: usize, c: usize| arr.cell(axis, l, r, c);
    let rect1 = max_rectangle(&cell, lo, hi, n, r1, c, &cfg.tolerance, None);
    let mut p2 = None;
    for _ in 0..20 {
        let r = rng.random_range(lo..hi);
        if (r < rect1.top || r > rect1.bottom) && cell(r, c) {
            p2 = Some(r);
            break;
        }
    }
    let rect2 = max_rectangle(
        &cell,
        lo,
        hi,
        n,
        p2?,
        c,
        &cfg.tolerance,
        Some((rect1.left, rect1.right)),
    );
    let (upper, lower) = if rect1.top < rect2.top {
        (rect1, rect2)
    } else {
        (rect2, rect1)
    };
    if lower.top <= upper.bottom + 1 {
        return None;
    }
    Some(Move::AdjacentBlocks {
        start: upper.bottom + 1,
        first: lower.top - upper.bottom - 1,
        second: lower.bottom - lower.top + 1,
    })
}
