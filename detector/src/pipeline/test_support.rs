//! Helpers the pipeline's and the sources' in-process tests share: a
//! simulated fleet's ticks, an alert sink that keeps what it is given, and
//! the alerts of the default pipeline over given ticks.

use std::sync::{Arc, Mutex};

use alerts::AlertEvent;
use datasets::simulator::{SimConfig, Simulator};
use features::Sample;

use super::AlertSink;
use crate::commands::backtest::run_pipeline;

/// Every tick of a simulated fleet, in order.
pub(crate) fn sim_ticks(config: SimConfig) -> Vec<Vec<Sample>> {
    let mut sim = Simulator::new(config).expect("sim");
    let mut ticks = Vec::new();
    loop {
        let mut out = Vec::new();
        if sim.next_tick(&mut out).is_none() {
            break;
        }
        ticks.push(out);
    }
    ticks
}

/// An alert sink that keeps the events it is given (clones share them).
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<AlertEvent>>>);

impl AlertSink for Capture {
    fn deliver(&mut self, events: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        let mut v = self.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        v.extend_from_slice(events);
        Ok(())
    }
}

impl Capture {
    /// The events so far, kept.
    pub(crate) fn all(&self) -> Vec<AlertEvent> {
        self.0.lock().expect("lock").clone()
    }

    /// The events so far, leaving none.
    pub(crate) fn take(&self) -> Vec<AlertEvent> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

/// The alert events of the default pipeline (the tests' config) over
/// `ticks`.
pub(crate) fn alerts_of(ticks: Vec<Vec<Sample>>) -> Vec<AlertEvent> {
    let (cfg, _) = super::restart_tests::test_config(7);
    let sink = Capture::default();
    run_pipeline(&cfg, None, Box::new(sink.clone()), None, |_, send| {
        for t in ticks {
            send(t)?;
        }
        Ok(())
    })
    .expect("pipeline");
    sink.all()
}
