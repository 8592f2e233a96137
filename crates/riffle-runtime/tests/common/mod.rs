//! Helpers shared by the runtime integration tests.

#![allow(dead_code)]

use riffle_runtime::WatermarkStrategy;
use std::time::Duration;

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn no_delay() -> WatermarkStrategy {
    WatermarkStrategy {
        max_out_of_orderness: Duration::ZERO,
        idle_timeout: None,
    }
}
