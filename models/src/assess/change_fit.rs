//! The temperature's own test signal (part of [`super`]): per GPU, the
//! five-minute mean temperature less what its own power model predicts,
//! less the median of the same over its host's other GPUs.
//!
//! Each GPU keeps a weighted least-squares fit of its temperature on its
//! power (smoothed with the thermal time constant): its own heat sink and
//! place, an offset and a slope of its own. What that fit misses is mostly
//! the air, which its host's GPUs share: the median of their misses takes
//! it out, and a GPU that leaves or joins the host (a failure, a job)
//! moves that median by noise only, since every GPU's miss is centred on
//! its own model.
//!
//! Why not the feature stage's residual: its expected temperature is one
//! model per SKU and phase, learning from every GPU with forgetting, so a
//! GPU's residual carries its own heat sink and the shared model's wander.
//! At the median healthy GPU of full random-precursor seed 111 that
//! residual's buckets had a lag-1 correlation of 0.86 and a sustained
//! shift met an effective spread of 3.1 °C; this signal's was 0.20 °C
//! (0.32 °C effective, 0.53 °C at the 98th percentile). A fit on the air
//! proxy (the host's other GPUs' mean temperature) instead of their median
//! miss read a peer that failed or went idle as hours of "too hot".
//!
//! A GPU's bucket is judged with its second row after the close, once its
//! host's GPUs on the same scrape have closed theirs. Its fit predicts
//! from the moments of 2–4 h before (as the counters' lagged baseline;
//! in a GPU's first hours, from its first four hours') and learns at the
//! temperature baselines' pace (a three-day half-life, a tenth of that
//! while the test sees a change). A bucket whose power lies outside what
//! the lagged fit has seen (its leverage above [`MAX_LEVERAGE`]) has no
//! prediction: a GPU's first hours of training after a day idle would
//! read as a fault of the extrapolated slope.

use features::hash::fnv1a;
use features::{Col, FeatureRow};
use serde::{Deserialize, Serialize};

use super::bucket::{close_bucket, snapshot};
use super::peers::HostGroups;
use super::{BUCKET_MS, ChangeConfig, Signal, Stat};

/// Fewest other GPUs whose median the fit learns to take out.
const LEARN_OTHERS: usize = 3;

/// Moments of the fit's buckets over power p (100 W) and temperature t:
/// weight, Σp, Σp², Σt, Σpt.
type Moments = [f64; 5];

/// Buckets the predicting snapshot needs: four hours of them as the
/// baselines' decay weighs them (48 weigh 47.1 at a three-day half-life;
/// at 48 the snapshot of 4 h in fell short and the first prediction came
/// 8 h into a GPU's history instead of 6).
const MIN_BUCKETS: f64 = 46.0;
/// Ridge on the slope, in buckets at a spread of 100 W: an undetermined
/// slope stays near 0 instead of following noise.
const RIDGE: f64 = 1.0;
/// Largest leverage of a predicted bucket (its prediction's variance, in
/// units of the residual's): beyond it the fit extrapolates.
const MAX_LEVERAGE: f64 = 0.25;
/// Fewest other GPUs of the host whose median stands for the air: one.
/// When shards owned GPUs by UUID (before `pipeline::placement` put a
/// host's GPUs in one shard) a shard met three to five of eight; at three,
/// half the hosts had no common part and a cooling step 11.8 h before its
/// failure (full seed 111) went unjudged. Hosts of two GPUs still have
/// one.
const MIN_OTHERS: usize = 1;

/// One GPU's temperature model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct ThermalFit {
    /// The open bucket: sums of power and temperature, and the rows.
    open: [f64; 3],
    /// The closed bucket waiting for its host's.
    pending: Option<Pending>,
    moments: Moments,
    /// The moments as of the last two snapshots, two hours apart, and
    /// when the newer was taken: the older one predicts ([`snapshot`]).
    lagged: [Moments; 2],
    lagged_at_ms: i64,
    /// The moments as they stood when they first had [`MIN_BUCKETS`]: what
    /// predicts until the lagged snapshot has as many (then dropped), so
    /// that a GPU's test starts ~4 h into its history, not 6–8 h (a
    /// precursor under way by then was learnt as usual, and every GPU of a
    /// new fleet was blind for its first third of a day).
    #[serde(default)]
    early: Option<Moments>,
    /// Per workload phase, the mean and hours of the feature stage's
    /// temperature residual: the usual levels the peer signal takes out.
    pub(super) levels: [(f64, f64); 4],
}

/// A closed bucket waiting for its host's: it is judged, and the fit
/// learns it, once the host's common part is known.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Pending {
    bucket: i64,
    /// Mean power (100 W) and temperature.
    p: f64,
    t: f64,
    /// The fit's miss, when it predicted.
    miss: Option<f64>,
    phase: u8,
}

/// Updates a decayed (mean, hours) with a bucket's value.
fn level_learn(level: &mut (f64, f64), x: f64, h: f64, d: f64) {
    let w = level.1 * d;
    level.0 = (level.0 * w + x * h) / (w + h);
    level.1 = w + h;
}

