//! The options of a fit as the Python bindings hand them over (strings and numbers), parsed
//! into the crate's parameter types: the bindings stay a few lines and every spelling is
//! checked here, with a cargo test.

use crate::bnb::Bound;
use crate::error::invalid;
use crate::error::parse_option;
use crate::fit::FitParams;
use crate::pls::{PlsParams, Step};
use crate::rectangles::Tolerance;
use crate::search::{Progress, SearchParams};
use crate::{
    ErrorKind, Kernel, KernelKind, Matrix, MoveConfig, MoveKind, Objective, OrderError, Padding,
};

/// A matrix of row-major colour codes: binary (`n_colours == 0`, codes 0 and 1) or
/// categorical with `n_colours` colours.
///
/// # Errors
/// A length mismatch, an empty matrix, or a code out of range (named with its cell).
pub fn matrix_from_codes(
    n_rows: usize,
    n_cols: usize,
    codes: &[u32],
    n_colours: usize,
) -> Result<Matrix, OrderError> {
    if n_colours > 0 {
        return Matrix::categorical(n_rows, n_cols, codes, n_colours);
    }
    if let Some(i) = codes.iter().position(|&v| v > 1) {
        let col = i % n_cols.max(1);
        let row = i / n_cols.max(1);
        let reason = format!(
            "binary matrices hold only 0 and 1; found {} at row {row}, column {col}",
            codes[i]
        );
        return Err(invalid("matrix", reason));
    }
    let bits: Vec<u8> = codes.iter().map(|&v| u8::from(v == 1)).collect();
    Matrix::binary(n_rows, n_cols, &bits)
}

/// The ConvoMap objective: a `kernel` of `kernel_size` (rows, columns), or explicit
/// `weights` (rows, columns, row-major values) that take precedence, with `padding` and
/// `error`.
///
/// # Errors
/// A bad kernel size or bad weights.
pub fn objective(
    kernel: KernelKind,
    kernel_size: (usize, usize),
    weights: Option<(usize, usize, &[f64])>,
    padding: Padding,
    error: ErrorKind,
) -> Result<Objective, OrderError> {
    let kernel = match weights {
        Some((r, c, w)) => Kernel::from_weights(r, c, w)?,
        None => Kernel::new(kernel, kernel_size.0, kernel_size.1)?,
    };
    Ok(Objective {
        kernel,
        padding,
        kind: error,
    })
}

parse_option!(Bound, "bound", { "fast" => Bound::Fast, "slow" => Bound::Slow });

/// Indices handed over as `i64` (NumPy's default integer), as `usize`; a negative one becomes
/// `usize::MAX`, which the receiving function rejects as out of range.
pub fn indices_from_i64(v: &[i64]) -> Vec<usize> {
    v.iter()
        .map(|&i| usize::try_from(i).unwrap_or(usize::MAX))
        .collect()
}

/// Row-major `(k, 2)` pairs of `i64` indices (a SciPy linkage's first two columns) as
/// `[usize; 2]`, negative ones as `usize::MAX`.
pub fn pairs_from_i64(v: &[i64]) -> Vec<[usize; 2]> {
    let idx = indices_from_i64(v);
    idx.chunks_exact(2).map(|c| [c[0], c[1]]).collect()
}

/// How an open path through points is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMethod {
    /// Held-Karp (at most 16 free cities): the oracle.
    Exact,
    /// A start, then 2-opt and Or-opt on neighbour lists.
    Heuristic,
}

parse_option!(PathMethod, "method", {
    "exact" => PathMethod::Exact,
    "heuristic" => PathMethod::Heuristic,
});

/// The options of a ConvoMap fit, as the Python estimator spells them.
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// "tsp" or "none".
    pub init: String,
    /// "pls" or "ls".
    pub method: String,
    /// Move names ([`MoveKind`]).
    pub moves: Vec<String>,
    /// Iterations of each local search.
    pub max_iter: usize,
    /// Segment length of the adaptive weights.
    pub segment_length: usize,
    /// Reaction factor of the adaptive weights.
    pub reaction: f64,
    /// Stop threshold of a local search (`None`: run all iterations).
    pub stop_threshold: Option<f64>,
    /// Accept moves that leave the error unchanged.
    pub accept_ties: bool,
    /// "rows", "columns" or "both".
    pub axes: String,
    /// Swap radius of the moves.
    pub swap_radius: usize,
    /// Longest block of relocate and reverse.
    pub max_block: usize,
    /// Rectangle tolerance (zeros, extra zeros, per ones, minimum density).
    pub tolerance: (usize, usize, usize, f64),
    /// P-LS schedule entries ([`Step::parse`]).
    pub schedule: Vec<String>,
    /// Blocks of the block ordering.
    pub n_blocks: usize,
    /// Seed.
    pub seed: u64,
    /// Swap colours per column (categorical matrices).
    pub recolor: bool,
    /// Cuts of the "kmax" schedule step.
    pub kmax_k: usize,
    /// Iterated-local-search rounds after the schedule.
    pub restarts: usize,
    /// Wall-clock budget in seconds.
    pub time_budget: Option<f64>,
    /// Block size of the final polish (0: off).
    pub polish: usize,
}

