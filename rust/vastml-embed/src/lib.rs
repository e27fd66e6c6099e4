//! Nonlinear embeddings at scale (Vladymyrov 2014, chapters 2, 3 and 5).
//!
//! * [`affinity`]: entropic affinities — per-point Gaussian precisions of a given
//!   perplexity, by safeguarded Newton / Halley / Euler steps in log β inside the bounds of
//!   Theorem 2.2.2 (bisection, Brent and Ridders for comparison), warm-started along an
//!   order, in parallel chunks.
//! * [`objective`]: E = E⁺ + λ E⁻ and ∇E for elastic embedding, SNE, symmetric SNE and
//!   t-SNE, with a sparse attraction and the repulsion by exact sums, Barnes-Hut or the
//!   fast Gauss transform ([`nbody`]), or FFT-accelerated interpolation ([`interp`]).
//!
//! The optimisers (spectral direction, fixed point, gradient descent, L-BFGS, homotopy)
//! live in the Python layer, which calls these kernels once per iteration.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_embed::affinity::{entropic_affinities, RootOptions, WarmStart, row_entropy};
//!
//! // 4 points, each with 3 neighbours (squared distances, self excluded).
//! let d2 = [1.0, 2.0, 5.0, 1.0, 1.5, 3.0, 0.5, 2.0, 2.5, 1.0, 4.0, 9.0];
//! let order = [0, 1, 2, 3];
//! let aff = entropic_affinities(&d2, 4, 3, 2.0, &RootOptions::default(), &order,
//!                               WarmStart::Previous, 1024, &AtomicBool::new(false)).unwrap();
//! for n in 0..4 {
//!     let h = row_entropy(&d2[3 * n..3 * n + 3], aff.log_beta[n]);
//!     assert!((h - 2f64.ln()).abs() < 1e-10);
//! }
//! ```
#![warn(missing_docs)]

pub mod affinity;
pub mod dualtree;
mod error;
pub mod interp;
mod kernel;
pub mod lll;
pub mod nbody;
pub mod objective;
pub mod parametric;

pub use error::{EmbedError, Result};
pub use nbody::{Kernel, Repulsion, RepulsionMethod, RepulsionParams};
pub use objective::{Csr, CsrIndex, CsrValue, Evaluation, Model, evaluate, evaluate_with};
