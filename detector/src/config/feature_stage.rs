//! `[features]`: the feature stage's knobs as written in `forewarn.toml`,
//! turned into a [`features::FeatureConfig`]. The feature stage counts
//! event time in milliseconds, so `FeatureConfig` names its durations
//! `*_ms`; the file writes them as duration strings under the name
//! without the suffix (`silence = "2m"`), and still reads the `*_ms`
//! numbers with a deprecation warning. Every default is
//! `FeatureConfig::default()`'s, where each one's reason is written.

use serde::Deserialize;

use features::FeatureConfig;

use super::duration::{self, ConfigDuration, Spelled};
use super::error::{ConfigError, err};

/// The `[features]` table as written; a key left out keeps
/// `FeatureConfig::default()`'s value.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeatures {
    /// A GPU silent for longer than this is a gap.
    pub silence: Option<ConfigDuration>,
    pub silence_ms: Option<i64>,
    /// A sample this much older than its GPU's newest is a small reorder.
    pub reorder_tolerance: Option<ConfigDuration>,
    pub reorder_tolerance_ms: Option<i64>,
    /// A sample further ahead of the fleet's watermark is a bad clock.
    pub max_future_skew: Option<ConfigDuration>,
    pub max_future_skew_ms: Option<i64>,
    /// Samples a missing gauge is carried forward for.
    pub carry_forward_samples: Option<u8>,
    /// Time constant of the event-rate features.
    pub event_decay: Option<ConfigDuration>,
    pub event_decay_ms: Option<i64>,
    /// Time constant of the smoothed power the temperature models use.
    pub thermal_tau: Option<ConfigDuration>,
    pub thermal_tau_ms: Option<i64>,
    /// Time constant of the smoothed temperature residual.
    pub resid_tau: Option<ConfigDuration>,
    pub resid_tau_ms: Option<i64>,
    /// Consecutive samples a new phase must hold before it is taken.
    pub phase_confirm_samples: Option<u8>,
    /// How long less work than a working phase must last to leave it.
    pub phase_hold: Option<ConfigDuration>,
    pub phase_hold_ms: Option<i64>,
    /// How long a GPU settles after a phase change.
    pub phase_settle: Option<ConfigDuration>,
    pub phase_settle_ms: Option<i64>,
    /// Width of a peer-statistics time bucket.
    pub peer_bucket: Option<ConfigDuration>,
    pub peer_bucket_ms: Option<i64>,
    /// Smallest cohort whose median / MAD are trusted.
    pub min_cohort: Option<u32>,
    /// Forgetting factor of the recursive least squares.
    pub rls_lambda: Option<f64>,
    /// Only every n-th sample of a GPU updates the shared models.
    pub rls_update_stride: Option<u32>,
    /// Updates before a model's residuals are reported.
    pub rls_warmup: Option<u32>,
    /// Window in which application XIDs on a job's GPUs are one event.
    pub xid_window: Option<ConfigDuration>,
    pub xid_window_ms: Option<i64>,
    /// Fraction of a job's GPUs that makes an XID the job's fault.
    pub xid_job_fraction: Option<f64>,
    /// State of a GPU not heard from for this long is dropped.
    pub gpu_ttl: Option<ConfigDuration>,
    pub gpu_ttl_ms: Option<i64>,
}

/// Resolves the durations of one table, remembering which were written
/// the deprecated way (errors then name the key as written).
#[derive(Default)]
struct Millis {
    legacy: Vec<&'static str>,
}

impl Millis {
    /// `name` (`"silence"`) from `name` or `name_ms`, else `default`.
    fn get(
        &mut self,
        name: &'static str,
        new: Option<ConfigDuration>,
        old: Option<i64>,
        default: i64,
    ) -> Result<i64, ConfigError> {
        let new_key = format!("features.{name}");
        let old_key = format!("{new_key}_ms");
        match duration::either(&new_key, new, &old_key, old, duration::from_millis)? {
            Spelled::Unset => Ok(default),
            Spelled::Old(ms) => {
                self.legacy.push(name);
                Ok(ms)
            }
            Spelled::New(d) => i64::try_from(d.as_millis())
                .ok()
                .filter(|_| d.subsec_nanos() % 1_000_000 == 0)
                .ok_or_else(|| err(&new_key, "must be whole milliseconds, below 2^63")),
        }
    }
}

impl RawFeatures {
    /// The feature stage's config, checked by `FeatureConfig::validate`.
    pub fn validate(&self) -> Result<FeatureConfig, ConfigError> {
        let d = FeatureConfig::default();
        let mut ms = Millis::default();
        // Every field listed (no `..d`): a new `FeatureConfig` field does
        // not compile until it has a key here.
        let config = FeatureConfig {
            silence_ms: ms.get("silence", self.silence, self.silence_ms, d.silence_ms)?,
            reorder_tolerance_ms: ms.get(
                "reorder_tolerance",
                self.reorder_tolerance,
                self.reorder_tolerance_ms,
                d.reorder_tolerance_ms,
            )?,
            max_future_skew_ms: ms.get(
                "max_future_skew",
                self.max_future_skew,
                self.max_future_skew_ms,
                d.max_future_skew_ms,
            )?,
            carry_forward_samples: self
                .carry_forward_samples
                .unwrap_or(d.carry_forward_samples),
            event_decay_ms: ms.get(
                "event_decay",
                self.event_decay,
                self.event_decay_ms,
                d.event_decay_ms,
            )?,
            thermal_tau_ms: ms.get(
                "thermal_tau",
                self.thermal_tau,
                self.thermal_tau_ms,
                d.thermal_tau_ms,
            )?,
            resid_tau_ms: ms.get(
                "resid_tau",
                self.resid_tau,
                self.resid_tau_ms,
                d.resid_tau_ms,
            )?,
            phase_confirm_samples: self
                .phase_confirm_samples
                .unwrap_or(d.phase_confirm_samples),
            phase_hold_ms: ms.get(
                "phase_hold",
                self.phase_hold,
                self.phase_hold_ms,
                d.phase_hold_ms,
            )?,
            phase_settle_ms: ms.get(
                "phase_settle",
                self.phase_settle,
                self.phase_settle_ms,
                d.phase_settle_ms,
            )?,
            peer_bucket_ms: ms.get(
                "peer_bucket",
                self.peer_bucket,
                self.peer_bucket_ms,
                d.peer_bucket_ms,
            )?,
            min_cohort: self.min_cohort.unwrap_or(d.min_cohort),
            rls_lambda: self.rls_lambda.unwrap_or(d.rls_lambda),
            rls_update_stride: self.rls_update_stride.unwrap_or(d.rls_update_stride),
            rls_warmup: self.rls_warmup.unwrap_or(d.rls_warmup),
            xid_window_ms: ms.get(
                "xid_window",
                self.xid_window,
                self.xid_window_ms,
                d.xid_window_ms,
            )?,
            xid_job_fraction: self.xid_job_fraction.unwrap_or(d.xid_job_fraction),
            gpu_ttl_ms: ms.get("gpu_ttl", self.gpu_ttl, self.gpu_ttl_ms, d.gpu_ttl_ms)?,
        };
        config.validate().map_err(|e| {
            // `FeatureConfig` names its own field (`silence_ms`); the key
            // the file used may be the one without the suffix.
            let name = e
                .field
                .strip_suffix("_ms")
                .filter(|n| !ms.legacy.contains(n))
                .unwrap_or(e.field);
            err(&format!("features.{name}"), e.reason)
        })?;
        Ok(config)
    }
}
