//! Decoders against real exporter output in `tests/fixtures/`: every file
//! decodes, and decoded values are spot-checked against the file.

use std::path::PathBuf;

use features::decode::{self, DecodeOutput, Encoding, nvsmi, prom};
use features::{Field, sniff};

fn fixture(rel: &str) -> String {
    // Relative to the working directory, which cargo sets to this package's
    // root: a compile-time `CARGO_MANIFEST_DIR` would be the path of
    // whichever checkout built the (cached, shared-target-dir) binary.
    let p = PathBuf::from("tests/fixtures").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading fixture {}: {e}", p.display()))
}

#[test]
fn k8s_scrape_decodes_with_values_from_the_file() {
    let text = fixture("dcgm-exporter/metrics-k8s-rtx4000ada.prom");
    assert_eq!(sniff(text.as_bytes()), Some(Encoding::PromText));
    let out = decode::decode(text.as_bytes(), 1_000);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.samples.len(), 1, "one GPU in the scrape");
    let s = &out.samples[0];
    assert_eq!(&*s.gpu, "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c");
    assert_eq!(
        s.ts_ms, 1_000,
        "no sample timestamps: the scrape time is used"
    );
    assert_eq!(
        s.topo.host.as_deref(),
        Some("lke529760-766837-0a634ab30000")
    );
    assert_eq!(
        s.topo.model.as_deref(),
        Some("NVIDIA RTX 4000 Ada Generation")
    );
    assert_eq!(s.topo.job.as_deref(), Some("cuda-75454ffb9f-8ljq7"));
    let m = &s.metrics;
    assert_eq!(m.get(Field::SmClock), Some(2310.0));
    assert_eq!(m.get(Field::MemClock), Some(9001.0));
    assert_eq!(m.get(Field::GpuTemp), Some(48.0));
    assert_eq!(m.get(Field::PowerUsage), Some(40.979));
    assert_eq!(m.get(Field::TotalEnergy), Some(455_497_156.0));
    assert_eq!(m.get(Field::FbFree), Some(20_015.0));
    assert_eq!(m.get(Field::XidErrors), Some(0.0));
    assert_eq!(
        m.get(Field::EccSbeVolTotal),
        None,
        "not exported, so missing — never zero"
    );
    let metric_lines = text.lines().filter(|l| l.starts_with("DCGM_")).count();
    assert_eq!(
        m.len() + s.extra.len(),
        metric_lines,
        "every metric line is kept: {:?}",
        s.extra
    );
}

/// Every metric of every dcgm-exporter counter list (commented out or not),
/// as an exporter would emit it, decodes without error: to a typed field when
/// forewarn knows it, else to an extra feature.
#[test]
fn every_counter_list_metric_decodes() {
    for file in [
        "default-counters.csv",
        "dcp-metrics-included.csv",
        "1.x-compatibility-metrics.csv",
    ] {
        let list = fixture(&format!("dcgm-exporter/{file}"));
        let mut scrape = String::new();
        let mut names = Vec::new();
        for line in list.lines() {
            let line = line.trim_start_matches(['#', ' ']);
            let mut cols = line.split(',').map(str::trim);
            let (Some(name), Some(kind)) = (cols.next(), cols.next()) else {
                continue;
            };
            if !(name.starts_with("DCGM_") || name.starts_with("dcgm_"))
                || !matches!(kind, "gauge" | "counter")
            {
                continue;
            }
            if names.iter().any(|n| n == name) {
                continue; // some lists name a metric twice
            }
            names.push(name.to_string());
            scrape.push_str(&format!(
                "{name}{{gpu=\"0\",UUID=\"GPU-x\",Hostname=\"h\"}} 1\n"
            ));
        }
        assert!(
            names.len() >= 10,
            "{file}: parsed {} metric names",
            names.len()
        );
        let out = decode::decode(scrape.as_bytes(), 0);
        assert!(out.errors.is_empty(), "{file}: {:?}", out.errors);
        let s = &out.samples[0];
        assert_eq!(s.metrics.len() + s.extra.len(), names.len(), "{file}");
        let known = names
            .iter()
            .filter(|n| Field::from_name(n).is_some())
            .count();
        assert!(
            known * 10 >= names.len() * 6,
            "{file}: only {known} of {} names known",
            names.len()
        );
    }
    // The health-relevant fields, in both namespaces, resolve to the same field.
    for (new, old) in [
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "dcgm_ecc_dbe_volatile_total",
        ),
        ("DCGM_FI_DEV_RETIRED_PENDING", "dcgm_retired_pages_pending"),
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "dcgm_nvlink_flit_crc_error_count_total",
        ),
        ("DCGM_FI_DEV_THERMAL_VIOLATION", "dcgm_thermal_violation"),
    ] {
        assert_eq!(Field::from_name(new), Field::from_name(old), "{new}");
        assert!(Field::from_name(new).is_some(), "{new}");
    }
}

