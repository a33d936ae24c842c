//! Fuzz target: restore of a random cut forest and of a thresholded
//! forest from their JSON snapshots (`from_json`, which checks version and
//! consistency). No bytes may panic, in restore or in the first scoring
//! and update after it; a restored forest writes JSON that restores to the
//! same JSON (round trip).

use models::rcf::{Forest, ThresholdedForest};

/// A point to score, unless the snapshot claims more dimensions than any
/// config accepts (the harness must not allocate what restore did not).
fn row(dims: usize) -> Option<Vec<f64>> {
    (dims <= 4096).then(|| vec![0.5; dims])
}

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut f) = Forest::from_json(text) {
        let once = f.to_json().expect("a restored forest serializes");
        let again = Forest::from_json(&once).expect("own snapshot restores");
        assert_eq!(
            again.to_json().expect("serializes"),
            once,
            "forest round trip"
        );
        let Some(row) = row(f.config().input_dimensions) else {
            return;
        };
        let _ = f.score(&row);
        let _ = f.attribution(&row);
        let _ = f.update(&row);
        let _ = f.score_and_update(&row);
    }
    if let Ok(mut t) = ThresholdedForest::from_json(text) {
        let once = t.to_json().expect("a restored detector serializes");
        let again = ThresholdedForest::from_json(&once).expect("own snapshot restores");
        assert_eq!(
            again.to_json().expect("serializes"),
            once,
            "thresholded round trip"
        );
        let Some(row) = row(t.forest().config().input_dimensions) else {
            return;
        };
        let _ = t.process(&row);
        let _ = t.process(&row);
    }
}
