//! Arrow schemas of forewarn's datasets, versioned.
//!
//! Telemetry: `ts` (timestamp ms UTC), `gpu`, the topology columns, then one
//! nullable `Float64` column per known DCGM field, named as DCGM names it, in
//! [`features::Field`] order. Null is "not reported" — never zero.
//! Labels: `gpu` (null for rack-wide incidents), `kind`, `onset` (precursor
//! start), `ts` (the failure, or the start of a straggler or incident), `end`
//! (when a straggler or incident ended), `host`, `rack`.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef, TimeUnit};
use features::Field;

/// Bumped whenever a column is added, removed or changes meaning.
pub const TELEMETRY_SCHEMA_VERSION: u32 = 1;
/// Schema-level metadata key holding the version.
pub const VERSION_KEY: &str = "forewarn.schema_version";
/// Topology columns, after `ts` and `gpu`.
pub const TOPOLOGY_COLUMNS: [&str; 5] = ["host", "rack", "cluster", "model", "job"];

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The telemetry schema.
pub fn telemetry() -> SchemaRef {
    let mut fields = vec![
        ArrowField::new("ts", ts_type(), false),
        ArrowField::new("gpu", DataType::Utf8, false),
    ];
    fields.extend(
        TOPOLOGY_COLUMNS
            .iter()
            .map(|c| ArrowField::new(*c, DataType::Utf8, true)),
    );
    fields.extend(
        Field::ALL
            .iter()
            .map(|f| ArrowField::new(f.name(), DataType::Float64, true)),
    );
    let meta: std::collections::HashMap<String, String> = [(
        VERSION_KEY.to_string(),
        TELEMETRY_SCHEMA_VERSION.to_string(),
    )]
    .into();
    Arc::new(Schema::new_with_metadata(fields, meta))
}

/// The labels schema.
pub fn labels() -> SchemaRef {
    Arc::new(Schema::new(vec![
        ArrowField::new("gpu", DataType::Utf8, true),
        ArrowField::new("kind", DataType::Utf8, false),
        ArrowField::new("onset", ts_type(), true),
        ArrowField::new("ts", ts_type(), false),
        ArrowField::new("end", ts_type(), true),
        ArrowField::new("host", DataType::Utf8, true),
        ArrowField::new("rack", DataType::Utf8, true),
    ]))
}
