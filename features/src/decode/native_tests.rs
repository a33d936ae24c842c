use super::*;

const CONTRACT: &str = r#"{
  "ts": "2026-11-29T17:00:00.000Z",
  "gpu": "GPU-3b1c5e2a-8f0d-4c6e-9a71-2d4f6b8c0e13",
  "host": "node-0042", "rack": "r07", "cluster": "east-1",
  "model": "NVIDIA H100 80GB HBM3", "job": "train-llm-17",
  "metrics": {
    "DCGM_FI_DEV_GPU_TEMP": 64, "DCGM_FI_DEV_MEMORY_TEMP": 71,
    "DCGM_FI_DEV_POWER_USAGE": 612.3, "DCGM_FI_DEV_GPU_UTIL": 98,
    "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 3,
    "DCGM_FI_DEV_XID_ERRORS": 0
  }
}"#;

fn decode(s: &str) -> DecodeOutput {
    let mut out = DecodeOutput::default();
    decode_into(s.as_bytes(), &mut out);
    out
}

#[test]
fn decodes_the_contract_example() {
    let out = decode(CONTRACT);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let s = &out.samples[0];
    assert_eq!(s.ts_ms, 1_795_971_600_000);
    assert_eq!(&*s.gpu, "GPU-3b1c5e2a-8f0d-4c6e-9a71-2d4f6b8c0e13");
    assert_eq!(s.topo.rack.as_deref(), Some("r07"));
    assert_eq!(s.topo.job.as_deref(), Some("train-llm-17"));
    assert_eq!(s.metrics.get(Field::PowerUsage), Some(612.3));
    assert_eq!(s.metrics.get(Field::XidErrors), Some(0.0));
    assert_eq!(
        s.metrics.get(Field::FbUsed),
        None,
        "missing is absent, never zero"
    );
    assert_eq!(s.metrics.len(), 7);
}

#[test]
fn round_trips_through_serialize() {
    let s = &decode(CONTRACT).samples[0];
    let json = serde_json::to_string(s).expect("serializes");
    let again = &decode(&json).samples[0];
    assert_eq!(s, again);
}

#[test]
fn array_keeps_good_records_next_to_bad_ones() {
    let msg = r#"[
        {"ts": 1000, "gpu": "GPU-a", "metrics": {"DCGM_FI_DEV_GPU_TEMP": 50}},
        {"ts": 1000, "metrics": {"DCGM_FI_DEV_GPU_TEMP": 50}},
        {"ts": 1000, "gpu": "GPU-c", "metrics": {"DCGM_FI_DEV_GPU_TEMP": 5000}},
        {"ts": "last tuesday", "gpu": "GPU-d", "metrics": {}},
        {"ts": 1000, "gpu": "GPU-e", "metrics": {"DCGM_FI_DEV_GPU_TEMP": "hot"}},
        {"ts": 2000, "gpu": "GPU-f", "job": 4711, "metrics": {"DCGM_FI_DEV_GPU_TEMP": null, "MY_CUSTOM": 2.5}}
    ]"#;
    let out = decode(msg);
    let gpus: Vec<&str> = out.samples.iter().map(|s| &*s.gpu).collect();
    // An out-of-range value leaves its field missing; the record stands
    // (the error is still reported, for the counter and the dead letter).
    assert_eq!(gpus, ["GPU-a", "GPU-c", "GPU-f"]);
    assert_eq!(out.samples[1].metrics.get(Field::GpuTemp), None);
    assert_eq!(out.errors.len(), 4);
    assert_eq!(out.errors[0], DecodeError::MissingGpu { index: 1 });
    assert!(matches!(
        out.errors[1],
        DecodeError::AbsurdValue {
            index: 2,
            field: "DCGM_FI_DEV_GPU_TEMP",
            ..
        }
    ));
    assert!(
        matches!(&out.errors[2], DecodeError::BadField { index: 3, field, .. } if field == "ts")
    );
    assert!(
        matches!(&out.errors[3], DecodeError::BadField { index: 4, field, .. } if field == "DCGM_FI_DEV_GPU_TEMP")
    );
    let f = &out.samples[2];
    assert_eq!(f.topo.job.as_deref(), Some("4711"));
    assert_eq!(f.metrics.get(Field::GpuTemp), None);
    assert_eq!(f.extra, vec![("MY_CUSTOM".into(), 2.5)]);
}

#[test]
fn blank_sentinels_are_missing() {
    let out = decode(
        r#"{"ts":1,"gpu":"g","metrics":{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":9223372036854775794,"DCGM_FI_DEV_GPU_TEMP":140737488355328.0}}"#,
    );
    assert!(out.errors.is_empty());
    assert!(out.samples[0].metrics.is_empty());
}

#[test]
fn syntax_error_names_line_and_column() {
    let out = decode("{\"ts\":1,\n\"gpu\":\"g\",,}");
    assert!(out.samples.is_empty());
    assert!(
        matches!(out.errors[0], DecodeError::Json { line: 2, .. }),
        "{:?}",
        out.errors
    );
}

#[test]
fn json_lines_errors_carry_line_numbers() {
    let text = "{\"ts\":1,\"gpu\":\"a\",\"metrics\":{}}\n\n{\"ts\":1}\nnot json\n";
    let mut out = DecodeOutput::default();
    decode_lines(text.as_bytes(), &mut out);
    assert_eq!(out.samples.len(), 1);
    assert_eq!(out.errors.len(), 2);
    assert!(matches!(out.errors[0], DecodeError::Line { line: 3, .. }));
    assert!(matches!(out.errors[1], DecodeError::Json { line: 4, .. }));
}
