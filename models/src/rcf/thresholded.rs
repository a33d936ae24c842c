//! Forest plus the thresholded grader (`crate::grading`): the anomaly
//! detector the models stage runs. Each input, and (with the grader's
//! `differences`) its change since the row before, is normalised by its own
//! running statistics, the forest scores the normalised row, and the grader
//! turns the score into a grade that means the same on every stream, with the
//! attribution behind it; a single stream's events that repeat one opened
//! recently are taken out (`grading::recurrence`, `grading::known`) and a
//! metric frozen at one value is flagged (`grading::stuck`). The whole state
//! snapshots to JSON (and to CBOR in the detector's checkpoints); a
//! restored detector continues exactly where the saved one stopped.

use serde::{Deserialize, Serialize};

use super::{DiVector, Direction, Forest, RcfError};
use crate::grading::{
    Episode, Grade, Grader, GraderConfig, InputNormalizer, KnownStates, Recurrences, Stuck,
    StuckRuns,
};

mod repr;

pub(crate) use repr::ThresholdedRepr;
use repr::{check_shapes, metrics_of};

/// Everything known about one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Raw forest score of the normalised row (about 1 for ordinary points,
    /// 0 while the forest fills).
    pub score: f64,
    /// Grade in [0.5, 1] for a flagged row (a new event or a clear rise in
    /// one), 0 otherwise (repeats of a flagged event included).
    pub grade: f64,
    pub is_anomaly: bool,
    /// The open event's peak grade, held until it closes (0 when none).
    pub event_grade: f64,
    /// An event is open.
    pub in_event: bool,
    /// Score standing at the grader's lower threshold (0 while warming up).
    pub threshold: f64,
    /// The forest or the grader is still warming up: nothing is graded.
    pub warming_up: bool,
    /// Per-metric (shingle lags folded) attribution; sums to `score`.
    pub attribution: DiVector,
}

/// The main reason behind a score: which metric, which way, what share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// Index of the input metric.
    pub metric: usize,
    pub direction: Direction,
    /// Fraction of the score this metric and direction explain.
    pub share: f64,
}

impl Verdict {
    pub fn explanation(&self) -> Option<Explanation> {
        let (metric, direction, part) = self.attribution.top()?;
        let total = self.attribution.total();
        Some(Explanation {
            metric,
            direction,
            share: if total > 0.0 { part / total } else { 0.0 },
        })
    }
}

/// A [`Forest`] behind an [`InputNormalizer`], with a [`Grader`] on its scores.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ThresholdedRepr")]
pub struct ThresholdedForest {
    forest: Forest,
    normalizer: InputNormalizer,
    grader: Grader,
    /// The last finite value of each metric (differences only; none
    /// before the first).
    last: Vec<Option<f64>>,
    recurrences: Recurrences,
    /// Raw inputs seen lately, and whether on a normal row (`grading::known`).
    #[serde(default)]
    known: KnownStates,
    /// Each metric's run of equal values (`grading::stuck`).
    #[serde(default)]
    stuck: StuckRuns,
}

impl TryFrom<ThresholdedRepr> for ThresholdedForest {
    type Error = RcfError;

    fn try_from(r: ThresholdedRepr) -> Result<Self, RcfError> {
        let p = r.into_parts()?;
        Ok(Self {
            forest: p.forest,
            normalizer: p.normalizer,
            grader: p.grader,
            last: p.last,
            recurrences: p.recurrences,
            known: p.known,
            stuck: p.stuck,
        })
    }
}

/// What a single stream's own memories make of one row before it is
/// graded (`ThresholdedForest::marks`); another stream's rows have none.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    /// The raw shingle's key for the known states.
    key: Option<u64>,
    stuck: Stuck,
    /// A run that became stuck lies below its metric's running mean.
    low: bool,
}

