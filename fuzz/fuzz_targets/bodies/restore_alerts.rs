//! Fuzz target: checkpoint restore of the alert stage, from the CBOR bytes
//! a checkpoint file holds: an `EngineSnapshot` restored into an
//! `AlertEngine`, and a `RouterSnapshot` into a `Dispatcher`, both under
//! the built-in default alert policy. No bytes may panic; a restored
//! state snapshots to bytes that restore to the same bytes (round trip);
//! the restored engine and dispatcher survive a tick.

use std::collections::HashMap;
use std::sync::LazyLock;

use alerts::snapshot::EngineSnapshot;
use alerts::{AlertEngine, Config, Dispatcher, RawConfig, Router, RouterSnapshot};

static CFG: LazyLock<Config> = LazyLock::new(|| {
    RawConfig::from_toml(include_str!(
        "../../../detector/src/config/default_alerts.toml"
    ))
    .and_then(|raw| raw.validate())
    .expect("the built-in alert policy is valid")
});

/// 2026-01-01T00:00:00Z: a plausible "now" for the tick after restore.
const NOW_MS: i64 = 1_767_225_600_000;

fn cbor<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("a snapshot serializes");
    out
}

fn caps() -> HashMap<String, i64> {
    HashMap::new()
}

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    if let Ok(snap) = ciborium::from_reader::<EngineSnapshot, _>(data)
        && let Ok(mut engine) = AlertEngine::restore(CFG.engine.clone(), snap)
    {
        let once = cbor(&engine.snapshot());
        let again: EngineSnapshot =
            ciborium::from_reader(once.as_slice()).expect("own bytes decode");
        let twice = AlertEngine::restore(CFG.engine.clone(), again).expect("own snapshot restores");
        assert_eq!(cbor(&twice.snapshot()), once, "engine snapshot round trip");
        let _ = engine.tick(NOW_MS);
        let _ = engine.firing();
    }
    if let Ok(snap) = ciborium::from_reader::<RouterSnapshot, _>(data)
        && let Ok(mut d) = Dispatcher::restore(Router::new(&CFG.route), caps(), snap)
    {
        let once = cbor(&d.snapshot());
        let again: RouterSnapshot =
            ciborium::from_reader(once.as_slice()).expect("own bytes decode");
        let twice = Dispatcher::restore(Router::new(&CFG.route), caps(), again)
            .expect("own snapshot restores");
        assert_eq!(cbor(&twice.snapshot()), once, "router snapshot round trip");
        let _ = d.next_due();
        let _ = d.tick(NOW_MS);
    }
}
