//! The live progress line and the run summary.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use riffle_runtime::readout::human;
use riffle_runtime::{CheckpointEvent, CheckpointListener, JobMetrics};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The newest checkpoint facts for the progress line, fed by the coordinator's events.
#[derive(Debug, Default)]
pub struct CheckpointStatus {
    committed: AtomicU64,
    last_epoch: AtomicU64,
    last_ms: AtomicU64,
    failed: AtomicU64,
}

impl CheckpointListener for CheckpointStatus {
    fn on_event(&self, event: &CheckpointEvent) {
        match event {
            CheckpointEvent::Completed {
                epoch, duration, ..
            } => {
                self.committed.fetch_add(1, Ordering::Relaxed);
                self.last_epoch.store(epoch.0, Ordering::Relaxed);
                self.last_ms
                    .store(duration.as_millis() as u64, Ordering::Relaxed);
            }
            CheckpointEvent::Failed { .. } => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
            CheckpointEvent::Started { .. }
            | CheckpointEvent::Acked { .. }
            | CheckpointEvent::Savepoint(_) => {}
        }
    }
}

impl CheckpointStatus {
    fn describe(&self) -> String {
        let epoch = self.last_epoch.load(Ordering::Relaxed);
        if epoch == 0 {
            return " | no checkpoint yet".into();
        }
        let failed = self.failed.load(Ordering::Relaxed);
        format!(
            " | checkpoint {epoch} ({} ms){}",
            self.last_ms.load(Ordering::Relaxed),
            if failed > 0 {
                format!(", {failed} failed")
            } else {
                String::new()
            }
        )
    }
}

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
    /// Starts drawing on stderr. When stderr is not a terminal the line is hidden, unless
    /// `force`: then it is printed as a plain line once a second (logs, CI).
    pub fn start(
        metrics: Arc<JobMetrics>,
        total_events: Option<u64>,
        force: bool,
        checkpoints: Option<Arc<CheckpointStatus>>,
    ) -> Self {
        let bar = ProgressBar::new_spinner();
        if force {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        }
        let plain = force && !std::io::stderr().is_terminal();
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
            let mut ticks = 0u64;
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
                let checkpoint = checkpoints
                    .as_ref()
                    .map(|c| c.describe())
                    .unwrap_or_default();
                // A large state takes a while to restore, and rows wait meanwhile: say
                // so rather than show a stalled job.
                let restoring = match metrics.subtasks_restoring() {
                    0 => String::new(),
                    n => format!("restoring state ({n} operator subtask(s) still at it) | "),
                };
                b.set_message(format!(
                    "{restoring}source rows {}{total} | {}/s now, {}/s avg | out {} | watermark lag {lag}{checkpoint}",
                    rate(rows as f64),
                    rate(per_second),
                    rate(average),
                    rate(metrics.sink_rows.load(Ordering::Relaxed) as f64),
                ));
                if plain {
                    ticks += 1;
                    if ticks.is_multiple_of(4) {
                        eprintln!("riffle: {}", b.message());
                    }
                } else {
                    b.tick();
                }
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
