//! Functional probes: real commands run through `host::run` under the
//! user's policy (mode `workspace-write`) in a throwaway workspace, with a
//! temporary HOME holding decoys. Each probe has its positive control and
//! checks host state afterwards, not just an exit code.
//!
//! The scratch directory lives in `/var/tmp` when possible: the sandbox
//! replaces `/tmp` with a private one, so decoys under `/tmp` would be
//! hidden for that reason alone and the deny-read probe would prove
//! nothing about the deny-read masks.

use super::parse::ProcStatus;
use super::report::{Row, Status};
use crate::host::{
    ExecOutcome, ExecRequest, ExitKind, HostError, HostSettings, PartialItem, Shortfall,
};
use crate::policy::SandboxPolicy;
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Per-probe timeout (a hung probe is a failed probe, not a hung doctor).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// What the in-sandbox connect probe prints when the connection succeeded.
pub const CONNECTED: &str = "connected";

/// The throwaway workspace, home and decoys.
pub struct Scratch {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub home: PathBuf,
    /// `<home>/.ssh/id_rsa`, holding [`Scratch::secret`].
    pub decoy: PathBuf,
    pub secret: String,
}

impl Scratch {
    /// Create it (in `/var/tmp` when writable, else the system temp dir).
    pub fn create() -> std::io::Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix("codewhale-doctor-")
            .tempdir_in("/var/tmp")
            .or_else(|_| {
                tempfile::Builder::new()
                    .prefix("codewhale-doctor-")
                    .tempdir()
            })?;
        let root = std::fs::canonicalize(dir.path())?;
        let workspace = root.join("workspace");
        let home = root.join("home");
        for d in [".git/hooks", ".git/objects", ".git/refs/heads"] {
            std::fs::create_dir_all(workspace.join(d))?;
        }
        std::fs::write(workspace.join(".git/HEAD"), "ref: refs/heads/main\n")?;
        std::fs::create_dir_all(home.join(".ssh"))?;
        let secret = format!("codewhale-doctor-decoy-{}", uuid::Uuid::new_v4());
        let decoy = home.join(".ssh/id_rsa");
        std::fs::write(&decoy, &secret)?;
        Ok(Scratch {
            _dir: dir,
            root,
            workspace,
            home,
            decoy,
            secret,
        })
    }

    /// Whether the scratch dir sits under `/tmp`, which the policy makes private.
    pub fn under_private_tmp(&self, policy: &SandboxPolicy) -> bool {
        policy.private_tmp && self.root.starts_with("/tmp")
    }
}

/// Everything the probes need.
pub struct ProbeCtx<'a> {
    pub policy: &'a SandboxPolicy,
    pub settings: &'a HostSettings,
    pub scratch: &'a Scratch,
    /// The codewhale binary (runs the in-sandbox connect probe).
    pub exe: &'a Path,
}

impl ProbeCtx<'_> {
    async fn run(&self, argv: &[&str]) -> Result<ExecOutcome, HostError> {
        let mut req = ExecRequest::new(argv.iter().map(|s| s.to_string()).collect());
        let mut env = BTreeMap::new();
        env.insert("HOME".to_string(), self.scratch.home.display().to_string());
        env.insert(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        );
        req.env = Some(env);
        req.timeout = Some(PROBE_TIMEOUT);
        req.output_cap = 64 * 1024;
        crate::host::run(self.policy, self.settings, req).await
    }
}

fn row(id: &str, status: Status, summary: impl Into<String>) -> Row {
    Row::new(id, "probe", status, summary)
}

fn outcome_detail(o: &ExecOutcome) -> String {
    let code = match o.exit {
        ExitKind::Code(c) => format!("exit {c}"),
        ExitKind::Signal(s) => format!("signal {s}"),
    };
    let err = o.stderr.text();
    let err = err.trim();
    if err.is_empty() {
        code
    } else {
        format!("{code}; stderr: {}", err.lines().next().unwrap_or(""))
    }
}

fn host_error(id: &str, tried: &str, e: &HostError) -> Row {
    row(
        id,
        Status::Fail,
        format!("{tried}: the sandbox did not run it ({e})"),
    )
}

