//! [`Router`]: matches an alert event against the routing tree with
//! Alertmanager's semantics: depth first, children in order, the first
//! matching child wins unless it says `continue`, and a node none of whose
//! children match is itself the match. The tree is flattened into a vector
//! so a route id is a plain index.

use crate::alert::AlertEvent;
use crate::matcher;
use crate::route::config::Route;

/// A flattened route node.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub route: Route,
    pub children: Vec<usize>,
}

/// The compiled routing tree.
#[derive(Debug, Clone)]
pub struct Router {
    pub(crate) nodes: Vec<Node>,
}

impl Router {
    /// Compiles a validated tree.
    pub fn new(root: &Route) -> Self {
        let mut nodes = Vec::new();
        flatten(root, &mut nodes);
        Self { nodes }
    }

    /// The route (settings) with id `id`.
    pub fn route(&self, id: usize) -> Option<&Route> {
        self.nodes.get(id).map(|n| &n.route)
    }

    /// Appends the ids of the routes `alert` ends at to `out` (cleared first).
    /// No allocation once `out` has grown to the tree's fan-out.
    pub fn matches(&self, alert: &AlertEvent, out: &mut Vec<usize>) {
        out.clear();
        self.walk(0, alert, out);
    }

    /// One text per route id naming the route by what it is (the matchers
    /// on its path from the root, its receiver and grouping), not by its
    /// position: snapshots find a group's route again in a changed tree.
    pub(crate) fn signatures(&self) -> Vec<String> {
        let mut out = vec![String::new(); self.nodes.len()];
        self.sign(0, "", &mut out);
        out
    }

    fn sign(&self, id: usize, prefix: &str, out: &mut Vec<String>) {
        let Some(node) = self.nodes.get(id) else {
            return;
        };
        let matchers: Vec<String> = node
            .route
            .matchers
            .iter()
            .map(ToString::to_string)
            .collect();
        let path = format!("{prefix}/{matchers:?}");
        if let Some(slot) = out.get_mut(id) {
            *slot = format!(
                "{path} -> {} by {:?}",
                node.route.receiver, node.route.group_by
            );
        }
        for &c in &node.children {
            self.sign(c, &path, out);
        }
    }

    fn walk(&self, id: usize, alert: &AlertEvent, out: &mut Vec<usize>) {
        let Some(node) = self.nodes.get(id) else {
            return;
        };
        let before = out.len();
        for &child in &node.children {
            let Some(c) = self.nodes.get(child) else {
                continue;
            };
            if !matcher::all_match(&c.route.matchers, alert) {
                continue;
            }
            self.walk(child, alert, out);
            if !c.route.continue_ {
                break;
            }
        }
        if out.len() == before {
            out.push(id);
        }
    }
}

fn flatten(route: &Route, nodes: &mut Vec<Node>) -> usize {
    let id = nodes.len();
    let mut own = route.clone();
    own.routes = Vec::new();
    nodes.push(Node {
        route: own,
        children: Vec::new(),
    });
    let children: Vec<usize> = route.routes.iter().map(|r| flatten(r, nodes)).collect();
    nodes[id].children = children;
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::{Scope, Severity, Status};
    use crate::route::config::RawRoute;

    fn ev(severity: Severity, kind: &str) -> AlertEvent {
        AlertEvent {
            ts: 0,
            status: Status::Firing,
            severity,
            kind: kind.into(),
            scope: Scope::Gpu,
            labels: Default::default(),
            dedup_key: "k".into(),
            summary: String::new(),
            risk: 1.0,
            eta_hours: None,
            reasons: vec![],
        }
    }

    #[test]
    fn first_match_wins_unless_continue() {
        let raw: RawRoute = toml::from_str(
            r#"
            receiver = "file"
            [[routes]]
            matchers = ['severity="critical"']
            receiver = "pd"
            continue = true
            [[routes]]
            matchers = ['severity=~"critical|warning"']
            receiver = "slack"
            [[routes.routes]]
            matchers = ['kind="thermal"']
            receiver = "thermal-slack"
            [[routes]]
            matchers = ['severity="warning"']
            receiver = "never"
            "#,
        )
        .expect("parses");
        let route = raw
            .validate(&["file", "pd", "slack", "thermal-slack", "never"])
            .expect("valid");
        let router = Router::new(&route);
        let names = |e: &AlertEvent| {
            let mut ids = Vec::new();
            router.matches(e, &mut ids);
            ids.iter()
                .filter_map(|i| router.route(*i))
                .map(|r| r.receiver.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&ev(Severity::Critical, "ecc")), ["pd", "slack"]);
        assert_eq!(
            names(&ev(Severity::Critical, "thermal")),
            ["pd", "thermal-slack"]
        );
        assert_eq!(names(&ev(Severity::Warning, "ecc")), ["slack"]);
        assert_eq!(names(&ev(Severity::Info, "ecc")), ["file"]);
        assert!(
            raw.validate(&["file"])
                .is_err_and(|e| e.key == "route.routes[0].receiver")
        );
    }
}
