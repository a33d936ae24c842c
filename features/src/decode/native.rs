//! Native JSON decoder: one sample object, or an array of them, per message
//! or line (telemetry contract §1).
//!
//! Deserializes straight into [`Metrics`] with borrowed keys and no
//! intermediate map: this is the hot path of a Kafka consumer. Structural JSON
//! errors reject the whole message (nothing can be trusted after them);
//! semantic errors (no `gpu`, a bad timestamp, an absurd value) reject only
//! their own record.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{DecodeOutput, Interner, validate};
use crate::error::DecodeError;
use crate::field::Field;
use crate::sample::{Metrics, Sample, Topology};
use crate::time::parse_timestamp;

/// Decodes one native message (object or array) into `out`.
pub fn decode_into(bytes: &[u8], out: &mut DecodeOutput) {
    // One UTF-8 check of the whole message (vectorised in std) is cheaper
    // than serde_json's check of every string it borrows from a slice.
    let Ok(text) = std::str::from_utf8(bytes) else {
        out.errors.push(DecodeError::NotUtf8);
        return;
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let start = out.samples.len();
    let before_err = out.errors.len();
    match de
        .deserialize_any(MessageVisitor { out })
        .and_then(|()| de.end())
    {
        Ok(()) => {}
        Err(e) => {
            // A syntax error anywhere makes the whole message suspect.
            out.samples.truncate(start);
            out.errors.truncate(before_err);
            out.errors.push(e.into());
        }
    }
}

/// Decodes JSON lines: one message per non-empty line. Errors carry their
/// line number.
pub fn decode_lines(bytes: &[u8], out: &mut DecodeOutput) {
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let errs = out.errors.len();
        decode_into(line, out);
        for e in &mut out.errors[errs..] {
            if let DecodeError::Json { line: l, .. } = e {
                *l = i + 1;
            } else {
                *e = DecodeError::Line {
                    line: i + 1,
                    message: e.to_string(),
                };
            }
        }
    }
}

struct MessageVisitor<'o> {
    out: &'o mut DecodeOutput,
}

impl<'de> Visitor<'de> for MessageVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sample object or an array of sample objects")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let rec = RecordVisitor.visit_map(map)?;
        finish(0, rec, self.out);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(rec) = seq.next_element_seed(RecordSeed)? {
            finish(index, rec, self.out);
            index += 1;
        }
        Ok(())
    }
}

fn finish(index: usize, mut rec: RawRecord, out: &mut DecodeOutput) {
    let mut field_errors = std::mem::take(&mut rec.field_errors);
    match rec.into_sample(index, &mut out.interner) {
        Ok(s) => {
            // The record stands without its out-of-range fields; each is
            // still counted and dead-lettered.
            for e in &mut field_errors {
                if let DecodeError::AbsurdValue { index: i, .. }
                | DecodeError::NotFinite { index: i, .. } = e
                {
                    *i = index;
                }
            }
            out.errors.append(&mut field_errors);
            out.samples.push(s);
        }
        Err(e) => out.errors.push(e),
    }
}

#[derive(Default)]
struct RawRecord<'de> {
    ts: Option<Result<i64, String>>,
    gpu: Option<Cow<'de, str>>,
    labels: [Option<Cow<'de, str>>; 5],
    metrics: Metrics,
    extra: Vec<(Box<str>, f64)>,
    problem: Option<DecodeError>,
    /// Out-of-range values: the field is left missing, the record kept.
    field_errors: Vec<DecodeError>,
}

impl RawRecord<'_> {
    fn into_sample(self, index: usize, interner: &mut Interner) -> Result<Sample, DecodeError> {
        if let Some(mut p) = self.problem {
            match &mut p {
                DecodeError::BadField { index: i, .. }
                | DecodeError::AbsurdValue { index: i, .. }
                | DecodeError::NotFinite { index: i, .. } => *i = index,
                _ => {}
            }
            return Err(p);
        }
        let gpu = match self.gpu {
            Some(g) if !g.trim().is_empty() => g,
            _ => return Err(DecodeError::MissingGpu { index }),
        };
        let ts_ms = match self.ts {
            Some(Ok(ts)) => ts,
            Some(Err(v)) => {
                return Err(DecodeError::BadField {
                    index,
                    field: "ts".into(),
                    message: format!("not an RFC 3339 time or epoch milliseconds: {v}"),
                });
            }
            None => {
                return Err(DecodeError::BadField {
                    index,
                    field: "ts".into(),
                    message: "missing".into(),
                });
            }
        };
        let [host, rack, cluster, model, job] = self
            .labels
            .map(|l| l.filter(|v| !v.is_empty()).map(|v| interner.get(&v)));
        let topo = Topology {
            host,
            rack,
            cluster,
            model,
            job,
        };
        Ok(Sample {
            ts_ms,
            gpu: interner.get(&gpu),
            topo,
            metrics: self.metrics,
            extra: self.extra,
        })
    }

    fn fail(&mut self, e: DecodeError) {
        self.problem.get_or_insert(e);
    }
}