/// A write inside the workspace succeeds, and the file is there afterwards.
pub async fn write_inside(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.write-inside";
    let target = cx.scratch.workspace.join("doctor-write-probe.txt");
    let t = target.display().to_string();
    let tried = format!("write {t} (inside the workspace)");
    match cx.run(&["sh", "-c", "printf ok > \"$1\"", "sh", &t]).await {
        Err(e) => host_error(id, &tried, &e),
        Ok(o) => {
            let on_host = std::fs::read_to_string(&target).ok();
            if o.exit == ExitKind::Code(0) && on_host.as_deref() == Some("ok") {
                row(
                    id,
                    Status::Ok,
                    format!("{tried}: succeeded, file present on the host"),
                )
            } else {
                row(id, Status::Fail, format!("{tried}: failed"))
                    .detail(outcome_detail(&o))
                    .detail(format!("on the host afterwards: {on_host:?}"))
            }
        }
    }
}

/// Exit code of the in-sandbox control step when it fails (distinct from
/// any code `sh` uses for a failed redirection).
const CONTROL_FAILED: i32 = 90;

/// One sandboxed `sh` that first writes `control` inside the workspace
/// (the in-sandbox positive control: the shell ran and can write where it
/// should), then tries `target`. `ok` needs the control on the host, a
/// failed target write, and no target on the host afterwards.
async fn denied_write(
    cx: &ProbeCtx<'_>,
    id: &str,
    target: &Path,
    tried: &str,
    control: &str,
) -> Row {
    let control = cx.scratch.workspace.join(control);
    let (c, t) = (control.display().to_string(), target.display().to_string());
    let script = format!("printf c > \"$1\" || exit {CONTROL_FAILED}; printf x > \"$2\"");
    match cx.run(&["sh", "-c", &script, "sh", &c, &t]).await {
        Err(e) => host_error(id, tried, &e),
        Ok(o) => {
            let exists = target.exists();
            let control_ok = std::fs::read_to_string(&control).ok().as_deref() == Some("c");
            if !control_ok || o.exit == ExitKind::Code(CONTROL_FAILED) {
                row(
                    id,
                    Status::Fail,
                    format!("{tried}: the in-sandbox control write to {c} failed"),
                )
                .detail(outcome_detail(&o))
            } else if o.exit != ExitKind::Code(0) && !exists {
                row(
                    id,
                    Status::Ok,
                    format!("{tried}: denied, absent on the host afterwards"),
                )
                .detail(outcome_detail(&o))
                .detail(format!("control: the same shell wrote {c}"))
            } else {
                row(id, Status::Fail, format!("{tried}: NOT denied"))
                    .detail(outcome_detail(&o))
                    .detail(format!("exists on the host afterwards: {exists}"))
            }
        }
    }
}

/// A write outside every writable root fails, and nothing appears.
pub async fn write_outside(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.write-outside";
    let target = cx.scratch.root.join("outside-probe.txt");
    let tried = format!("write {} (outside the workspace)", target.display());
    // Host-side control: this user can write there without the sandbox.
    if let Err(e) = std::fs::write(cx.scratch.root.join("outside-control.txt"), "control") {
        return row(
            id,
            Status::Fail,
            format!("{tried}: host-side control failed ({e})"),
        );
    }
    denied_write(cx, id, &target, &tried, "outside-control.txt").await
}

/// `.git/hooks` stays read-only inside the writable workspace.
pub async fn protected(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.protected-path";
    let hook = cx.scratch.workspace.join(".git/hooks/pre-commit");
    let tried = format!("write {} (write-protected .git/hooks)", hook.display());
    denied_write(cx, id, &hook, &tried, "hooks-control.txt").await
}

