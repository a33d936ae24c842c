//! The same bad bytes through the file source and the Kafka source give the
//! same reasons, counters and dead-letter records (payload included): both
//! decode through one `features::decode::Decoder`. Only the `source` of a
//! record differs, as it says where the bytes were (a file line, a
//! partition offset).

use std::path::{Path, PathBuf};

use features::decode::Decoder;

use super::kafka::{Record, decode_record};
use super::{DeadLetters, file};
use crate::state::{SharedState, State};

/// A GPU id in every well-formed record below.
const GPU: &str = "GPU-3b1c5e2a-8f0d-4c6e-9a71-2d4f6b8c0e13";

/// Bad (and a few good) messages, one per line of a JSON-lines file.
fn messages() -> Vec<String> {
    let adapter = |ts: &str, value: &str| {
        format!(
            r#"{{"timestamp":"{ts}","value":"{value}","name":"DCGM_FI_DEV_GPU_TEMP","labels":{{"__name__":"DCGM_FI_DEV_GPU_TEMP","UUID":"{GPU}","Hostname":"n1"}}}}"#
        )
    };
    let good_adapter = adapter("2026-11-29T17:00:00Z", "61");
    vec![
        format!(
            r#"{{"ts":"2026-11-29T17:00:00Z","gpu":"{GPU}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":64}}}}"#
        ),
        // Invalid JSON.
        format!(r#"{{"ts":"2026-11-29T17:00:00Z","gpu":"{GPU}","metrics":{{"#),
        // Unknown encoding.
        "\u{1}\u{2}binary".into(),
        "42".into(),
        // Bad field (timestamp), absurd value, non-finite value, no gpu.
        format!(r#"{{"ts":"yesterday","gpu":"{GPU}","metrics":{{}}}}"#),
        format!(r#"{{"ts":1,"gpu":"{GPU}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":5000}}}}"#),
        r#"{"ts":1,"metrics":{"DCGM_FI_DEV_GPU_TEMP":60}}"#.into(),
        // An array with one bad record among good ones.
        format!(r#"[{{"ts":1,"gpu":"{GPU}"}},{{"ts":2}},{{"ts":3,"gpu":"GPU-2"}}]"#),
        // Adapter: good, truncated, bad value, bad timestamp, no UUID.
        good_adapter.clone(),
        good_adapter[..good_adapter.len() - 20].to_owned(),
        adapter("2026-11-29T17:00:00Z", "warm"),
        adapter("soon", "60"),
        r#"{"timestamp":1,"value":"1","name":"DCGM_FI_DEV_GPU_TEMP","labels":{}}"#.into(),
        // Prometheus text on one line: a sample; a comment.
        format!(r#"DCGM_FI_DEV_GPU_TEMP{{UUID="{GPU}"}} 60 1000"#),
        "# TYPE x gauge".into(),
    ]
}

/// One record of a dead-letter file, parsed.
fn dead_letters(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("reading the dead-letter file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON dead letter"))
        .collect()
}

/// What one source made of the input: dead letters (without `source`),
/// their sources, counts by reason and the samples' GPUs and times.
#[derive(Debug, PartialEq)]
struct Seen {
    records: Vec<serde_json::Value>,
    by_reason: Vec<(&'static str, u64)>,
    metric: Vec<(&'static str, u64)>,
    samples: Vec<(String, i64)>,
}

fn seen(
    state: &State,
    dead: &DeadLetters,
    path: &Path,
    samples: Vec<(String, i64)>,
) -> (Seen, Vec<String>) {
    let mut records = dead_letters(path);
    let sources = records
        .iter_mut()
        .map(|r| {
            r.as_object_mut()
                .and_then(|o| o.remove("source"))
                .and_then(|s| s.as_str().map(str::to_owned))
                .expect("every dead letter has a source")
        })
        .collect();
    let seen = Seen {
        records,
        by_reason: dead.by_reason().into_iter().collect(),
        metric: state.metrics.decode_errors_by_reason(),
        samples,
    };
    (seen, sources)
}

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("forewarn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Runs `payloads` (the bytes of one file) through the file source.
fn through_file(tag: &str, bytes: &[u8]) -> (Seen, Vec<String>) {
    let (input, dl) = (
        temp(&format!("{tag}-in.txt")),
        temp(&format!("{tag}-file-dl.jsonl")),
    );
    std::fs::write(&input, bytes).expect("writing the input");
    // A scrape without timestamps takes the file's modification time; the
    // message side's scrape time is 0.
    std::fs::File::options()
        .write(true)
        .open(&input)
        .and_then(|f| f.set_modified(std::time::UNIX_EPOCH))
        .expect("setting the modification time");
    let state = SharedState::new();
    let mut dead = DeadLetters::open(Some(&dl)).expect("dead-letter file");
    let mut samples = Vec::new();
    file::read_inputs(std::slice::from_ref(&input), &state, &mut dead, |b| {
        samples.extend(b.into_iter().map(|s| (s.gpu.to_string(), s.ts_ms)));
        Ok(())
    })
    .expect("reading the input");
    let out = seen(&state, &dead, &dl, samples);
    let _ = (std::fs::remove_file(&input), std::fs::remove_file(&dl));
    out
}

/// Runs `payloads` as messages of partition 3 through the Kafka source's
/// per-message decoding.
fn through_kafka(tag: &str, payloads: &[&[u8]]) -> (Seen, Vec<String>) {
    let dl = temp(&format!("{tag}-kafka-dl.jsonl"));
    let state = SharedState::new();
    let mut dead = DeadLetters::open(Some(&dl)).expect("dead-letter file");
    let mut decoder = Decoder::default();
    let mut samples = Vec::new();
    for (offset, payload) in payloads.iter().enumerate() {
        let rec = Record {
            topic: "telemetry",
            partition: 3,
            offset: offset as i64,
            key: Some(GPU.as_bytes()),
            payload,
            timestamp_ms: None,
        };
        let out = decode_record(&mut decoder, &rec, &state, &mut dead, None);
        samples.extend(out.drain(..).map(|s| (s.gpu.to_string(), s.ts_ms)));
    }
    samples.extend(
        decoder
            .finish()
            .samples
            .drain(..)
            .map(|s| (s.gpu.to_string(), s.ts_ms)),
    );
    dead.flush();
    let out = seen(&state, &dead, &dl, samples);
    let _ = std::fs::remove_file(&dl);
    out
}

#[test]
fn file_and_kafka_give_the_same_dead_letters_for_the_same_bytes() {
    let msgs = messages();
    let text = msgs.join("\n") + "\n";
    let (file, file_sources) = through_file("lines", text.as_bytes());
    let payloads: Vec<&[u8]> = msgs.iter().map(String::as_bytes).collect();
    let (kafka, kafka_sources) = through_kafka("lines", &payloads);
    assert_eq!(file, kafka);

    let reasons: Vec<&str> = file
        .records
        .iter()
        .map(|r| r["reason"].as_str().expect("reason"))
        .collect();
    assert_eq!(
        reasons,
        [
            "invalid_json",
            "unknown_encoding",
            "unknown_encoding",
            "bad_field",
            "absurd_value",
            "missing_gpu",
            "missing_gpu",
            "invalid_json",
            "bad_field",
            "bad_field",
            "missing_gpu",
        ]
    );
    assert_eq!(file.metric.iter().map(|(_, n)| n).sum::<u64>(), 11);
    // Every record carries the bytes that failed, not an empty payload.
    for r in &file.records {
        assert!(!r["payload"].as_str().expect("payload").is_empty(), "{r}");
    }
    assert_eq!(file.records[1]["payload"], "\u{1}\u{2}binary");
    // Positions: the file's line, the message's partition and offset.
    assert!(
        file_sources[0].contains("-in.txt") && file_sources[0].ends_with(":2"),
        "{}",
        file_sources[0]
    );
    assert_eq!(kafka_sources[0], "telemetry/3@1");
    // The good records still decode, the adapter metric assembled, and
    // the record with an out-of-range value stands without that field.
    let gpus = file.samples.iter().filter(|(g, _)| g == GPU).count();
    assert_eq!((file.samples.len(), gpus), (6, 5), "{:?}", file.samples);
}

#[test]
fn a_scrape_file_and_a_scrape_message_agree() {
    let scrape = format!(
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{{gpu=\"0\",UUID=\"{GPU}\"}} 64\nDCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"{GPU}\"}} not-a-number\nDCGM_FI_DEV_SM_CLOCK{{gpu=\"0\",UUID=\"{GPU}\"\n"
    );
    let (file, file_sources) = through_file("scrape", scrape.as_bytes());
    let (kafka, _) = through_kafka("scrape", &[scrape.as_bytes()]);
    assert_eq!(file, kafka);
    assert_eq!(file.by_reason, vec![("bad_line", 2)]);
    assert_eq!(file.records[0]["payload"], scrape.as_str());
    assert!(
        file_sources[0].contains("-in.txt") && !file_sources[0].contains(':'),
        "{}",
        file_sources[0]
    );
    assert_eq!(file.samples, vec![(GPU.to_owned(), 0)]);
}
