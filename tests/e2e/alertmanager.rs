//! forewarn with the real Alertmanager tools (Debian's
//! `prometheus-alertmanager`, installed by `scripts/alertmanager.sh`):
//! `amtool` manages forewarn's silences through its Alertmanager API v2
//! (add, query, expire, with the change token from `--http.config.file`),
//! and forewarn's Alertmanager receiver feeds a real Alertmanager, which
//! groups the alerts as its route says and shows them to `amtool alert
//! query`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use forewarn_tests::alertmanager::{Alertmanager, amtool, amtool_ok, policy_to, program};
use forewarn_tests::service::{Service, wait_for};
use forewarn_tests::{forewarn, forewarn_bin, free_port, http_get, scratch};
use serde_json::Value;

const TOKEN: &str = "e2e-change-token";

fn serve(dir: &std::path::Path) -> Service {
    Service(
        Command::new(forewarn_bin())
            .args(["serve", "--config", "forewarn.toml"])
            .current_dir(dir)
            .env("FW_E2E_TOKEN", TOKEN)
            .env("FOREWARN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("serve.log")).expect("serve log"))
            .spawn()
            .expect("spawn forewarn serve"),
    )
}

fn silences_json(url: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["silence", "query", "-o", "json"];
    args.extend(extra);
    serde_json::from_str(&amtool_ok(url, None, &args)).expect("amtool json")
}

#[test]
fn amtool_adds_queries_and_expires_silences_in_event_time() {
    program("amtool");
    let dir = scratch("amtool-silences");
    let api = free_port();
    // The simulated fleet runs from 2026-11-01 at 120× real time: its
    // event time stays far behind the wall clock.
    std::fs::write(
        dir.join("forewarn.toml"),
        format!(
            "[source]\ntype = \"simulator\"\ngpus = 64\n\n[api]\nlisten = \"127.0.0.1:{api}\"\ntoken_env = \"FW_E2E_TOKEN\"\n"
        ),
    )
    .expect("config");
    let auth = dir.join("amtool-http.yml");
    std::fs::write(&auth, format!("authorization:\n  credentials: {TOKEN}\n")).expect("auth");
    let _svc = serve(&dir);
    wait_for("the first samples", Duration::from_secs(60), || {
        http_get(api, "/v1/fleet")
            .and_then(|b| serde_json::from_str::<Value>(&b).ok())
            .is_some_and(|v| v["gpus"].as_u64().unwrap_or(0) > 0)
    });
    let url = format!("http://127.0.0.1:{api}");

    // Without the token the change is refused.
    let refused = amtool(
        &url,
        None,
        &["silence", "add", "rack=r01", "-c", "x", "-a", "y"],
    );
    assert!(
        !refused.status.success(),
        "a silence added without the token"
    );

    let add = |matchers: &[&str], start: &str, comment: &str| -> String {
        let mut args = vec!["silence", "add", "-a", "ops", "-c", comment];
        let start = format!("--start={start}");
        args.extend([start.as_str(), "--end=2099-01-01T00:00:00Z"]);
        args.extend(matchers);
        let id = amtool_ok(&url, Some(&auth), &args).trim().to_owned();
        assert_eq!(id.len(), 36, "a silence id in UUID shape: {id:?}");
        id
    };
    let active = add(
        &["rack=r01", "kind=~xid_.*"],
        "2026-10-01T00:00:00Z",
        "reseat",
    );
    // Starts before the wall clock's now but after the fleet's: pending.
    let later = add(&["rack=r02"], "2026-11-20T00:00:00Z", "later");

    let all = silences_json(&url, &[]);
    let state = |list: &[Value], id: &str| -> Option<String> {
        list.iter()
            .find(|s| s["id"] == id)
            .map(|s| s["status"]["state"].as_str().unwrap_or("").to_owned())
    };
    assert_eq!(state(&all, &active).as_deref(), Some("active"), "{all:?}");
    assert_eq!(
        state(&all, &later).as_deref(),
        Some("pending"),
        "state in event time, not the wall clock: {all:?}"
    );
    let s = all
        .iter()
        .find(|s| s["id"] == active.as_str())
        .expect("listed");
    assert_eq!(s["createdBy"], "ops");
    assert_eq!(s["matchers"][1]["isRegex"], true);

    // Filters as amtool sends them.
    let r01 = silences_json(&url, &["rack=r01"]);
    assert_eq!(r01.len(), 1, "{r01:?}");
    assert!(silences_json(&url, &["rack=r09"]).is_empty());
    let simple = amtool_ok(&url, None, &["silence", "query"]);
    assert!(
        simple.contains(&active) && simple.contains("reseat"),
        "{simple}"
    );

    // Update (same matchers, same start): in place, the id kept.
    amtool_ok(
        &url,
        Some(&auth),
        &["silence", "update", &active, "--comment=reseat, take 2"],
    );
    let updated = silences_json(&url, &["rack=r01"]);
    assert_eq!(updated[0]["id"], active.as_str(), "{updated:?}");
    assert_eq!(updated[0]["comment"], "reseat, take 2");

    // Expire: gone from the default (unexpired) list, shown as expired.
    amtool_ok(&url, Some(&auth), &["silence", "expire", &active]);
    let left = silences_json(&url, &[]);
    assert!(
        left.iter().all(|s| s["id"] != active.as_str()),
        "an expired silence in the default list: {left:?}"
    );
    let expired = silences_json(&url, &["--expired"]);
    assert_eq!(state(&expired, &active).as_deref(), Some("expired"));
    // The v1 view agrees, in event time.
    let v1: Value =
        serde_json::from_str(&http_get(api, "/v1/silences").expect("v1")).expect("json");
    let items = v1["items"].as_array().expect("items");
    let flag = |id: &str| {
        items
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["active"].clone())
    };
    assert_eq!(flag(&active), Some(Value::Bool(false)));
    assert_eq!(
        flag(&later),
        Some(Value::Bool(false)),
        "pending in event time"
    );
}

