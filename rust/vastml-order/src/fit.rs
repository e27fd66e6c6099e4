//! The whole ConvoMap fit: an optional TSP start, then plain local search or the P-LS
//! pipeline, with the history of the error along the way.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_order::fit::{FitParams, Method, fit};
//! use vastml_order::{ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding};
//!
//! // two interleaved blocks: rows 0, 2, 4 share columns 0-2, rows 1, 3, 5 columns 3-5
//! let bits: Vec<u8> = (0..36)
//!     .map(|i| u8::from((i / 6) % 2 == usize::from(i % 6 >= 3)))
//!     .collect();
//! let m = Matrix::binary(6, 6, &bits).unwrap();
//! let obj = Objective {
//!     kernel: Kernel::new(KernelKind::Gbs, 3, 3).unwrap(),
//!     padding: Padding::Zero,
//!     kind: ErrorKind::Abs,
//! };
//! let params = FitParams { method: Method::LocalSearch, ..FitParams::default() };
//! let report = fit(m, obj, None, None, &params, &AtomicBool::new(false)).unwrap();
//! assert!(report.error < report.history[0].1); // better than the order it started from
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::error::invalid;
use crate::error::parse_option;
use crate::pls::{PlsParams, Step, pls};
use crate::search::{Axes, Progress, SearchParams, local_search};
use crate::{Arrangement, Matrix, MoveKind, Objective, OrderError};

/// How the fit starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Init {
    /// A TSP path over the rows and columns (Hamming distances), as the thesis does.
    #[default]
    Tsp,
    /// The orders given (or the identity).
    None,
}

/// The search after the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// The parallel P-LS pipeline ([`crate::pls()`]).
    #[default]
    Pls,
    /// One local search ([`crate::local_search`]).
    LocalSearch,
}

parse_option!(Init, "init", { "tsp" => Init::Tsp, "none" => Init::None });
parse_option!(Method, "method", { "pls" => Method::Pls, "ls" => Method::LocalSearch });
parse_option!(Axes, "axes", { "rows" => Axes::Rows, "columns" => Axes::Cols, "both" => Axes::Both });

impl Step {
    /// Parses a schedule entry: `block_ordering`, `kmax` (with `kmax_cuts` cuts),
    /// `restart`, `stop_unless_improved`, `polish`, or a positive number of splits.
    ///
    /// # Errors
    /// [`OrderError::InvalidParameter`] naming `schedule` for anything else.
    pub fn parse(entry: &str, kmax_cuts: usize) -> Result<Self, OrderError> {
        match entry {
            "block_ordering" => Ok(Self::BlockOrdering),
            "kmax" => Ok(Self::KMax(kmax_cuts)),
            "restart" => Ok(Self::Restart),
            "stop_unless_improved" => Ok(Self::StopUnlessImproved),
            "polish" => Ok(Self::Polish(8)),
            k => k
                .parse::<usize>()
                .ok()
                .filter(|&k| k > 0)
                .map(Self::Split)
                .ok_or_else(|| {
                    invalid(
                        "schedule",
                        format!(
                            "entries must be 'block_ordering', 'kmax', 'restart', \
                             'stop_unless_improved', 'polish' or a positive number of splits, \
                             got {k:?}"
                        ),
                    )
                }),
        }
    }
}

/// Everything [`fit`] needs besides the matrix and the objective.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FitParams {
    /// The start.
    pub init: Init,
    /// The search.
    pub method: Method,
    /// P-LS parameters; with [`Method::LocalSearch`] only `pls.search` is used. Its
    /// `time_budget` counts from the start of the fit, the TSP included.
    pub pls: PlsParams,
}

/// What [`fit`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct FitReport {
    /// Final row order (shown position -> original row).
    pub row_order: Vec<usize>,
    /// Final column order.
    pub col_order: Vec<usize>,
    /// Final error.
    pub error: f64,
    /// (stage, error) after the start, the TSP and each step of the search.
    pub history: Vec<(String, f64)>,
    /// Final adaptive move weights of a plain local search (empty for P-LS).
    pub move_weights: Vec<(String, f64)>,
    /// Per-column colour maps (n_cols x n_colours, row-major; empty for binary matrices).
    pub colour_maps: Vec<u8>,
    /// The progress hook asked to stop: the orders are those of the moment it did.
    pub stopped: bool,
}

