//! The switch that every crate's run-time SIMD dispatch consults.

use std::sync::OnceLock;

/// The environment variable that turns the SIMD kernels off: when it is set to anything but
/// `""` or `"0"` at the first call of [`simd_allowed`], every crate runs its portable (scalar,
/// baseline x86-64) code paths. For tests that compare the two paths, and for bug reports.
pub const NO_SIMD_ENV: &str = "VASTML_NO_SIMD";

/// Whether the AVX2 / FMA / POPCNT kernels may be used (the CPU check is each kernel's own).
/// Read once per process, so the check costs one atomic load.
pub fn simd_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os(NO_SIMD_ENV).is_none_or(|v| v.is_empty() || v == "0"))
}
