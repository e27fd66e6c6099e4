//! Benchmarks: kd-tree build and fixed-radius queries on 100k 2-D points, and farthest-point
//! clustering with K = 256 on 100k 3-D points.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use vastml_spatial::{FarthestPoint, KdTree};

fn uniform(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n * dim).map(|_| rng.random::<f64>()).collect()
}

fn kdtree(c: &mut Criterion) {
    let n = 100_000;
    let pts = uniform(n, 2, 1);
    let queries = uniform(1_000, 2, 2);
    let mut group = c.benchmark_group("kdtree_2d_100k");
    group.sample_size(20);
    group.bench_function("build_leaf16", |b| {
        b.iter(|| KdTree::build(black_box(&pts), 2, 16))
    });
    let tree = match KdTree::build(&pts, 2, 16) {
        Ok(t) => t,
        Err(e) => panic!("build failed: {e}"),
    };
    group.throughput(Throughput::Elements(1_000));
    // radius 0.01 -> ~31 neighbours per query; 0.05 -> ~785.
    for radius in [0.01, 0.05] {
        group.bench_function(format!("for_each_within_radius_r{radius}_x1000"), |b| {
            b.iter(|| {
                let mut acc = 0.0;
                for q in queries.chunks_exact(2) {
                    tree.for_each_within_radius(q, radius, |_, d2| acc += d2);
                }
                black_box(acc)
            })
        });
        group.bench_function(format!("count_within_radius_r{radius}_x1000"), |b| {
            b.iter(|| {
                let mut acc = 0;
                for q in queries.chunks_exact(2) {
                    acc += tree.count_within_radius(q, radius);
                }
                black_box(acc)
            })
        });
    }
    group.bench_function("nearest_k10_x1000", |b| {
        b.iter(|| {
            let mut acc = 0;
            for q in queries.chunks_exact(2) {
                acc += tree.nearest(q, 10).map(|v| v.len()).unwrap_or(0);
            }
            black_box(acc)
        })
    });
    group.finish();
}

fn farthest_point(c: &mut Criterion) {
    let pts = uniform(100_000, 3, 3);
    let mut group = c.benchmark_group("farthest_point_3d_100k");
    group.sample_size(10);
    group.bench_function("grow_to_256", |b| {
        b.iter(|| match FarthestPoint::new(black_box(&pts), 3, 0) {
            Ok(mut fp) => black_box(fp.grow_to(256)),
            Err(e) => panic!("{e}"),
        })
    });
    group.bench_function("grow_to_256_and_clustering", |b| {
        b.iter(|| match FarthestPoint::new(black_box(&pts), 3, 0) {
            Ok(mut fp) => {
                fp.grow_to(256);
                black_box(fp.clustering())
            }
            Err(e) => panic!("{e}"),
        })
    });
    group.finish();
}

criterion_group!(benches, kdtree, farthest_point);
criterion_main!(benches);
