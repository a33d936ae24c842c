//! PCIe link width: a GPU whose link trained down from the width it ran
//! at. A step of a shard's assessment beside [`super::rules`], on the
//! same feature rows.
//!
//! A link that retrains narrower (x16 → x8, `DCGM_FI_DEV_PCIE_LINK_WIDTH`)
//! halves the GPU's host bandwidth and is the mark of a failing slot,
//! riser or cable: the link layer gave up lanes it could not keep error
//! free. Unlike the link's generation, which drops at idle to save power,
//! its width holds at every load, so a width under the widest this GPU
//! has reported for [`ESTABLISHED_SAMPLES`] samples is news on any row.
//! The GPU's own history is the reference, not its SKU's: the same board
//! may sit behind a narrower switch in another chassis, and a card seated
//! narrow from the start is the installer's to find (`nvidia-smi -q`).
//!
//! The component is [`NARROW_RISK`] of `pcie_errors` (a warning after the
//! kind's `for`, never a page), held for [`HOLD_MS`] after the last narrow
//! reading (a marginal riser that bounces between widths must not reset
//! the warning's wait at every wide row); it resolves once the link has
//! been back at its width that long, or a lower width has held for
//! [`NEW_NORMAL_MS`] (a link renegotiated on purpose is the new width, and
//! the warning said it).

use std::collections::HashMap;

use features::hash::FxBuild;
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};

use super::{Evidence, KINDS, Kind};

/// Samples at a width before it is the GPU's own.
pub const ESTABLISHED_SAMPLES: u32 = 20;

/// The `pcie_errors` component of a narrowed link: over the default
/// policy's `fire_at` (0.5), under a page.
pub const NARROW_RISK: f32 = 0.6;

/// How long a narrow reading holds the warning through wide ones.
pub const HOLD_MS: i64 = 15 * 60_000;

/// How long a narrower width is news before it is the GPU's width.
pub const NEW_NORMAL_MS: i64 = 7 * 24 * 3_600_000;

/// One GPU's link history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Link {
    /// The widest width reported for [`ESTABLISHED_SAMPLES`] samples.
    usual: f32,
    /// The width now and samples at it in a row.
    now: f32,
    run: u32,
    /// When the link first read narrower than `usual` in this spell.
    narrow_since_ms: Option<i64>,
    /// The last narrow reading: its time and width.
    last_narrow: Option<(i64, f32)>,
}

/// Per GPU: its usual link width and any narrower spell.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct LinkWatch {
    gpus: HashMap<GpuId, Link, FxBuild>,
}

impl LinkWatch {
    /// Takes `row`'s link width and, while it is narrower than usual and
    /// the pipeline is `warm` (degradation is judged after its warm-up, as
    /// by [`super::rules`]), sets the `pcie_errors` component and its
    /// reason.
    pub fn apply(
        &mut self,
        row: &FeatureRow,
        warm: bool,
        components: &mut [f32; KINDS],
        reasons: &mut Vec<(Kind, Evidence)>,
    ) {
        let width = row.get(Col::PcieLinkWidth);
        if !(width.is_finite() && width >= 1.0) {
            return;
        }
        let l = self.gpus.entry(row.gpu.clone()).or_default();
        if width == l.now {
            l.run = l.run.saturating_add(1);
        } else {
            (l.now, l.run) = (width, 1);
        }
        if l.run >= ESTABLISHED_SAMPLES && width > l.usual {
            l.usual = width;
        }
        let ts = row.ts_ms;
        let narrow = if width < l.usual {
            l.last_narrow = Some((ts, width));
            width
        } else {
            match l.last_narrow {
                // Back at its width, lately narrow: held.
                Some((at, w)) if ts - at < HOLD_MS => w,
                _ => {
                    (l.narrow_since_ms, l.last_narrow) = (None, None);
                    return;
                }
            }
        };
        let since = *l.narrow_since_ms.get_or_insert(ts);
        if width < l.usual && ts - since >= NEW_NORMAL_MS {
            // Renegotiated for good: the narrower width is the GPU's now.
            (l.usual, l.narrow_since_ms, l.last_narrow) = (width, None, None);
            return;
        }
        if !warm {
            return;
        }
        let lost = 1.0 - narrow / l.usual;
        let c = &mut components[Kind::PcieErrors as usize];
        *c = c.max(NARROW_RISK);
        reasons.push((
            Kind::PcieErrors,
            Evidence {
                signal: "DCGM_FI_DEV_PCIE_LINK_WIDTH".to_string(),
                detail: format!(
                    "PCIe link at x{narrow:.0}, down from x{:.0} for {} min: {:.0} % of its lanes lost (a failing slot, riser or cable)",
                    l.usual,
                    (ts - since) / 60_000,
                    100.0 * lost
                ),
            },
        ));
    }

    /// Forgets a GPU (evicted or replaced).
    pub fn evict(&mut self, gpu: &str) {
        self.gpus.remove(gpu);
    }

    pub fn heap_bytes(&self) -> usize {
        self.gpus.capacity() * (std::mem::size_of::<Link>() + 24)
    }
}

