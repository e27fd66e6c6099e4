//! Shared pieces of vastml's pure-Rust crates.
//!
//! - [`Points`]: a borrowed row-major point set, checked once (shape, emptiness, finite
//!   values); every crate that takes points validates them through it.
//! - [`Csr`]: a borrowed CSR sparse matrix over int32 / int64 / usize indices and f32 / f64
//!   values ([`CsrIndex`], [`CsrValue`]), checked once.
//! - [`exp`](mod@exp): one branch-free, vectorisable `exp` (and its variants for Gauss sums).
//! - [`Error`]: the small error vocabulary of those checks; each crate converts it into its
//!   own error type with `From`.
//! - [`Control`]: what every long loop polls — the cancel flag (set by the Python door on
//!   Ctrl-C, or by any Rust caller) and an optional progress [`Hook`] called as
//!   `hook(iteration, objective, state)` every `every` iterations, whose `true` asks the loop
//!   to stop cleanly with its best state so far.
//!
//! The crates know nothing of Python: the bindings turn a Python callable into a [`Hook`].
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_core::{Control, Csr, Error, Halt, Points};
//!
//! // Checked views: a bad value is reported with its place, before any work starts.
//! let x = [0.0, 0.5, 1.0, 1.5];
//! let points = Points::new("X", &x, 2)?;
//! assert_eq!(points.len(), 2);
//! let w = Csr::new("W", &[0i32, 1, 2], &[1i32, 0], &[0.5f64, 0.5], 2)?;
//! assert_eq!(w.row(0), (&[1i32][..], &[0.5][..]));
//! assert!(matches!(
//!     Points::new("X", &[1.0, f64::NAN], 2),
//!     Err(Error::NonFinite { name: "X", row: 0, column: 1 })
//! ));
//!
//! // The branch-free exp, within its documented error of std's.
//! let g = vastml_core::exp::exp(-0.25 * 3.0);
//! assert!((g - (-0.75f64).exp()).abs() <= vastml_core::exp::MAX_RELATIVE_ERROR * g);
//!
//! // A loop that halves a value and stops when the hook says so.
//! fn halve(mut x: f64, control: &Control<'_, f64>) -> (f64, Option<Halt>) {
//!     for it in 1..=100 {
//!         x /= 2.0;
//!         if let Err(halt) = control.report(it, || x, &x) {
//!             return (x, Some(halt));
//!         }
//!     }
//!     (x, None)
//! }
//!
//! let cancel = AtomicBool::new(false);
//! let stop_below = |_it: usize, objective: f64, _state: &f64| objective < 0.1;
//! let control = Control::new(&cancel).with_hook(&stop_below, 1);
//! let (x, halt) = halve(1.0, &control);
//! assert_eq!(halt, Some(Halt::Stopped));
//! assert_eq!(x, 0.0625);
//! # Ok::<(), Error>(())
//! ```

#![warn(missing_docs)]

mod control;
mod csr;
mod error;
pub mod exp;
mod points;

pub use control::{Control, Halt, Hook};
pub use csr::{Csr, CsrIndex, CsrValue};
pub use error::{Error, Result};
pub use points::{Points, check_finite, coordinate_bounds};
