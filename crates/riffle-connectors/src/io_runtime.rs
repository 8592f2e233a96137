//! A small tokio runtime of the connectors' own, for async clients (tokio-postgres).
//!
//! Sinks are synchronous ([`riffle_core::Sink`]) and are called from the job's worker
//! threads, from the checkpoint coordinator's thread and from recovery; a future cannot
//! be driven on any of those without starting a runtime inside a runtime. Connections
//! live on this runtime instead, and callers wait for their requests with a plain
//! blocking wait, the way they wait for a file write.

use riffle_core::{Error, Result};
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

fn runtime() -> Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("riffle-connector-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::external("connector I/O runtime", format!("cannot start: {e}")))
}

/// Runs `future` on the connectors' runtime and waits for its output.
///
/// # Errors
/// The runtime cannot start, or the future panicked.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = runtime()?.spawn(future);
    // Outside tokio's cooperative budget: a caller inside an async task (recovery asks
    // a sink about every committed epoch) would otherwise spend the task's budget after
    // 128 waits, and every later poll of the handle would answer "not yet" and wake
    // itself at once: a busy loop that never ends.
    futures::executor::block_on(tokio::task::unconstrained(handle))
        .map_err(|e| Error::external("connector I/O runtime", format!("request stopped: {e}")))
}

/// Starts `future` on the connectors' runtime and returns at once: a reader that runs
/// beside its source (the PostgreSQL CDC stream), stopped by aborting the handle.
///
/// # Errors
/// The runtime cannot start.
pub fn spawn<F>(future: F) -> Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(future))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_waits_inside_one_async_task_all_finish() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let outer = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let sum = outer.block_on(async {
                let mut sum = 0;
                for i in 0..1000 {
                    sum += block_on(async move { i }).unwrap();
                }
                sum
            });
            let _ = done.send(sum);
        });
        let sum = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("block_on spun for ever once the async task's budget ran out");
        assert_eq!(sum, 499_500);
    }
}