#[cfg(test)]
mod tests {
    use features::{FEATURE_COUNT, Phase};

    use super::*;

    fn row(min: i64, width: f32) -> FeatureRow {
        let mut values = [f32::NAN; FEATURE_COUNT];
        values[Col::PcieLinkWidth as usize] = width;
        FeatureRow {
            ts_ms: min * 60_000,
            gpu: "GPU-l".into(),
            topo: Default::default(),
            phase: Phase::Training,
            values,
        }
    }

    fn judge(w: &mut LinkWatch, r: &FeatureRow) -> (f32, Vec<String>) {
        let mut c = [0.0f32; KINDS];
        let mut reasons = Vec::new();
        w.apply(r, true, &mut c, &mut reasons);
        (
            c[Kind::PcieErrors as usize],
            reasons.into_iter().map(|(_, e)| e.detail).collect(),
        )
    }

    #[test]
    fn a_link_that_trains_down_warns_until_it_is_back() {
        let mut w = LinkWatch::default();
        for m in 0..60 {
            assert_eq!(judge(&mut w, &row(m, 16.0)).0, 0.0);
        }
        let (c, why) = judge(&mut w, &row(60, 8.0));
        assert_eq!(c, NARROW_RISK);
        assert!(
            why[0].starts_with("PCIe link at x8, down from x16 for 0 min: 50 % of its lanes lost"),
            "{why:?}"
        );
        assert_eq!(judge(&mut w, &row(90, 8.0)).0, NARROW_RISK);
        // A missing reading or a width of 0 says nothing; back at x16, the
        // warning holds for a quarter hour, then clears.
        assert_eq!(judge(&mut w, &row(91, f32::NAN)).0, 0.0);
        assert_eq!(judge(&mut w, &row(91, 0.0)).0, 0.0);
        assert_eq!(judge(&mut w, &row(92, 16.0)).0, NARROW_RISK);
        assert_eq!(judge(&mut w, &row(90 + HOLD_MS / 60_000, 16.0)).0, 0.0);
        assert_eq!(judge(&mut w, &row(120, 16.0)).0, 0.0);
        // In the pipeline's warm-up the width is learnt, not judged.
        let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
        w.apply(&row(93, 8.0), false, &mut c, &mut reasons);
        assert_eq!((c[Kind::PcieErrors as usize], reasons.len()), (0.0, 0));
    }

    #[test]
    fn a_gpu_narrow_from_the_start_or_a_glitch_before_its_width_is_known_is_not_news() {
        let mut w = LinkWatch::default();
        // x16 for fewer samples than make it the GPU's own, then x8: the
        // GPU's width is not known yet.
        for m in 0..5 {
            assert_eq!(judge(&mut w, &row(m, 16.0)).0, 0.0);
        }
        for m in 5..100 {
            assert_eq!(judge(&mut w, &row(m, 8.0)).0, 0.0, "minute {m}");
        }
        // Wider later (reseated): x16 becomes its width; x8 is news again.
        for m in 100..130 {
            assert_eq!(judge(&mut w, &row(m, 16.0)).0, 0.0);
        }
        assert_eq!(judge(&mut w, &row(130, 8.0)).0, NARROW_RISK);
    }

    #[test]
    fn a_link_bouncing_between_widths_keeps_its_warning() {
        // A marginal riser: x8 and x16 in turn every other minute, an
        // alert's 5-minute wait must not restart at each wide row.
        let mut w = LinkWatch::default();
        for m in 0..30 {
            judge(&mut w, &row(m, 16.0));
        }
        for m in 30..60 {
            let width = if m % 2 == 0 { 8.0 } else { 16.0 };
            let (c, why) = judge(&mut w, &row(m, width));
            assert_eq!(c, NARROW_RISK, "minute {m}");
            assert!(
                why[0].starts_with("PCIe link at x8, down from x16"),
                "{why:?}"
            );
        }
        // x12 of x16: a quarter lost.
        let (_, why) = judge(&mut w, &row(60, 12.0));
        assert!(
            why[0].contains("at x12, down from x16 for 30 min: 25 %"),
            "{why:?}"
        );
    }

    #[test]
    fn a_narrower_link_held_for_a_week_is_the_new_width() {
        let mut w = LinkWatch::default();
        for m in 0..30 {
            judge(&mut w, &row(m, 16.0));
        }
        let week = NEW_NORMAL_MS / 60_000;
        assert_eq!(judge(&mut w, &row(30, 8.0)).0, NARROW_RISK);
        assert_eq!(judge(&mut w, &row(30 + week - 1, 8.0)).0, NARROW_RISK);
        assert_eq!(judge(&mut w, &row(30 + week, 8.0)).0, 0.0);
        assert_eq!(judge(&mut w, &row(31 + week, 8.0)).0, 0.0);
        w.evict("GPU-l");
        assert_eq!(
            w.heap_bytes(),
            w.gpus.capacity() * (std::mem::size_of::<Link>() + 24)
        );
    }
}
