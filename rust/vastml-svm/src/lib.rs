//! Budgeted non-linear classifiers: multi-class Pegasos, AMM (batch and online, with pruning),
//! GAMM, BSGD (removal / merging), LLSVM (Nystrom map + dual coordinate descent) and AROW (full
//! or diagonal covariance), after N. Djuric's thesis (chapters 4-6) and the BudgetedSVM toolbox.
//!
//! Examples are borrowed in place as dense rows or CSR ([`Examples`]); sparse input is never
//! densified. Every long loop takes a [`vastml_core::Control`]: it polls the cancel flag (at
//! least every few milliseconds of work) and the drivers ([`Amm::fit`], [`Bsgd::fit`],
//! [`arow_one_vs_rest`], [`llsvm_fit`]) report to its progress hook after every pass (or chunk
//! of a single pass), where the hook can stop the fit cleanly. Prediction is parallel (rayon).
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_core::Control;
//! use vastml_svm::{Amm, AmmParams, Examples, argmax_rows};
//!
//! // Two classes on a line: x < 0 is class 0, x > 0 is class 1.
//! let xs: Vec<f64> = (0..200).map(|i| (i as f64 - 99.5) / 50.0).collect();
//! let y: Vec<usize> = xs.iter().map(|&v| usize::from(v > 0.0)).collect();
//! let data = Examples::dense(&xs, 1)?;
//! let params = AmmParams { lambda: 1e-3, ..AmmParams::default() };
//! let mut amm = Amm::new(params, 1, 2)?;
//! let cancel = AtomicBool::new(false);
//! for epoch in 0..5 {
//!     amm.epoch(&data, &y, true, epoch, false, Control::new(&cancel))?;
//! }
//! let pred = argmax_rows(&amm.decision(&data)?, 2);
//! let errors = pred.iter().zip(&y).filter(|(a, b)| a != b).count();
//! assert!(errors <= 4);
//! # Ok::<(), vastml_svm::SvmError>(())
//! ```
#![warn(missing_docs)]

mod amm;
mod arow;
mod bsgd;
mod data;
mod error;
mod kernel;
mod llsvm;

pub use amm::{Amm, AmmParams, EpochStats, FitOutcome, Pass, Schedule, argmax_rows};
pub use arow::{
    Arow, ArowOutcome, ArowParams, CHUNKS_PER_PASS, UpdateOn, arow_decision, arow_one_vs_rest,
};
pub use bsgd::{Bsgd, BsgdParams, Maintenance, Merge, golden_section, merge_pair};
pub use data::{Examples, Row, class_codes};
pub use error::SvmError;
pub use kernel::{Kernel, KernelKind, exp_in_place};
pub use llsvm::{
    DcdOptions, LlsvmFit, LlsvmModel, LlsvmParams, Nystrom, OneVsRest, dual_cd, dual_cd_full,
    dual_cd_one_vs_rest, kmeans, kmeans_landmarks, llsvm_decision, llsvm_fit, symmetric_eigen,
    symmetric_eigen_with,
};
