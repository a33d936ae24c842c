//! `forewarn score` end to end on in-memory CSV: quoting, bad rows (named
//! by line and column), determinism across thread counts, column selection.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: ScoreArgs,
}

fn args(extra: &[&str]) -> ScoreArgs {
    let mut argv = vec!["score"];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv).args
}

#[test]
fn quoted_fields_and_crlf_are_read_by_the_csv_crate() {
    let input = "ts,\"a,b\",c\r\n\"1,5\",2,\"x\"\"y\"\r\n";
    let mut rdr = reader::csv_reader(input.as_bytes());
    let header = reader::read_header(&mut rdr).expect("header");
    assert_eq!(header, vec!["ts", "a,b", "c"]);
    let mut rec = csv::ByteRecord::new();
    assert!(reader::read_record(&mut rdr, &mut rec).expect("row"));
    let fields: Vec<&[u8]> = rec.iter().collect();
    assert_eq!(fields, vec![&b"1,5"[..], b"2", b"x\"y"]);
    assert_eq!(rec.position().map(csv::Position::line), Some(2));
    // The timestamp is quoted again on output.
    assert_eq!(reader::quote_if_needed("1,5"), "\"1,5\"");
}

#[test]
fn bad_fields_name_their_column() {
    let header: Vec<String> = ["ts", "cpu", "mem"].iter().map(|s| s.to_string()).collect();
    let mut v = [0.0; 2];
    let rec = csv::ByteRecord::from(vec!["1", "50", "oops"]);
    let p = reader::parse_row(&rec, &header, 0, &[1, 2], &mut v).expect("bad");
    assert_eq!(p, "column 3 (\"mem\") is not a number: \"oops\"");
    assert!(v[0] == 50.0 && v[1].is_nan());
    let short = csv::ByteRecord::from(vec!["1"]);
    let p = reader::parse_row(&short, &header, 0, &[1, 2], &mut v).expect("bad");
    assert_eq!(p, "expected at least 3 fields, found 1");
}

#[test]
fn one_output_line_per_row_and_bad_rows_reported() {
    let mut csv = String::from("ts,cpu,\"mem temp\"\n");
    for t in 0..1200 {
        let (cpu, mem) = (
            50.0 + (t as f64 / 9.0).sin(),
            70.0 + (t as f64 / 13.0).cos(),
        );
        match t {
            500 => csv.push_str("500,oops,70\n"),
            501 => csv.push_str("501\n"),
            502 => csv.push_str("502,,70\n"),
            1100 => csv.push_str("1100,50,95\n"),
            _ => csv.push_str(&format!("{t},{cpu},{mem}\n")),
        }
    }
    let mut out = Vec::new();
    let mut err = Vec::new();
    let a = args(&["--trees", "20", "--warmup", "100", "--threads", "1"]);
    let s = score_csv(&a, csv.as_bytes(), &mut out, &mut err, None).expect("scores");
    // The tree groups on three threads write the same bytes.
    let (mut out3, mut err3) = (Vec::new(), Vec::new());
    let a3 = args(&["--trees", "20", "--warmup", "100", "--threads", "3"]);
    score_csv(&a3, csv.as_bytes(), &mut out3, &mut err3, None).expect("scores");
    assert!(out3 == out && err3 == err, "output depends on --threads");
    assert_eq!(s.rows, 1200);
    assert_eq!(s.bad_rows, 2);
    let out = String::from_utf8(out).expect("utf8");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1201);
    assert_eq!(lines[0], "timestamp,grade,score,attribution,state");
    assert_eq!(lines[1], "0,0.0000,0.0000,,warmup");
    let spike = lines[1101];
    assert!(spike.ends_with(",mem temp_high,anomaly"), "{spike}");
    assert!(!spike.starts_with("1100,0.0000"), "{spike}");
    let err = String::from_utf8(err).expect("utf8");
    assert!(
        err.contains("line 502: column 2 (\"cpu\") is not a number: \"oops\"")
            && err.contains("line 503: expected at least 3 fields"),
        "{err}"
    );
}

#[test]
fn column_selection_by_name_and_index() {
    let header: Vec<String> = ["time", "a", "b"].iter().map(|s| s.to_string()).collect();
    assert_eq!(reader::resolve_column(&header, "b").expect("by name"), 2);
    assert_eq!(reader::resolve_column(&header, "1").expect("by index"), 1);
    assert!(reader::resolve_column(&header, "7").is_err());
    assert!(reader::resolve_column(&header, "zzz").is_err());
}

/// `csv` scored on one thread with `extra` flags: the output CSV.
fn score_on_one_thread(csv: &str, extra: &[&str]) -> String {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut argv = vec!["--threads", "1"];
    argv.extend_from_slice(extra);
    score_csv(&args(&argv), csv.as_bytes(), &mut out, &mut err, None).expect("scores");
    String::from_utf8(out).expect("utf8")
}

/// Output rows in `rows` (0-based, header skipped) whose state is `state`.
fn count(out: &str, state: &str, rows: std::ops::Range<usize>) -> usize {
    out.lines()
        .skip(1)
        .enumerate()
        .filter(|(i, l)| rows.contains(i) && l.ends_with(&format!(",{state}")))
        .count()
}