#[test]
fn alerts_reach_a_real_alertmanager_grouped_by_its_route() {
    program("prometheus-alertmanager");
    program("amtool");
    let dir = scratch("alertmanager-forward");
    let am = Alertmanager::start(
        &dir,
        "  group_by: ['alertname', 'rack']\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h",
    );
    // A fleet whose telemetry ends now: alerts still firing at its end
    // carry an `endsAt` in the future, so Alertmanager shows them.
    let hours = 6;
    let start = features::time::format_rfc3339_s(forewarn_wall_ms() - i64::from(hours) * 3_600_000);
    let h = hours.to_string();
    forewarn(
        &[
            "simulate",
            "--gpus",
            "64",
            "--hours",
            &h,
            "--seed",
            "3",
            "--format",
            "jsonl",
            "--out",
            "sim",
            "--start",
            &start,
            "--failure-rate",
            "0.3",
        ],
        &dir,
    );
    let api = free_port();
    std::fs::write(
        dir.join("forewarn.toml"),
        format!(
            "[source]\ntype = \"files\"\nfiles = [\"sim/telemetry.jsonl\"]\n\n[api]\nlisten = \"127.0.0.1:{api}\"\n{}",
            policy_to(&am.url())
        ),
    )
    .expect("config");
    // What must be firing at the end: the backtest of the same data.
    forewarn(
        &[
            "backtest",
            "--config",
            "forewarn.toml",
            "--input",
            "sim/telemetry.jsonl",
            "--alerts-out",
            "reference.jsonl",
        ],
        &dir,
    );
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("reference.jsonl"))
        .expect("reference")
        .lines()
    {
        let e: Value = serde_json::from_str(line).expect("json");
        last.insert(e["dedup_key"].as_str().expect("key").to_owned(), e);
    }
    let firing: BTreeMap<String, Value> = last
        .into_iter()
        .filter(|(_, e)| e["status"] == "firing")
        .collect();
    assert!(!firing.is_empty(), "the fleet must end with alerts firing");

    let _svc = serve(&dir);
    let seen = || -> Vec<Value> {
        let out = amtool(&am.url(), None, &["alert", "query", "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let keys = |alerts: &[Value]| -> BTreeSet<String> {
        alerts
            .iter()
            .filter_map(|a| a["labels"]["dedup_key"].as_str().map(str::to_owned))
            .collect()
    };
    let want: BTreeSet<String> = firing.keys().cloned().collect();
    wait_for(
        "Alertmanager to show forewarn's alerts",
        Duration::from_secs(90),
        || keys(&seen()) == want,
    );
    let alerts = seen();
    for a in &alerts {
        let key = a["labels"]["dedup_key"].as_str().expect("dedup_key");
        assert_eq!(a["labels"]["alertname"], firing[key]["kind"], "{a}");
        assert_eq!(a["status"]["state"], "active", "{a}");
    }
    // Grouped as the Alertmanager route says: one group per (alertname,
    // rack), holding exactly those alerts.
    let mut want_groups: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for a in &alerts {
        let l = &a["labels"];
        let g = (
            l["alertname"].as_str().unwrap_or("").to_owned(),
            l["rack"].as_str().unwrap_or("").to_owned(),
        );
        want_groups
            .entry(g)
            .or_default()
            .insert(l["dedup_key"].as_str().unwrap_or("").to_owned());
    }
    let mut groups: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for g in am.groups() {
        let l = &g["labels"];
        let name = (
            l["alertname"].as_str().unwrap_or("").to_owned(),
            l["rack"].as_str().unwrap_or("").to_owned(),
        );
        let members = g["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["labels"]["dedup_key"].as_str().map(str::to_owned))
            .collect();
        groups.insert(name, members);
    }
    assert_eq!(groups, want_groups);
    assert!(
        groups.values().any(|m| m.len() > 1),
        "some group holds several alerts: {groups:?}"
    );
    eprintln!(
        "alertmanager: {} alerts from forewarn in {} groups (alertname, rack)",
        alerts.len(),
        groups.len()
    );
}

fn forewarn_wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
