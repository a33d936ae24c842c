//! Telemetry as Parquet: a buffered, deterministic [`TelemetryWriter`] and a
//! streaming [`TelemetryReader`] (one record batch at a time, so memory is
//! bounded by the batch and row-group size, not the file).

mod reader;
mod writer;

pub use reader::TelemetryReader;
pub use writer::{TelemetryWriter, WriterOptions};

#[cfg(test)]
mod tests;
