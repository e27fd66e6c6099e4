//! The VERIFIED "Original" errors of the spec (§16) on the planted matrices.

use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, Objective, Padding, Pattern, THESIS_SEED,
    planted, planted_categorical,
};

fn err(m: Matrix, kind: KernelKind, r: usize, c: usize, e: ErrorKind) -> f64 {
    let obj = Objective {
        kernel: Kernel::new(kind, r, c).unwrap(),
        padding: Padding::ZerosAndOnes,
        kind: e,
    };
    Arrangement::new(m, obj, None, None).unwrap().error()
}

fn bin(p: Pattern, noise: f64) -> Matrix {
    Matrix::binary(300, 300, &planted(p, 300, noise, THESIS_SEED).unwrap()).unwrap()
}

#[test]
fn planted_gbs49() {
    use Pattern::*;
    let cases = [
        (Nested, 0.0, 1805.7),
        (Banded, 0.0, 3458.5),
        (Blocks, 0.0, 4438.1),
        (BandedBlocks, 0.0, 4494.7),
        (Nested, 0.1, 9031.1),
        (Banded, 0.1, 10200.8),
        (Blocks, 0.1, 10691.6),
        (BandedBlocks, 0.1, 10829.3),
        (Nested, 0.25, 16980.5),
        (Banded, 0.25, 17532.8),
        (Blocks, 0.25, 17639.7),
        (BandedBlocks, 0.25, 17822.3),
    ];
    for (p, noise, want) in cases {
        let e = err(bin(p, noise), KernelKind::Gbs, 49, 49, ErrorKind::Abs);
        assert!((e - want).abs() < 0.06, "{p:?} {noise}: {e} vs {want}");
    }
}

#[test]
fn planted_other_kernels() {
    let nested = bin(Pattern::Nested, 0.25);
    let banded = bin(Pattern::Banded, 0.25);
    let cases = [
        (KernelKind::Gbs, 3, 3, 13479.5, 13514.5),
        (KernelKind::Gbs, 11, 11, 16554.1, 16687.6),
        (KernelKind::Gbs, 11, 3, 15948.6, 16039.9),
        (KernelKind::Gbs, 25, 25, 16868.4, 17154.7),
        (KernelKind::Gbs, 29, 29, 16897.8, 17228.9),
        (KernelKind::Gbe, 49, 49, 15027.5, 15117.8),
        (KernelKind::CrossGbe, 49, 49, 13533.6, 13598.0),
    ];
    for (k, r, c, wn, wb) in cases {
        let en = err(nested.clone(), k, r, c, ErrorKind::Abs);
        let eb = err(banded.clone(), k, r, c, ErrorKind::Abs);
        assert!((en - wn).abs() < 0.06, "{k:?} {r}x{c} nested {en} vs {wn}");
        assert!((eb - wb).abs() < 0.06, "{k:?} {r}x{c} banded {eb} vs {wb}");
    }
    let q = err(nested, KernelKind::Gbs, 49, 49, ErrorKind::Quadratic);
    assert!((q - 8588.5).abs() < 0.06, "quadratic {q}");
    // The GBS-restricted cross gives different numbers (spec §3 pitfall).
    let cg = err(banded, KernelKind::CrossGbs, 49, 49, ErrorKind::Abs);
    assert!((cg - 17012.0).abs() < 1.0, "cross gbs {cg}");
}

#[test]
fn planted_categorical_gbs() {
    let codes = planted_categorical(300, THESIS_SEED).unwrap();
    let m = Matrix::categorical(300, 300, &codes, 6).unwrap();
    for (r, c, want) in [
        (3, 3, 50737.5),
        (11, 3, 59826.0),
        (11, 11, 62967.0),
        (21, 21, 64970.6),
    ] {
        let e = err(m.clone(), KernelKind::Gbs, r, c, ErrorKind::Abs);
        assert!((e - want).abs() < 0.06, "{r}x{c}: {e} vs {want}");
    }
}
