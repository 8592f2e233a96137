//! The simulated world: the seeded random source, the fault switch, what every actor
//! wrote, the scheduler that interleaves the actors, and the invariant checks.

use super::actor::{run_actor, ActorEnd, SOURCE_ROWS};
use super::faulty_store::FaultyStore;
use super::sink::SimSink;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use riffle_state::{CheckpointStore, ManifestStatus, StateRoot};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

/// The pipeline every actor runs.
pub const PIPELINE: &str = "sim";

/// Steps before the disrupted phase ends at the latest.
const MAX_DISRUPTED_STEPS: u64 = 1500;

/// Steps after which a seed that has not finished counts as stuck.
const MAX_STEPS: u64 = 100_000;

/// Runs started after the faults stopped before the seed counts as refused.
const MAX_CLEAN_STARTS: usize = 6;

/// How many trace lines a failure shows.
const TRACE_LINES: usize = 60;

/// Everything the actors share, behind one lock (the simulation is single-threaded;
/// the lock only satisfies `Send` bounds).
pub struct World {
    /// The one source of randomness: schedule, faults, epoch sizes.
    pub rng: StdRng,
    /// Faults are injected while this is set (the disrupted phase).
    pub faults_on: bool,
    /// Per-operation fault probability in the disrupted phase.
    pub fault_rate: f64,
    /// Faults injected so far.
    pub faults: usize,
    /// Generation of the run that last wrote or deleted each object.
    pub writers: HashMap<String, u64>,
    /// The generation each actor claimed.
    pub generation_of: HashMap<usize, u64>,
    /// Invariant 3 broken: what and where.
    pub violations: Vec<String>,
    /// Bumped by every write or delete: invariant 2 is checked again only when it moved.
    pub version: u64,
    /// An actor that just read the generation claims and is to stall there (a process
    /// frozen right after a fencing check: the zombie of defect 4).
    pub stall: Option<usize>,
    /// State files the world damaged (a bad disk): invariant 2 does not blame a run.
    pub damaged: HashSet<String>,
    trace: VecDeque<String>,
}

