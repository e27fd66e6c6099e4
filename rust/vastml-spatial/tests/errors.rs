//! Bad input returns the right error instead of panicking.

use vastml_spatial::{FarthestPoint, KdTree, SpatialError, farthest_point_clustering};

fn invalid(name: &'static str) -> impl Fn(&SpatialError) -> bool {
    move |e| matches!(e, SpatialError::InvalidParameter { name: n, .. } if *n == name)
}

#[test]
fn kdtree_build_rejects_bad_input() {
    let pts = [0.0, 1.0, 2.0, 3.0];
    let e = KdTree::build(&pts, 0, 16).unwrap_err();
    assert!(invalid("dim")(&e), "{e:?}");
    let e = KdTree::build(&pts, 3, 16).unwrap_err();
    assert!(
        matches!(
            e,
            SpatialError::ShapeMismatch {
                name: "points",
                actual: 4,
                ..
            }
        ),
        "{e:?}"
    );
    let e = KdTree::build(&[], 2, 16).unwrap_err();
    assert_eq!(e, SpatialError::Empty { name: "points" });
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let e = KdTree::build(&[0.0, bad], 2, 16).unwrap_err();
        assert_eq!(e, SpatialError::NonFinite { name: "points" });
    }
    let e = KdTree::build(&pts, 2, 0).unwrap_err();
    assert!(invalid("leaf_size")(&e), "{e:?}");
    // The error message names the parameter.
    assert!(e.to_string().contains("leaf_size"), "{e}");
}

#[test]
fn kdtree_checked_queries_reject_bad_input() {
    let tree = KdTree::build(&[0.0, 0.0, 1.0, 1.0], 2, 16).unwrap();
    let mut out = vec![(7, 7.0)];
    let e = tree.within_radius(&[0.0], 1.0, &mut out).unwrap_err();
    assert!(
        matches!(
            e,
            SpatialError::ShapeMismatch {
                name: "query",
                actual: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(out.is_empty(), "out is cleared even on error");
    let e = tree
        .within_radius(&[0.0, f64::NAN], 1.0, &mut out)
        .unwrap_err();
    assert_eq!(e, SpatialError::NonFinite { name: "query" });
    for r in [-1.0, f64::NAN] {
        let e = tree.within_radius(&[0.0, 0.0], r, &mut out).unwrap_err();
        assert!(invalid("radius")(&e), "{e:?}");
    }
    tree.within_radius(&[0.0, 0.0], f64::INFINITY, &mut out)
        .unwrap();
    assert_eq!(out.len(), 2);

    let e = tree.nearest(&[0.0, 0.0, 0.0], 1).unwrap_err();
    assert!(
        matches!(
            e,
            SpatialError::ShapeMismatch {
                name: "query",
                actual: 3,
                ..
            }
        ),
        "{e:?}"
    );
    let e = tree.nearest(&[f64::INFINITY, 0.0], 1).unwrap_err();
    assert_eq!(e, SpatialError::NonFinite { name: "query" });
}

#[test]
fn farthest_point_rejects_bad_input() {
    let pts = [0.0, 1.0, 2.0, 3.0];
    assert!(invalid("dim")(
        &FarthestPoint::new(&pts, 0, 0).err().unwrap()
    ));
    assert!(matches!(
        FarthestPoint::new(&pts, 3, 0).err().unwrap(),
        SpatialError::ShapeMismatch { name: "points", .. }
    ));
    assert_eq!(
        FarthestPoint::new(&[], 1, 0).err().unwrap(),
        SpatialError::Empty { name: "points" }
    );
    assert_eq!(
        FarthestPoint::new(&[0.0, f64::NAN], 1, 0).err().unwrap(),
        SpatialError::NonFinite { name: "points" }
    );
    assert!(invalid("first")(
        &FarthestPoint::new(&pts, 2, 2).err().unwrap()
    ));
    assert!(FarthestPoint::new(&pts, 2, 1).is_ok());

    assert!(invalid("k")(
        &farthest_point_clustering(&pts, 2, 0, 0).unwrap_err()
    ));
    assert!(invalid("first")(
        &farthest_point_clustering(&pts, 1, 2, 4).unwrap_err()
    ));
    assert_eq!(
        farthest_point_clustering(&[], 2, 1, 0).unwrap_err(),
        SpatialError::Empty { name: "points" }
    );
}
