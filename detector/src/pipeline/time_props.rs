//! Property test: a fleet's stream with extreme timestamps at random
//! places (first in a batch or anywhere, on new ids or on a fleet GPU's own
//! clock, in history, partitioned and live mode) goes through every stage
//! (admission, features, models, rack air, alert stage and its timers)
//! without a panic or a hang, and nothing pages outside the fleet's time or
//! about a GPU whose clock lied.

use proptest::prelude::*;

const T0: i64 = 1_793_491_200_000;
const TICKS: i64 = 24;
const FLEET: usize = 6;

fn extreme() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1_i64),
        Just(0_i64),
        Just(253_402_300_799_999_i64), // 9999-12-31
        Just(4_102_444_800_000_i64),   // 2100-01-01
        Just(1_000_i64),
        // Near the fleet: a ratchet's step, a stale replay.
        (-86_400_000_i64..86_400_000).prop_map(|d| T0 + d * 7),
        any::<i64>(),
    ]
}

/// (tick, where in the batch, a fleet GPU's own clock or a new id, ts).
fn injection() -> impl Strategy<Value = (i64, bool, Option<usize>, i64)> {
    (
        0..TICKS,
        any::<bool>(),
        prop::option::of(0..FLEET),
        extreme(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn extreme_timestamps_anywhere_never_panic_nor_page(
        injections in prop::collection::vec(injection(), 1..12),
        mode in 0..3_u8,
    ) {
        let (mut p, events) = super::tests::collecting_pipeline(2);
        p.set_live(mode == 2);
        let mut liars = Vec::new();
        for tick in 0..TICKS {
            let mut batch: Vec<features::Sample> = (0..FLEET)
                .map(|g| {
                    let mut s = features::Sample::new(format!("GPU-{g}"), T0 + tick * 30_000);
                    s.topo.host = Some(format!("node-{}", g / 3).into());
                    s.metrics.set(features::Field::GpuTemp, 50.0);
                    s
                })
                .collect();
            for (i, &(at, first, own, ts)) in injections.iter().enumerate() {
                if at != tick {
                    continue;
                }
                match own {
                    Some(g) => {
                        batch[g].ts_ms = ts;
                    }
                    None => {
                        let gpu = format!("GPU-liar-{i}");
                        liars.push(gpu.clone());
                        let s = features::Sample::new(gpu, ts);
                        if first { batch.insert(0, s) } else { batch.push(s) }
                    }
                }
            }
            let horizon = (mode == 1).then_some(T0 + (tick - 1) * 30_000);
            p.send_from(batch, None, horizon).expect("send");
        }
        p.finish().expect("finish");
        for e in events.0.lock().expect("lock").iter() {
            prop_assert!(
                (T0..T0 + 3_600_000).contains(&e.ts),
                "an event outside the fleet's time: {:?}", e
            );
            prop_assert!(!e.dedup_key.contains("liar"), "a liar paged: {:?}", e);
        }
    }
}
