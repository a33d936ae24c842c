//! No new import cycles between the modules of a workspace library.
//!
//! A module that uses its parent while the parent uses it (or any longer
//! loop) is one tangle in disguise: neither half can be read, tested or
//! moved alone. This reads each library's sources, collects the module
//! edges its `use` items make (`crate::…`, `super::…`, `self::…`, a parent's
//! uses of its children; an item a module only re-exports or imports counts
//! for the module it comes from; paths written in code are not edges, as
//! for cargo-modules), and fails naming any loop not in [`KNOWN`]. It
//! approximates `scripts/check-cycles.sh` (cargo-modules, which resolves
//! items exactly but takes minutes to install) and runs in the workspace's
//! tests: pointed at 3f921c3 (`FOREWARN_MODULE_GRAPH_ROOT`) it names the
//! same four detector loops that script named there, and at a3f5298 the
//! same one. Test modules (`#[cfg(test)]`, `*tests.rs`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A crate's modules and their use edges.
#[derive(Debug, Default)]
struct Graph {
    /// Module path (`crate::a::b`) → its source text, tests and comments removed.
    modules: BTreeMap<String, String>,
    edges: BTreeSet<(String, String)>,
    /// Module → name → the path its `use` items bring in under that name.
    reexports: BTreeMap<String, BTreeMap<String, String>>,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` → `crate::a::b`; `src/lib.rs` → `crate`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.last()?.clone();
    if last.ends_with("tests") || parts.iter().any(|p| p == "bin") || last == "main" {
        return None;
    }
    if last == "mod" || (parts.len() == 1 && last == "lib") {
        parts.pop();
    }
    Some(
        std::iter::once("crate".to_string())
            .chain(parts)
            .collect::<Vec<_>>()
            .join("::"),
    )
}

/// The index just past the first `end` at or after `i` (past the text
/// when there is none).
fn past(b: &[u8], mut i: usize, end: &[u8]) -> usize {
    while i < b.len() && !b[i..].starts_with(end) {
        i += 1;
    }
    i + end.len()
}

/// The text without comments, string literals' contents, and the bodies
/// of `#[cfg(test)]` items.
fn clean(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            i = past(b, i, b"\n") - 1;
        } else if b[i..].starts_with(b"/*") {
            i = past(b, i + 2, b"*/");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A character literal such as '"' or '{'.
            out.push_str("' '");
            i += 3;
        } else if b[i..].starts_with(b"r#\"") {
            i = past(b, i + 3, b"\"#");
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i..].starts_with(b"#[cfg(test)]") {
            // Skip the attribute and the item after it: up to its `;` or
            // its matching closing brace.
            i += "#[cfg(test)]".len();
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    b';' if depth == 0 => {
                        i += 1;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Expands `use` trees: `a::{b, c::{d as x, e}}` → `a::b`, `a::c::d`,
/// `a::c::e`, each with the name it brings in (`b`, `x`, `e`).
fn expand(tree: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..k], &base, out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], &base, out);
    } else if !tree.is_empty() {
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim())),
            None => (tree, None),
        };
        let name = alias.unwrap_or_else(|| path.rsplit("::").next().unwrap_or(path));
        out.push((join(prefix, path), name.to_string()));
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}::{b}"),
    }
}

fn parent(m: &str) -> &str {
    m.rfind("::").map_or("crate", |k| &m[..k])
}

/// The module a path written in `from` lands in (the longest module prefix
/// of it), if it names one of the crate's; `depth` re-exports followed so far.
fn resolve(g: &Graph, from: &str, path: &str, depth: usize) -> Option<String> {
    let segs: Vec<&str> = path.split("::").map(str::trim).collect();
    let mut base = match *segs.first()? {
        "crate" => "crate".to_string(),
        "self" => from.to_string(),
        "super" => parent(from).to_string(),
        first => {
            // A relative path into one of `from`'s own children.
            let child = format!("{from}::{first}");
            if !g.modules.contains_key(&child) {
                return None;
            }
            child
        }
    };
    let mut rest = &segs[1..];
    while rest.first() == Some(&"super") {
        base = parent(&base).to_string();
        rest = &rest[1..];
    }
    let mut found = base.clone();
    let mut cur = base;
    let mut next_name = None;
    for s in rest {
        cur = format!("{cur}::{s}");
        if g.modules.contains_key(&cur) {
            found.clone_from(&cur);
        } else {
            next_name = Some(*s);
            break;
        }
    }
    // An item the module only re-exports (or imports: a child sees its
    // parent's private imports) belongs to where it comes from; one from
    // another crate makes no edge.
    if let Some(name) = next_name
        && depth < 8
        && let Some(target) = g.reexports.get(&found).and_then(|r| r.get(name))
    {
        return resolve(g, &found, target, depth + 1);
    }
    Some(found)
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let mut g = Graph::default();
    for f in &files {
        if let (Some(m), Ok(text)) = (module_of(src, f), fs::read_to_string(f)) {
            g.modules.insert(m, clean(&text));
        }
    }
    let mut uses = BTreeMap::new();
    for (m, text) in &g.modules {
        let mut paths = Vec::new();
        let mut reexports = BTreeMap::new();
        // `use` items (groups expanded).
        for item in text.split(';') {
            let item = item.trim_start();
            let Some((vis, body)) = item.split_once("use ") else {
                continue;
            };
            if !matches!(vis.trim(), "" | "pub" | "pub(crate)" | "pub(super)") {
                continue;
            }
            let mut here = Vec::new();
            expand(body, "", &mut here);
            for (path, name) in here {
                reexports.insert(name, path.clone());
                paths.push(path);
            }
        }
        g.reexports.insert(m.clone(), reexports);
        uses.insert(m.clone(), paths);
    }
    let mut edges = BTreeSet::new();
    for m in g.modules.keys() {
        let paths = uses.remove(m).unwrap_or_default();
        for p in paths {
            if let Some(to) = resolve(&g, m, &p, 0)
                && &to != m
            {
                edges.insert((m.clone(), to));
            }
        }
    }
    g.edges = edges;
    g
}

