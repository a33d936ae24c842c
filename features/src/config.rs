//! Feature-stage configuration: the event-time tolerances, windows and model
//! knobs of [`crate::FeatureEngine`], with documented defaults and a
//! `validate()` that does no I/O and names the field behind each problem.
//!
//! Every duration is event time in milliseconds (the pipeline never reads a
//! wall clock), so a backtest and the live service behave the same.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A field of [`FeatureConfig`] is out of range.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("invalid feature config: `{field}` {reason}")]
pub struct ConfigError {
    /// The field's name in [`FeatureConfig`].
    pub field: &'static str,
    pub reason: String,
}

/// Knobs of the feature stage. Deserialize from the `[features]` table of
/// the service config; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeatureConfig {
    /// A GPU silent for longer than this is a gap: a `Silent` event when the
    /// fleet's watermark passes it, a `Gap` event when it reports again.
    /// Default 120 s: four missed dcgm-exporter scrapes at its 30 s default.
    /// A GPU sampled more slowly gets three and a half of its own samples
    /// if that is longer (`ArrivalState::silence_ms`).
    pub silence_ms: i64,
    /// A sample up to this much older than its GPU's newest one is a small
    /// reorder: absorbed (counted, no row, no state change) rather than
    /// rejected. Default 5 s: Kafka producer retries and adapter assembly.
    pub reorder_tolerance_ms: i64,
    /// A sample further ahead of the fleet's watermark than this is rejected
    /// as a bad clock (it would otherwise make every other GPU look silent).
    /// Default 10 min.
    pub max_future_skew_ms: i64,
    /// A gauge missing from a sample is carried forward from the GPU's last
    /// value for at most this many samples, then it is missing (NaN).
    /// Default 2: one dropped metric in a scrape should not blank a row.
    pub carry_forward_samples: u8,
    /// Time constant of event-rate features (`*_1h`): exponentially decayed
    /// counts. Default 1 h.
    pub event_decay_ms: i64,
    /// Time constant of the smoothed power that the temperature models use:
    /// a first-order thermal lag of a GPU package and heatsink. Default 60 s
    /// (air-cooled HGX heat sinks settle in 1–2 min after a load step; the
    /// inlet proxy, itself a temperature, carries the rest of the lag).
    pub thermal_tau_ms: i64,
    /// Time constant of the smoothed temperature residual. Default 10 min.
    pub resid_tau_ms: i64,
    /// Consecutive samples a new phase must hold before it is taken
    /// (hysteresis against flapping at checkpoints). Default 2.
    pub phase_confirm_samples: u8,
    /// How long a GPU must have shown less work than its working phase
    /// (training, inference), short of idle, before it is taken to have
    /// left it: checkpoint dips and lulls of a minute or three are not
    /// phase changes. Default 10 min.
    pub phase_hold_ms: i64,
    /// After a phase change a GPU is "settling" (temperatures still moving):
    /// it is compared only with job peers that changed with it, and it does
    /// not train the expected-value models. Default 5 min (five thermal time
    /// constants).
    pub phase_settle_ms: i64,
    /// Width of a peer-statistics time bucket. Default 60 s: two samples per
    /// GPU at dcgm-exporter's 30 s default, so jitter never leaves a GPU out.
    pub peer_bucket_ms: i64,
    /// Smallest cohort whose median / MAD are trusted; smaller cohorts fall
    /// back to wider ones. Default 3 (the issue's rule).
    pub min_cohort: u32,
    /// Forgetting factor of the per-SKU, per-phase recursive least squares.
    /// Default 0.9995: an effective memory of ~2,000 updates.
    pub rls_lambda: f64,
    /// Only every n-th sample of a GPU updates the shared models (prediction
    /// uses every sample). Default 8: a fleet gives far more data than four
    /// coefficients need (1,000 GPUs at 30 s still give ~4 updates per
    /// second per model), and it keeps the stage near 1 M samples/s.
    pub rls_update_stride: u32,
    /// Updates before a model's residuals are reported. Default 50.
    pub rls_warmup: u32,
    /// Window in which application XIDs on a job's GPUs count as one
    /// job-wide event. Default 2 min.
    pub xid_window_ms: i64,
    /// Fraction of a job's GPUs that must see an application XID in the
    /// window for it to be the job's fault. Default 0.5.
    pub xid_job_fraction: f64,
    /// State of a GPU not heard from for this long is dropped (replaced or
    /// decommissioned GPUs must not leak memory). Default 7 days.
    pub gpu_ttl_ms: i64,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            silence_ms: 120_000,
            reorder_tolerance_ms: 5_000,
            max_future_skew_ms: 600_000,
            carry_forward_samples: 2,
            event_decay_ms: 3_600_000,
            thermal_tau_ms: 60_000,
            resid_tau_ms: 600_000,
            phase_confirm_samples: 2,
            phase_hold_ms: 600_000,
            phase_settle_ms: 300_000,
            peer_bucket_ms: 60_000,
            min_cohort: 3,
            rls_lambda: 0.9995,
            rls_update_stride: 8,
            rls_warmup: 50,
            xid_window_ms: 120_000,
            xid_job_fraction: 0.5,
            gpu_ttl_ms: 7 * 86_400_000,
        }
    }
}

