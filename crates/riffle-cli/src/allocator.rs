//! The allocator's settings under a state budget (docs/engine.md, "State beyond
//! memory").

/// Blocks of at least this size are mapped on their own, and unmapped when freed.
const MMAP_THRESHOLD: i32 = 128 << 10;

/// Makes glibc hand large freed blocks back to the system at once. By default glibc
/// raises its mmap threshold as large blocks are freed (up to 32 MiB), after which it
/// keeps them in its heaps, so a budgeted process stayed far above its budget: the
/// table a spill rebuilds and Arrow's doubled buffers came back as free heap, not as
/// memory returned. Fixed at 128 KiB, `riffle bench --state-memory 256MiB,64MiB`
/// peaked 15–16% lower (928 and 407 MiB, against 1088 and 487) and ran 3–10% slower,
/// one run each. A `MALLOC_MMAP_THRESHOLD_` the user set is left as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_large_blocks() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets a parameter of glibc's allocator, under its lock.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Elsewhere the system allocator is left as it is.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_large_blocks() {}