/// Adds a row of the `Thermal` signal to the GPU's fit. A snapshot of a
/// build before the fit held the residual's baselines instead: they start
/// over.
pub(super) fn add(st: &mut Stat, row: &FeatureRow) {
    let fit = st.fit.get_or_insert_with(|| {
        (st.phases, st.s, st.base_h) = Default::default();
        Box::default()
    });
    let (t, p) = (
        f64::from(row.get(Col::GpuTemp)),
        f64::from(row.get(Col::PowerEwma)),
    );
    if t.is_finite() && p.is_finite() {
        fit.open[0] += p / 100.0;
        fit.open[1] += t;
        fit.open[2] += 1.0;
    }
}

/// Closes a bucket of the `Thermal` signal: the feature stage's residual
/// updates its phase's usual level (for the peer signal); the fit's miss
/// joins its host's and waits there to be judged ([`settle`]). A bucket
/// still waiting (the GPU had no row since the one before closed) is
/// settled first with what its host has.
pub(super) fn close(
    cfg: &ChangeConfig,
    st: &mut Stat,
    air: &mut HostGroups,
    host: Option<&str>,
    now_ms: i64,
) {
    settle(cfg, st, air, host, now_ms);
    let Some(fit) = st.fit.as_mut() else {
        return;
    };
    let h = BUCKET_MS as f64 / 3.6e6;
    let d = cfg.decay(h, st.s > cfg.quiet_below());
    if st.n > 0
        && let Some(level) = fit.levels.get_mut(usize::from(st.phase))
    {
        level_learn(level, st.sum / f64::from(st.n), h, d);
    }
    let o = std::mem::take(&mut fit.open);
    if o[2] < 1.0 {
        return;
    }
    let (p, t) = (o[0] / o[2], o[1] / o[2]);
    snapshot(&mut fit.lagged, &mut fit.lagged_at_ms, now_ms, fit.moments);
    // (A snapshot's weight only grows toward the decay's steady state:
    // once the lagged one has enough, the first hours' fit is done.)
    if fit.lagged[0][0] >= MIN_BUCKETS {
        fit.early = None;
    } else if fit.early.is_none() && fit.moments[0] >= MIN_BUCKETS {
        fit.early = Some(fit.moments);
    }
    let model = fit.early.as_ref().unwrap_or(&fit.lagged[0]);
    let key = host.map(|h| fnv1a(h.as_bytes()));
    let miss = key.zip(predict(model, p)).map(|(k, pred)| {
        air.push(k, st.bucket, t - pred);
        t - pred
    });
    fit.pending = Some(Pending {
        bucket: st.bucket,
        p,
        t,
        miss,
        phase: st.phase,
    });
}

/// Judges the GPU's closed bucket against its host's common part, then
/// the fit learns it — its temperature less that common part, so that
/// the fit learns the GPU and not the air (a GPU idle through a cool
/// night had learned a slope too steep and read +1 °C when it trained
/// again). Called with the GPU's second row after the close, by when its
/// host's GPUs on the same scrape have closed theirs (judging at the next
/// close instead held every thermal warning back five minutes).
pub(super) fn settle(
    cfg: &ChangeConfig,
    st: &mut Stat,
    air: &mut HostGroups,
    host: Option<&str>,
    now_ms: i64,
) {
    let Some(fit) = st.fit.as_mut() else {
        return;
    };
    let Some(pd) = fit.pending.take() else {
        return;
    };
    let d = cfg.decay(BUCKET_MS as f64 / 3.6e6, st.s > cfg.quiet_below());
    let key = host.map(|h| fnv1a(h.as_bytes()));
    let others = key.and_then(|k| air.others(k, pd.bucket, pd.miss));
    let common = others.filter(|&(_, n)| n >= MIN_OTHERS).map(|(m, _)| m);
    // The fit learns the temperature less the air where enough of its
    // host's GPUs tell it (with one or two, a peer's own error fed back
    // into every fit of the host), else the temperature as it is.
    let air_c = others
        .filter(|&(_, n)| n >= LEARN_OTHERS)
        .map_or(0.0, |(m, _)| m);
    let y = pd.t - air_c;
    let m = &mut fit.moments;
    for (v, x) in m.iter_mut().zip([1.0, pd.p, pd.p * pd.p, y, pd.p * y]) {
        *v = *v * d + x;
    }
    let (Some(miss), Some(common)) = (pd.miss, common) else {
        return;
    };
    let saved = (st.sum, st.n, st.phase);
    (st.sum, st.n, st.phase) = (miss - common, 1, pd.phase);
    close_bucket(cfg, Signal::Thermal, st, None, None, now_ms);
    (st.sum, st.n, st.phase) = saved;
}

/// Whether the GPU's closed bucket is due to be judged with this row: it
/// waits for one, and the open bucket has a row already.
pub(super) fn due(st: &Stat) -> bool {
    st.fit
        .as_ref()
        .is_some_and(|f| f.pending.is_some() && f.open[2] >= 1.0)
}

/// The prediction of `m` at power `p`, when it has enough buckets and `p`
/// lies within what it has seen.
fn predict(m: &Moments, p: f64) -> Option<f64> {
    let [w, sp, spp, st, spt] = *m;
    if w < MIN_BUCKETS {
        return None;
    }
    let (mp, mt) = (sp / w, st / w);
    let var = (spp - w * mp * mp).max(0.0) + RIDGE;
    let slope = (spt - w * mp * mt) / var;
    let dp = p - mp;
    let leverage = 1.0 / w + dp * dp / var;
    (leverage <= MAX_LEVERAGE).then_some(mt + slope * dp)
}

#[cfg(test)]
#[path = "change_fit_tests.rs"]
mod tests;
