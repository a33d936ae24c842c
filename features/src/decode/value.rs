//! Value hygiene shared by every decoder: DCGM blank sentinels are missing
//! data, non-finite values and physically absurd readings are errors.

use crate::error::DecodeError;
use crate::field::{Field, FieldKind};

/// DCGM "blank" values are missing data, not readings: `DCGM_FP64_BLANK`
/// (2^47 = 140737488355328.0) and its NOT_FOUND / NOT_SUPPORTED /
/// NOT_PERMISSIONED neighbours just above, `DCGM_INT32_BLANK`
/// (0x7ffffff0) and its neighbours up to `i32::MAX`, and `DCGM_INT64_BLANK`
/// (0x7ffffffffffffff0, e.g. `9223372036854775794` = not supported) and its
/// neighbours, which an f64 cannot tell apart from 2^63. Anything else is
/// a reading, to be checked against the field's range: a value such as
/// 1e308 is out of range, not blank.
pub fn is_blank_sentinel(v: f64) -> bool {
    const FP64_BLANK: f64 = 140_737_488_355_328.0;
    const INT32_BLANK: f64 = 2_147_483_632.0;
    const INT64_BLANK: f64 = 9_223_372_036_854_775_792.0;
    (FP64_BLANK..FP64_BLANK + 16.0).contains(&v)
        || (INT32_BLANK..=f64::from(i32::MAX)).contains(&v)
        || (INT64_BLANK..=9_223_372_036_854_775_808.0).contains(&v)
}

/// The physically plausible range of a field; outside it, a reading is a
/// decoding or exporter bug, not a GPU state.
fn plausible(field: Field) -> (f64, f64) {
    use Field::*;
    match field {
        GpuTemp | MemoryTemp => (-50.0, 250.0),
        PowerUsage | PowerLimit => (0.0, 5_000.0),
        GpuUtil | MemCopyUtil | EncUtil | DecUtil | FanSpeed => (0.0, 100.5),
        SmClock | MemClock => (0.0, 20_000.0),
        GrEngineActive | SmActive | SmOccupancy | TensorActive | DramActive => (0.0, 1.05),
        XidErrors => (0.0, 1_000.0),
        PcieLinkGen => (0.0, 8.0),
        PcieLinkWidth => (0.0, 64.0),
        _ if field.kind() == FieldKind::Counter => (0.0, 1e18),
        _ => (0.0, 1e18),
    }
}

/// Checks one decoded value: `Ok(None)` for a blank sentinel (missing),
/// `Ok(Some(v))` for a usable value, an error naming the field otherwise.
pub fn validate(index: usize, field: Field, v: f64) -> Result<Option<f64>, DecodeError> {
    if !v.is_finite() {
        return Err(DecodeError::NotFinite {
            index,
            field: field.name().to_string(),
        });
    }
    if is_blank_sentinel(v) {
        return Ok(None);
    }
    let (min, max) = plausible(field);
    if v < min || v > max {
        return Err(DecodeError::AbsurdValue {
            index,
            field: field.name(),
            value: v,
            min,
            max,
        });
    }
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_are_missing() {
        assert_eq!(
            validate(0, Field::EccSbeVolTotal, 9_223_372_036_854_775_794.0),
            Ok(None)
        );
        assert_eq!(validate(0, Field::GpuTemp, 140_737_488_355_328.0), Ok(None));
        assert_eq!(validate(0, Field::GpuTemp, 64.0), Ok(Some(64.0)));
        assert!(validate(0, Field::GpuTemp, 900.0).is_err());
        assert!(validate(0, Field::PowerUsage, -3.0).is_err());
        assert!(validate(0, Field::PowerUsage, f64::NAN).is_err());
    }

    #[test]
    fn huge_values_are_out_of_range_not_blank() {
        assert!(validate(0, Field::GpuTemp, 1e308).is_err());
        assert!(validate(0, Field::EccSbeVolTotal, 1e300).is_err());
        assert_eq!(validate(0, Field::GpuTemp, 140_737_488_355_330.0), Ok(None));
        assert_eq!(validate(0, Field::GpuTemp, 2_147_483_632.0), Ok(None));
        assert_eq!(
            validate(0, Field::EccSbeVolTotal, 9_223_372_036_854_775_807.0),
            Ok(None)
        );
    }
}