impl ThresholdedForest {
    /// `forest` must take `config.forest_dimensions(metrics)` inputs.
    pub fn new(forest: Forest, config: GraderConfig) -> Result<Self, RcfError> {
        let dims = forest.config().input_dimensions;
        if config.differences && !dims.is_multiple_of(2) {
            return Err(RcfError::InvalidParameter {
                field: "input_dimensions",
                reason: "with differences the forest takes two inputs per metric (GraderConfig::forest_dimensions)",
                value: dims.to_string(),
            });
        }
        let last = if config.differences {
            vec![None; dims / 2]
        } else {
            Vec::new()
        };
        let normalizer = InputNormalizer::new(dims, config.input_decay);
        Ok(Self {
            forest,
            normalizer,
            grader: Grader::new(config)?,
            last,
            recurrences: Recurrences::default(),
            known: KnownStates::default(),
            stuck: StuckRuns::default(),
        })
    }

    /// Grades by `config` from now on, keeping everything learnt: how a
    /// restored snapshot takes the running build's thresholds instead of
    /// those it was written with. The forest's inputs cannot change under
    /// it: `differences` and `normalize_inputs` must be as before (and
    /// remembered events fit the forest, for a memory that starts now).
    pub fn regrade(&mut self, config: GraderConfig) -> Result<(), RcfError> {
        let old = self.grader.config();
        for (field, was, now) in [
            ("differences", old.differences, config.differences),
            (
                "normalize_inputs",
                old.normalize_inputs,
                config.normalize_inputs,
            ),
        ] {
            if was != now {
                return Err(RcfError::InvalidParameter {
                    field,
                    reason: "the forest learnt its inputs the other way",
                    value: now.to_string(),
                });
            }
        }
        check_shapes(&config, &self.recurrences, &self.forest)?;
        Ok(self.grader.reconfigure(config)?)
    }

    /// Values per input row.
    pub fn metrics(&self) -> usize {
        metrics_of(self.grader.config(), self.forest.config().input_dimensions)
    }

    pub fn forest(&self) -> &Forest {
        &self.forest
    }

    pub fn grader(&self) -> &Grader {
        &self.grader
    }

    /// The forest's inputs before normalisation: `row` itself, or with
    /// differences `row` and each value's change since the last finite one
    /// (a missing value's change is missing; the first row's is 0), written
    /// to `wide`. Without differences nothing is copied.
    fn widen<'a>(&self, row: &'a [f64], wide: &'a mut Vec<f64>) -> &'a [f64] {
        if !self.grader.config().differences {
            return row;
        }
        wide.clear();
        wide.extend_from_slice(row);
        wide.extend(row.iter().zip(&self.last).map(|(&x, &l)| match l {
            _ if !x.is_finite() => f64::NAN,
            Some(l) => x - l,
            None => 0.0,
        }));
        wide
    }

    /// The widened `row` as the forest sees it (normalised when
    /// configured), without learning from it.
    fn input(&self, wide: &[f64], out: &mut Vec<f64>) {
        if self.grader.config().normalize_inputs {
            self.normalizer.apply(wide, out);
        } else {
            out.clear();
            out.extend_from_slice(wide);
        }
    }

    /// Learns the widened row: the normaliser's statistics and each
    /// metric's last value.
    fn learn(&mut self, row: &[f64], wide: &[f64]) {
        self.normalizer.learn(wide);
        for (l, &x) in self.last.iter_mut().zip(row) {
            if x.is_finite() {
                *l = Some(x);
            }
        }
    }

    fn check(&self, row: &[f64]) -> Result<(), RcfError> {
        let expected = self.metrics();
        if row.len() != expected {
            return Err(RcfError::DimensionMismatch {
                expected,
                got: row.len(),
            });
        }
        Ok(())
    }

    /// Scores, grades and explains `row`, then learns from it.
    pub fn process(&mut self, row: &[f64]) -> Result<Verdict, RcfError> {
        self.check(row)?;
        let (mut buf, mut x) = (
            Vec::new(),
            Vec::with_capacity(self.forest.config().input_dimensions),
        );
        let wide = self.widen(row, &mut buf);
        self.input(wide, &mut x);
        let attribution = self.forest.attribute_and_update(&x)?;
        self.learn(row, wide);
        let marks = self.marks(row, wide, &x);
        let seen = self.forest.points_seen();
        // The point the forest scored: what an event opening here is
        // remembered by (copied only when recurrences are on).
        let shape = if self.remembers() {
            self.forest.last_point().to_vec()
        } else {
            Vec::new()
        };
        Ok(self.verdict(attribution, seen, None, &shape, marks))
    }