/// The deny-read decoy under the temporary HOME cannot be read, while a
/// control file in the workspace is read by the same shell.
pub async fn deny_read(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.deny-read";
    let d = cx.scratch.decoy.display().to_string();
    let tried = format!("read the decoy {d} (deny-read ~/.ssh)");
    let control = cx.scratch.workspace.join("read-control.txt");
    let marker = "codewhale-doctor-read-control";
    // Host-side control: the decoy is readable without the sandbox.
    if std::fs::read_to_string(&cx.scratch.decoy).ok().as_deref() != Some(&cx.scratch.secret)
        || std::fs::write(&control, marker).is_err()
    {
        return row(
            id,
            Status::Fail,
            format!("{tried}: host-side control failed"),
        );
    }
    let c = control.display().to_string();
    let script = format!("cat \"$1\" || exit {CONTROL_FAILED}; echo; cat \"$2\"");
    match cx.run(&["sh", "-c", &script, "sh", &c, &d]).await {
        Err(e) => host_error(id, &tried, &e),
        Ok(o) => {
            let out = o.stdout.text();
            let mut r = if !out.contains(marker) {
                row(
                    id,
                    Status::Fail,
                    format!("{tried}: the in-sandbox control read of {c} failed"),
                )
            } else if out.contains(&cx.scratch.secret) {
                row(id, Status::Fail, format!("{tried}: the secret was READ"))
            } else {
                row(id, Status::Ok, format!("{tried}: unreadable"))
                    .detail(format!("control: the same shell read {c}"))
            }
            .detail(outcome_detail(&o));
            if cx.scratch.under_private_tmp(cx.policy) {
                r = r.detail("note: the decoy lives under /tmp, which the sandbox also replaces by a private /tmp (/var/tmp was not usable)");
            }
            r
        }
    }
}

/// Network to a loopback listener the probe opens is blocked.
pub async fn network(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.network";
    if cx.policy.network {
        return row(
            id,
            Status::Skip,
            "network is allowed by your [sandbox] network setting: not probed as blocked",
        );
    }
    let (listener, addr) = match loopback_listener() {
        Ok(l) => l,
        Err(why) => return row(id, Status::Fail, why),
    };
    let tried = format!("connect to a loopback listener at {addr} (network off)");
    // Positive control: the listener accepts a connection from the host.
    if !control_connect(&listener, addr) {
        return row(
            id,
            Status::Fail,
            format!("{tried}: positive control failed"),
        );
    }
    let a = addr.to_string();
    let exe = cx.exe.display().to_string();
    match cx.run(&[&exe, "doctor", "--connect-probe", &a]).await {
        Err(e) => host_error(id, &tried, &e),
        Ok(o) => {
            let out = o.stdout.text();
            let saw = match listener.accept() {
                Ok(_) => true,
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            };
            let ran = o.exit == ExitKind::Code(0);
            if ran && out.trim_start().starts_with("blocked") && !saw {
                row(
                    id,
                    Status::Ok,
                    format!("{tried}: blocked, the listener saw nothing"),
                )
                .detail(format!("in the sandbox: {}", out.trim()))
                .detail("control: the host connected to the same listener")
            } else if !ran {
                row(id, Status::Fail, format!("{tried}: the probe did not run"))
                    .detail(outcome_detail(&o))
            } else {
                row(id, Status::Fail, format!("{tried}: NOT blocked"))
                    .detail(format!("in the sandbox: {}", out.trim()))
                    .detail(format!("listener saw a connection: {saw}"))
            }
        }
    }
}

/// A non-blocking listener on an ephemeral loopback port for a probe to
/// aim at (the network and egress probes count what reaches it), or why
/// none could be opened (the probe's `fail` summary).
fn loopback_listener() -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| {
            l.set_nonblocking(true)?;
            Ok(l)
        })
        .map_err(|e| format!("could not open a loopback listener: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("loopback listener: {e}"))?;
    Ok((listener, addr))
}

fn control_connect(listener: &TcpListener, addr: SocketAddr) -> bool {
    if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
        return false;
    }
    for _ in 0..100 {
        match listener.accept() {
            Ok(_) => return true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(_) => return false,
        }
    }
    false
}

/// `/proc/self/status` inside the sandbox: `NoNewPrivs` and capabilities.
pub async fn status(cx: &ProbeCtx<'_>) -> (Vec<Row>, Option<ExecOutcome>) {
    let tried = "read /proc/self/status in the sandbox";
    match cx.run(&["cat", "/proc/self/status"]).await {
        Err(e) => (
            vec![
                host_error("probe.no-new-privs", tried, &e),
                host_error("probe.capabilities", tried, &e),
            ],
            None,
        ),
        Ok(o) => {
            let s = ProcStatus::parse(&o.stdout.text());
            let nnp = if s.no_new_privs == Some(1) {
                row(
                    "probe.no-new-privs",
                    Status::Ok,
                    format!("{tried}: NoNewPrivs = 1"),
                )
            } else {
                row(
                    "probe.no-new-privs",
                    Status::Fail,
                    format!("{tried}: NoNewPrivs = {:?}", s.no_new_privs),
                )
                .detail(outcome_detail(&o))
            };
            let caps_zero = s.cap_eff == Some(0) && s.cap_prm == Some(0);
            let caps = row(
                "probe.capabilities",
                if caps_zero { Status::Ok } else { Status::Fail },
                format!(
                    "{tried}: CapEff = {}, CapPrm = {}",
                    hex(s.cap_eff),
                    hex(s.cap_prm)
                ),
            );
            (vec![nnp, caps], Some(o))
        }
    }
}

