//! The live progress line and the run summary.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use riffle_bench::harness::human;
use riffle_runtime::JobMetrics;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redraws a one-line status from the job's metrics until dropped.
pub struct ProgressLine {
    bar: ProgressBar,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn rate(n: f64) -> String {
    human(n).replace(' ', "")
}

impl ProgressLine {
    /// Starts drawing on stderr (hidden when stderr is not a terminal, unless `force`).
    pub fn start(metrics: Arc<JobMetrics>, total_events: Option<u64>, force: bool) -> Self {
        let bar = ProgressBar::new_spinner();
        if force {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        }
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        // Dropping the sender wakes the thread at once, so the run's timing is not padded.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let b = bar.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let (mut last_rows, mut last_at) = (0u64, Instant::now());
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(Duration::from_millis(250))
            {
                let rows = metrics.source_rows.load(Ordering::Relaxed);
                let now = Instant::now();
                let per_second =
                    (rows - last_rows) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-3);
                (last_rows, last_at) = (rows, now);
                let average = rows as f64 / started.elapsed().as_secs_f64().max(1e-3);
                let lag = match (
                    metrics.sink_watermark(),
                    metrics.source_max_event_time.load(Ordering::Relaxed),
                ) {
                    (Some(w), max) if max > i64::MIN && w < i64::MAX => {
                        format!("{:.1}s", (max - w) as f64 / 1e9)
                    }
                    _ => "-".into(),
                };
                let total = total_events
                    .map(|t| format!(" of {} events", rate(t as f64)))
                    .unwrap_or_default();
                b.set_message(format!(
                    "source rows {}{total} | {}/s now, {}/s avg | out {} | watermark lag {lag}",
                    rate(rows as f64),
                    rate(per_second),
                    rate(average),
                    rate(metrics.sink_rows.load(Ordering::Relaxed) as f64),
                ));
                b.tick();
            }
        });
        Self {
            bar,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
