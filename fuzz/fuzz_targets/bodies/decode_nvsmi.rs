//! Fuzz target: the `nvidia-smi --query-gpu … --format=csv` decoder. No
//! input may panic; a sample never comes without its GPU id.

use features::DecodeOutput;
use features::decode::nvsmi;

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let mut out = DecodeOutput::default();
    nvsmi::decode_into(data, &mut out);
    for s in &out.samples {
        assert!(!s.gpu.is_empty(), "a sample without a GPU id");
    }
}
