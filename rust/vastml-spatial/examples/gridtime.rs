use std::time::Instant;
fn main() {
    let n = 7495;
    let mut s = 12345u64;
    let mut pts = vec![0.0; 2 * n];
    for p in pts.iter_mut() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *p = ((s >> 11) as f64 / (1u64 << 53) as f64) * 250.0;
    }
    for _ in 0..3 {
        let t = Instant::now();
        let reps = 2000;
        for _ in 0..reps {
            let g = vastml_spatial::CellGrid::build(&pts, 2, 5.657, 4 * n + 64).unwrap();
            std::hint::black_box(g);
        }
        println!(
            "grid {:.1} us",
            t.elapsed().as_secs_f64() / reps as f64 * 1e6
        );
        let t = Instant::now();
        for _ in 0..reps {
            let g = vastml_spatial::KdTree::build(&pts, 2, 32).unwrap();
            std::hint::black_box(g);
        }
        println!(
            "tree {:.1} us",
            t.elapsed().as_secs_f64() / reps as f64 * 1e6
        );
    }
}