impl World {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let fault_rate = rng.random_range(0.0..0.08);
        Self {
            rng,
            faults_on: true,
            fault_rate,
            faults: 0,
            writers: HashMap::new(),
            generation_of: HashMap::new(),
            violations: Vec::new(),
            version: 0,
            stall: None,
            damaged: HashSet::new(),
            trace: VecDeque::new(),
        }
    }

    /// Adds a line to the trace a failure prints.
    pub fn trace(&mut self, line: String) {
        if self.trace.len() == TRACE_LINES {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    /// Whether the next operation is disturbed (drawn only while faults are on).
    pub fn fault(&mut self) -> bool {
        let hit = self.faults_on && self.rng.random_bool(self.fault_rate);
        self.faults += usize::from(hit);
        hit
    }
}

/// The world behind its lock.
#[derive(Clone)]
pub struct Shared(Arc<Mutex<World>>);

impl Shared {
    /// Locks the world (a panic elsewhere has already failed the test).
    pub fn lock(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How one seed ended.
#[derive(Debug)]
pub enum Verdict {
    /// A run reached the end of input and the sink holds every row once.
    Finished,
    /// Every run after the faults was refused (with a message): not a wrong result.
    Refused(String),
    /// An invariant broke.
    Broken(String),
}

/// What one seed did.
pub struct Outcome {
    pub verdict: Verdict,
    pub trace_tail: Vec<String>,
    pub crashes: usize,
    pub concurrent: usize,
    pub pauses: usize,
    pub stalls: usize,
    pub damaged: usize,
    pub faults: usize,
    pub fenced: usize,
    pub runs: usize,
    pub steps: u64,
}

/// Counts over all seeds.
#[derive(Default)]
pub struct Totals {
    pub seeds: usize,
    pub finished: usize,
    pub refused: usize,
    pub broken: usize,
    pub crashes: usize,
    pub concurrent: usize,
    pub pauses: usize,
    pub stalls: usize,
    pub damaged: usize,
    pub faults: usize,
    pub zombie_fenced: usize,
    pub runs: usize,
    pub steps: u64,
}

impl Totals {
    pub fn add(&mut self, o: &Outcome) {
        self.seeds += 1;
        match o.verdict {
            Verdict::Finished => self.finished += 1,
            Verdict::Refused(_) => self.refused += 1,
            Verdict::Broken(_) => self.broken += 1,
        }
        self.crashes += o.crashes;
        self.concurrent += o.concurrent;
        self.pauses += o.pauses;
        self.stalls += o.stalls;
        self.damaged += o.damaged;
        self.faults += o.faults;
        self.zombie_fenced += o.fenced;
        self.runs += o.runs;
        self.steps += o.steps;
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} seeds: {} finished exactly, {} refused, {} broken; {} runs, {} steps, {} injected faults, {} crashes, {} second copies started, {} pauses, {} stalls right after a fencing check, {} committed state files damaged, {} runs fenced",
            self.seeds,
            self.finished,
            self.refused,
            self.broken,
            self.runs,
            self.steps,
            self.faults,
            self.crashes,
            self.concurrent,
            self.pauses,
            self.stalls,
            self.damaged,
            self.zombie_fenced
        )
    }
}

type ActorFuture = Pin<Box<dyn Future<Output = ActorEnd>>>;

struct Live {
    id: usize,
    future: ActorFuture,
    paused_until: u64,
}

/// Everything one seed's actors run against.
struct Setup {
    world: Shared,
    memory: Arc<InMemory>,
    sink: Arc<SimSink>,
    graph: Arc<riffle_runtime::JobGraph>,
}

impl Setup {
    fn start(&self, id: usize) -> Live {
        let faulty: Arc<dyn ObjectStore> = Arc::new(FaultyStore::new(
            self.memory.clone(),
            id,
            self.world.clone(),
        ));
        let store = CheckpointStore::new(
            StateRoot {
                bulk: faulty.clone(),
                store: faulty,
                prefix: ObjectPath::from("state"),
                local_dir: None,
                url: "sim://".into(),
            },
            PIPELINE,
        );
        self.world.lock().trace(format!("a{id} starts"));
        Live {
            id,
            future: Box::pin(run_actor(
                id,
                store,
                self.graph.clone(),
                self.sink.clone(),
                self.world.clone(),
            )),
            paused_until: 0,
        }
    }
}

/// Runs one seed to its end.
pub fn simulate(seed: u64) -> Outcome {
    let world = Shared(Arc::new(Mutex::new(World::new(seed))));
    let sink = Arc::new(SimSink::new(world.clone()));
    let setup = Setup {
        world: world.clone(),
        memory: Arc::new(InMemory::new()),
        graph: Arc::new(super::actor::graph(sink.clone())),
        sink,
    };
    let clean = CheckpointStore::new(
        StateRoot {
            store: setup.memory.clone(),
            bulk: setup.memory.clone(),
            prefix: ObjectPath::from("state"),
            local_dir: None,
            url: "memory://".into(),
        },
        PIPELINE,
    );
    let disrupted_until = world.lock().rng.random_range(100..MAX_DISRUPTED_STEPS);
    let mut outcome = Outcome {
        verdict: Verdict::Finished,
        trace_tail: Vec::new(),
        crashes: 0,
        concurrent: 0,
        pauses: 0,
        stalls: 0,
        damaged: 0,
        faults: 0,
        fenced: 0,
        runs: 0,
        steps: 0,
    };
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut actors: Vec<Live> = Vec::new();
    let mut next_id = 0;
    let mut clean_starts = 0;
    let mut last_end: Option<ActorEnd> = None;
    let mut checked_version = u64::MAX;
    let mut step = 0u64;
    let verdict = loop {
        step += 1;
        if step > MAX_STEPS {
            break Verdict::Broken(format!("no run finished in {MAX_STEPS} steps"));
        }
        let disrupted = step < disrupted_until;
        if step == disrupted_until {
            let mut w = world.lock();
            w.faults_on = false;
            w.trace("faults stop".into());
        }
        if disrupted {
            let mut w = world.lock();
            let roll: f64 = w.rng.random();
            if roll < 0.004 && !actors.is_empty() {
                let i = w.rng.random_range(0..actors.len());
                w.trace(format!("a{} crashes (kill -9)", actors[i].id));
                drop(w);
                actors.remove(i);
                outcome.crashes += 1;
            } else if roll < 0.008 && actors.len() == 1 {
                drop(w);
                actors.push(setup.start(next_id));
                next_id += 1;
                outcome.runs += 1;
                outcome.concurrent += 1;
            } else if roll < 0.012 && !actors.is_empty() {
                let i = w.rng.random_range(0..actors.len());
                let pause = w.rng.random_range(10..600);
                w.trace(format!("a{} pauses for {pause} steps", actors[i].id));
                actors[i].paused_until = step + pause;
                outcome.pauses += 1;
            } else if roll < 0.0125 {
                drop(w);
                if futures::executor::block_on(damage_newest_checkpoint(
                    &world,
                    &setup.memory,
                    &clean,
                )) {
                    outcome.damaged += 1;
                }
            }
        }
        if actors.is_empty() {
            if !disrupted {
                if matches!(last_end, Some(ActorEnd::Done)) {
                    break Verdict::Finished;
                }
                clean_starts += 1;
                if clean_starts > MAX_CLEAN_STARTS {
                    let why = match &last_end {
                        Some(ActorEnd::Failed(why)) => why.clone(),
                        other => format!("{other:?}"),
                    };
                    break Verdict::Refused(why);
                }
            }
            actors.push(setup.start(next_id));
            next_id += 1;
            outcome.runs += 1;
        }
        let runnable: Vec<usize> = (0..actors.len())
            .filter(|i| actors[*i].paused_until <= step)
            .collect();
        if runnable.is_empty() {
            continue; // everyone is paused: time passes
        }
        let i = runnable[world.lock().rng.random_range(0..runnable.len())];
        let polled = actors[i].future.as_mut().poll(&mut cx);
        let stall = world.lock().stall.take();
        if stall == Some(actors[i].id) {
            let pause = world.lock().rng.random_range(50..800);
            world
                .lock()
                .trace(format!("a{} stalls for {pause} steps", actors[i].id));
            actors[i].paused_until = step + pause;
            outcome.stalls += 1;
        }
        if let Poll::Ready(end) = polled {
            let id = actors[i].id;
            world.lock().trace(format!("a{id} ends: {end:?}"));
            if matches!(end, ActorEnd::Fenced) {
                outcome.fenced += 1;
            }
            actors.remove(i);
            last_end = Some(end);
        }
        if let Err(broken) = check_invariants(&world, &setup.sink, &clean, &mut checked_version) {
            break Verdict::Broken(broken);
        }
    };
    let verdict = match verdict {
        Verdict::Finished => match setup.sink.published_rows() {
            rows if rows == (0..SOURCE_ROWS).collect::<Vec<_>>() => Verdict::Finished,
            rows => Verdict::Broken(format!(
                "the run finished, but the sink holds {} rows, not 0..{SOURCE_ROWS} once: {rows:?}",
                rows.len()
            )),
        },
        other => other,
    };
    let w = world.lock();
    outcome.verdict = verdict;
    outcome.faults = w.faults;
    outcome.steps = step;
    outcome.trace_tail = w.trace.iter().cloned().collect();
    outcome
}

/// Invariants 1–3 (see the top of `mod.rs`).
fn check_invariants(
    world: &Shared,
    sink: &SimSink,
    clean: &CheckpointStore,
    checked_version: &mut u64,
) -> Result<(), String> {
    if let Some(v) = world.lock().violations.first() {
        return Err(v.clone());
    }
    sink.check_prefix()?;
    let version = world.lock().version;
    if version == *checked_version {
        return Ok(());
    }
    *checked_version = version;
    let damaged = world.lock().damaged.clone();
    futures::executor::block_on(committed_manifests_intact(clean, &damaged))
}

/// A bad disk: truncates a state file of the newest COMMITTED checkpoint behind every
/// run's back (the damaged newest checkpoint of defect 5). Returns whether it did.
async fn damage_newest_checkpoint(
    world: &Shared,
    memory: &InMemory,
    clean: &CheckpointStore,
) -> bool {
    use object_store::ObjectStoreExt;
    let Ok(epochs) = clean.list_epochs().await else {
        return false;
    };
    for epoch in epochs.into_iter().rev() {
        let Ok(Some(manifest)) = clean.read_manifest(epoch).await else {
            continue;
        };
        if manifest.status != ManifestStatus::Committed {
            continue;
        }
        let Some(file) = manifest.files().next() else {
            return false;
        };
        let path = clean.layout().absolute(&file.path);
        let Ok(bytes) = clean.read_bytes(&file.path).await else {
            return false;
        };
        let half = bytes.slice(..bytes.len() / 2);
        if memory.put(&path, half.into()).await.is_err() {
            return false;
        }
        let mut w = world.lock();
        w.trace(format!("the disk damages {} (epoch {epoch})", file.path));
        w.damaged.insert(file.path.clone());
        w.version += 1;
        return true;
    }
    false
}

/// Invariant 2: every file of every COMMITTED manifest is there, unchanged.
async fn committed_manifests_intact(
    store: &CheckpointStore,
    damaged: &HashSet<String>,
) -> Result<(), String> {
    let epochs = store.list_epochs().await.map_err(|e| e.to_string())?;
    for epoch in epochs {
        let Ok(Some(manifest)) = store.read_manifest(epoch).await else {
            continue; // none, or damaged: never taken as a checkpoint
        };
        if manifest.status != ManifestStatus::Committed {
            continue;
        }
        if manifest.files().any(|f| damaged.contains(&f.path)) {
            continue; // the world's doing, not a run's
        }
        for file in manifest.files() {
            let bytes = store.read_bytes(&file.path).await.map_err(|e| {
                format!(
                    "epoch {epoch} (generation {}) is COMMITTED but {}",
                    manifest.generation, e
                )
            })?;
            if bytes.len() as u64 != file.bytes || crc32c::crc32c(&bytes) != file.crc32c {
                return Err(format!(
                    "epoch {epoch} is COMMITTED but {} changed ({} bytes)",
                    file.path,
                    bytes.len()
                ));
            }
        }
    }
    Ok(())
}