/// The search parameters with the recolour move dropped unless recolouring is on.
fn effective_search(search: &SearchParams) -> Result<SearchParams, OrderError> {
    let mut s = search.clone();
    if !s.config.recolour {
        s.moves.retain(|&k| k != MoveKind::Recolor);
    }
    if s.moves.is_empty() {
        return Err(invalid(
            "moves",
            "give at least one move (the 'recolor' move needs `recolor=True`)",
        ));
    }
    Ok(s)
}

/// Runs the ConvoMap fit on `matrix` shown first in `row_order` x `col_order`.
///
/// The progress hook of `params.pls.search` is called after the TSP start (stage `"tsp"`) and
/// by the search; returning false from it stops the fit, which then reports the arrangement
/// of that moment with `stopped` set.
///
/// # Errors
/// Invalid orders or parameters ([`OrderError::InvalidParameter`]), recolouring on a binary
/// matrix, or [`OrderError::Cancelled`] when `cancel` is raised or the hook asks to stop.
pub fn fit(
    matrix: Matrix,
    objective: Objective,
    row_order: Option<&[usize]>,
    col_order: Option<&[usize]>,
    params: &FitParams,
    cancel: &AtomicBool,
) -> Result<FitReport, OrderError> {
    let clock = Instant::now();
    let mut search = effective_search(&params.pls.search)?;
    // A hook that asks to stop raises `stopped`, so that the Cancelled it causes ends the fit
    // with the arrangement of that moment rather than with an error (Ctrl-C still errors).
    let stopped = Arc::new(AtomicBool::new(false));
    if let Some(inner) = search.progress.take() {
        let flag = stopped.clone();
        search.progress = Some(Progress(Arc::new(
            move |stage: &str, step: usize, a: &Arrangement| {
                let go_on = inner.report(stage, step, a);
                if !go_on {
                    flag.store(true, Ordering::Relaxed);
                }
                go_on
            },
        )));
    }
    if search.config.recolour && matrix.n_layers() <= 1 {
        return Err(invalid(
            "recolor",
            "`recolor=True` needs a categorical matrix (colours are swapped per column)",
        ));
    }
    let mut arr = Arrangement::new_cancellable(matrix, objective, row_order, col_order, cancel)?;
    let mut history = vec![("start".to_string(), arr.error())];
    let mut move_weights = Vec::new();
    let outcome = run(
        &mut arr,
        &search,
        params,
        clock,
        cancel,
        &mut history,
        &mut move_weights,
    );
    let was_stopped = stopped.load(Ordering::Relaxed);
    match outcome {
        Ok(()) => {}
        Err(OrderError::Cancelled) if was_stopped => {}
        Err(e) => return Err(e),
    }
    Ok(FitReport {
        row_order: arr.order(0),
        col_order: arr.order(1),
        error: arr.error(),
        history,
        move_weights,
        colour_maps: arr.colour_maps().to_vec(),
        stopped: was_stopped,
    })
}

