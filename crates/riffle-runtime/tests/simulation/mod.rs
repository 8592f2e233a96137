//! A seeded simulation of the checkpoint commit protocol inside one process.
//!
//! Simulated runs of one pipeline ("actors") share a state root and a sink. Each runs
//! the real recovery ([`riffle_runtime::recovery::recover`]) and the real commit
//! protocol ([`EpochCommitter::commit_epoch`]) over epochs of a counting source: epoch
//! after epoch it stages the source's next rows in the sink, writes the source's offset
//! as a state file and commits. A scheduler driven by one seed polls the actors itself
//! and interleaves them at every object-store operation, so a run of two actors is a
//! zombie and its successor stepping through the protocol in a random order. The same
//! seed gives the same schedule, faults and result.
//!
//! ## Fault model
//! While the disrupted phase lasts, each object-store operation may:
//! - **fail** before it takes effect (an error, nothing written, deleted or read);
//! - **lose its response**: a put or delete takes effect, and the caller gets an error;
//! - **tear**: a put writes only the first half of its bytes, and the caller gets an
//!   error (a store that is not atomic, crashing mid-write);
//! - come back **reordered** (a listing, in random order);
//! - be **delayed** arbitrarily: the scheduler may hold an actor between any two
//!   operations (a pause, a GC stall, a frozen VM) while the others go on; in
//!   particular a run **stalls right after reading the generation claims** now and then
//!   (a process frozen just after its fencing check, the zombie of defect 4).
//!
//! The disk may **damage** a state file of the newest COMMITTED checkpoint behind every
//! run's back (the damaged newest checkpoint of defect 5), and the scheduler may
//! **crash** an actor (drop it between two operations, like
//! `kill -9`), **start another** while one runs (two copies of a job, or a restarted
//! pod whose predecessor still runs), and **pause** one for a long stretch. A sink
//! commit may fail. Then faults stop and runs are started until one reaches the end of
//! input (or every start is refused, which is allowed: a refusal is not a wrong
//! result).
//!
//! ## Invariants, checked after every step
//! 1. The sink's published rows are each there at most once, and form a prefix of the
//!    source (nothing lost before a row that is published).
//! 2. No COMMITTED manifest references a missing or changed file: GC never deleted a
//!    file a retained manifest references.
//! 3. A run never writes or deletes an object that a run of a newer generation wrote
//!    (once a newer run claimed the state, an older one changes nothing of its).
//!
//! And at the end: when a run reached the end of input, the sink holds every row of
//! the source exactly once.
//!
//! A failing seed is printed with the last steps of its trace; replay one with
//! `RIFFLE_SIM_SEEDS=17 cargo test -p riffle-runtime --test simulation`, and try many
//! with `RIFFLE_SIM_SEEDS=1000..3000`.

mod actor;
mod faulty_store;
mod sink;
mod world;

use world::{simulate, Verdict};

/// Seeds checked on every `scripts/test`.
const CI_SEEDS: std::ops::Range<u64> = 0..1000;

fn seeds() -> Vec<u64> {
    let Ok(text) = std::env::var("RIFFLE_SIM_SEEDS") else {
        return CI_SEEDS.collect();
    };
    match text.split_once("..") {
        Some((a, b)) => (a.parse().expect("seed")..b.parse().expect("seed")).collect(),
        None => text
            .split(',')
            .map(|s| s.trim().parse().expect("seed"))
            .collect(),
    }
}

#[test]
fn the_commit_protocol_keeps_its_invariants_under_faults_crashes_and_zombies() {
    let mut failures = Vec::new();
    let mut totals = world::Totals::default();
    for seed in seeds() {
        let outcome = simulate(seed);
        totals.add(&outcome);
        if let Verdict::Refused(why) = &outcome.verdict {
            println!("seed {seed}: every run after the faults was refused: {why}");
        }
        if let Verdict::Broken(why) = &outcome.verdict {
            failures.push(format!(
                "seed {seed}: {why}\n  last steps:\n    {}",
                outcome.trace_tail.join("\n    ")
            ));
        }
    }
    println!("simulation: {totals}");
    assert!(
        failures.is_empty(),
        "{} seed(s) broke an invariant (replay with RIFFLE_SIM_SEEDS=<seed>):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The schedule must actually exercise what it claims to, or the test proves nothing.
    assert!(totals.finished > totals.seeds / 2, "{totals}");
    assert!(
        totals.zombie_fenced > 0,
        "no zombie was ever fenced: {totals}"
    );
    assert!(
        totals.crashes > 0 && totals.faults > 0 && totals.concurrent > 0,
        "{totals}"
    );
}
