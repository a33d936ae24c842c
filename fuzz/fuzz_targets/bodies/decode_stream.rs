//! Fuzz target: `Decoder::read`, the path of files and stdin (sniffing,
//! whole-file scrapes and CSV, JSON lines with the adapter assembler). No
//! input may panic; a line decodes to the same errors as a message of the
//! same bytes; the last unit comes once, last.

use features::decode::{Decoder, Position, decode};

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let mut d = Decoder::default();
    let mut lasts = 0usize;
    let mut after_last = false;
    d.read(data, "fuzz", |u| {
        after_last |= lasts > 0;
        if u.last {
            lasts += 1;
        }
        if let Position::Line { .. } = u.position {
            assert_eq!(u.errors, decode(u.payload, 0).errors.as_slice());
        }
        Ok::<_, std::io::Error>(())
    })
    .expect("reading from memory cannot fail");
    assert_eq!(lasts, 1);
    assert!(!after_last, "a unit after the last one");
}
