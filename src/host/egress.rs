//! The host side of `network = "allowlist"`, shared by the local backends:
//! start the egress proxy for one command (a Unix socket for the bwrap
//! tier's bridge, a loopback TCP port for the landlock tier), give the
//! command its proxy environment, and turn the proxy's events into the
//! report's [`EgressReport`] when the command is done.

use std::path::PathBuf;

use crate::host::enforcement::{EgressReport, PartialItem, Shortfall};
use crate::host::BackendKind;
use crate::host::HostError;
use crate::net::classify::LocalAddrs;
use crate::net::proxy::thread::ProxyThread;
use crate::net::proxy::Listen;
use crate::net::{EgressSpec, FixedResolver, Gate, Resolver};

/// The port the bwrap tier's bridge listens on inside the sandbox's own
/// (empty) network namespace; nothing else can be there.
pub const BRIDGE_PORT: u16 = 3128;

/// The test seam: `name=ip[,ip][!loopback];...` answers those names
/// instead of the system resolver (tests build their world on loopback
/// without `/etc/hosts`). Its use is listed in every report. Read by
/// [`crate::seams`], only in test builds.
pub use crate::seams::TEST_RESOLVE as TEST_RESOLVE_ENV;

/// A running proxy for one command.
pub struct EgressRun {
    thread: ProxyThread,
    spec: EgressSpec,
    via: String,
    test_names: Vec<String>,
    /// The private directory holding the Unix socket (removed on drop).
    dir: Option<tempfile::TempDir>,
}

fn resolver(spec: &EgressSpec, backend: BackendKind) -> Result<(Resolver, Vec<String>), HostError> {
    let fixed = spec
        .test_resolve
        .clone()
        .or_else(crate::seams::test_resolve);
    match fixed {
        Some(spec) if !spec.trim().is_empty() => {
            let fixed = FixedResolver::parse(&spec).map_err(|e| HostError::Unavailable {
                backend,
                reason: format!("{TEST_RESOLVE_ENV}: {e}"),
                remedy: None,
            })?;
            let names = fixed.names().map(str::to_string).collect();
            Ok((Resolver::Fixed(fixed), names))
        }
        _ => Ok((Resolver::System, Vec::new())),
    }
}

fn gate(spec: &EgressSpec, backend: BackendKind) -> Result<(Gate, Vec<String>), HostError> {
    let policy = spec.policy().map_err(|e| HostError::Unavailable {
        backend,
        reason: format!("[sandbox.network]: {e}"),
        remedy: None,
    })?;
    let (resolver, names) = resolver(spec, backend)?;
    // Without the interface list only this host's *public* addresses could
    // slip through (every private range is refused anyway).
    let local = LocalAddrs::of_this_host().unwrap_or_default();
    Ok((Gate::new(policy, resolver, local, spec.limits()), names))
}

/// `GIT_SSH_COMMAND` for an allow-list command: git's ssh connects through
/// `codewhale __egress-connect` (the helper binary, or this executable),
/// so the proxy decides on the ssh host by name like on every other
/// connection. Empty when the binary's path cannot be quoted for ssh.
#[cfg(unix)]
pub fn ssh_env(helper_exe: Option<&std::path::Path>) -> Vec<(String, String)> {
    let exe = match helper_exe {
        Some(p) => Some(p.to_path_buf()),
        None => default_connect_exe(),
    };
    exe.and_then(|e| crate::net::connect::git_ssh_command(&e))
        .map(|v| vec![("GIT_SSH_COMMAND".to_string(), v)])
        .unwrap_or_default()
}

/// The binary that runs `__egress-connect` inside the sandbox: the small
/// helper binary on Linux (as the bwrap tier execs it), this executable
/// elsewhere (macOS: Seatbelt lets the command exec any readable binary).
#[cfg(target_os = "linux")]
fn default_connect_exe() -> Option<PathBuf> {
    crate::host::process::helper_exe().ok()
}

