//! `forewarn config check` on broken configs: each error names the key
//! path and the line (and column) where the file has it.

use super::check_text;

/// `(what, config text, expected key, expected line)`.
const BROKEN: &[(&str, &str, &str, usize)] = &[
    (
        "typo'd key",
        "[pipeline]\nshards = 2\nshardz = 4\n",
        "pipeline.shardz",
        3,
    ),
    (
        "wrong type",
        "[pipeline]\nshards = \"four\"\n",
        "pipeline.shards",
        2,
    ),
    (
        "bad duration",
        "[features]\nsilence = \"5 parsecs\"\n",
        "features.silence",
        2,
    ),
    (
        "bad URL",
        "# hooks\n[[alerts.receivers]]\ntype = \"webhook\"\nname = \"hook\"\nurl = \"htp:/x\"\n",
        "alerts.receivers[0].url",
        5,
    ),
    (
        "missing secret file",
        "[[alerts.receivers]]\ntype = \"pagerduty\"\nname = \"pd\"\nrouting_key = { file = \"/nonexistent/forewarn/pd-key\" }\n",
        "alerts.receivers[0].routing_key",
        4,
    ),
    (
        "unset secret variable",
        "[[alerts.receivers]]\ntype = \"slack\"\nname = \"chat\"\nwebhook_url = { env = \"FOREWARN_TEST_SURELY_UNSET\" }\n",
        "alerts.receivers[0].webhook_url",
        4,
    ),
    (
        "inline secret",
        "[[alerts.receivers]]\ntype = \"slack\"\nname = \"chat\"\nwebhook_url = \"https://hooks.example/x\"\n",
        "alerts.receivers[0].webhook_url",
        4,
    ),
    (
        "route to an unknown receiver",
        "[alerts.route]\nreceiver = \"nobody\"\n",
        "alerts.route.receiver",
        2,
    ),
    (
        "unknown key in a receiver",
        "[[alerts.receivers]]\ntype = \"file\"\nname = \"f\"\npath = \"x.jsonl\"\ncolour = \"red\"\n",
        "alerts.receivers[0].colour",
        5,
    ),
    (
        "unknown source type",
        "[source]\ntype = \"carrier-pigeon\"\n",
        "source.type",
        2,
    ),
    (
        "bad listen address",
        "[api]\nlisten = \"localhost:99999\"\n",
        "api.listen",
        2,
    ),
    (
        "kafka without brokers",
        "[source]\ntype = \"kafka\"\ntopics = [\"dcgm\"]\n",
        "source.brokers",
        1,
    ),
];

#[test]
fn every_broken_config_names_its_key_and_line() {
    let mut failures = Vec::new();
    for (what, text, key, line) in BROKEN {
        match check_text(text, true) {
            Ok(_) => failures.push(format!("{what}: accepted")),
            Err(e) => {
                let shown = e.to_string();
                if e.key != *key || e.at.map(|a| a.0) != Some(*line) {
                    failures.push(format!(
                        "{what}: got key {:?} at {:?}, want {key:?} at line {line}: {shown}",
                        e.key, e.at
                    ));
                }
                if !shown.contains(&format!("line {line}, column ")) {
                    failures.push(format!("{what}: the message has no line/column: {shown}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn wrong_type_points_at_the_value() {
    let e = check_text("[pipeline]\nshards = \"four\"\n", false).expect_err("invalid");
    assert_eq!(e.at, Some((2, 10)), "{e}");
}

#[test]
fn the_example_config_is_valid_and_layers_the_builtin_policy() {
    let text = include_str!("../../../docs/forewarn.example.toml");
    let (raw, config) = match check_text(text, false) {
        Ok(c) => c,
        Err(e) => panic!("docs/forewarn.example.toml: {e}"),
    };
    let _ = raw;
    assert!(!config.alerts.receivers.is_empty());
}

#[test]
fn a_pagerduty_url_takes_the_alertmanager_form() {
    let text = "[[alerts.receivers]]\ntype = \"pagerduty\"\nname = \"pd\"\nurl = { value = \"http://127.0.0.1:9/v2/enqueue\" }\nrouting_key = { env = \"PD\" }\n\n[alerts.route]\nreceiver = \"pd\"\n";
    let (_, config) = check_text(text, false).expect("valid");
    assert!(config.alerts.receivers.iter().any(|r| r.name == "pd"));
}