    /// `process` for another stream's `episode`: the forest and the
    /// statistics are shared, the event is that stream's own (the
    /// pipeline's shard forest, one episode per GPU). The last values are
    /// the forest's too, so a forest fed several streams should take no
    /// differences (the pipeline's takes none); recurrences are one
    /// stream's, so they are not taken out here (the pipeline's grader
    /// remembers none).
    pub fn process_for(&mut self, row: &[f64], episode: &mut Episode) -> Result<Verdict, RcfError> {
        self.check(row)?;
        let (mut buf, mut x) = (
            Vec::new(),
            Vec::with_capacity(self.forest.config().input_dimensions),
        );
        let wide = self.widen(row, &mut buf);
        self.input(wide, &mut x);
        let attribution = self.forest.attribute_and_update(&x)?;
        self.learn(row, wide);
        let seen = self.forest.points_seen();
        let marks = Marks::default();
        Ok(self.verdict(attribution, seen, Some(episode), &[], marks))
    }

    /// Grades `row` for `episode` without learning from it (forest,
    /// normaliser and score statistics unchanged). The attribution is
    /// computed only when an event is open; otherwise it is empty.
    pub fn assess_for(&self, row: &[f64], episode: &mut Episode) -> Result<Verdict, RcfError> {
        self.check(row)?;
        let (mut buf, mut x) = (
            Vec::new(),
            Vec::with_capacity(self.forest.config().input_dimensions),
        );
        let wide = self.widen(row, &mut buf);
        self.input(wide, &mut x);
        let score = self.forest.score(&x)?;
        let g = if self.is_mature(self.forest.points_seen()) && score > 0.0 {
            crate::grading::grade(score, self.grader.stats(), episode, self.grader.config())
        } else {
            Grade::WARMING_UP
        };
        let metrics = self.metrics();
        let attribution = if g.in_event {
            self.forest.attribution(&x)?.per_metric(metrics)
        } else {
            DiVector::zeros(metrics)
        };
        Ok(Self::assemble(score, g, attribution))
    }

