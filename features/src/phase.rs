//! Workload phase of one GPU (idle / light / training / inference), part of
//! the feature stage's per-GPU state.
//!
//! The phase decides which expected-value model and which peer cohort a GPU
//! is compared with: hot during training is normal, hot while idle is not.
//! It comes from smoothed utilization, power as a fraction of the limit,
//! frame-buffer use and a hint from the job label (`train-…`, `infer-…`),
//! with hysteresis so that checkpoint dips do not flap it.

use serde::{Deserialize, Serialize};

/// What a GPU is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum Phase {
    /// No meaningful work.
    Idle = 0,
    /// Some work, neither sustained training nor serving.
    Light = 1,
    /// Sustained, synchronized full load with a large memory footprint.
    Training = 2,
    /// Serving: moderate, load-following utilization.
    Inference = 3,
}

/// Number of phases (models and cohorts are kept per phase).
pub const PHASE_COUNT: usize = 4;

impl Phase {
    /// Every phase, by code.
    pub const ALL: [Phase; PHASE_COUNT] =
        [Phase::Idle, Phase::Light, Phase::Training, Phase::Inference];

    /// A stable label for exports.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Light => "light",
            Phase::Training => "training",
            Phase::Inference => "inference",
        }
    }

    /// How much work the phase is: idle < light < inference < training.
    fn load(self) -> u8 {
        match self {
            Phase::Idle => 0,
            Phase::Light => 1,
            Phase::Inference => 2,
            Phase::Training => 3,
        }
    }

    /// The numeric code used in the feature vector.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// What the job label says the workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum JobHint {
    #[default]
    None,
    Training,
    Inference,
}

impl JobHint {
    /// Reads a hint from a Slurm job name or Kubernetes pod / namespace.
    /// Computed once per job change, not per sample.
    pub fn from_job(job: Option<&str>) -> JobHint {
        let Some(job) = job else {
            return JobHint::None;
        };
        let j = job.to_ascii_lowercase();
        if ["train", "finetune", "fine-tune", "sft", "rlhf"]
            .iter()
            .any(|k| j.contains(k))
        {
            JobHint::Training
        } else if ["infer", "serv", "predict", "triton", "vllm"]
            .iter()
            .any(|k| j.contains(k))
        {
            JobHint::Inference
        } else {
            JobHint::None
        }
    }
}

/// Below this smoothed utilization (percent) a GPU does no real work.
const IDLE_UTIL: f32 = 5.0;
/// Idle GPUs draw little; above this fraction of the limit something runs.
const IDLE_POWER_FRAC: f32 = 0.35;
/// Sustained utilization of a training step loop.
const TRAINING_UTIL: f32 = 60.0;
/// Training keeps weights, optimizer state and activations resident.
const TRAINING_FB_FRAC: f32 = 0.4;
/// Serving at moderate load.
const INFERENCE_UTIL: f32 = 20.0;

/// The phase a sample suggests, before hysteresis. `util` is smoothed
/// utilization in percent; the others are NaN when unknown.
pub fn classify(util: f32, power_frac: f32, fb_frac: f32, hint: JobHint) -> Phase {
    let busy_power = power_frac.is_finite() && power_frac >= IDLE_POWER_FRAC;
    if !util.is_finite() {
        // No utilization: power alone separates idle from working.
        return match (busy_power, hint) {
            (false, _) => Phase::Idle,
            (true, JobHint::Inference) => Phase::Inference,
            (true, JobHint::Training) => Phase::Training,
            (true, JobHint::None) => Phase::Light,
        };
    }
    if util < IDLE_UTIL && !busy_power {
        return Phase::Idle;
    }
    match hint {
        JobHint::Training => return Phase::Training,
        JobHint::Inference => return Phase::Inference,
        JobHint::None => {}
    }
    let big_fb = !fb_frac.is_finite() || fb_frac >= TRAINING_FB_FRAC;
    if util >= TRAINING_UTIL && big_fb {
        Phase::Training
    } else if util >= INFERENCE_UTIL {
        Phase::Inference
    } else {
        Phase::Light
    }
}

/// Per-GPU phase tracker with hysteresis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseState {
    pub phase: Phase,
    /// Event time the current phase was entered.
    pub since_ms: i64,
    /// The phase changed at least once (the first phase is taken as settled:
    /// a restarted service must not treat every GPU as just-changed).
    pub changed: bool,
    candidate: Phase,
    candidate_count: u8,
    initialized: bool,
    /// Since when a lighter phase than a working one is suggested (a dip,
    /// until it has lasted the hold).
    #[serde(default)]
    lighter_since_ms: Option<i64>,
}

impl Default for PhaseState {
    fn default() -> Self {
        PhaseState {
            phase: Phase::Idle,
            since_ms: 0,
            changed: false,
            candidate: Phase::Idle,
            candidate_count: 0,
            initialized: false,
            lighter_since_ms: None,
        }
    }
}