/// Loops of the graph: its strongly connected components of more than one module.
fn loops(g: &Graph) -> Vec<Vec<String>> {
    let names: Vec<&String> = g.modules.keys().collect();
    let index: BTreeMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(k, n)| (n.as_str(), k))
        .collect();
    let mut next = vec![Vec::new(); names.len()];
    for (a, b) in &g.edges {
        if let (Some(&x), Some(&y)) = (index.get(a.as_str()), index.get(b.as_str())) {
            next[x].push(y);
        }
    }
    // Tarjan's algorithm, iterative.
    let n = names.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut counter) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 {
                idx[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = next[v].get(*k) {
                *k += 1;
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// The workspace root; `FOREWARN_MODULE_GRAPH_ROOT` points the check at
/// another checkout.
fn workspace() -> PathBuf {
    std::env::var_os("FOREWARN_MODULE_GRAPH_ROOT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        PathBuf::from,
    )
}

/// Loops the libraries had when this check came (a parent and the children
/// that use its helpers, mostly): listed so that they are not forgotten and
/// no new one joins them. A loop that changes or goes must be taken off.
const KNOWN: [&str; 6] = [
    "features: crate::admission, crate::admission::clock",
    "features: crate::decode, crate::decode::adapter, crate::decode::capture, crate::decode::decoder, crate::decode::native, crate::decode::nvsmi, crate::decode::prom",
    "datasets: crate::simulator::config, crate::simulator::failures, crate::simulator::jobs, crate::simulator::physics, crate::simulator::random_precursors, crate::simulator::scheduler",
    "models: crate::rcf::config, crate::rcf::forest, crate::rcf::snapshot",
    "models: crate::rcf::score::climb, crate::rcf::score::geo, crate::rcf::score::kernel",
    "models: crate::rcf::score::lookup, crate::rcf::score::traversal, crate::rcf::tree",
];

#[test]
fn no_library_has_an_import_cycle_between_its_modules() {
    let mut new = Vec::new();
    let mut seen = BTreeSet::new();
    for krate in [
        "features",
        "datasets",
        "models",
        "alerts",
        "evaluation",
        "detector",
    ] {
        let g = graph(&workspace().join(krate).join("src"));
        assert!(
            g.modules.len() > 3,
            "{krate}: read {} modules",
            g.modules.len()
        );
        for l in loops(&g) {
            let name = format!("{krate}: {}", l.join(", "));
            if KNOWN.contains(&name.as_str()) {
                seen.insert(name);
                continue;
            }
            let inner: Vec<String> = g
                .edges
                .iter()
                .filter(|(a, b)| l.contains(a) && l.contains(b))
                .map(|(a, b)| format!("    {a} -> {b}"))
                .collect();
            new.push(format!("{name}\n{}", inner.join("\n")));
        }
    }
    assert!(new.is_empty(), "new import cycles:\n{}", new.join("\n"));
    let gone: Vec<&&str> = KNOWN.iter().filter(|k| !seen.contains(**k)).collect();
    assert!(
        gone.is_empty(),
        "take these off KNOWN (changed or gone): {gone:#?}"
    );
}

#[test]
fn the_checker_sees_a_parent_and_child_that_use_each_other() {
    let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("store/backend")).expect("temp dir");
    let files = [
        ("lib.rs", "pub mod store;\npub mod leaf;\n"),
        ("leaf.rs", "pub fn f() {}\n"),
        (
            "store/mod.rs",
            "pub mod backend;\npub use backend::Key;\npub fn wall() {}\n",
        ),
        (
            "store/backend/mod.rs",
            "// use crate::leaf::f; in a comment is no edge\nuse crate::store::wall;\npub type Key = u8;\npub fn now() { wall() }\n",
        ),
    ];
    for (p, t) in files {
        fs::write(dir.join(p), t).expect("write");
    }
    let g = graph(&dir);
    assert_eq!(
        loops(&g),
        vec![vec![
            "crate::store".to_string(),
            "crate::store::backend".into()
        ]]
    );
    assert!(
        !g.edges.iter().any(|(_, b)| b == "crate::leaf"),
        "{:?}",
        g.edges
    );
    // Fixed the way the checkpoint store was: the helper moves to a leaf.
    fs::write(
        dir.join("store/backend/mod.rs"),
        "use crate::leaf::f;\npub type Key = u8;\npub fn now() { f() }\n",
    )
    .expect("write");
    let g = graph(&dir);
    assert!(loops(&g).is_empty(), "{:?}", g.edges);
    let _ = fs::remove_dir_all(&dir);
}