fn bad(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        reason: reason.into(),
    }
}

impl FeatureConfig {
    /// Checks every field and the cross-field rules; names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("silence_ms", self.silence_ms),
            ("max_future_skew_ms", self.max_future_skew_ms),
            ("event_decay_ms", self.event_decay_ms),
            ("thermal_tau_ms", self.thermal_tau_ms),
            ("resid_tau_ms", self.resid_tau_ms),
            ("peer_bucket_ms", self.peer_bucket_ms),
            ("xid_window_ms", self.xid_window_ms),
            ("gpu_ttl_ms", self.gpu_ttl_ms),
        ];
        for (field, v) in positive {
            if v <= 0 {
                return Err(bad(field, format!("must be > 0, got {v}")));
            }
        }
        if self.reorder_tolerance_ms < 0 {
            return Err(bad("reorder_tolerance_ms", "must be >= 0"));
        }
        if self.reorder_tolerance_ms >= self.silence_ms {
            return Err(bad(
                "reorder_tolerance_ms",
                "must be below `silence_ms` (a reorder cannot be longer than a gap)",
            ));
        }
        if self.phase_settle_ms < 0 {
            return Err(bad("phase_settle_ms", "must be >= 0"));
        }
        if self.phase_hold_ms < 0 {
            return Err(bad("phase_hold_ms", "must be >= 0"));
        }
        if self.phase_confirm_samples == 0 {
            return Err(bad("phase_confirm_samples", "must be >= 1"));
        }
        if self.min_cohort < 2 {
            return Err(bad("min_cohort", "must be >= 2 (a MAD needs spread)"));
        }
        if !(self.rls_lambda > 0.9 && self.rls_lambda <= 1.0) {
            return Err(bad("rls_lambda", "must be in (0.9, 1]"));
        }
        if self.rls_update_stride == 0 {
            return Err(bad("rls_update_stride", "must be >= 1"));
        }
        if !(self.xid_job_fraction > 0.0 && self.xid_job_fraction <= 1.0) {
            return Err(bad("xid_job_fraction", "must be in (0, 1]"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_errors_name_the_field() {
        assert_eq!(FeatureConfig::default().validate(), Ok(()));
        let cfg = FeatureConfig {
            reorder_tolerance_ms: 200_000,
            ..FeatureConfig::default()
        };
        assert_eq!(
            cfg.validate().map_err(|e| e.field),
            Err("reorder_tolerance_ms")
        );
        let cfg = FeatureConfig {
            rls_lambda: 1.5,
            ..FeatureConfig::default()
        };
        assert_eq!(cfg.validate().map_err(|e| e.field), Err("rls_lambda"));
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<FeatureConfig>(r#"{"silence_ms": 1, "nope": 2}"#);
        assert!(err.is_err());
        let ok: FeatureConfig =
            serde_json::from_str(r#"{"silence_ms": 90000}"#).expect("partial config");
        assert_eq!(ok.silence_ms, 90_000);
        assert_eq!(ok.peer_bucket_ms, 60_000);
    }
}