impl PhaseState {
    /// Feeds one sample's suggested phase; returns `Some(previous)` when the
    /// phase changed. The first sample of a GPU sets the phase directly.
    /// A new phase needs `confirm` samples in a row; leaving a working
    /// phase (training, inference) for a lighter one that is not idle
    /// needs the lighter suggestions to have lasted `hold_ms` too: a
    /// checkpoint or a lull in requests is a dip of the work, not its end.
    /// (A job label's hint keeps a training job in training through its
    /// dips; without a label, or with one that names no workload, only the
    /// load tells. Idle is taken at once, as with a hint: the work ended.)
    pub fn update(
        &mut self,
        suggested: Phase,
        ts_ms: i64,
        confirm: u8,
        hold_ms: i64,
    ) -> Option<Phase> {
        if !self.initialized {
            self.initialized = true;
            self.phase = suggested;
            self.candidate = suggested;
            self.since_ms = ts_ms;
            return None;
        }
        if suggested == self.phase {
            self.candidate_count = 0;
            self.lighter_since_ms = None;
            return None;
        }
        if suggested == self.candidate {
            self.candidate_count = self.candidate_count.saturating_add(1);
        } else {
            self.candidate = suggested;
            self.candidate_count = 1;
        }
        let working = matches!(self.phase, Phase::Training | Phase::Inference);
        if working && suggested != Phase::Idle && suggested.load() < self.phase.load() {
            let since = *self.lighter_since_ms.get_or_insert(ts_ms);
            if ts_ms - since < hold_ms {
                return None;
            }
        } else {
            self.lighter_since_ms = None;
        }
        if self.candidate_count < confirm {
            return None;
        }
        let prev = self.phase;
        self.phase = suggested;
        self.since_ms = ts_ms;
        self.changed = true;
        self.candidate_count = 0;
        self.lighter_since_ms = None;
        Some(prev)
    }

    /// A different phase is suggested but not yet confirmed: the GPU is
    /// mid-transition and comparable with neither phase.
    pub fn pending(&self) -> bool {
        self.candidate_count > 0
    }

    /// Whether the GPU changed phase less than `settle_ms` ago.
    pub fn settling(&self, ts_ms: i64, settle_ms: i64) -> bool {
        self.changed && self.age_ms(ts_ms) < settle_ms
    }

    /// Milliseconds in the current phase.
    pub fn age_ms(&self, ts_ms: i64) -> i64 {
        (ts_ms - self.since_ms).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_load_and_hint() {
        assert_eq!(classify(0.0, 0.1, 0.0, JobHint::None), Phase::Idle);
        assert_eq!(classify(0.0, 0.1, 0.0, JobHint::Training), Phase::Idle);
        assert_eq!(classify(97.0, 0.9, 0.8, JobHint::None), Phase::Training);
        assert_eq!(classify(97.0, 0.9, 0.1, JobHint::None), Phase::Inference);
        assert_eq!(classify(40.0, 0.5, 0.3, JobHint::None), Phase::Inference);
        assert_eq!(classify(10.0, 0.2, 0.1, JobHint::None), Phase::Light);
        assert_eq!(classify(30.0, 0.5, 0.9, JobHint::Training), Phase::Training);
        assert_eq!(
            classify(f32::NAN, 0.8, f32::NAN, JobHint::None),
            Phase::Light
        );
        assert_eq!(JobHint::from_job(Some("train-llm-17")), JobHint::Training);
        assert_eq!(JobHint::from_job(Some("infer-chat-3")), JobHint::Inference);
        assert_eq!(JobHint::from_job(Some("ns/abc")), JobHint::None);
    }

    #[test]
    fn hysteresis_needs_confirmation() {
        let mut p = PhaseState::default();
        assert_eq!(p.update(Phase::Idle, 0, 2, 0), None);
        assert_eq!(p.update(Phase::Training, 10, 2, 0), None);
        assert_eq!(p.phase, Phase::Idle);
        assert_eq!(p.update(Phase::Training, 20, 2, 0), Some(Phase::Idle));
        assert_eq!((p.phase, p.since_ms), (Phase::Training, 20));
        assert_eq!(p.update(Phase::Light, 30, 2, 0), None);
        assert_eq!(p.update(Phase::Training, 40, 2, 0), None);
        assert_eq!(p.phase, Phase::Training);
        assert_eq!(p.age_ms(100), 80);
    }

    #[test]
    fn a_dip_of_the_work_shorter_than_the_hold_keeps_the_phase() {
        let (min, hold) = (60_000, 600_000);
        let mut p = PhaseState::default();
        p.update(Phase::Training, 0, 2, hold);
        // A three-minute checkpoint: the load passes through inference and
        // light; the phase holds (pending: comparable with neither).
        for (i, s) in [Phase::Inference, Phase::Light, Phase::Light, Phase::Light]
            .into_iter()
            .enumerate()
        {
            assert_eq!(p.update(s, (10 + i as i64) * min, 2, hold), None);
            assert!(p.pending());
        }
        assert_eq!(p.update(Phase::Training, 14 * min, 2, hold), None);
        assert!(!p.pending());
        // A lull longer than the hold is a change.
        for m in 15..25 {
            assert_eq!(p.update(Phase::Light, m * min, 2, hold), None, "{m}");
        }
        assert_eq!(
            p.update(Phase::Light, 25 * min, 2, hold),
            Some(Phase::Training)
        );
        // Back to work, then the job ends: idle is taken at once.
        p.update(Phase::Training, 26 * min, 2, hold);
        assert_eq!(
            p.update(Phase::Training, 27 * min, 2, hold),
            Some(Phase::Light)
        );
        assert_eq!(p.update(Phase::Idle, 29 * min, 2, hold), None);
        assert_eq!(
            p.update(Phase::Idle, 30 * min, 2, hold),
            Some(Phase::Training)
        );
        // Work starting is taken at once (two samples).
        assert_eq!(p.update(Phase::Inference, 31 * min, 2, hold), None);
        assert_eq!(
            p.update(Phase::Inference, 32 * min, 2, hold),
            Some(Phase::Idle)
        );
        // A dip, then more work: no hold up.
        assert_eq!(p.update(Phase::Light, 33 * min, 2, hold), None);
        assert_eq!(p.update(Phase::Training, 34 * min, 2, hold), None);
        assert_eq!(
            p.update(Phase::Training, 35 * min, 2, hold),
            Some(Phase::Inference)
        );
    }
}
