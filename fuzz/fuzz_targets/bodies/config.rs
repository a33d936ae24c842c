//! Fuzz target: the config parsers of the library crates, from TOML text:
//! the alerts file (`alerts::RawConfig`, engine, routes, receivers,
//! outbox) and the feature stage's `[features]` table. No text may panic
//! in parsing or validation. (The detector's own `RawConfig` bundles these
//! with its source sections; fuzzing it would instrument librdkafka, arrow
//! and parquet too: see docs/fuzzing.md.)

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(raw) = alerts::RawConfig::from_toml(text) {
        let _ = raw.validate();
    }
    if let Ok(raw) = toml::from_str::<alerts::RawEngineConfig>(text) {
        let _ = raw.validate();
    }
    if let Ok(cfg) = toml::from_str::<features::FeatureConfig>(text) {
        let _ = cfg.validate();
    }
    // A detector config file: its `[alerts]` and `[features]` tables go
    // to the same parsers, as the detector's config loading does.
    if let Ok(table) = toml::from_str::<toml::Table>(text) {
        if let Some(a) = table.get("alerts")
            && let Ok(raw) = a.clone().try_into::<alerts::RawConfig>()
        {
            let _ = raw.validate();
        }
        if let Some(f) = table.get("features")
            && let Ok(cfg) = f.clone().try_into::<features::FeatureConfig>()
        {
            let _ = cfg.validate();
        }
    }
}
