//! Batches of rows through the forest with its tree groups on parallel
//! threads (`Forest::process_batch`, `Forest::attribute_and_update_batch`):
//! the offline path of `forewarn score`. Results equal repeated per-row
//! calls exactly, for any thread count: groups share nothing, every tree has
//! its own generator, and the per-tree scores and attribution terms are
//! summed in tree order, as the per-row path sums them.

use super::{Forest, Group, Step};
use crate::rcf::traversal::Scratch;
use crate::rcf::{DiVector, RcfError};

/// What one group reports for a batch: for every scored row, each of its
/// trees' score, and (with attribution) each tree's `2 * dims` terms.
#[derive(Default)]
struct GroupOut {
    scores: Vec<f64>,
    terms: Vec<f64>,
}

/// Per-row results of a batch.
struct BatchOut {
    scores: Vec<f64>,
    /// `2 * dims` attribution terms per row (zeros for unscored rows); empty
    /// without attribution.
    attr: Vec<f64>,
    /// Points offered to the samplers once each row was processed.
    seen: Vec<u64>,
    /// The point each row was scored as, `dims` per row.
    points: Vec<f32>,
}

/// Each row's attribution and `points_seen` right after it.
type Attributed = Vec<(DiVector, u64)>;

impl Forest {
    /// Scores then learns each row in order, like repeated `score_and_update`
    /// (and with identical results), running tree groups on `threads` threads.
    pub fn process_batch<R: AsRef<[f64]>>(&mut self, rows: &[R]) -> Result<Vec<f64>, RcfError> {
        Ok(self.run_batch(rows, false)?.scores)
    }

    /// Attributes then learns each row in order, like repeated
    /// `attribute_and_update` (identical results), running tree groups on
    /// `threads` threads. Each row also gets `points_seen` as it stood right
    /// after that row.
    pub fn attribute_and_update_batch<R: AsRef<[f64]>>(
        &mut self,
        rows: &[R],
    ) -> Result<Attributed, RcfError> {
        Ok(self.attribute_and_update_batch_points(rows)?.0)
    }

    /// `attribute_and_update_batch`, with the point each row was scored as
    /// (`dimensions()` per row, flat): what `ThresholdedForest` remembers
    /// an event by.
    pub(crate) fn attribute_and_update_batch_points<R: AsRef<[f64]>>(
        &mut self,
        rows: &[R],
    ) -> Result<(Attributed, Vec<f32>), RcfError> {
        let out = self.run_batch(rows, true)?;
        let width = 2 * self.config.dimensions();
        let rows = out
            .attr
            .chunks_exact(width.max(1))
            .map(DiVector::from_flat)
            .zip(out.seen)
            .collect();
        Ok((rows, out.points))
    }

    fn run_batch<R: AsRef<[f64]>>(
        &mut self,
        rows: &[R],
        want_attr: bool,
    ) -> Result<BatchOut, RcfError> {
        for r in rows {
            self.check(r.as_ref())?;
        }
        let dims = self.config.dimensions();
        let mut points = Vec::with_capacity(rows.len() * dims);
        let mut steps = Vec::with_capacity(rows.len());
        let mut seen = Vec::with_capacity(rows.len());
        let mut point = Vec::with_capacity(dims);
        for r in rows {
            let cand = self.shingle.candidate(r.as_ref(), &mut point);
            let step = Step {
                t: self.stored,
                insert: cand.complete && !cand.poisoned,
                score: cand.complete && self.is_ready(),
            };
            self.stored += u64::from(step.insert);
            seen.push(self.stored);
            self.shingle.push(r.as_ref(), &point);
            points.extend_from_slice(&point);
            steps.push(step);
        }
        let scored = steps.iter().filter(|s| s.score).count();
        let width = if want_attr { 2 * dims } else { 0 };
        let run = |g: &mut Group| -> GroupOut {
            let mut s = Scratch::new(dims);
            let mut out = GroupOut {
                scores: Vec::with_capacity(scored * g.trees.len()),
                terms: Vec::with_capacity(scored * g.trees.len() * width),
            };
            g.learn(&points, &steps, &mut s, want_attr, &mut |x, terms| {
                out.scores.push(x);
                out.terms.extend_from_slice(terms);
            });
            out
        };
        let per_group: Vec<GroupOut> = if self.groups.len() > 1 {
            std::thread::scope(|scope| {
                let handles: Vec<_> = self
                    .groups
                    .iter_mut()
                    .map(|g| scope.spawn(|| run(g)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a forest worker panicked"))
                    .collect()
            })
        } else {
            self.groups.iter_mut().map(run).collect()
        };
        let mut cursors = vec![0usize; per_group.len()];
        let mut scores = Vec::with_capacity(steps.len());
        let mut attr = Vec::with_capacity(steps.len() * width);
        let mut a = vec![0.0; width];
        for step in &steps {
            a.fill(0.0);
            if !step.score {
                scores.push(0.0);
                attr.extend_from_slice(&a);
                continue;
            }
            let mut total = 0.0;
            for (gi, g) in self.groups.iter().enumerate() {
                let out = &per_group[gi];
                for c in cursors[gi]..cursors[gi] + g.trees.len() {
                    total += out.scores[c];
                    let terms = &out.terms[c * width..(c + 1) * width];
                    a.iter_mut().zip(terms).for_each(|(a, t)| *a += t);
                }
                cursors[gi] += g.trees.len();
            }
            scores.push(self.finish(total, want_attr.then_some(&mut a[..])));
            attr.extend_from_slice(&a);
        }
        Ok(BatchOut {
            scores,
            attr,
            seen,
            points,
        })
    }
}
