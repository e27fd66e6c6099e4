//! The moves of the thesis (spec §9.2-§9.5) as permutations of displayed positions.

use rand::{Rng, RngExt};

use crate::arrangement::{Arrangement, Segment};
use crate::error::{OrderError, invalid};
use crate::rectangles::{Area, Tolerance, max_rectangle};

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
    /// Swap two colours of one attribute (original column) so that a cell takes the colour
    /// of its left or right neighbour (categorical data with per-column colours, spec §9.5).
    Recolor,
}

impl MoveKind {
    /// All permutation move kinds, in the thesis's order ([`MoveKind::Recolor`] changes
    /// colours, not positions, and is not among them).
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
            MoveKind::Recolor => "recolor",
        }
    }
}

impl std::str::FromStr for MoveKind {
    type Err = OrderError;
    fn from_str(s: &str) -> Result<Self, OrderError> {
        MoveKind::ALL
            .iter()
            .copied()
            .chain([MoveKind::Recolor])
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                invalid(
                    "moves",
                    format!(
                        "unknown move {s:?}; expected swap, adjacent_swap, block_swap, relocate, reverse, swap_rectangles or recolor"
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
    /// Colours may be swapped per original column (categorical "notCommonAttributes"): on
    /// the column axis swap-rectangles may pair rectangles of different colours and recolour
    /// the narrower one (spec §9.5).
    pub recolour: bool,
}

impl Default for MoveConfig {
    fn default() -> Self {
        Self {
            swap_radius: 10,
            max_block: 50,
            tolerance: Tolerance::default(),
            recolour: false,
        }
    }
}

/// A recolouring of whole attributes: colours `a` and `b` swap in every original column of
/// `cols`, then the optional position move `then` is applied on the column axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recolour {
    /// Original columns to recolour.
    pub cols: Vec<usize>,
    /// First colour.
    pub a: usize,
    /// Second colour.
    pub b: usize,
    /// Relocation applied after the recolouring (columns axis).
    pub then: Option<Move>,
}

/// A proposal of the search: a permutation of positions, or a recolouring (+ relocation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposal {
    /// Positions move on the given axis.
    Perm(Move),
    /// Colours change (and columns may move).
    Recolour(Recolour),
}

/// Draws a recolouring move (columns `lo..hi` on the column axis): a random cell takes the
/// colour of its left or right neighbour by swapping the two colours in its whole column.
pub fn random_recolour(
    arr: &Arrangement,
    lo: usize,
    hi: usize,
    rng: &mut impl Rng,
) -> Option<Recolour> {
    let (m, n) = (arr.len(0), arr.len(1));
    let k = arr.matrix().n_layers();
    if k < 2 || n < 2 || hi <= lo {
        return None;
    }
    let pc = rng.random_range(lo..hi);
    let nb = if pc == 0 || (pc + 1 < n && rng.random_bool(0.5)) {
        pc + 1
    } else {
        pc - 1
    };
    let r = rng.random_range(0..m);
    let colour = |c: usize| (0..k).find(|&l| arr.cell(0, l, r, c));
    let (b, a) = (colour(pc)?, colour(nb)?);
    if a == b {
        return None;
    }
    Some(Recolour {
        cols: vec![arr.order(1)[pc]],
        a,
        b,
        then: None,
    })
}

/// Draws a proposal of `kind` on `axis` (recolourings only on the column axis, and only
/// with `cfg.recolour` for swap-rectangles).
pub fn random_proposal(
    arr: &Arrangement,
    axis: usize,
    kind: MoveKind,
    lo: usize,
    hi: usize,
    cfg: &MoveConfig,
    rng: &mut impl Rng,
) -> Option<Proposal> {
    match kind {
        MoveKind::Recolor if axis == 1 => random_recolour(arr, lo, hi, rng).map(Proposal::Recolour),
        MoveKind::Recolor => None,
        MoveKind::SwapRectangles if axis == 1 && cfg.recolour => {
            swap_rectangles_recolour(arr, lo, hi, cfg, rng)
        }
        _ => random_move(arr, axis, kind, lo, hi, cfg, rng).map(Proposal::Perm),
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
        MoveKind::Recolor => return None,
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
    let area = Area::new(lo, hi, n, cfg.tolerance);
    let rect1 = max_rectangle(&cell, &area, (r1, c), None);
    let mut p2 = None;
    for _ in 0..20 {
        let r = rng.random_range(lo..hi);
        if (r < rect1.top || r > rect1.bottom) && cell(r, c) {
            p2 = Some(r);
            break;
        }
    }
    let rect2 = max_rectangle(&cell, &area, (p2?, c), Some((rect1.left, rect1.right)));
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

/// The categorical variant of swap-rectangles on the column axis (spec §9.5): the rows of the
/// transposed matrix are attributes, so the second rectangle may have another colour; the
/// narrower of the two (fewer attributes) is recoloured to the other's colour over its whole
/// attributes, then relocated next to the other.
fn swap_rectangles_recolour(
    arr: &Arrangement,
    lo: usize,
    hi: usize,
    cfg: &MoveConfig,
    rng: &mut impl Rng,
) -> Option<Proposal> {
    let axis = 1;
    let n = arr.len(0);
    let k = arr.matrix().n_layers();
    let layer_at = |r: usize, c: usize| (0..k).find(|&l| arr.cell(axis, l, r, c));
    let (r1, c) = (rng.random_range(lo..hi), rng.random_range(0..n));
    let l1 = layer_at(r1, c)?;
    let cell1 = |r: usize, c: usize| arr.cell(axis, l1, r, c);
    let area = Area::new(lo, hi, n, cfg.tolerance);
    let rect1 = max_rectangle(&cell1, &area, (r1, c), None);
    let mut p2 = None;
    for _ in 0..20 {
        let r = rng.random_range(lo..hi);
        if r < rect1.top || r > rect1.bottom {
            p2 = Some(r);
            break;
        }
    }
    let r2 = p2?;
    let l2 = layer_at(r2, c)?;
    let cell2 = |r: usize, c: usize| arr.cell(axis, l2, r, c);
    let rect2 = max_rectangle(&cell2, &area, (r2, c), Some((rect1.left, rect1.right)));
    let (upper, lower) = if rect1.top < rect2.top {
        (rect1, rect2)
    } else {
        (rect2, rect1)
    };
    if lower.top <= upper.bottom + 1 {
        return None;
    }
    let then = Move::AdjacentBlocks {
        start: upper.bottom + 1,
        first: lower.top - upper.bottom - 1,
        second: lower.bottom - lower.top + 1,
    };
    if l1 == l2 {
        return Some(Proposal::Perm(then));
    }
    let h = |r: &crate::Rect| r.bottom - r.top + 1;
    let narrow = if h(&rect2) <= h(&rect1) { rect2 } else { rect1 };
    let order = arr.order(1);
    Some(Proposal::Recolour(Recolour {
        cols: order[narrow.top..=narrow.bottom].to_vec(),
        a: l1,
        b: l2,
        then: Some(then),
    }))
}
