//! Spatial data structures for vastml's fast Gauss transforms.
//!
//! - [`KdTree`]: a static kd-tree (median splits on the widest box dimension, tight node boxes,
//!   points stored contiguously in tree order) with allocation-free fixed-radius search,
//!   k-nearest-neighbour queries and access to contiguous leaf ranges for blocked evaluation.
//!   It is `Sync`, so one tree can be queried from many threads at once.
//! - [`CellGrid`]: a uniform grid of cells over 1-D or 2-D points, built by one counting sort,
//!   with a fixed-radius search that returns runs of consecutive points.
//! - [`FarthestPoint`]: farthest-point (Gonzalez) k-center clustering that grows one centre at a
//!   time, with a triangle-inequality prune and rayon-parallel updates, and
//!   [`farthest_point_clustering`] for the one-shot version. The final [`Clustering`] moves each
//!   centre to its cluster mean and recomputes the radii about the means.
//! - [`kmeans`]: seeded k-means (k-means++ seeding, Lloyd iterations), e.g. for LLSVM landmarks,
//!   and [`kmeans_csr`] on sparse rows given as a [`vastml_core::Csr`] view.
//!
//! Points are always row-major `&[f64]` slices of length `n * dim` together with `dim`, checked
//! once by [`vastml_core::Points`]. Bad input is reported as a [`SpatialError`], never by
//! panicking.
//!
//! # Example
//!
//! ```
//! use vastml_spatial::{KdTree, farthest_point_clustering};
//!
//! // 100 points on a 10 x 10 grid in [0, 1]^2.
//! let pts: Vec<f64> = (0..100)
//!     .flat_map(|i| [(i % 10) as f64 / 9.0, (i / 10) as f64 / 9.0])
//!     .collect();
//!
//! let tree = KdTree::build(&pts, 2, 16)?;
//! let mut near = Vec::new();
//! tree.within_radius(&[0.0, 0.0], 0.2, &mut near)?;
//! near.sort_by_key(|&(i, _)| i);
//! assert_eq!(near.iter().map(|&(i, _)| i).collect::<Vec<_>>(), vec![0, 1, 10, 11]);
//! assert_eq!(tree.count_within_radius(&[0.5, 0.5], 10.0), 100);
//!
//! let clustering = farthest_point_clustering(&pts, 2, 4, 0)?;
//! assert_eq!(clustering.n_clusters(), 4);
//! for (i, &l) in clustering.labels.iter().enumerate() {
//!     let c = &clustering.centers[2 * l..2 * l + 2];
//!     let d = vastml_spatial::squared_distance(&pts[2 * i..2 * i + 2], c).sqrt();
//!     assert!(d <= clustering.radii[l]);
//! }
//! # Ok::<(), vastml_spatial::SpatialError>(())
//! ```
#![warn(missing_docs)]

mod clustering;
mod cpu;
mod distance;
mod error;
mod grid;
mod kcenter;
mod kdtree;
mod kmeans;
mod knn;
mod knn_tree;
mod validate;

pub use clustering::Clustering;
pub use cpu::{NO_SIMD_ENV, simd_allowed};
pub use distance::{dot, squared_distance};
pub use error::SpatialError;
pub use grid::{Block, CellGrid};
pub use kcenter::{FarthestPoint, farthest_point_clustering};
pub use kdtree::{DEFAULT_LEAF_SIZE, KdTree};
pub use kmeans::{KMeans, kmeans, kmeans_csr, kmeans_csr_with, kmeans_plus_plus, kmeans_with};
pub use knn::{KNN_LEAF_SIZE, KnnGraph, knn_graph, knn_graph_with, knn_query, knn_query_with};

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, SpatialError>;