/// The `--query-gpu … --format=csv` tables (header + one row) in a capture.
fn query_gpu_tables(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("timestamp, driver_version"))
        .map(|(i, l)| format!("{l}\n{}\n", lines.get(i + 1).copied().unwrap_or("")))
        .collect()
}

#[test]
fn nvidia_smi_csv_decodes_idle_and_load_captures() {
    let cases = [
        (
            "nvidia-smi/h100-80gb-hbm3-590.48.01.txt",
            "NVIDIA H100 80GB HBM3",
            [
                (41.0, 48.0, 69.85, 0.0, 345.0),
                (59.0, 54.0, 631.95, 100.0, 1980.0),
            ],
        ),
        (
            "nvidia-smi/h200-590.48.01.txt",
            "NVIDIA H200",
            [
                (28.0, 32.0, 77.71, 0.0, 345.0),
                (52.0, 40.0, 627.40, 100.0, 1980.0),
            ],
        ),
    ];
    for (file, model, expected) in cases {
        let tables = query_gpu_tables(&fixture(file));
        assert_eq!(tables.len(), 2, "{file}: idle and load tables");
        for (table, (temp, mem_temp, power, util, sm)) in tables.iter().zip(expected) {
            assert_eq!(sniff(table.as_bytes()), Some(Encoding::NvidiaSmiCsv));
            let mut out = DecodeOutput::default();
            nvsmi::decode_into(table.as_bytes(), &mut out);
            assert!(out.errors.is_empty(), "{file}: {:?}", out.errors);
            let s = &out.samples[0];
            assert_eq!(&*s.gpu, "GPU-00000000-0000-0000-0000-000000000000");
            assert_eq!(s.topo.model.as_deref(), Some(model));
            assert_eq!(s.topo.host, None, "hostname is [N/A]");
            let m = &s.metrics;
            assert_eq!(m.get(Field::GpuTemp), Some(temp), "{file}");
            assert_eq!(m.get(Field::MemoryTemp), Some(mem_temp), "{file}");
            assert_eq!(m.get(Field::PowerUsage), Some(power), "{file}");
            assert_eq!(m.get(Field::GpuUtil), Some(util), "{file}");
            assert_eq!(m.get(Field::SmClock), Some(sm), "{file}");
            assert_eq!(m.get(Field::RowRemapPending), Some(0.0), "'No' is 0");
            assert_eq!(
                m.get(Field::RetiredPending),
                None,
                "[N/A] on Hopper: row remapping instead"
            );
            assert_eq!(m.get(Field::FanSpeed), None, "[N/A]");
            assert_eq!(m.get(Field::CorrectableRemappedRows), Some(0.0));
        }
    }
}

#[test]
fn nvidia_smi_a_capture_has_no_csv_and_is_not_mistaken_for_one() {
    let text = fixture("nvidia-smi/h100-80gb-hbm3-560.35.03-full.txt");
    assert!(query_gpu_tables(&text).is_empty());
    let out = decode::decode(text.as_bytes(), 0);
    assert!(out.samples.is_empty(), "free text must not invent samples");
    let mut out = DecodeOutput::default();
    prom::decode_into(text.as_bytes(), 0, &mut out);
    assert!(out.samples.is_empty());
}

/// A whole capture file is recognised: its two `--query-gpu` rows (idle,
/// load) decode with the file's line numbers, everything else is skipped;
/// an `nvidia-smi -q` report is refused saying what to run instead.
#[test]
fn nvidia_smi_captures_decode_their_csv_and_reports_are_refused() {
    for file in [
        "nvidia-smi/h100-80gb-hbm3-590.48.01.txt",
        "nvidia-smi/h200-590.48.01.txt",
    ] {
        let text = fixture(file);
        assert_eq!(sniff(text.as_bytes()), Some(Encoding::NvidiaSmiCapture));
        let out = decode::decode(text.as_bytes(), 0);
        assert!(out.errors.is_empty(), "{file}: {:?}", out.errors);
        assert_eq!(out.samples.len(), 2, "{file}: idle and load");
        assert!(out.samples[0].ts_ms < out.samples[1].ts_ms);
    }
    let report = fixture("nvidia-smi/h100-80gb-hbm3-560.35.03-full.txt");
    assert_eq!(sniff(report.as_bytes()), Some(Encoding::NvidiaSmiQuery));
    let out = decode::decode(report.as_bytes(), 0);
    assert!(out.samples.is_empty());
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].reason(), "unsupported_format");
    assert!(out.errors[0].to_string().contains("--query-gpu="));
}
