//! A bounded string interner for GPU ids and topology labels: a fleet has
//! few distinct hosts, racks, models and jobs but sends them with every
//! sample, so decoding shares one `Arc<str>` per distinct value instead of
//! allocating six per sample.

use std::collections::HashMap;
use std::sync::Arc;

use crate::hash::FxBuild;

/// Distinct strings kept at most; past it the table starts over (a bound,
/// not a working-set size: 100,000 GPUs plus their hosts and jobs fit).
const MAX_ENTRIES: usize = 400_000;

#[derive(Debug, Default, Clone)]
pub struct Interner {
    map: HashMap<Box<str>, Arc<str>, FxBuild>,
}

impl Interner {
    /// The shared `Arc<str>` for `s`.
    pub fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.map.get(s) {
            return a.clone();
        }
        if s.len() > super::limits::MAX_LABEL_BYTES {
            // Refused by the limits check right after decoding: not worth
            // a place in the table.
            return Arc::from(s);
        }
        if self.map.len() >= MAX_ENTRIES {
            self.map.clear();
        }
        let a: Arc<str> = Arc::from(s);
        self.map.insert(s.into(), a.clone());
        a
    }

    /// Distinct strings held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_one_allocation_per_value() {
        let mut i = Interner::default();
        let a = i.get("node-1");
        let b = i.get("node-1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(i.len(), 1);
    }
}
