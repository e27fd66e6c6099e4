"""Slow reference implementations (NumPy) that the fast Rust paths are tested against."""