fn hex(v: Option<u64>) -> String {
    v.map(|v| format!("{v:016x}"))
        .unwrap_or_else(|| "(missing)".into())
}

/// The in-sandbox half of the network probe (`doctor --connect-probe ADDR`):
/// print `connected` or `blocked: <error>`.
pub fn connect_probe(addr: SocketAddr) -> String {
    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(_) => CONNECTED.to_string(),
        Err(e) => format!("blocked: {e}"),
    }
}

/// The in-sandbox half of the egress probe (`doctor --egress-probe
/// HOST:PORT`): a SOCKS5 `CONNECT` by name (the `fast-socks5` client)
/// through the proxy in `ALL_PROXY`; prints `connected` or `blocked: …`.
pub fn egress_probe(target: &str) -> String {
    let Some((host, port)) = target
        .rsplit_once(':')
        .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h.to_string(), p)))
    else {
        return format!("blocked: bad target {target}");
    };
    let proxy = std::env::var("ALL_PROXY")
        .or_else(|_| std::env::var("all_proxy"))
        .ok()
        .and_then(|u| {
            u.strip_prefix("socks5h://")
                .and_then(|a| a.trim_end_matches('/').parse::<SocketAddr>().ok())
        });
    let Some(proxy) = proxy else {
        return "blocked: no socks5h:// proxy in ALL_PROXY".into();
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return format!("blocked: runtime: {e}"),
    };
    rt.block_on(async {
        let c = fast_socks5::client::Socks5Stream::connect(
            proxy,
            host,
            port,
            fast_socks5::client::Config::default(),
        );
        match tokio::time::timeout(Duration::from_secs(3), c).await {
            Ok(Ok(_)) => CONNECTED.to_string(),
            Ok(Err(e)) => format!("blocked: {e}"),
            Err(_) => "blocked: timed out".into(),
        }
    })
}

/// The test names of the egress probe; they resolve only through the
/// probe's own fixed table (`EgressSpec::test_resolve`), never via DNS.
const EGRESS_ALLOWED: &str = "allowed.egress-probe.codewhale.invalid";
const EGRESS_DENIED: &str = "denied.egress-probe.codewhale.invalid";

