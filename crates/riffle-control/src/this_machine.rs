//! What a control record says of the machine it was written on, and what a client on
//! that machine can check of it.

/// This machine's host name (`HOSTNAME`, else the kernel's), trimmed; empty if unknown.
pub fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_string())
        .unwrap_or_default()
}

/// Whether process `pid` of this machine still runs (Linux: it has a `/proc` entry).
pub fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
