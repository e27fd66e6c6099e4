//! Budgeted non-linear classifiers: multi-class Pegasos, AMM (batch and online, with pruning),
//! GAMM, BSGD (removal / merging), LLSVM (Nystrom map + dual coordinate descent) and AROW (full
//! or diagonal covariance), after N. Djuric's thesis (chapters 4-6) and the BudgetedSVM toolbox.
//!
//! Examples are borrowed in place as dense rows or CSR ([`Examples`]); sparse input is never
//! densified. Training is sequential SGD, one epoch per call, so callers can report progress
//! and stop between epochs; every loop polls a cancel flag. Prediction is parallel (rayon).
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
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
//!     amm.epoch(&data, &y, true, epoch, false, &cancel)?;
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

pub use amm::{Amm, AmmParams, EpochStats, argmax_rows};
pub use arow::{Arow, UpdateOn, arow_decision, arow_one_vs_rest};
pub use bsgd::{Bsgd, BsgdParams, Maintenance, Merge, golden_section, merge_pair};
pub use data::{Examples, Row};
pub use error::SvmError;
pub use kernel::{Kernel, exp_in_place};
pub use llsvm::{DcdOptions, Nystrom, dual_cd, dual_cd_full, kmeans_landmarks, symmetric_eigen};
