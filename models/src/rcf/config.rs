//! Forest parameters: a builder with AWS-like defaults and a `validate()` that
//! names the offending field, producing the `ForestConfig` a `Forest` is built from.

use serde::{Deserialize, Serialize};

use super::RcfError;
use super::forest::Forest;
use super::tree::MAX_SAMPLE_SIZE;

/// Validated forest parameters. Build one with [`ForestBuilder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForestConfig {
    /// Number of trees; the score is their average, so more trees means less
    /// variance and proportionally more time and memory.
    pub trees: usize,
    /// Points each tree keeps; scores are normalised by `log2(sample_size + 1)`.
    pub sample_size: usize,
    /// Values per input row (metrics).
    pub input_dimensions: usize,
    /// Rows per point; points have `input_dimensions * shingle_size` coordinates.
    pub shingle_size: usize,
    /// Rate of the exponential recency weighting of each tree's sample;
    /// `1 / time_decay` rows is the effective memory.
    pub time_decay: f64,
    /// Points stored before scores are reported (earlier scores are 0).
    pub output_after: usize,
    /// Seed of all randomness: same seed and input give identical output.
    pub seed: u64,
    /// Trees cache bounding boxes only for nodes with at least this many
    /// leaves (distinct points); smaller boxes are recomputed by scanning
    /// the node's leaves (time/memory trade-off; scores do not depend on it).
    pub box_cache_min_mass: usize,
    /// Worker threads for [`Forest::process_batch`]; 1 disables parallelism.
    pub threads: usize,
}

/// Builder for [`Forest`]. Defaults follow AWS's random-cut-forest library:
/// 50 trees, sample size 256, `time_decay = 1 / (10 * sample_size)`,
/// `output_after = sample_size / 4`, shingle size 1.
#[derive(Debug, Clone)]
pub struct ForestBuilder {
    trees: usize,
    sample_size: usize,
    input_dimensions: usize,
    shingle_size: usize,
    time_decay: Option<f64>,
    output_after: Option<usize>,
    seed: u64,
    box_cache_min_mass: usize,
    threads: usize,
}

impl Default for ForestBuilder {
    fn default() -> Self {
        Self {
            trees: 50,
            sample_size: 256,
            input_dimensions: 1,
            shingle_size: 1,
            time_decay: None,
            output_after: None,
            seed: 0,
            // The lowest threshold that keeps a forest of the default shape
            // at 8 dimensions within the memory target (measurements in
            // BENCHMARKS.md): lower values trade memory for fewer leaf
            // scans. Scores do not depend on it.
            box_cache_min_mass: 16,
            threads: 1,
        }
    }
}

impl ForestBuilder {
    pub fn trees(mut self, n: usize) -> Self {
        self.trees = n;
        self
    }
    pub fn sample_size(mut self, n: usize) -> Self {
        self.sample_size = n;
        self
    }
    /// Values per input row.
    pub fn input_dimensions(mut self, n: usize) -> Self {
        self.input_dimensions = n;
        self
    }
    pub fn shingle_size(mut self, n: usize) -> Self {
        self.shingle_size = n;
        self
    }
    pub fn time_decay(mut self, lambda: f64) -> Self {
        self.time_decay = Some(lambda);
        self
    }
    pub fn output_after(mut self, n: usize) -> Self {
        self.output_after = Some(n);
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    pub fn box_cache_min_mass(mut self, n: usize) -> Self {
        self.box_cache_min_mass = n;
        self
    }
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Checks every field; no IO.
    pub fn validate(&self) -> Result<ForestConfig, RcfError> {
        if self.trees == 0 || self.trees > 10_000 {
            return Err(RcfError::invalid(
                "trees",
                "must be in 1..=10000",
                self.trees,
            ));
        }
        if self.sample_size < 2 || self.sample_size > MAX_SAMPLE_SIZE {
            return Err(RcfError::invalid(
                "sample_size",
                "must be in 2..=32752",
                self.sample_size,
            ));
        }
        if self.input_dimensions == 0 {
            return Err(RcfError::invalid(
                "input_dimensions",
                "must be at least 1",
                0,
            ));
        }
        if self.shingle_size == 0 {
            return Err(RcfError::invalid("shingle_size", "must be at least 1", 0));
        }
        let dims = self.input_dimensions.saturating_mul(self.shingle_size);
        if dims > usize::from(u16::MAX) {
            return Err(RcfError::invalid(
                "input_dimensions",
                "input_dimensions * shingle_size must be at most 65535",
                dims,
            ));
        }
        let time_decay = self
            .time_decay
            .unwrap_or(1.0 / (10.0 * self.sample_size as f64));
        if !(time_decay.is_finite() && (0.0..=1.0).contains(&time_decay)) {
            return Err(RcfError::invalid(
                "time_decay",
                "must be finite and in [0, 1]",
                time_decay,
            ));
        }
        let output_after = self.output_after.unwrap_or(self.sample_size / 4).max(1);
        if self.box_cache_min_mass == 0 || self.box_cache_min_mass > usize::from(u16::MAX) {
            return Err(RcfError::invalid(
                "box_cache_min_mass",
                "must be in 1..=65535",
                self.box_cache_min_mass,
            ));
        }
        if self.threads == 0 || self.threads > 256 {
            return Err(RcfError::invalid(
                "threads",
                "must be in 1..=256",
                self.threads,
            ));
        }
        Ok(ForestConfig {
            trees: self.trees,
            sample_size: self.sample_size,
            input_dimensions: self.input_dimensions,
            shingle_size: self.shingle_size,
            time_decay,
            output_after,
            seed: self.seed,
            box_cache_min_mass: self.box_cache_min_mass,
            threads: self.threads,
        })
    }

    pub fn build(&self) -> Result<Forest, RcfError> {
        Ok(Forest::new(self.validate()?))
    }
}

impl ForestConfig {
    /// Coordinates per point.
    pub fn dimensions(&self) -> usize {
        self.input_dimensions * self.shingle_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let c = ForestBuilder::default()
            .validate()
            .expect("defaults are valid");
        assert_eq!(c.trees, 50);
        assert_eq!(c.output_after, 64);
        assert!((c.time_decay - 1.0 / 2560.0).abs() < 1e-12);
    }

    #[test]
    fn errors_name_the_field() {
        let e = ForestBuilder::default().sample_size(1).validate();
        assert!(matches!(
            e,
            Err(RcfError::InvalidParameter {
                field: "sample_size",
                ..
            })
        ));
        let e = ForestBuilder::default().time_decay(f64::NAN).validate();
        assert!(matches!(
            e,
            Err(RcfError::InvalidParameter {
                field: "time_decay",
                ..
            })
        ));
        let e = ForestBuilder::default().trees(0).validate();
        assert!(matches!(
            e,
            Err(RcfError::InvalidParameter { field: "trees", .. })
        ));
    }
}
