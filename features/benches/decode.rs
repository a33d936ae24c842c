//! Decoder throughput: native JSON with a 20-metric sample (the Kafka hot
//! path), a host's 8 GPUs in one array message, and a dcgm-exporter scrape.
//! Run: `cargo bench -p features --bench decode`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use features::decode::{DecodeOutput, native, prom};
use std::hint::black_box;

const SAMPLE_20: &str = r#"{"ts":"2026-11-29T17:00:00.000Z","gpu":"GPU-3b1c5e2a-8f0d-4c6e-9a71-2d4f6b8c0e13","host":"node-0042","rack":"r07","cluster":"east-1","model":"NVIDIA H100 80GB HBM3","job":"train-llm-17","metrics":{"DCGM_FI_DEV_GPU_TEMP":64,"DCGM_FI_DEV_MEMORY_TEMP":71,"DCGM_FI_DEV_POWER_USAGE":612.3,"DCGM_FI_DEV_GPU_UTIL":98,"DCGM_FI_DEV_MEM_COPY_UTIL":41,"DCGM_FI_DEV_SM_CLOCK":1980,"DCGM_FI_DEV_MEM_CLOCK":2619,"DCGM_FI_DEV_FB_USED":61234,"DCGM_FI_DEV_FB_FREE":20325,"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":3,"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":0,"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":0,"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS":0,"DCGM_FI_DEV_ROW_REMAP_FAILURE":0,"DCGM_FI_DEV_PCIE_REPLAY_COUNTER":12,"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL":0,"DCGM_FI_DEV_THERMAL_VIOLATION":0,"DCGM_FI_DEV_POWER_VIOLATION":1234567,"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":455497156,"DCGM_FI_DEV_XID_ERRORS":0}}"#;

fn bench(c: &mut Criterion) {
    let names: Vec<&str> = features::Field::ALL
        .iter()
        .take(20)
        .map(|f| f.name())
        .collect();
    c.bench_function("field_from_name_x20", |b| {
        b.iter(|| {
            for n in &names {
                black_box(features::Field::from_name(black_box(n)));
            }
        })
    });
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    g.bench_function("native_json_20_metrics", |b| {
        let mut out = DecodeOutput::default();
        b.iter(|| {
            out.samples.clear();
            native::decode_into(black_box(SAMPLE_20.as_bytes()), &mut out);
            assert_eq!(out.samples.len(), 1);
        })
    });
    let array = format!("[{}]", [SAMPLE_20; 8].join(","));
    g.throughput(Throughput::Elements(8));
    g.bench_function("native_json_array_of_8", |b| {
        let mut out = DecodeOutput::default();
        b.iter(|| {
            out.samples.clear();
            native::decode_into(black_box(array.as_bytes()), &mut out);
        })
    });
    // Relative to the package root (cargo's working directory for benches).
    let scrape =
        std::fs::read_to_string("tests/fixtures/dcgm-exporter/metrics-k8s-rtx4000ada.prom");
    if let Ok(scrape) = scrape {
        g.throughput(Throughput::Elements(1));
        g.bench_function("dcgm_exporter_scrape_1_gpu", |b| {
            let mut out = DecodeOutput::default();
            b.iter(|| {
                out.samples.clear();
                prom::decode_into(black_box(scrape.as_bytes()), 0, &mut out);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