impl FitOptions {
    /// The [`FitParams`] these options spell, with `progress` as the hook of the search.
    ///
    /// # Errors
    /// An unknown init, method, move, axes or schedule entry.
    pub fn params(&self, progress: Option<Progress>) -> Result<FitParams, OrderError> {
        let moves = self
            .moves
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<MoveKind>, _>>()?;
        let schedule = self.schedule.iter().map(|s| Step::parse(s, self.kmax_k));
        let t = self.tolerance;
        let config = MoveConfig {
            swap_radius: self.swap_radius,
            max_block: self.max_block,
            tolerance: Tolerance {
                zeros: t.0,
                extra_zeros: t.1,
                per_ones: t.2,
                min_density: t.3,
            },
            recolour: self.recolor,
        };
        let search = SearchParams {
            moves,
            max_iter: self.max_iter,
            segment: self.segment_length,
            reaction: self.reaction,
            stop_threshold: self.stop_threshold,
            accept_ties: self.accept_ties,
            axes: self.axes.parse()?,
            config,
            seed: self.seed,
            progress,
        };
        let pls = PlsParams {
            search,
            schedule: schedule.collect::<Result<Vec<_>, _>>()?,
            n_blocks: self.n_blocks,
            restarts: self.restarts,
            time_budget: self.time_budget,
            polish: (self.polish > 0).then_some(self.polish),
        };
        Ok(FitParams {
            init: self.init.parse()?,
            method: self.method.parse()?,
            pls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::{Init, Method};
    use crate::search::Axes;

    fn spelled() -> FitOptions {
        FitOptions {
            init: "tsp".into(),
            method: "pls".into(),
            moves: MoveKind::ALL.iter().map(|k| k.name().to_string()).collect(),
            max_iter: 5000,
            segment_length: 100,
            reaction: 0.6,
            stop_threshold: Some(-1e-4),
            accept_ties: true,
            axes: "both".into(),
            swap_radius: 10,
            max_block: 50,
            tolerance: (2, 1, 4, 0.8),
            schedule: ["block_ordering", "3", "kmax"].map(String::from).to_vec(),
            n_blocks: 10,
            seed: 7,
            recolor: false,
            kmax_k: 5,
            restarts: 2,
            time_budget: None,
            polish: 0,
        }
    }

    #[test]
    fn every_spelling_parses_and_a_wrong_one_names_its_parameter() {
        let o = spelled();
        let p = o.params(None).unwrap();
        assert_eq!((p.init, p.method), (Init::Tsp, Method::Pls));
        assert_eq!(p.pls.search.axes, Axes::Both);
        assert_eq!(p.pls.search.moves, MoveKind::ALL.to_vec());
        let steps = vec![Step::BlockOrdering, Step::Split(3), Step::KMax(5)];
        assert_eq!(p.pls.schedule, steps);
        assert_eq!(
            (p.pls.restarts, p.pls.polish, p.pls.search.seed),
            (2, None, 7)
        );
        assert_eq!(p.pls.search.config.tolerance, Tolerance::default());
        for (bad, name) in [
            (
                FitOptions {
                    init: "x".into(),
                    ..o.clone()
                },
                "init",
            ),
            (
                FitOptions {
                    method: "x".into(),
                    ..o.clone()
                },
                "method",
            ),
            (
                FitOptions {
                    axes: "x".into(),
                    ..o.clone()
                },
                "axes",
            ),
            (
                FitOptions {
                    moves: vec!["x".into()],
                    ..o.clone()
                },
                "moves",
            ),
            (
                FitOptions {
                    schedule: vec!["0".into()],
                    ..o.clone()
                },
                "schedule",
            ),
        ] {
            match bad.params(None) {
                Err(OrderError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!("fast".parse::<Bound>().unwrap(), Bound::Fast);
        assert!("quick".parse::<Bound>().is_err());
        assert_eq!("exact".parse::<PathMethod>().unwrap(), PathMethod::Exact);
        assert!("greedy".parse::<PathMethod>().is_err());
    }

    #[test]
    fn i64_indices_convert_and_negatives_fall_out_of_range() {
        assert_eq!(indices_from_i64(&[0, 3, -1]), vec![0, 3, usize::MAX]);
        assert_eq!(
            pairs_from_i64(&[0, 1, 2, -3]),
            vec![[0, 1], [2, usize::MAX]]
        );
    }

    #[test]
    fn codes_become_the_matrix_they_spell_and_bad_codes_name_the_cell() {
        let m = matrix_from_codes(2, 2, &[1, 0, 0, 1], 0).unwrap();
        let direct = Matrix::binary(2, 2, &[1, 0, 0, 1]).unwrap();
        let (gbs, zero, abs) = (KernelKind::Gbs, Padding::Zero, ErrorKind::Abs);
        let obj = objective(gbs, (3, 3), None, zero, abs).unwrap();
        let a = crate::Arrangement::new(m, obj.clone(), None, None)
            .unwrap()
            .error();
        let b = crate::Arrangement::new(direct, obj, None, None)
            .unwrap()
            .error();
        assert_eq!(a, b);
        let e = matrix_from_codes(2, 2, &[1, 0, 256, 1], 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("found 256 at row 1, column 0"), "{e}");
        assert!(matrix_from_codes(1, 3, &[0, 2, 1], 3).is_ok());
        assert!("nope".parse::<KernelKind>().is_err());
        assert!("cube".parse::<ErrorKind>().is_err());
        let w = [1.0; 9];
        assert!(objective(gbs, (1, 1), Some((3, 3, &w)), zero, abs).is_ok());
    }
}
