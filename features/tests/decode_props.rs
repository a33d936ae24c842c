//! Property tests: decoders return errors on garbage, never panic, and never
//! produce a sample without a GPU id or with a non-finite value.

use features::decode::{self, DecodeOutput, adapter, native, nvsmi, prom};
use proptest::prelude::*;

fn check(out: &DecodeOutput) {
    for s in &out.samples {
        assert!(!s.gpu.is_empty());
        for (_, v) in s.metrics.iter() {
            assert!(v.is_finite());
        }
    }
}

fn json_ish() -> impl Strategy<Value = Vec<u8>> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"gpu\"",
        "\"ts\"",
        "\"metrics\"",
        "\"DCGM_FI_DEV_GPU_TEMP\"",
        "1e400",
        "-1",
        "null",
        "\"GPU-1\"",
        "9223372036854775794",
        "\"2026-11-29T17:00:00Z\"",
        "\"labels\"",
        "\"name\"",
        "\\u0000",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&decode::decode(&bytes, 0));
        let mut out = DecodeOutput::default();
        native::decode_into(&bytes, &mut out);
        native::decode_lines(&bytes, &mut out);
        prom::decode_into(&bytes, 0, &mut out);
        nvsmi::decode_into(&bytes, &mut out);
        check(&out);
        if let Ok(m) = adapter::parse(&bytes) {
            adapter::Assembler::new(0).push(m, &mut out);
        }
    }

    #[test]
    fn json_shaped_noise_never_panics(bytes in json_ish()) {
        check(&decode::decode(&bytes, 0));
        let _ = adapter::parse(&bytes);
    }

    #[test]
    fn prom_shaped_noise_never_panics(s in "[A-Za-z_{}=\",. 0-9#\\\\\n-]{0,200}") {
        let mut out = DecodeOutput::default();
        prom::decode_into(s.as_bytes(), 0, &mut out);
        nvsmi::decode_into(s.as_bytes(), &mut out);
        check(&out);
    }
}
