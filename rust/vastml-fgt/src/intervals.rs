//! Uniform intervals on the line, the 1-D clustering of the Hermite and erfc sums.
//!
//! In one dimension no tree is needed: a source's interval is `floor((x - origin) / width)`
//! and the intervals near a target form one contiguous run of interval indices. Only the
//! non-empty intervals are stored (sorted by index), so a bandwidth tiny against the data's
//! span costs memory in proportion to the data, not to the span.

/// Non-empty intervals of one width over a set of 1-D sources.
pub(crate) struct Intervals {
    origin: f64,
    width: f64,
    /// Interval index of each stored interval, increasing.
    keys: Vec<i64>,
    /// Sources of interval `n` are `order[offsets[n]..offsets[n + 1]]`.
    offsets: Vec<usize>,
    /// Source indices sorted by interval.
    order: Vec<usize>,
}

impl Intervals {
    /// Groups `sources` into intervals `[origin + k width, origin + (k + 1) width)`.
    pub(crate) fn new(sources: &[f64], width: f64) -> Self {
        let origin = sources.iter().copied().fold(f64::INFINITY, f64::min);
        let key = |x: f64| ((x - origin) / width).floor() as i64;
        let mut order: Vec<usize> = (0..sources.len()).collect();
        order.sort_unstable_by_key(|&i| key(sources[i]));
        let mut keys = Vec::new();
        let mut offsets = Vec::new();
        for (pos, &i) in order.iter().enumerate() {
            let k = key(sources[i]);
            if keys.last() != Some(&k) {
                keys.push(k);
                offsets.push(pos);
            }
        }
        offsets.push(order.len());
        Intervals {
            origin,
            width,
            keys,
            offsets,
            order,
        }
    }

    /// Number of non-empty intervals.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Centre of stored interval `n`.
    pub(crate) fn centre(&self, n: usize) -> f64 {
        self.origin + (self.keys[n] as f64 + 0.5) * self.width
    }

    /// Source indices of stored interval `n`.
    pub(crate) fn members(&self, n: usize) -> &[usize] {
        &self.order[self.offsets[n]..self.offsets[n + 1]]
    }

    /// Stored intervals whose centre lies within `radius` of `y`, as a range of positions.
    /// Every interval after the range has its centre right of `y + radius`, every one
    /// before it left of `y - radius` (also when the range is empty).
    pub(crate) fn near(&self, y: f64, radius: f64) -> std::ops::Range<usize> {
        // Interval k's centre is origin + (k + 1/2) width; |y - centre| <= radius. The key
        // bounds get a margin of one against rounding, then the ends are trimmed exactly.
        let lo = ((y - radius - self.origin) / self.width - 1.5).floor();
        let hi = ((y + radius - self.origin) / self.width + 0.5).ceil();
        let mut start = self.keys.partition_point(|&k| (k as f64) < lo);
        let mut end = self.keys.partition_point(|&k| (k as f64) <= hi);
        while start < end && self.centre(start) < y - radius {
            start += 1;
        }
        while end > start && self.centre(end - 1) > y + radius {
            end -= 1;
        }
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_equals_brute_force_filter() {
        let sources: Vec<f64> = (0..500)
            .map(|i| ((i * 7919) % 1000) as f64 / 37.0 - 5.0)
            .collect();
        let iv = Intervals::new(&sources, 0.3);
        let total: usize = (0..iv.len()).map(|n| iv.members(n).len()).sum();
        assert_eq!(total, sources.len());
        for n in 0..iv.len() {
            for &i in iv.members(n) {
                assert!((sources[i] - iv.centre(n)).abs() <= 0.15 + 1e-12);
            }
        }
        for y in [-9.0, -5.0, -0.31, 0.0, 3.3, 20.0, 40.0] {
            for radius in [0.0, 0.1, 0.45, 2.0, 100.0] {
                let got: Vec<usize> = iv.near(y, radius).collect();
                let want: Vec<usize> = (0..iv.len())
                    .filter(|&n| iv.centre(n) >= y - radius && iv.centre(n) <= y + radius)
                    .collect();
                assert_eq!(got, want, "y = {y}, radius = {radius}");
                let range = iv.near(y, radius);
                assert!((range.end..iv.len()).all(|n| iv.centre(n) > y + radius));
                assert!((0..range.start).all(|n| iv.centre(n) < y - radius));
            }
        }
    }
}
