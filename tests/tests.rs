//! End-to-end tests: the real `forewarn` binary against real parts. One
//! test binary, one module per area.

/// `forewarn simulate` → files → `forewarn backtest` → alert contract lines.
mod e2e {
    mod alertmanager;
    mod backtest;
    mod chaos;
    mod fleet;
    mod kafka;
    mod kafka_outage;
    mod kafka_tls;
    mod remote_write;
    mod retrain;
    mod s3_store;
    mod scenarios;
    mod scrape;
    mod scrape_files;
    mod simulate;
    mod startup;
    mod state_files;
    mod supervision;
}
