//! What the checkpoint tests share: the engine and route configs, the
//! topology of their nine GPU slots, and CBOR as the detector stores it.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;

use alerts::route::RawRoute;
use alerts::{EngineConfig, Labels, RawEngineConfig, Router};

pub const ENGINE_TOML: &str = r#"
[lifecycle]
slot_labels = ["host", "slot"]
[lifecycle.default]
for = "20s"
resolve_after = "30s"
stale_after = "3m"
flap_window = "10m"
flap_resolve_after = "2m"
[lifecycle.kinds.thermal]
for = "40s"
[lifecycle.kinds.xid]
for = "0s"
resolve_after = "10s"
[correlation.host]
min_count = 2
min_fraction = 0.5
[correlation.rack]
min_count = 2
min_fraction = 0.5
[[correlation.job]]
kinds = ["xid"]
min_count = 2
[[silences]]
matchers = ['host="h1"', 'kind="power"']
starts_at = "1970-01-01T00:05:00Z"
ends_at = "1970-01-01T00:15:00Z"
created_by = "ops"
comment = "maintenance"
[[inhibit_rules]]
source_matchers = ['kind="power"', 'severity="critical"']
target_matchers = ['kind="thermal"']
equal = ["host"]
"#;

pub const ROUTE_TOML: &str = r#"
receiver = "file"
group_wait = "20s"
group_interval = "1m"
repeat_interval = "3m"
[[routes]]
matchers = ['severity="critical"']
receiver = "pd"
group_by = ["..."]
group_wait = "0s"
continue = true
[[routes]]
matchers = ['kind=~"thermal|power"']
receiver = "slack"
group_by = ["host", "kind"]
"#;

pub const KINDS: [&str; 3] = ["thermal", "power", "xid"];
pub const RISKS: [f64; 7] = [0.0, 0.3, 0.7, 0.85, 0.95, 1.0, f64::NAN];

pub fn engine_cfg(toml_text: &str) -> EngineConfig {
    toml::from_str::<RawEngineConfig>(toml_text)
        .unwrap()
        .validate()
        .unwrap()
}

pub fn router(toml_text: &str) -> Router {
    let raw: RawRoute = toml::from_str(toml_text).unwrap();
    Router::new(&raw.validate(&["file", "pd", "slack"]).unwrap())
}

pub fn caps() -> HashMap<String, i64> {
    [("slack".to_owned(), 120_000)].into()
}

/// 3 hosts x 3 slots; h0 and h1 in rack r0, h2 in r1. `generation` bumps a
/// slot's GPU (replacement).
pub fn labels(slot: usize, generation: u32) -> Labels {
    let host = slot / 3;
    [
        ("gpu", format!("g{slot}-{generation}")),
        ("slot", (slot % 3).to_string()),
        ("host", format!("h{host}")),
        ("rack", if host < 2 { "r0" } else { "r1" }.to_owned()),
        ("cluster", "c".to_owned()),
        ("job", format!("j{}", slot % 2)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub fn cbor<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut buf = Vec::new();
    ciborium::into_writer(v, &mut buf).unwrap();
    buf
}

pub fn uncbor<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    ciborium::from_reader(bytes).unwrap()
}
