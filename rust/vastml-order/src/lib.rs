//! Matrix reordering for faithful heatmaps: the ConvoMap objective with exact incremental
//! moves, local search with adaptive move choice and a parallel pipeline, the
//! branch-and-bound seriator, and TSP orderings.
//!
//! ```
//! use vastml_order::{Arrangement, ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding};
//!
//! let m = Matrix::binary(2, 2, &[1, 0, 0, 1]).unwrap();
//! let obj = Objective {
//!     kernel: Kernel::new(KernelKind::Gbs, 3, 3).unwrap(),
//!     padding: Padding::Zero,
//!     kind: ErrorKind::Abs,
//! };
//! let a = Arrangement::new(m, obj, None, None).unwrap();
//! // each 1 sees itself (2/10) and the other 1 diagonally (1/10): error 2 * (1 - 0.3)
//! assert!((a.error() - 1.4).abs() < 1e-12);
//! ```
#![warn(missing_docs)]

mod arrangement;
pub mod bnb;
pub mod colours;
mod error;
pub mod fit;
pub mod gradient;
mod kernel;
pub mod kmax;
mod knn;
mod matrix;
mod moves;
pub mod olo;
pub mod options;
pub mod pls;
pub mod polish;
mod rectangles;
mod search;
mod synthetic;
pub mod tsp;
pub mod tsp_heuristics;
pub mod tsp_ils;
pub mod tsp_means;
mod view;

pub use arrangement::{Arrangement, Objective, Segment, usable_kernel_side};
pub use error::OrderError;
pub use kernel::{Kernel, KernelKind};
pub use matrix::{ErrorKind, Matrix, Padding, dense_error};
pub use moves::{Move, MoveConfig, MoveKind, Proposal, Recolour, random_move, random_proposal};
pub use pls::{PlsParams, PlsReport, Step, block_ordering, pls, split_search};
pub use rectangles::{Area, Rect, Tolerance, max_rectangle};
pub use search::{
    Axes, MoveWeights, Progress, SearchParams, SearchReport, local_search, time_moves,
};
pub use synthetic::{JavaRandom, Pattern, THESIS_SEED, planted, planted_categorical};
pub use tsp_means::{TspMeans, TspMeansParams, tsp_means};
pub use vastml_core::{Control, Halt};
