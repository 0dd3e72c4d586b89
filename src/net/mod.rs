//! Egress by name: the network policy of a sandboxed command and the proxy
//! that enforces it (issue 19, `docs/NETWORK.md`).
//!
//! A command under `network = "allowlist"` has no route out of its sandbox
//! except codewhale's own proxy. The proxy decides by the *name* the client
//! asked for (HTTP CONNECT authority, absolute-form URI, SOCKS5 domain),
//! resolves that name itself exactly once, refuses when any resolved
//! address is somewhere a sandbox must never reach (loopback, private,
//! link-local, cloud metadata, this host, ...), and dials the address it
//! vetted. Each piece is its own module so the pure parts are tested
//! everywhere:
//!
//! - [`policy`]: `off | on | allowlist`, allow/deny host patterns, named
//!   sets, the repository-override shrink rule; `decide(host, port)`.
//! - [`classify`]: what kind of address an IP is.
//! - [`covert`]: DNS-over-HTTPS resolver names, tunnel-shaped labels and
//!   DNS media types, refused unless an exact entry names the host.
//! - [`resolve`]: the system resolver and the fixed test resolver (the only
//!   seam through which a test name may point at loopback).
//! - [`gate`]: policy + resolution + classification = one verdict.
//! - [`limits`]: the per-command byte budget and connection rate limit.
//! - [`events`]: what each connection did, and the one-line summary.
//! - `proxy` (unix only): the listeners, HTTP (hyper) and SOCKS5
//!   (fast-socks5) front ends, and the metered relay.

#[cfg(target_os = "linux")]
pub mod bridge;
pub mod classify;
#[cfg(unix)]
pub mod connect;
pub mod covert;
pub mod events;
pub mod gate;
pub mod limits;
pub mod policy;

pub mod resolve;
pub mod spec;

#[cfg(unix)]
pub mod proxy;

pub use classify::{classify, AddressClass};
pub use events::{ConnectionEvent, Decision, EgressLog, EgressSummary, Protocol};
pub use gate::{Gate, Verdict};
pub use limits::{ByteBudget, Limits, RateLimiter};
pub use policy::{HostPattern, NetworkMode, NetworkPolicy, PolicyError, RuleMatch};
pub use resolve::{FixedResolver, Resolver};
pub use spec::{proxy_env, EgressSpec};
