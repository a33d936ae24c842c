//! Where in `forewarn.toml` a key is: the bridge between the config's key
//! paths (`alerts.receivers[1].url`, `source.brokers`) and the file's lines
//! and columns. The text is parsed once more with spans
//! ([`toml::de::DeTable`]); a parse or type error's byte span becomes the
//! deepest key path that holds it, and a validation error's key path becomes
//! the line and column of that key (or of the nearest table above it that
//! the file has, when the key itself is missing).

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One segment of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Splits `a.b[2].c` into segments. Keys holding dots cannot be told apart
/// from nesting; config keys never hold them.
fn segments(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            if open > 0 {
                out.push(Segment::Key(rest[..open].to_owned()));
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let Some(close) = stripped.find(']') else {
                    break;
                };
                if let Ok(i) = stripped[..close].parse() {
                    out.push(Segment::Index(i));
                }
                rest = &stripped[close + 1..];
            }
        } else {
            out.push(Segment::Key(rest.to_owned()));
        }
    }
    out
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[start..].chars().count() + 1;
    (line, column)
}

/// A config text parsed with spans, for locating keys.
pub struct Located<'t> {
    text: &'t str,
    root: Option<Spanned<DeTable<'t>>>,
}

impl<'t> Located<'t> {
    /// Parses `text`; a text that is not TOML locates nothing.
    pub fn new(text: &'t str) -> Self {
        Self {
            text,
            root: DeTable::parse(text).ok(),
        }
    }

    /// Line and column of `path`'s key in the file, or of the nearest
    /// enclosing key the file has. `None`: nothing of it is in the file.
    pub fn position(&self, path: &str) -> Option<(usize, usize)> {
        let span = self.span_of(path)?;
        Some(line_col(self.text, span.start))
    }

    /// Whether the file has exactly `path` (not only a key above it).
    pub fn has(&self, path: &str) -> bool {
        let Some(leaf) = segments(path).pop() else {
            return false;
        };
        let Some(span) = self.span_of(path) else {
            return false;
        };
        match leaf {
            Segment::Key(k) => self
                .text
                .get(span)
                .is_some_and(|t| t.trim_matches('"') == k),
            Segment::Index(_) => true,
        }
    }

    fn span_of(&self, path: &str) -> Option<Range<usize>> {
        let root = self.root.as_ref()?;
        let mut table = root.get_ref();
        let mut array: Option<&[Spanned<DeValue<'t>>]> = None;
        let mut found: Option<Range<usize>> = None;
        for seg in segments(path) {
            let value = match (seg, array) {
                (Segment::Key(k), None) => {
                    let Some((key, value)) = table.get_key_value(k.as_str()) else {
                        break;
                    };
                    found = Some(key.span());
                    value
                }
                (Segment::Index(i), Some(items)) => {
                    let Some(value) = items.get(i) else {
                        break;
                    };
                    found = Some(value.span());
                    value
                }
                _ => break,
            };
            array = None;
            match value.get_ref() {
                DeValue::Table(t) => table = t,
                DeValue::Array(items) => array = Some(&items[..]),
                _ => {}
            }
        }
        found
    }

    /// The deepest key path whose key or value holds byte `offset`.
    pub fn path_at(&self, offset: usize) -> Option<String> {
        let root = self.root.as_ref()?;
        let mut path = String::new();
        walk_table(root.get_ref(), offset, &mut path);
        (!path.is_empty()).then_some(path)
    }
}

fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

fn walk_table(table: &DeTable<'_>, offset: usize, path: &mut String) {
    for (key, value) in table.iter() {
        if holds(&key.span(), offset) || holds(&value.span(), offset) || inside(value, offset) {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key.get_ref());
            walk_value(value, offset, path);
            return;
        }
    }
}

/// Whether a table or array has a descendant holding `offset` (a `[table]`
/// header's span does not cover the keys under it).
fn inside(value: &Spanned<DeValue<'_>>, offset: usize) -> bool {
    match value.get_ref() {
        DeValue::Table(t) => t.iter().any(|(k, v)| {
            holds(&k.span(), offset) || holds(&v.span(), offset) || inside(v, offset)
        }),
        DeValue::Array(items) => items
            .iter()
            .any(|v| holds(&v.span(), offset) || inside(v, offset)),
        _ => false,
    }
}

fn walk_value(value: &Spanned<DeValue<'_>>, offset: usize, path: &mut String) {
    match value.get_ref() {
        DeValue::Table(t) => walk_table(t, offset, path),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if holds(&item.span(), offset) || inside(item, offset) {
                    path.push_str(&format!("[{i}]"));
                    walk_value(item, offset, path);
                    return;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[source]\ntype = \"kafka\"\nbrokers = \"x\"\n\n[alerts.route]\nreceiver = \"pd\"\n\n[[alerts.receivers]]\ntype = \"file\"\nname = \"f\"\n\n[[alerts.receivers]]\ntype = \"webhook\"\nname = \"w\"\nurl = \"htp:/x\"\n";

    #[test]
    fn paths_become_lines_and_columns() {
        let l = Located::new(TEXT);
        assert_eq!(l.position("source.brokers"), Some((3, 1)));
        assert_eq!(l.position("alerts.route.receiver"), Some((6, 1)));
        assert_eq!(l.position("alerts.receivers[1].url"), Some((15, 1)));
        // A missing key: its nearest enclosing key.
        assert_eq!(l.position("source.topic").map(|p| p.0), Some(1));
        assert_eq!(l.position("nothing.here"), None);
    }

    #[test]
    fn offsets_become_key_paths() {
        let l = Located::new(TEXT);
        let at = |needle: &str| l.path_at(TEXT.find(needle).expect("needle"));
        assert_eq!(at("\"x\"").as_deref(), Some("source.brokers"));
        assert_eq!(at("htp").as_deref(), Some("alerts.receivers[1].url"));
        assert_eq!(at("\"f\"").as_deref(), Some("alerts.receivers[0].name"));
    }

    #[test]
    fn segments_split_indices() {
        assert_eq!(
            segments("a.b[2].c"),
            vec![
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(2),
                Segment::Key("c".into())
            ]
        );
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