/// The start and the search of [`fit`], on `arr`.
fn run(
    arr: &mut Arrangement,
    search: &SearchParams,
    params: &FitParams,
    clock: Instant,
    cancel: &AtomicBool,
    history: &mut Vec<(String, f64)>,
    move_weights: &mut Vec<(String, f64)>,
) -> Result<(), OrderError> {
    if params.init == Init::Tsp {
        if search.config.recolour {
            let control = vastml_core::Control::new(cancel);
            crate::colours::tsp_arrange_recolour(arr, search.axes, control)?;
        } else {
            crate::tsp::tsp_arrange(arr, search.axes, vastml_core::Control::new(cancel))?;
        }
        history.push(("tsp".to_string(), arr.error()));
        if let Some(h) = &search.progress {
            if !h.report("tsp", 0, arr) {
                return Err(OrderError::Cancelled);
            }
        }
    }
    match params.method {
        Method::Pls => {
            let mut p = params.pls.clone();
            p.search = search.clone();
            p.time_budget = p.time_budget.map(|b| b - clock.elapsed().as_secs_f64());
            let rep = pls(arr, &p, cancel)?;
            history.extend(rep.history.into_iter().skip(1));
        }
        Method::LocalSearch => {
            let rep = local_search(arr, search, None, cancel)?;
            history.extend(
                rep.history
                    .iter()
                    .skip(1)
                    .map(|&(it, e)| (format!("iteration_{it}"), e)),
            );
            *move_weights = search
                .moves
                .iter()
                .zip(rep.weights)
                .map(|(k, w)| (k.name().to_string(), w))
                .collect();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, Kernel, KernelKind, Padding, planted};

    fn objective() -> Objective {
        Objective {
            kernel: Kernel::new(KernelKind::Gbs, 5, 5).unwrap(),
            padding: Padding::Zero,
            kind: ErrorKind::Abs,
        }
    }

    #[test]
    fn parses_every_option_and_names_the_parameter() {
        assert_eq!("ls".parse::<Method>().unwrap(), Method::LocalSearch);
        assert_eq!("none".parse::<Init>().unwrap(), Init::None);
        assert_eq!("columns".parse::<Axes>().unwrap(), Axes::Cols);
        assert_eq!(Step::parse("3", 5).unwrap(), Step::Split(3));
        assert_eq!(Step::parse("kmax", 7).unwrap(), Step::KMax(7));
        for e in [
            "x".parse::<Method>().unwrap_err(),
            "x".parse::<Init>().unwrap_err(),
            Step::parse("0", 5).unwrap_err(),
        ] {
            assert!(matches!(e, OrderError::InvalidParameter { .. }), "{e}");
        }
    }

    #[test]
    fn fit_reports_consistent_orders_and_history() {
        let v = planted(crate::Pattern::Blocks, 40, 0.05, 3).unwrap();
        let m = Matrix::binary(40, 40, &v).unwrap();
        let mut params = FitParams::default();
        params.pls.search.max_iter = 300;
        params.pls.restarts = 0;
        let r = fit(
            m.clone(),
            objective(),
            None,
            None,
            &params,
            &AtomicBool::new(false),
        )
        .unwrap();
        let again = Arrangement::new(m, objective(), Some(&r.row_order), Some(&r.col_order))
            .unwrap()
            .error();
        assert!((again - r.error).abs() < 1e-9);
        assert_eq!(r.history[0].0, "start");
        assert_eq!(r.history[1].0, "tsp");
        assert!(r.error <= r.history[1].1 + 1e-9);
        assert!(r.move_weights.is_empty());
        assert!(!r.stopped);
    }

    #[test]
    fn recolouring_a_binary_matrix_is_refused() {
        let m = Matrix::binary(4, 4, &[0; 16]).unwrap();
        let mut params = FitParams::default();
        params.pls.search.config.recolour = true;
        let e = fit(m, objective(), None, None, &params, &AtomicBool::new(false)).unwrap_err();
        assert!(matches!(
            e,
            OrderError::InvalidParameter {
                name: "recolor",
                ..
            }
        ));
    }

    #[test]
    fn a_hook_that_asks_to_stop_ends_the_fit_with_its_arrangement() {
        let v = planted(crate::Pattern::Banded, 60, 0.1, 1).unwrap();
        let m = Matrix::binary(60, 60, &v).unwrap();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        let mut params = FitParams::default();
        params.pls.search.progress = Some(Progress(Arc::new(
            move |_s: &str, _i: usize, _a: &Arrangement| {
                seen.fetch_add(1, Ordering::Relaxed) < 1 // go on after the TSP, stop at the next report
            },
        )));
        let r = fit(
            m.clone(),
            objective(),
            None,
            None,
            &params,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert!(r.stopped);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        let again = Arrangement::new(m, objective(), Some(&r.row_order), Some(&r.col_order))
            .unwrap()
            .error();
        assert!((again - r.error).abs() < 1e-9);
    }

    #[test]
    fn a_raised_cancel_flag_stops_the_fit() {
        let v = planted(crate::Pattern::Nested, 60, 0.1, 1).unwrap();
        let m = Matrix::binary(60, 60, &v).unwrap();
        let e = fit(
            m,
            objective(),
            None,
            None,
            &FitParams::default(),
            &AtomicBool::new(true),
        );
        assert!(matches!(e, Err(OrderError::Cancelled)));
    }
}
