//! Property tests: decoders return errors on garbage, never panic, and never
//! produce a sample without a GPU id or with a non-finite value; a line of a
//! file decodes exactly as a message of the same bytes.

use features::decode::{self, DecodeOutput, Decoded, Decoder, adapter, native, nvsmi, prom};
use features::{DecodeError, Encoding};
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

    #[test]
    fn a_line_decodes_as_a_message_of_the_same_bytes(lines in prop::collection::vec(json_ish(), 1..8)) {
        let lines: Vec<Vec<u8>> = lines
            .into_iter()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .collect();
        prop_assume!(!lines.is_empty());
        // A head that sniffs as a scrape or a CSV table makes the whole
        // file one unit.
        prop_assume!(!decode::sniff(&lines[0]).is_some_and(Encoding::whole_file));
        let text = lines.join(&b'\n');
        let mut got: Vec<(Vec<u8>, Vec<DecodeError>)> = Vec::new();
        Decoder::default()
            .read(text.as_slice(), "f", |u: Decoded<'_>| {
                if !u.last {
                    got.push((u.payload.to_vec(), u.errors.to_vec()));
                }
                Ok::<_, std::io::Error>(())
            })
            .expect("an in-memory read");
        let mut messages = Decoder::default();
        let want: Vec<(Vec<u8>, Vec<DecodeError>)> = lines
            .iter()
            .map(|l| (l.clone(), messages.decode(l, 0).errors.clone()))
            .collect();
        prop_assert_eq!(got, want);
    }
}