/// One metric ramping and resetting every 60 rows: each reset is normal.
/// By default a reset that repeats an earlier one's shape is a
/// `recurrence` (not flagged); `--recurrence 0` flags them all; a drop
/// far below any reset is an anomaly either way.
#[test]
fn resets_that_come_back_are_recurrences_not_anomalies() {
    let mut csv = String::from("ts,queue\n");
    for t in 0..3000 {
        let drop = if (2500..2520).contains(&t) { -1.5 } else { 0.0 };
        // The jitter's period (1,013 rows) keeps any reset from repeating
        // an earlier one exactly, which the known states would take out.
        let v = 10.0 + (t % 60) as f64 / 60.0 + drop + ((t * 7919) % 1013) as f64 * 0.000_013;
        csv.push_str(&format!("{t},{v}\n"));
    }
    let run = |extra: &[&str]| score_on_one_thread(&csv, extra);
    let (on, off) = (run(&[]), run(&["--recurrence", "0"]));
    let before = 0..2500;
    eprintln!(
        "anomalies before the drop: on {} off {}; recurrences {}",
        count(&on, "anomaly", before.clone()),
        count(&off, "anomaly", before.clone()),
        count(&on, "recurrence", before.clone())
    );
    assert!(count(&off, "anomaly", before.clone()) >= 10, "{off}");
    assert!(count(&on, "recurrence", before.clone()) >= 10);
    assert!(count(&on, "anomaly", before.clone()) * 4 <= count(&off, "anomaly", before.clone()));
    assert_eq!(count(&off, "recurrence", 0..3000), 0);
    assert!(count(&on, "anomaly", 2500..2506) >= 1, "the deep drop");
}

/// A health check at 1 with one 0: by default the rows back at 1 end the
/// event the 0 opened (known states) and the flapping later is flagged;
/// `--known-horizon 0` holds the event open on them.
#[test]
fn a_flat_stream_back_at_its_value_is_not_an_open_event() {
    let mut csv = String::from("ts,up\n");
    for t in 0..2000usize {
        let flap = (1600..1660).contains(&t) && (t / 2).is_multiple_of(2);
        let v = if t == 1000 || flap { 0 } else { 1 };
        csv.push_str(&format!("{t},{v}\n"));
    }
    let run = |extra: &[&str]| score_on_one_thread(&csv, extra);
    let (on, off) = (run(&[]), run(&["--known-horizon", "0"]));
    assert_eq!(count(&on, "event", 1010..1600), 0, "{on}");
    assert!(count(&on, "anomaly", 1600..1660) >= 1, "the flapping: {on}");
    assert!(count(&off, "event", 1010..1600) > 50, "{off}");
}

/// A noisy sensor that freezes at its last reading for 200 rows: by
/// default its eighth equal row is an anomaly explained by that column and
/// the rest of the run is the event; `--stuck-run 0` sees nothing in the
/// run (every frozen reading is an ordinary value). A factor under 1 is
/// refused by name.
#[test]
fn a_frozen_sensor_is_an_anomaly_and_its_run_the_event() {
    let mut csv = String::from("ts,temp\n");
    let mut frozen = String::new();
    for t in 0..2000usize {
        // A deterministic wobble that never repeats a reading exactly.
        let v = format!("{:.3}", 60.0 + ((t * 7919) % 1009) as f64 / 400.0);
        if t == 1500 {
            frozen = v.clone();
        }
        let v = if (1500..1700).contains(&t) {
            &frozen
        } else {
            &v
        };
        csv.push_str(&format!("{t},{v}\n"));
    }
    let run = |extra: &[&str]| score_on_one_thread(&csv, extra);
    let (on, off) = (run(&[]), run(&["--stuck-run", "0"]));
    let row = |out: &str, i: usize| out.lines().nth(i + 1).unwrap_or("").to_string();
    let flagged = row(&on, 1507);
    assert!(
        flagged.starts_with("1507,1.0000,") && flagged.ends_with(",anomaly"),
        "{flagged}"
    );
    assert!(flagged.contains(",temp_"), "{flagged}");
    assert_eq!(count(&on, "event", 1508..1700), 192, "{on}");
    // The first repeat is a step of 0, which this wobble never takes (the
    // forest flags row 1,501 either way); the run itself it never sees.
    assert_eq!(count(&off, "anomaly", 1502..1700), 0, "{off}");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let bad = args(&["--stuck-factor", "0.5"]);
    let e = score_csv(&bad, csv.as_bytes(), &mut out, &mut err, None).expect_err("refused");
    assert!(format!("{e:#}").contains("stuck_factor"), "{e:#}");
}

/// `forewarn score` with its defaults is the detector the stream benchmark
/// measures (`evaluation::streams::detect`, `GraderConfig::default()`):
/// the same grades, row for row, on streams of the corpus. (Its grader
/// flags once defaulted to other thresholds than the benchmark's.)
#[test]
fn defaults_are_the_benchmarks_grader() {
    let a = args(&[]);
    let d = build_detector(&a, 1).expect("detector");
    assert_eq!(d.grader().config(), &GraderConfig::default());
    let streams = evaluation::streams::corpus::corpus(1, 1);
    for s in streams.iter().take(6) {
        let bench = evaluation::streams::detect::run(&s.values, 0, &GraderConfig::default())
            .expect("benchmark");
        let mut csv = String::from("ts,value\n");
        for (t, v) in s.values.iter().enumerate() {
            csv.push_str(&format!("{t},{v}\n"));
        }
        let (mut out, mut err) = (Vec::new(), Vec::new());
        score_csv(&a, csv.as_bytes(), &mut out, &mut err, None).expect("scores");
        let out = String::from_utf8(out).expect("utf8");
        let grades: Vec<String> = out
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap_or("").to_string())
            .collect();
        let expected: Vec<String> = bench.grade.iter().map(|g| format!("{g:.4}")).collect();
        assert_eq!(grades, expected, "stream {}", s.name);
    }
}