struct RecordSeed;

impl<'de> de::DeserializeSeed<'de> for RecordSeed {
    type Value = RawRecord<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawRecord<'de>, D::Error> {
        d.deserialize_map(RecordVisitor)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = RawRecord<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sample object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawRecord<'de>, A::Error> {
        let mut rec = RawRecord::default();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            match &*k {
                "ts" => rec.ts = Some(map.next_value::<Ts>()?.0),
                "gpu" => rec.gpu = map.next_value::<Label<'de>>()?.0,
                "host" => rec.labels[0] = map.next_value::<Label<'de>>()?.0,
                "rack" => rec.labels[1] = map.next_value::<Label<'de>>()?.0,
                "cluster" => rec.labels[2] = map.next_value::<Label<'de>>()?.0,
                "model" => rec.labels[3] = map.next_value::<Label<'de>>()?.0,
                "job" => rec.labels[4] = map.next_value::<Label<'de>>()?.0,
                "metrics" => map.next_value_seed(MetricsSeed { rec: &mut rec })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(rec)
    }
}

struct MetricsSeed<'r, 'de> {
    rec: &'r mut RawRecord<'de>,
}

impl<'de> de::DeserializeSeed<'de> for MetricsSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetricsSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of metric name to number")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let rec = self.rec;
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            let v = map.next_value::<Num>()?;
            let v = match v {
                Num::Missing => continue,
                Num::Value(v) => v,
                Num::Bad(text) => {
                    rec.fail(DecodeError::BadField {
                        index: 0,
                        field: k.into_owned(),
                        message: format!("not a number: {text}"),
                    });
                    continue;
                }
            };
            match Field::from_name(&k) {
                Some(field) => match validate(0, field, v) {
                    Ok(Some(v)) => rec.metrics.set(field, v),
                    Ok(None) => {}
                    Err(e) => rec.field_errors.push(e),
                },
                None if v.is_finite() && !super::is_blank_sentinel(v) => {
                    rec.extra.push((k.into(), v))
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// A map key or string value, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A topology label: a string, a number (Slurm job ids) or null.
struct Label<'de>(Option<Cow<'de, str>>);

impl<'de> de::Deserialize<'de> for Label<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Label<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a number or null")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Label<'de>, E> {
                Ok(Label(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Label<'de>, E> {
                Ok(Label(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Label<'de>, E> {
                Ok(Label(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Label<'de>, E> {
                Ok(Label(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Label<'de>, E> {
                Ok(Label(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Label<'de>, E> {
                Ok(Label(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A timestamp: RFC 3339 text or epoch milliseconds. A bad one is kept as
/// text so the record, not the message, is rejected.
struct Ts(Result<i64, String>);

impl<'de> de::Deserialize<'de> for Ts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Ts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 string or epoch milliseconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ts, E> {
                Ok(Ts(parse_timestamp(v).ok_or_else(|| format!("{v:?}"))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ts, E> {
                Ok(Ts(i64::try_from(v).map_err(|_| v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ts, E> {
                Ok(Ts(Ok(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Ts, E> {
                if v.is_finite() && v.abs() < 9e15 {
                    Ok(Ts(Ok(v as i64)))
                } else {
                    Ok(Ts(Err(v.to_string())))
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ts, E> {
                Ok(Ts(Err("null".into())))
            }
        }
        d.deserialize_any(V)
    }
}

/// A metric value: a number, null (missing), or numeric text.
enum Num {
    Value(f64),
    Missing,
    Bad(String),
}

impl<'de> de::Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or null")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::Value(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::Value(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Value(v as f64))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Num, E> {
                Ok(Num::Value(if v { 1.0 } else { 0.0 }))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(v.trim()
                    .parse::<f64>()
                    .map_or_else(|_| Num::Bad(format!("{v:?}")), Num::Value))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::Missing)
            }
            fn visit_none<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::Missing)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Num, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num::Bad("an array".into()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Num, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Num::Bad("an object".into()))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
