//! Loopback ports for servers a test starts in another process.
//!
//! Binding port 0 and closing the socket again hands out a port from the
//! kernel's ephemeral range, the range every outgoing connection takes its
//! local port from: between the pick and the child's bind, a connection to
//! PostgreSQL or to another node can take it ("Address already in use").
//! The ports here lie below that range, where the kernel never assigns one
//! on its own, and are checked free before they are handed out.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The lowest port this picks from (below it are well-known services).
const FIRST: u32 = 20_000;

/// A free loopback port outside the ephemeral range: a restarted server can
/// listen on it again after a kill, and nothing but another explicit bind
/// can take it in between.
pub fn loopback_port() -> u16 {
    // Processes start at different places (pid and clock); within one
    // process the picks are consecutive, so two never coincide even before
    // either port is bound.
    static START: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    if ephemeral_low <= FIRST + 1_000 {
        // An unusual range leaves no room below it: fall back to the kernel.
        return std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a loopback port");
    }
    let span = ephemeral_low - FIRST;
    let start = *START.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        std::process::id().wrapping_mul(7_919) ^ nanos
    });
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST + start.wrapping_add(n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{ephemeral_low}");
}