    /// `process` for each row in order (identical verdicts), with the
    /// forest's tree groups on its `threads` threads.
    pub fn process_batch<R: AsRef<[f64]>>(&mut self, rows: &[R]) -> Result<Vec<Verdict>, RcfError> {
        let m = self.forest.config().input_dimensions;
        let mut flat = Vec::with_capacity(rows.len() * m);
        let (mut buf, mut x) = (Vec::with_capacity(m), Vec::with_capacity(m));
        let mut marks = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row.as_ref();
            self.check(row)?;
            let wide = self.widen(row, &mut buf);
            self.input(wide, &mut x);
            flat.extend_from_slice(&x);
            self.learn(row, wide);
            marks.push(self.marks(row, wide, &x));
        }
        let inputs: Vec<&[f64]> = flat.chunks_exact(m).collect();
        let (rows, points) = self.forest.attribute_and_update_batch_points(&inputs)?;
        let d = self.forest.config().dimensions();
        let remembers = self.remembers();
        Ok(rows
            .into_iter()
            .enumerate()
            .map(|(i, (attribution, seen))| {
                let shape = if remembers {
                    &points[i * d..(i + 1) * d]
                } else {
                    &[]
                };
                self.verdict(attribution, seen, None, shape, marks[i])
            })
            .collect())
    }

    /// Takes `row` (raw), `wide` (widened) and `x` (as the forest sees it)
    /// into the single stream's own memories, in row order: the raw
    /// shingle's key for the known states (`None` with them off or before a
    /// shingle has filled) and each metric's run of equal values.
    fn marks(&mut self, row: &[f64], wide: &[f64], x: &[f64]) -> Marks {
        let key = if self.grader.config().known_horizon == 0 {
            None
        } else {
            self.known.push(wide, self.forest.config().shingle_size)
        };
        let stuck = self.stuck.push(row, self.grader.config());
        // A run that became stuck sits on the side of its normalised value.
        let low = stuck
            .opened
            .is_some_and(|m| x.get(m).is_some_and(|&v| v < 0.0));
        Marks { key, stuck, low }
    }

    /// Events are remembered by their shape (`GraderConfig::recurrence`).
    fn remembers(&self) -> bool {
        self.grader.config().recurrence > 0.0
    }

    /// Scores run high while the samplers are still filling; grading (and
    /// learning) them would set the statistics too high.
    fn is_mature(&self, seen: u64) -> bool {
        seen > self.forest.config().sample_size as u64
    }

    /// Grades a row's attribution; `seen` is the forest's `points_seen`
    /// right after the row; `episode` is another stream's event, or `None`
    /// for the detector's own, whose recurrences are taken out by `shape`,
    /// the point the forest scored the row as (empty with recurrence off),
    /// and its known states and stuck values by `marks`.
    fn verdict(
        &mut self,
        attribution: DiVector,
        seen: u64,
        episode: Option<&mut Episode>,
        shape: &[f32],
        marks: Marks,
    ) -> Verdict {
        let Marks { key, stuck, low } = marks;
        let score = attribution.total();
        // Shingle lags and each metric's change fold onto the metric.
        let mut attribution = attribution.per_metric(self.metrics());
        let horizon = self.grader.config().known_horizon;
        let own = episode.is_none();
        let g = if self.is_mature(seen) && score > 0.0 {
            match episode {
                Some(e) => self.grader.process_for(score, e, true),
                None => {
                    let was_open = self.grader.in_event();
                    let g = self.grader.process(score);
                    let (g, ends) = self.known.filter(g, was_open, key, seen, horizon);
                    if ends {
                        self.grader.close_event();
                    }
                    let opened = g.is_anomaly && !was_open;
                    let input = || shape.to_vec();
                    let g = self
                        .recurrences
                        .filter(g, opened, seen, input, self.grader.config());
                    if let Some(m) = stuck.opened {
                        // The frozen metric explains the row.
                        attribution = DiVector::zeros(attribution.high.len());
                        let side = if low {
                            &mut attribution.low
                        } else {
                            &mut attribution.high
                        };
                        side[m] = score;
                    }
                    StuckRuns::apply(g, stuck)
                }
            }
        } else {
            Grade::WARMING_UP
        };
        if own {
            self.known.remember(key, seen, g.in_event, horizon);
        }
        Self::assemble(score, g, attribution)
    }

    fn assemble(score: f64, g: Grade, attribution: DiVector) -> Verdict {
        Verdict {
            score,
            grade: g.grade,
            is_anomaly: g.is_anomaly,
            event_grade: g.event_grade,
            in_event: g.in_event,
            threshold: g.threshold,
            warming_up: g.warming_up,
            attribution,
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.forest.heap_bytes()
            + self.normalizer.heap_bytes()
            + self.last.capacity() * 16
            + self.recurrences.heap_bytes()
            + self.known.heap_bytes()
            + self.stuck.heap_bytes()
    }

    /// Serialises forest, normaliser and grader (JSON).
    pub fn to_json(&self) -> Result<String, RcfError> {
        Ok(serde_json::to_string(self)?)
    }

    /// Restores a detector saved by `to_json`, checking its consistency.
    pub fn from_json(json: &str) -> Result<Self, RcfError> {
        super::snapshot::check_nested_json_version(json)?;
        let repr: ThresholdedRepr = serde_json::from_str(json)?;
        repr.forest.check_consistency()?;
        Self::try_from(repr)
    }
}

/// Name of a direction as used in explanations: `cpu_high`.
pub fn reason_label(metric_name: &str, direction: Direction) -> String {
    format!("{metric_name}_{}", direction.as_str())
}