#[cfg(all(unix, not(target_os = "linux")))]
fn default_connect_exe() -> Option<PathBuf> {
    std::env::current_exe().ok()
}

fn io_err(what: &'static str) -> impl FnOnce(std::io::Error) -> HostError {
    move |e| HostError::io(what, e)
}

impl EgressRun {
    /// A proxy on a Unix socket in a fresh private directory under
    /// `$XDG_RUNTIME_DIR` (or the temp dir): the bwrap tier.
    pub fn start_unix(spec: &EgressSpec) -> Result<Self, HostError> {
        let (gate, test_names) = gate(spec, BackendKind::Bwrap)?;
        // A `TMPDIR` that does not exist (a fresh machine's, a removed
        // one) must not stop the run: `/tmp` then.
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .or_else(|| Some(std::env::temp_dir()).filter(|p| p.is_dir()))
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let dir = tempfile::Builder::new()
            .prefix("codewhale-egress-")
            .tempdir_in(&base)
            .map_err(io_err("creating the egress proxy's directory"))?;
        let sock = dir.path().join("proxy.sock");
        let thread = ProxyThread::start(
            gate,
            Listen {
                tcp: None,
                unix: Some(sock),
            },
        )
        .map_err(io_err("starting the egress proxy"))?;
        Ok(EgressRun {
            thread,
            spec: spec.clone(),
            via: format!(
                "unix socket bridged to 127.0.0.1:{BRIDGE_PORT} in the sandbox's empty network namespace"
            ),
            test_names,
            dir: Some(dir),
        })
    }

    /// A proxy on a free 127.0.0.1 port of the host: the landlock tier.
    pub fn start_tcp(spec: &EgressSpec) -> Result<Self, HostError> {
        Self::start_loopback(spec, BackendKind::Landlock)
    }

    /// A proxy on a free 127.0.0.1 port of the host for `backend` (the
    /// landlock tier and Seatbelt: both let the command connect to that
    /// one port and nothing else).
    pub fn start_loopback(spec: &EgressSpec, backend: BackendKind) -> Result<Self, HostError> {
        let (gate, test_names) = gate(spec, backend)?;
        let thread = ProxyThread::start(
            gate,
            Listen {
                tcp: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
                unix: None,
            },
        )
        .map_err(io_err("starting the egress proxy"))?;
        let via = match thread.tcp_addr {
            Some(a) => format!("host loopback {a}"),
            None => "host loopback".into(),
        };
        Ok(EgressRun {
            thread,
            spec: spec.clone(),
            via,
            test_names,
            dir: None,
        })
    }

    /// The Unix socket (bwrap tier).
    pub fn socket(&self) -> Option<PathBuf> {
        self.thread.unix_path.clone()
    }

    /// The directory holding the socket (bound into the sandbox).
    pub fn socket_dir(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.path().to_path_buf())
    }

    /// The TCP port on host loopback (landlock tier).
    pub fn tcp_port(&self) -> Option<u16> {
        self.thread.tcp_addr.map(|a| a.port())
    }

    /// Stop the proxy and build the report.
    pub fn finish(self) -> EgressReport {
        let (events, summary) = self.thread.finish();
        let line = summary.line();
        drop(self.dir);
        EgressReport {
            allow: self.spec.allow,
            deny: self.spec.deny,
            via: self.via,
            events,
            summary,
            line,
            test_resolver: self.test_names,
        }
    }
}

/// The partial lines every allowlist run reports, whatever the tier.
pub fn partial_lines(report: &EgressReport) -> Vec<PartialItem> {
    let mut v = vec![PartialItem::new(
        Shortfall::Network,
        "allowed hosts can receive whatever the command sends them (bounded by the byte cap)",
    )];
    if !report.test_resolver.is_empty() {
        v.push(PartialItem::new(
            Shortfall::Network,
            format!(
                "test resolver ({TEST_RESOLVE_ENV}) answered for {}",
                report.test_resolver.join(", ")
            ),
        ));
    }
    v
}
