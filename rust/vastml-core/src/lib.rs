//! Shared pieces of vastml's pure-Rust crates.
//!
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
//! use vastml_core::{Control, Halt};
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
//! ```

#![warn(missing_docs)]

mod control;

pub use control::{Control, Halt, Hook};
