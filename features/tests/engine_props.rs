//! Property tests of the feature engine through its public API (issue 3's
//! acceptance): rates are never negative and smoothed values stay within
//! what was observed, whatever the counters and gauges do; and the whole
//! engine's state after any interleaving of duplicate (or late) re-sends
//! equals its state without them.

use std::sync::Arc;

use features::{
    Col, FeatureConfig, FeatureEngine, FeatureEvent, FeatureRow, Field, Sample, Topology,
};
use proptest::prelude::*;

const T0: i64 = 1_793_491_200_000;

fn topo(g: usize) -> Topology {
    Topology {
        host: Some(format!("h{}", g / 4).into()),
        rack: Some("r1".into()),
        cluster: None,
        model: Some("H100".into()),
        job: (g < 4).then(|| Arc::from("train-1")),
    }
}

/// Every rate column of the feature vector.
const RATES: [Col; 14] = [
    Col::EccSbeRate,
    Col::EccDbeRate,
    Col::RetiredSbeRate,
    Col::RetiredDbeRate,
    Col::RemapCorrRate,
    Col::RemapUncorrRate,
    Col::PcieReplayRate,
    Col::NvlinkCrcFlitRate,
    Col::NvlinkCrcDataRate,
    Col::NvlinkReplayRate,
    Col::NvlinkRecoveryRate,
    Col::PowerViolationFrac,
    Col::ThermalViolationFrac,
    Col::EnergyPowerW,
];

/// One GPU's step: time advance, counter moves (negative = a reset to
/// that much), whether each counter is reported, and gauges.
type Step = (i64, [i32; 4], [bool; 4], f32, f32);

