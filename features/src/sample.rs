//! `Sample`: one GPU's telemetry at one event time, as every decoder produces
//! it and every later stage consumes it.
//!
//! Metrics are a fixed array indexed by [`Field`] with a presence bitmask, so a
//! missing metric is *absent*, never zero, and lookups cost an index. Unknown
//! numeric metrics are kept in `extra` by name.

use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use crate::field::{FIELD_COUNT, Field};
use crate::time::format_rfc3339_ms;

/// A GPU's identity: its UUID as DCGM reports it (`GPU-xxxxxxxx-…`).
pub type GpuId = Arc<str>;

/// Typed DCGM metric values; absent means "not reported".
#[derive(Clone, PartialEq)]
pub struct Metrics {
    values: [f64; FIELD_COUNT],
    present: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            values: [0.0; FIELD_COUNT],
            present: 0,
        }
    }
}

impl Metrics {
    /// The value of `field`, or `None` when it was not reported.
    #[inline]
    pub fn get(&self, field: Field) -> Option<f64> {
        let i = field.index();
        (self.present >> i & 1 == 1).then(|| self.values[i])
    }

    /// Sets `field`. Callers validate values before (see `decode::validate`).
    #[inline]
    pub fn set(&mut self, field: Field, value: f64) {
        let i = field.index();
        self.values[i] = value;
        self.present |= 1 << i;
    }

    /// Marks `field` as not reported.
    #[inline]
    pub fn clear(&mut self, field: Field) {
        self.present &= !(1u64 << field.index());
    }

    /// Whether `field` was reported.
    #[inline]
    pub fn has(&self, field: Field) -> bool {
        self.present >> field.index() & 1 == 1
    }

    /// Number of reported fields.
    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// The presence bitmask (bit `Field::index()`).
    pub fn presence(&self) -> u64 {
        self.present
    }

    /// The raw value array (absent fields hold stale or zero values: check
    /// [`Metrics::presence`]). For columnar writers.
    pub fn raw_values(&self) -> &[f64; FIELD_COUNT] {
        &self.values
    }

    /// Reported fields and values in field order.
    pub fn iter(&self) -> impl Iterator<Item = (Field, f64)> + '_ {
        Field::ALL
            .iter()
            .filter_map(move |f| self.get(*f).map(|v| (*f, v)))
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (k.name(), v)))
            .finish()
    }
}

/// Where a GPU sits and what it runs: everything optional but the GPU id.
/// Serde support exists so that feature state (which remembers each GPU's
/// topology) can be checkpointed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Topology {
    pub host: Option<Arc<str>>,
    pub rack: Option<Arc<str>>,
    pub cluster: Option<Arc<str>>,
    /// The SKU (`modelName`); peers are only of the same SKU.
    pub model: Option<Arc<str>>,
    /// The workload: Slurm job id, Kubernetes pod or namespace.
    pub job: Option<Arc<str>>,
}

/// One GPU's telemetry at one event time.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Event time, epoch milliseconds (UTC).
    pub ts_ms: i64,
    pub gpu: GpuId,
    pub topo: Topology,
    pub metrics: Metrics,
    /// Numeric metrics with names forewarn does not know, kept by name.
    pub extra: Vec<(Box<str>, f64)>,
}

impl Sample {
    /// An empty sample for `gpu` at `ts_ms`.
    pub fn new(gpu: impl Into<GpuId>, ts_ms: i64) -> Self {
        Sample {
            ts_ms,
            gpu: gpu.into(),
            topo: Topology::default(),
            metrics: Metrics::default(),
            extra: Vec::new(),
        }
    }

    /// Builder-style metric setter, handy in tests and the simulator.
    pub fn with(mut self, field: Field, value: f64) -> Self {
        self.metrics.set(field, value);
        self
    }
}

/// Serializes as the native JSON format of the telemetry contract.
impl Serialize for Sample {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = &self.topo;
        let n = 3 + [&t.host, &t.rack, &t.cluster, &t.model, &t.job]
            .iter()
            .filter(|x| x.is_some())
            .count();
        let mut st = s.serialize_struct("Sample", n)?;
        st.serialize_field("ts", &format_rfc3339_ms(self.ts_ms))?;
        st.serialize_field("gpu", &*self.gpu)?;
        for (k, v) in [
            ("host", &t.host),
            ("rack", &t.rack),
            ("cluster", &t.cluster),
            ("model", &t.model),
            ("job", &t.job),
        ] {
            if let Some(v) = v {
                st.serialize_field(k, &**v)?;
            } else {
                st.skip_field(k)?;
            }
        }
        st.serialize_field("metrics", &MetricsJson(self))?;
        st.end()
    }
}

struct MetricsJson<'a>(&'a Sample);

impl Serialize for MetricsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = &self.0.metrics;
        let mut map = s.serialize_map(Some(m.len() + self.0.extra.len()))?;
        for (f, v) in m.iter() {
            map.serialize_entry(f.name(), &v)?;
        }
        for (k, v) in &self.0.extra {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_is_absent_not_zero() {
        let mut m = Metrics::default();
        assert_eq!(m.get(Field::GpuTemp), None);
        m.set(Field::GpuTemp, 0.0);
        assert_eq!(m.get(Field::GpuTemp), Some(0.0));
        m.clear(Field::GpuTemp);
        assert_eq!(m.get(Field::GpuTemp), None);
        assert!(m.is_empty());
    }
}
