//! The straggler rule's hold level (in `models::assess::rules`) and the
//! shipped alert policy (detector's default config) must agree: the hold
//! keeps a pending or firing straggler alert alive but never starts one.
//! The check lives here because only detector knows the default policy.

use detector::config::RawConfig;
use models::assess::rules::STRAGGLER_HOLD;

#[test]
fn straggler_hold_sits_between_the_default_thresholds() {
    let cfg = RawConfig::default().validate().expect("defaults");
    let rule = &cfg.alerts.engine.rules["straggler"];
    let hold = f64::from(STRAGGLER_HOLD);
    assert!(
        hold < rule.fire_at && hold >= rule.resolve_below,
        "{rule:?}"
    );
}