fn step() -> impl Strategy<Value = Step> {
    (
        1i64..200_000,
        proptest::array::uniform4(-50i32..200),
        proptest::array::uniform4(proptest::bool::weighted(0.9)),
        20.0f32..95.0,
        50.0f32..700.0,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Counters that grow, stall, reset (go down) or go missing at irregular
    /// intervals never give a negative rate or delta; the smoothed
    /// temperature and power stay within the GPU's observed min / max.
    #[test]
    fn rates_never_negative_and_ewmas_stay_within_observed(
        steps in proptest::collection::vec(proptest::collection::vec(step(), 1..40), 1..4),
    ) {
        let mut e = FeatureEngine::new(FeatureConfig::default()).expect("valid config");
        let fields = [
            Field::EccSbeVolTotal,
            Field::PcieReplayCounter,
            Field::PowerViolation,
            Field::TotalEnergy,
        ];
        let mut rows = Vec::new();
        let mut events = Vec::new();
        for (g, gpu_steps) in steps.iter().enumerate() {
            let gpu: Arc<str> = format!("GPU-{g}").into();
            let (mut ts, mut vals) = (T0, [0f64; 4]);
            let (mut tmin, mut tmax) = (f32::INFINITY, f32::NEG_INFINITY);
            let (mut pmin, mut pmax) = (f32::INFINITY, f32::NEG_INFINITY);
            for (dt, moves, present, temp, power) in gpu_steps {
                ts += dt;
                let mut s = Sample::new(gpu.clone(), ts)
                    .with(Field::GpuTemp, f64::from(*temp))
                    .with(Field::PowerUsage, f64::from(*power));
                for (i, f) in fields.iter().enumerate() {
                    vals[i] = if moves[i] < 0 {
                        f64::from(-moves[i])
                    } else {
                        vals[i] + f64::from(moves[i]) * 1e6
                    };
                    if present[i] {
                        s.metrics.set(*f, vals[i]);
                    }
                }
                s.topo = topo(g);
                rows.clear();
                // The watermark rejects samples far ahead of other GPUs;
                // that is fine here, only accepted rows are checked.
                if e.process(&s, &mut rows, &mut events).is_err() {
                    continue;
                }
                tmin = tmin.min(*temp);
                tmax = tmax.max(*temp);
                pmin = pmin.min(*power);
                pmax = pmax.max(*power);
                for r in &rows {
                    for c in RATES {
                        let v = r.get(c);
                        prop_assert!(v.is_nan() || v >= 0.0, "{:?} = {}", c, v);
                    }
                    let d = r.get(Col::EccSbeDelta);
                    prop_assert!(d.is_nan() || d >= 0.0, "delta {}", d);
                    let te = r.get(Col::GpuTempEwma);
                    prop_assert!(te >= tmin && te <= tmax, "temp ewma {} outside [{}, {}]", te, tmin, tmax);
                    let pe = r.get(Col::PowerEwma);
                    prop_assert!(pe >= pmin && pe <= pmax, "power ewma {} outside [{}, {}]", pe, pmin, pmax);
                }
            }
        }
    }
}

/// Two ticks of eight GPUs per 60 s bucket, idle then training.
fn fleet(ticks: std::ops::Range<i64>) -> Vec<Vec<Sample>> {
    let ids: Vec<Arc<str>> = (0..8).map(|g| format!("GPU-{g}").into()).collect();
    ticks
        .map(|k| {
            ids.iter()
                .enumerate()
                .map(|(g, gpu)| {
                    let busy = k >= 10;
                    let w = ((k * 7 + g as i64) % 5) as f64;
                    let mut s = Sample::new(gpu.clone(), T0 + k * 30_000)
                        .with(Field::GpuUtil, if busy { 97.0 } else { 0.0 })
                        .with(Field::PowerUsage, if busy { 640.0 } else { 75.0 } + w)
                        .with(Field::PowerLimit, 700.0)
                        .with(Field::GpuTemp, if busy { 72.0 } else { 33.0 } + w * 0.3)
                        .with(Field::MemoryTemp, 40.0 + w)
                        .with(Field::SmClock, if busy { 1980.0 } else { 345.0 })
                        .with(Field::FbUsed, if busy { 70_000.0 } else { 500.0 })
                        .with(Field::FbFree, if busy { 11_000.0 } else { 80_500.0 })
                        .with(Field::EccSbeVolTotal, (k / 3) as f64)
                        .with(Field::TotalEnergy, 1e9 + k as f64 * 30_000.0 * 640.0)
                        .with(Field::XidErrors, if k == 14 && g == 3 { 31.0 } else { 0.0 });
                    s.topo = topo(g);
                    if busy {
                        s.topo.job = Some("train-1".into());
                    }
                    s
                })
                .collect()
        })
        .collect()
}

/// The engine's serialized state without its counters (which count the
/// duplicates and late samples, by design).
fn state_bytes(e: &FeatureEngine) -> Vec<u8> {
    let mut bytes = Vec::new();
    ciborium::into_writer(e, &mut bytes).expect("serialize");
    let v: ciborium::Value = ciborium::from_reader(bytes.as_slice()).expect("read back");
    let ciborium::Value::Map(fields) = v else {
        panic!("the engine serializes as a map");
    };
    let kept: Vec<_> = fields
        .into_iter()
        .filter(|(k, _)| k.as_text() != Some("counters"))
        .collect();
    let mut out = Vec::new();
    ciborium::into_writer(&ciborium::Value::Map(kept), &mut out).expect("serialize");
    out
}

type Outcome = (Vec<FeatureRow>, Vec<FeatureEvent>, Vec<&'static str>);

/// Runs tick batches through `e` (per batch, or per sample when `single`).
fn run(e: &mut FeatureEngine, batches: &[Vec<Sample>], single: bool) -> Outcome {
    let (mut rows, mut events, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
    for b in batches {
        if single {
            for s in b {
                if let Err(r) = e.process(s, &mut rows, &mut events) {
                    rejected.push((0, r));
                }
            }
        } else {
            e.process_batch(b, &mut rows, &mut events, &mut rejected);
        }
    }
    (
        rows,
        events,
        rejected.iter().map(|(_, r)| r.reason()).collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Re-sending any earlier sample, any number of times, anywhere in the
    /// stream (a duplicate of a recent one is dropped, an older one is
    /// rejected as late) leaves every row, every event and the whole
    /// engine's state (per-GPU state, models, cohorts, hosts, XID groups)
    /// as without it, in batch and in single-sample mode; and the rows
    /// after it are the same too.
    #[test]
    fn duplicates_never_change_engine_state(
        dups in proptest::collection::vec((0usize..160, 0usize..64), 0..40),
        single in proptest::bool::ANY,
    ) {
        let clean = fleet(0..20);
        let flat: Vec<&Sample> = clean.iter().flatten().collect();
        let mut dirty: Vec<Vec<Sample>> = Vec::new();
        let mut i = 0;
        for tick in &clean {
            let mut b = Vec::new();
            for s in tick {
                b.push(s.clone());
                for (at, back) in &dups {
                    if *at == i {
                        b.push(flat[i.saturating_sub(*back)].clone());
                    }
                }
                i += 1;
            }
            dirty.push(b);
        }
        let cfg = FeatureConfig::default;
        let (mut a, mut b) = (
            FeatureEngine::new(cfg()).expect("valid"),
            FeatureEngine::new(cfg()).expect("valid"),
        );
        let (ra, ea, xa) = run(&mut a, &clean, single);
        let (rb, eb, xb) = run(&mut b, &dirty, single);
        prop_assert!(xa.is_empty());
        prop_assert!(xb.iter().all(|r| *r == "late"), "{:?}", xb);
        prop_assert_eq!(ra.len(), rb.len());
        prop_assert!(ra.iter().zip(&rb).all(|(x, y)| x.same_bits(y)));
        prop_assert_eq!(ea, eb);
        prop_assert!(state_bytes(&a) == state_bytes(&b), "engine state differs");
        let c = b.counters();
        prop_assert_eq!(c.duplicates + c.late, dups.len() as u64);
        let next = fleet(20..30);
        let (ra, _, _) = run(&mut a, &next, single);
        let (rb, _, _) = run(&mut b, &next, single);
        prop_assert!(ra.iter().zip(&rb).all(|(x, y)| x.same_bits(y)));
    }
}
