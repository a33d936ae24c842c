//! A synthetic fleet for the feature-stage benchmark and memory test: eight
//! GPUs per host, four hosts per rack, a training job per pair of hosts,
//! every DCGM field a dcgm-exporter default scrape carries. Cheap to build,
//! deterministic, no simulator (which lives in a crate that depends on this
//! one).

use std::sync::Arc;

use features::{Field, Sample, Topology};

/// 2026-11-01T00:00:00Z.
pub const T0: i64 = 1_793_491_200_000;
/// dcgm-exporter's default interval.
pub const STEP_MS: i64 = 30_000;

/// Identities and topology of `n` GPUs.
pub fn fleet(n: usize) -> Vec<(Arc<str>, Topology)> {
    let model: Arc<str> = "NVIDIA H100 80GB HBM3".into();
    let cluster: Arc<str> = "east-1".into();
    (0..n)
        .map(|i| {
            let host = i / 8;
            let topo = Topology {
                host: Some(format!("node-{host:05}").into()),
                rack: Some(format!("r{:04}", host / 4).into()),
                cluster: Some(cluster.clone()),
                model: Some(model.clone()),
                job: (host % 3 != 2).then(|| format!("train-llm-{}", host / 2).into()),
            };
            (format!("GPU-{i:08x}-0000-4000-8000-{i:012x}").into(), topo)
        })
        .collect()
}

/// Every GPU's sample at tick `k`.
pub fn tick(fleet: &[(Arc<str>, Topology)], k: i64, out: &mut Vec<Sample>) {
    for (i, (gpu, topo)) in fleet.iter().enumerate() {
        let busy = topo.job.is_some();
        let w = ((i as i64 * 31 + k * 17) % 11) as f64 / 10.0;
        let (util, power, temp, clock) = if busy {
            (95.0 + w, 620.0 + 10.0 * w, 70.0 + w, 1980.0)
        } else {
            (0.0, 70.0 + w, 32.0 + w, 345.0)
        };
        let k_f = k as f64;
        let mut s = Sample::new(gpu.clone(), T0 + k * STEP_MS)
            .with(Field::GpuTemp, temp)
            .with(Field::MemoryTemp, temp + 6.0)
            .with(Field::PowerUsage, power)
            .with(Field::PowerLimit, 700.0)
            .with(Field::GpuUtil, util)
            .with(Field::MemCopyUtil, util * 0.4)
            .with(Field::SmClock, clock)
            .with(Field::MemClock, 2619.0)
            .with(Field::FbUsed, if busy { 70_000.0 } else { 600.0 })
            .with(Field::FbFree, if busy { 11_000.0 } else { 80_400.0 })
            .with(Field::XidErrors, 0.0)
            .with(Field::ClocksEventReasons, 0.0)
            .with(Field::EccSbeVolTotal, (k / 20) as f64)
            .with(Field::EccDbeVolTotal, 0.0)
            .with(Field::RetiredSbe, 0.0)
            .with(Field::RetiredDbe, 0.0)
            .with(Field::CorrectableRemappedRows, 0.0)
            .with(Field::UncorrectableRemappedRows, 0.0)
            .with(Field::PcieReplayCounter, (k / 50) as f64)
            .with(Field::NvlinkCrcFlitErrors, 0.0)
            .with(Field::PowerViolation, 0.0)
            .with(Field::ThermalViolation, 0.0)
            .with(Field::TotalEnergy, 1e9 + k_f * 30_000.0 * power);
        s.topo = topo.clone();
        out.push(s);
    }
}