/// `network = "allowlist"` holds here: a command in the sandbox reaches an
/// allowed name through codewhale's egress proxy (positive control), and
/// neither a name outside the list nor a direct connect reaches the same
/// loopback listener, which accepts exactly one connection.
pub async fn egress(cx: &ProbeCtx<'_>) -> Row {
    let id = "probe.egress";
    let (listener, addr) = match loopback_listener() {
        Ok(l) => l,
        Err(why) => return row(id, Status::Fail, why),
    };
    let tried = format!(
        "network = \"allowlist\" with only {EGRESS_ALLOWED}: connect by name through the egress proxy, a name not allowed, and a direct connect, all to {addr}"
    );
    let mut spec = crate::net::EgressSpec::new(vec![EGRESS_ALLOWED.into()], Vec::new());
    spec.test_resolve = Some(format!(
        "{EGRESS_ALLOWED}={ip}!loopback;{EGRESS_DENIED}={ip}!loopback",
        ip = addr.ip()
    ));
    let mut policy = cx.policy.clone();
    policy.network = false;
    policy.egress = Some(spec);
    let exe = cx.exe.display().to_string();
    let port = addr.port();
    let script = format!(
        "echo \"allowed:$(\"$1\" doctor --egress-probe {EGRESS_ALLOWED}:{port})\"; \
         echo \"denied:$(\"$1\" doctor --egress-probe {EGRESS_DENIED}:{port})\"; \
         echo \"direct:$(\"$1\" doctor --connect-probe {addr})\""
    );
    let sub = ProbeCtx {
        policy: &policy,
        settings: cx.settings,
        scratch: cx.scratch,
        exe: cx.exe,
    };
    match sub.run(&["sh", "-c", &script, "sh", &exe]).await {
        Err(HostError::Unavailable { reason, .. }) => row(
            id,
            Status::Warn,
            format!("partial: the egress allow-list cannot be enforced with this backend here: {reason}"),
        )
        .fix("use the bwrap tier (user namespaces), or a kernel with Landlock ABI 4 for the landlock tier"),
        Err(e) => host_error(id, &tried, &e),
        Ok(o) => {
            let out = o.stdout.text();
            let mut accepted = 0;
            while listener.accept().is_ok() {
                accepted += 1;
            }
            let line = |k: &str| {
                out.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .unwrap_or("(no output)")
                    .to_string()
            };
            let (allowed, denied, direct) = (line("allowed:"), line("denied:"), line("direct:"));
            let partial: Vec<String> = o
                .enforcement
                .partial
                .iter()
                .filter(|p| p.item == Shortfall::Network)
                .map(|p| p.reason.clone())
                // Always listed for an allow-list, and the probe's own
                // names: not a weakness of this machine (shown as notes).
                .filter(|r| !r.contains("test resolver") && !r.starts_with("allowed hosts can receive"))
                .collect();
            let details = |r: Row| {
                r.detail(format!("allowed name: {allowed}"))
                    .detail(format!("name not in the list: {denied}"))
                    .detail(format!("direct connect: {direct}"))
                    .detail(format!("the listener accepted {accepted} connection(s)"))
                    .detail("note: an allowed host still receives whatever a command sends it (bounded by the byte cap)")
            };
            let held = allowed == CONNECTED
                && denied.starts_with("blocked")
                && direct.starts_with("blocked")
                && accepted == 1;
            if !held {
                let why = if allowed != CONNECTED {
                    "the allowed name did not connect (positive control failed)"
                } else {
                    "a refused way out reached the listener"
                };
                details(row(id, Status::Fail, format!("{tried}: {why}"))).detail(outcome_detail(&o))
            } else if !partial.is_empty() {
                details(row(
                    id,
                    Status::Warn,
                    format!("{tried}: held, partial: {}", partial.join("; ")),
                ))
            } else {
                details(row(id, Status::Ok, format!("{tried}: held")))
            }
        }
    }
}

/// Run every probe concurrently; returns the rows and one outcome whose
/// enforcement report describes the probe runs.
pub async fn run_all(cx: &ProbeCtx<'_>) -> (Vec<Row>, Option<ExecOutcome>) {
    let (a, b, c, d, e, f, (mut st, outcome)) = tokio::join!(
        write_inside(cx),
        write_outside(cx),
        deny_read(cx),
        protected(cx),
        network(cx),
        egress(cx),
        status(cx)
    );
    let d = known_limitation(
        d,
        &cx.scratch.workspace.join(".git/hooks"),
        outcome.as_ref(),
    );
    let mut rows = vec![a, b, c, d, e, f];
    rows.append(&mut st);
    (rows, outcome)
}

/// A probe that failed on an item the backend itself reports as not
/// enforced (e.g. the landlock tier cannot keep `.git/hooks` read-only
/// inside the writable workspace) is a known, declared limitation: `warn`
/// with the backend's own line, not `fail`. Anything undeclared stays `fail`.
fn known_limitation(mut r: Row, path: &Path, outcome: Option<&ExecOutcome>) -> Row {
    if r.status != Status::Fail {
        return r;
    }
    let needle = path.to_string_lossy();
    let declared = outcome.and_then(|o| {
        o.enforcement
            .partial
            .iter()
            .find(|p| {
                p.item != Shortfall::OverRestricted
                    && (p.path.as_deref() == Some(path) || p.line().contains(needle.as_ref()))
            })
            .map(PartialItem::line)
    });
    if let Some(line) = declared {
        r.status = Status::Warn;
        r = r
            .detail(format!("declared by the backend: {line}"))
            .fix("install bubblewrap (the bwrap backend enforces this); see docs/LANDLOCK.md");
    }
    r
}
