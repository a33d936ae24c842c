//! One module per `forewarn` command. Each exposes a clap `…Args` struct and
//! a `run(&Args)`; shared machinery lives in the crate's other modules.

pub mod backtest;
pub mod config;
pub mod evaluate;
pub mod features;
pub mod promote;
pub mod replay;
pub mod score;
pub mod serve;
pub mod simulate;
pub mod train;
