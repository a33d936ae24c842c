//! Fuzz target: prometheus-kafka-adapter JSON lines, each a message
//! through one `Decoder` (parse + assembler), then the end of input. No
//! input may panic; after `finish` nothing is left pending, and the
//! assembler never emits more samples than it was given metrics.

use features::decode::{Decoder, adapter};
use features::{Encoding, sniff};

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let mut d = Decoder::new(2_000);
    let (mut parsed, mut emitted) = (0usize, 0usize);
    // Only lines that sniff as adapter metrics: a native line would bring
    // samples of its own and void the count below.
    for line in data.split(|b| *b == b'\n') {
        if sniff(line) != Some(Encoding::Adapter) {
            continue;
        }
        if adapter::parse(line).is_ok() {
            parsed += 1;
        }
        emitted += d.decode(line, 0).samples.len();
    }
    emitted += d.finish().samples.len();
    assert_eq!(d.pending(), 0, "groups left after finish");
    assert!(emitted <= parsed, "{emitted} samples from {parsed} metrics");
}
