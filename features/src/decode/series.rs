//! Labelled series → [`Sample`]s: the decoder for input that arrives as
//! Prometheus series rather than exposition text (remote-write requests).
//! Each value goes through the dcgm-exporter label mapping of [`super::prom`]
//! (same labels, same fields, same extras), so a GPU looks the same whether
//! its samples were scraped, written to a file or remote-written.
//!
//! One [`SeriesDecoder`] covers one request: values of one GPU at one
//! timestamp become one sample, whichever series they came in.

use super::DecodeOutput;
use super::prom::{Index, decode_series};
use crate::error::DecodeError;

/// The metric name label of a Prometheus series.
const NAME: &str = "__name__";

/// Decodes the series of one request into `out`.
pub struct SeriesDecoder<'o> {
    out: &'o mut DecodeOutput,
    index: Index,
    first: usize,
    series: usize,
}

impl<'o> SeriesDecoder<'o> {
    pub fn new(out: &'o mut DecodeOutput) -> Self {
        let first = out.samples.len();
        SeriesDecoder {
            out,
            index: Index::default(),
            first,
            series: 0,
        }
    }

    /// One series: its labels (`__name__` among them) and its
    /// `(value, timestamp ms)` samples. NaN values (absent values and
    /// Prometheus' staleness markers) are skipped: a series that went stale
    /// is not a report from its GPU. A bad series is an error naming its
    /// position in the request; the others are kept.
    pub fn push<'a, L>(&mut self, labels: L, samples: impl IntoIterator<Item = (f64, i64)>)
    where
        L: IntoIterator<Item = (&'a str, &'a str)> + Clone,
    {
        let index = self.series;
        self.series += 1;
        let Some(name) = labels
            .clone()
            .into_iter()
            .find_map(|(k, v)| (k == NAME).then_some(v))
        else {
            self.out.errors.push(DecodeError::BadField {
                index,
                field: NAME.into(),
                message: "a series without a metric name".into(),
            });
            return;
        };
        for (value, ts) in samples {
            if value.is_nan() {
                continue;
            }
            let labels = labels.clone();
            if let Err(message) = decode_series(
                name,
                labels,
                value,
                ts,
                self.first,
                &mut self.index,
                self.out,
            ) {
                self.out.errors.push(DecodeError::BadField {
                    index,
                    field: name.into(),
                    message,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;

    fn labels<'a>(
        pairs: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + Clone {
        pairs.iter().copied()
    }

    #[test]
    fn groups_values_per_gpu_and_timestamp_like_the_text_decoder() {
        let mut out = DecodeOutput::default();
        let mut d = SeriesDecoder::new(&mut out);
        let a = [
            ("__name__", "DCGM_FI_DEV_GPU_TEMP"),
            ("UUID", "GPU-a"),
            ("Hostname", "n1"),
            ("modelName", "NVIDIA H100"),
            ("instance", "n1:9400"),
        ];
        d.push(labels(&a), [(61.0, 1000), (62.0, 2000)]);
        let p = [("__name__", "DCGM_FI_DEV_POWER_USAGE"), ("UUID", "GPU-a")];
        d.push(labels(&p), [(300.5, 1000), (f64::NAN, 2000)]);
        let up = [("__name__", "up"), ("instance", "n1:9400")];
        d.push(labels(&up), [(1.0, 1000)]);
        let x = [
            ("__name__", "DCGM_EXP_XID_ERRORS_COUNT"),
            ("UUID", "GPU-a"),
            ("xid", "79"),
        ];
        d.push(labels(&x), [(2.0, 1000)]);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.samples.len(), 2);
        let s = &out.samples[0];
        assert_eq!((&*s.gpu, s.ts_ms), ("GPU-a", 1000));
        assert_eq!(s.topo.host.as_deref(), Some("n1"));
        assert_eq!(s.metrics.get(Field::GpuTemp), Some(61.0));
        assert_eq!(s.metrics.get(Field::PowerUsage), Some(300.5));
        assert_eq!(
            s.extra,
            vec![("DCGM_EXP_XID_ERRORS_COUNT{xid=\"79\"}".into(), 2.0)]
        );
        let later = &out.samples[1];
        assert_eq!(later.ts_ms, 2000);
        assert_eq!(later.metrics.get(Field::PowerUsage), None, "stale marker");
    }

    #[test]
    fn a_series_without_a_name_or_with_a_bad_value_is_an_error_the_rest_kept() {
        let mut out = DecodeOutput::default();
        let mut d = SeriesDecoder::new(&mut out);
        d.push(labels(&[("UUID", "GPU-a")]), [(1.0, 1)]);
        let t = [("__name__", "DCGM_FI_DEV_GPU_TEMP"), ("UUID", "GPU-a")];
        d.push(labels(&t), [(1e12, 1)]);
        d.push(labels(&t), [(60.0, 2)]);
        assert_eq!(out.errors.len(), 2, "{:?}", out.errors);
        assert!(
            matches!(&out.errors[0], DecodeError::BadField { index: 0, field, .. } if field == "__name__")
        );
        assert!(matches!(
            &out.errors[1],
            DecodeError::BadField { index: 1, .. }
        ));
        assert!(
            out.samples
                .iter()
                .any(|s| s.metrics.get(Field::GpuTemp) == Some(60.0))
        );
    }
}
