//! `[route]`: the routing tree as written in TOML, and its validated form.
//! Children inherit `receiver`, `group_by` and the three intervals from
//! their parent, as in Alertmanager; the root must name a receiver and has
//! no matchers (it matches everything).

use std::time::Duration;

use serde::Deserialize;

use crate::config::{ConfigError, duration};
use crate::matcher::{self, Matcher};

/// One route node.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// Receiver name (inherited when unset; required at the root).
    pub receiver: Option<String>,
    /// Matchers (`severity="critical"`, `kind=~"xid_.*"`); all must match.
    #[serde(default)]
    pub matchers: Vec<String>,
    /// Labels grouping alerts into one notification; `["..."]` groups by all
    /// labels (one group per alert). Inherited; default `["kind"]`.
    pub group_by: Option<Vec<String>>,
    /// Wait before a new group's first notification, to batch a storm. Inherited; default "30s" (Alertmanager).
    pub group_wait: Option<String>,
    /// Wait between notifications about changes of one group. Inherited; default "5m" (Alertmanager).
    pub group_interval: Option<String>,
    /// Re-send of a still-firing group without changes. Inherited; default "4h" (Alertmanager).
    pub repeat_interval: Option<String>,
    /// Keep matching later siblings after this route matched.
    #[serde(default, rename = "continue")]
    pub continue_: bool,
    /// Shadow mode: this route's notifications are recorded in the shadow
    /// log (`alerts.shadow_file`) instead of sent, so a new rule or model
    /// can be watched on live data before it pages anyone. Inherited;
    /// default false.
    pub shadow: Option<bool>,
    /// Child routes, tried in order.
    #[serde(default)]
    pub routes: Vec<RawRoute>,
}

/// A validated route node with inherited settings resolved.
#[derive(Debug, Clone)]
pub struct Route {
    /// Receiver name.
    pub receiver: String,
    /// Matchers.
    pub matchers: Vec<Matcher>,
    /// Grouping labels (`None`: group by all labels).
    pub group_by: Option<Vec<String>>,
    /// First-notification delay.
    pub group_wait: Duration,
    /// Change-notification spacing.
    pub group_interval: Duration,
    /// Unchanged re-send spacing.
    pub repeat_interval: Duration,
    /// Keep matching siblings.
    pub continue_: bool,
    /// Record instead of send.
    pub shadow: bool,
    /// Children.
    pub routes: Vec<Route>,
}

impl Route {
    /// Puts this route and every route below it in shadow mode
    /// (`forewarn serve --shadow`).
    pub fn set_shadow_all(&mut self) {
        self.shadow = true;
        for r in &mut self.routes {
            r.set_shadow_all();
        }
    }
}

impl RawRoute {
    /// Validates the tree; `receivers` are the known receiver names.
    pub fn validate(&self, receivers: &[&str]) -> Result<Route, ConfigError> {
        if !self.matchers.is_empty() {
            return Err(ConfigError::new(
                "route.matchers",
                "the root route matches everything; remove its matchers",
            ));
        }
        let Some(receiver) = &self.receiver else {
            return Err(ConfigError::new(
                "route.receiver",
                "the root route needs a receiver",
            ));
        };
        let root = Route {
            receiver: receiver.clone(),
            matchers: Vec::new(),
            group_by: Some(vec!["kind".to_owned()]),
            group_wait: Duration::from_secs(30),
            group_interval: Duration::from_secs(300),
            repeat_interval: Duration::from_secs(4 * 3600),
            continue_: false,
            shadow: false,
            routes: Vec::new(),
        };
        self.build("route", &root, receivers)
    }

    fn build(&self, key: &str, parent: &Route, receivers: &[&str]) -> Result<Route, ConfigError> {
        let receiver = self
            .receiver
            .clone()
            .unwrap_or_else(|| parent.receiver.clone());
        if !receivers.contains(&receiver.as_str()) {
            return Err(ConfigError::new(
                format!("{key}.receiver"),
                format!("unknown receiver {receiver:?}"),
            ));
        }
        let group_by = match &self.group_by {
            Some(g) if g.iter().any(|l| l == "...") => None,
            Some(g) => Some(g.clone()),
            None => parent.group_by.clone(),
        };
        let dur = |name: &str, v: &Option<String>, inherited: Duration| match v {
            Some(t) => duration(&format!("{key}.{name}"), t),
            None => Ok(inherited),
        };
        let group_interval = dur(
            "group_interval",
            &self.group_interval,
            parent.group_interval,
        )?;
        let repeat_interval = dur(
            "repeat_interval",
            &self.repeat_interval,
            parent.repeat_interval,
        )?;
        if group_interval.is_zero() {
            return Err(ConfigError::new(
                format!("{key}.group_interval"),
                "must be > 0",
            ));
        }
        if repeat_interval < group_interval {
            return Err(ConfigError::new(
                format!("{key}.repeat_interval"),
                "must be >= group_interval",
            ));
        }
        let mut route = Route {
            receiver,
            matchers: matcher::parse_all(&format!("{key}.matchers"), &self.matchers)?,
            group_by,
            group_wait: dur("group_wait", &self.group_wait, parent.group_wait)?,
            group_interval,
            repeat_interval,
            continue_: self.continue_,
            shadow: self.shadow.unwrap_or(parent.shadow),
            routes: Vec::new(),
        };
        for (i, child) in self.routes.iter().enumerate() {
            let built = child.build(&format!("{key}.routes[{i}]"), &route, receivers)?;
            route.routes.push(built);
        }
        Ok(route)
    }
}
