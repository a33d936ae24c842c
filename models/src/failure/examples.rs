//! A labelled example set's columns, borrowed from `datasets`' sets, and
//! the check that they agree. A leaf of `failure/` that the sampling and
//! the warning budget both read.

use thiserror::Error;

/// A labelled example set's columns, borrowed. Every column has one entry
/// per row; `x` is row-major with `width` values per row.
#[derive(Debug, Clone, Copy)]
pub struct Examples<'a> {
    pub width: usize,
    pub x: &'a [f32],
    pub y: &'a [u8],
    pub weight: &'a [f32],
    /// Hours to failure (positives), else NaN.
    pub lead_h: &'a [f32],
    /// Whether the row's failure shows at that time (true for negatives).
    pub visible: &'a [bool],
    /// The row's GPU, as an index.
    pub gpu: &'a [u32],
    /// The row's event time (epoch ms).
    pub ts_ms: &'a [i64],
}

/// Columns of unequal length.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("example columns disagree: {rows} labels, but {column} has {found} entries")]
pub struct ShapeError {
    pub rows: usize,
    pub column: &'static str,
    pub found: usize,
}

impl<'a> Examples<'a> {
    /// Checks that every column has one entry per label.
    pub fn check(self) -> Result<Self, ShapeError> {
        let rows = self.y.len();
        for (column, found) in [
            ("x", self.x.len() / self.width.max(1)),
            ("weight", self.weight.len()),
            ("lead_h", self.lead_h.len()),
            ("visible", self.visible.len()),
            ("gpu", self.gpu.len()),
            ("ts_ms", self.ts_ms.len()),
        ] {
            if found != rows {
                return Err(ShapeError {
                    rows,
                    column,
                    found,
                });
            }
        }
        if self.x.len() != rows * self.width {
            return Err(ShapeError {
                rows,
                column: "x (values)",
                found: self.x.len(),
            });
        }
        Ok(self)
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    pub fn row(&self, i: usize) -> &'a [f32] {
        &self.x[i * self.width..(i + 1) * self.width]
    }

    pub fn positives(&self) -> usize {
        self.y.iter().filter(|y| **y == 1).count()
    }
}
