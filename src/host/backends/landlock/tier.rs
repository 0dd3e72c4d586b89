//! The landlock tier backend (`--backend landlock`): no namespaces at all,
//! for machines where bubblewrap is missing or cannot create namespaces.
//!
//! The parent plans the ruleset ([`Tier::NoNamespaces`], with a per-run
//! directory as `TMPDIR`/`TMP`/`TEMP`) and builds it in the kernel, or
//! reuses one it built for the same resolved policy while nothing it
//! depends on changed (see `landlock_cache`). The forked stage (see
//! `stage`, no helper exec) then starts the command with a new
//! session, no_new_privs, every capability dropped, the ruleset and the
//! seccomp filter (network off: every socket family but AF_UNIX, and
//! `socket(AF_UNIX)` too, so host unix sockets such as docker.sock or an
//! ssh-agent cannot be reached; Landlock at ABI 7 cannot restrict
//! `connect()` to a named socket), and reports on the status pipe.
//! Supervision and env scrubbing are the shared ones (`supervise`,
//! `EnvPolicy::apply`).
//!
//! Without a pid namespace there is no kernel-side "kill the sandbox": the
//! stage is the subreaper of the command's tree and kills every
//! descendant itself (see `reaper`) when the command exits, on timeout
//! (the lifeline is closed) and when codewhale dies (the lifeline hangs
//! up). Signals and ptrace towards host processes are denied by Landlock's
//! signal scope (ABI ≥ 6) and seccomp's ptrace rule.

use crate::host::backends::landlock::cache as landlock_cache;
use crate::host::backends::landlock::mask;
use crate::host::backends::landlock::opener;
use crate::host::backends::landlock::stage::{
    read_stage_status, Command as StageCommand, Stage, StageStatus, Step,
};
use crate::host::backends::landlock::{
    self, LandlockOptions, LandlockPlan, PartialKind, PrivateNet, Tier,
};
use crate::host::child_env::ChildEnv;
use crate::host::enforcement::{
    Enforcement, EnforcementLevel, LandlockReport, LandlockStatus, Namespace, NetworkEnforcer,
    PartialItem, Revert, SeccompReport, Shortfall,
};
use crate::host::process::supervise;
use crate::host::request::{ExecOutcome, ExecRequest};
use crate::host::seccomp::{denied_names, SeccompOptions};
use crate::host::{BackendKind, HostError};
use crate::policy::HoleStrategy;
use crate::policy::ResolvedPolicy;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The test seam capping the Landlock ABI (owned by [`crate::seams`]).
pub use crate::seams::{landlock_max_abi as max_abi_seam, LANDLOCK_MAX_ABI as MAX_ABI_ENV};

/// The Landlock ABI this tier would use (kernel, capped by the seam).
pub fn effective_abi() -> u32 {
    let k = landlock::kernel_abi();
    max_abi_seam().map_or(k, |m| m.min(k))
}

/// Why the tier cannot run here, or `Ok` when Landlock enforces something.
pub fn available() -> Result<(), String> {
    if effective_abi() > 0 {
        return Ok(());
    }
    Err(if landlock::kernel_abi() == 0 {
        "the kernel has no Landlock (needs Linux ≥ 5.13 with CONFIG_SECURITY_LANDLOCK=y and \
         `landlock` in the active LSM list)"
            .into()
    } else {
        format!("Landlock disabled by the test seam {MAX_ABI_ENV}=0")
    })
}

/// What to tell the user to do when the landlock tier is unavailable.
pub const REMEDY: &str = "enable Landlock (boot with lsm=landlock,... on a kernel built with \
     CONFIG_SECURITY_LANDLOCK=y, Linux ≥ 5.13), or install bubblewrap with working user \
     namespaces; --allow-unsandboxed runs without a sandbox (labelled unsandboxed)";

fn unavailable(reason: String) -> HostError {
    HostError::Unavailable {
        backend: crate::host::BackendKind::Landlock,
        reason,
        remedy: Some(REMEDY.into()),
    }
}

/// The options this tier plans with (kernel ABI, seam, per-run tmp dir,
/// the policy's hole strategies from `[sandbox.landlock]`).
pub fn options(policy: &ResolvedPolicy, tmp_dir: Option<PathBuf>) -> LandlockOptions {
    let mut opts = LandlockOptions::detect(Tier::NoNamespaces);
    opts.max_abi = max_abi_seam();
    opts.tmp_dir = tmp_dir;
    opts.deny_read_in_writable = policy.landlock.deny_read_in_writable;
    opts.protect_in_writable = policy.landlock.protect_in_writable;
    // Probed (one fork, once per process) only when there is something to
    // mask: an existing deny-read item inside a writable root.
    if opts.deny_read_in_writable == HoleStrategy::Carve && has_deny_read_in_writable(policy) {
        match mask::choose(opts.deny_read_in_writable, &mask::probe(), mask::seam_off()) {
            Ok(via) => opts.mask = Some(via),
            Err(why) => opts.mask_fallback = Some(why),
        }
    }
    // With the network off, a network namespace of the command's own keeps
    // its loopback usable (a test server) and everything else out of
    // reach. Under "allowlist" the proxy listens on the host's loopback,
    // which a private namespace could not reach.
    if !policy.network {
        if policy.egress.is_some() {
            opts.private_net_fallback =
                Some("network = \"allowlist\" reaches its proxy on the host's loopback".into());
        } else {
            match mask::probe_net() {
                mask::Probe::Available(via) => opts.private_net = Some(PrivateNet::Stage(via)),
                mask::Probe::Unavailable(why) => opts.private_net_fallback = Some(why),
            }
        }
    }
    opts
}

/// Whether an existing deny-read item (not a symlink) lies inside a
/// writable root: what the mask strategy would cover.
fn has_deny_read_in_writable(policy: &ResolvedPolicy) -> bool {
    use crate::policy::resolve::PathKind;
    policy
        .deny_read
        .iter()
        .filter(|e| !matches!(e.kind, PathKind::Symlink | PathKind::Missing))
        .any(|e| {
            let real = landlock::complement::real_location(&e.path);
            policy
                .writable_roots
                .iter()
                .any(|r| real.starts_with(&r.path) && real != r.path)
        })
}

/// The seccomp options of this tier: with the network off, `socket()` of
/// every family (AF_UNIX included) is denied, except IP sockets when the
/// command has a network namespace of its own (`private_net`: only its
/// own loopback); `socketpair` stays.
pub fn seccomp_options(network: bool, private_net: bool) -> SeccompOptions {
    SeccompOptions {
        network,
        deny_unix_socket: !network,
        stream_only: false,
        private_net: !network && private_net,
    }
}

/// Run `req` under the landlock tier. `note` (e.g. why `auto` fell back
/// here) is added to the report's partial list.
pub fn run(
    policy: &ResolvedPolicy,
    req: &ExecRequest,
    env: &ChildEnv,
    note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    match run_once(policy, req, env.clone(), note.clone(), None) {
        // The mask could not be set up although the probe said it could
        // (the command did not run): the carve and the opener instead.
        Err(Attempt::MaskFailed(why)) => {
            // Remembered: later runs of this process go straight to the
            // fallback instead of failing the same set-up first.
            let _ = MASK_FAILED.set(why.clone());
            match run_once(policy, req, env.clone(), note, Some(why)) {
                Ok(o) => Ok(o),
                Err(Attempt::Host(e)) => Err(e),
                Err(Attempt::MaskFailed(why)) => Err(unavailable(why)),
            }
        }
        Ok(o) => Ok(o),
        Err(Attempt::Host(e)) => Err(e),
    }
}

/// Why the mask failed to set up in this process, once it has (the probe
/// said it would work): every later run uses the fallback directly.
static MASK_FAILED: OnceLock<String> = OnceLock::new();

/// Why one attempt of [`run`] did not produce an outcome.
enum Attempt {
    Host(HostError),
    /// The mask step failed before the command ran (the reason).
    MaskFailed(String),
}

impl From<HostError> for Attempt {
    fn from(e: HostError) -> Self {
        Attempt::Host(e)
    }
}

fn run_once(
    policy: &ResolvedPolicy,
    req: &ExecRequest,
    mut env: ChildEnv,
    note: Option<String>,
    mask_failed: Option<String>,
) -> Result<ExecOutcome, Attempt> {
    available().map_err(unavailable)?;
    // network = "allowlist": the proxy on a free host loopback port, the
    // only TCP port Landlock lets the command connect to.
    let egress = match &policy.egress {
        Some(spec) if !policy.network => Some(crate::host::egress::EgressRun::start_tcp(spec)?),
        _ => None,
    };
    let opts = run_options(
        policy,
        mask_failed,
        egress.as_ref().and_then(|e| e.tcp_port()),
    );
    let entry = landlock_cache::checkout(policy, &opts, unavailable)?;
    let prepared = entry.ruleset()?;
    if egress.is_some() && prepared.report().abi < 4 {
        // Fail closed: without Landlock's TCP rules nothing would keep
        // the command from connecting anywhere directly.
        return Err(Attempt::Host(unavailable(format!(
            "network = \"allowlist\" needs Landlock ABI 4 (TCP connect rules) in this tier; \
             in effect: ABI {}",
            prepared.report().abi
        ))));
    }
    if !prepared.enforces_anything() {
        return Err(Attempt::Host(unavailable(
            "Landlock would enforce nothing on this kernel".into(),
        )));
    }
    let tmp_path = entry.tmp_path.clone();
    let report = prepared.report().clone();

    let (read_end, write_end): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HostError::io("creating the status pipe", e.into()))?;
    let (life_read, life_write): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HostError::io("creating the lifeline pipe", e.into()))?;
    let seccomp = if egress.is_some() {
        SeccompOptions::for_allowlist()
    } else {
        seccomp_options(policy.network, entry.plan.private_net.is_some())
    };
    let tmp_str = tmp_path.to_string_lossy().into_owned();
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.insert(k, tmp_str.clone());
    }
    if let Some(port) = egress.as_ref().and_then(|e| e.tcp_port()) {
        env.extend(crate::net::proxy_env(port));
        env.extend(crate::host::egress::ssh_env(None));
    }
    let Some(program) = req.argv.first() else {
        return Err(Attempt::Host(HostError::NotFound(String::new())));
    };
    let cwd = req.cwd.clone().unwrap_or_else(|| policy.workspace.clone());
    // Looked up here, with the command's PATH, as a shell would; whether
    // the sandbox lets it run is the kernel's answer to `execve`.
    // A name with a slash is taken as is (relative to the cwd), as a
    // shell does: `execve` then says not found or not executable.
    let path = if program.contains('/') {
        cwd.join(program)
    } else {
        which::which_in(program, env.get("PATH"), &cwd)
            .map_err(|_| HostError::NotFound(program.clone()))?
    };
    let mut stage = Stage::new(
        prepared,
        &seccomp,
        write_end.as_raw_fd(),
        life_read.as_raw_fd(),
        StageCommand {
            path: &path,
            argv: &req.argv,
            env: env
                .vars()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: &cwd,
        },
    )
    .map_err(|e| unavailable(e.to_string()))?;
    // The mask strategy: the command's half mounts over each deny-read
    // item inside a writable root in its own mount namespace.
    let private_net = match entry.plan.private_net {
        Some(PrivateNet::Stage(via)) => Some(via),
        _ => None,
    };
    let mask_via = match (entry.plan.mask_via, entry.plan.masks.is_empty()) {
        (Some(via), false) => Some(via),
        _ => None,
    };
    // The mask's step also makes the private network namespace; with
    // nothing to mask it makes only the namespaces.
    let masked = match mask_via.or(private_net) {
        Some(via) => {
            let targets = if mask_via.is_some() {
                entry.plan.masks.as_slice()
            } else {
                &[]
            };
            let Some(spec) = mask::MaskSpec::new(via, targets, &tmp_path) else {
                return Err(Attempt::MaskFailed(
                    "a masked path contains a NUL byte".into(),
                ));
            };
            let spec = spec.with_net(private_net.is_some());
            stage = stage
                .with_mask(spec)
                .map_err(|e| unavailable(e.to_string()))?;
            true
        }
        None => false,
    };
    // A carve inside a writable root: the opener serves reads of the
    // command's new entries there (see `opener`).
    let opener = start_opener(policy, &entry.plan)?;
    let command_sock = match opener {
        OpenerRun::Running {
            ref command_end, ..
        } => Some(command_end.as_raw_fd()),
        _ => None,
    };
    if let (Some(sock), Some(prog)) = (command_sock, opener::bpf::this_arch()) {
        stage = stage.with_opener(prog, sock);
    }
    // Landlock cannot withhold single names inside a directory the command
    // may create files in (it would forbid `git commit`'s index.lock and
    // every new file in the workspace root), so every protected path inside
    // a writable root is guarded by the after-run integrity check.
    let paths: Vec<PathBuf> = policy.protected.iter().map(|e| e.path.clone()).collect();
    let targets = crate::host::integrity::targets(policy, &paths);
    let guard = crate::host::integrity::RunGuard::enter(&policy.workspace, &targets)?;
    // The fallback lets the command rename a deny-read file in its
    // directory: each is renamed back after the run (see `renamed`).
    let watched = if entry.plan.deny_read_strategy == mask::DenyReadStrategy::CarveOpener {
        landlock::renamed::record(policy)
    } else {
        Vec::new()
    };
    // ... and, should codewhale die first, by the crash recovery.
    let persisted = landlock::renamed::persist(guard.run_dir(), &watched).map_err(|e| {
        HostError::io(
            "recording the deny-read files for the crash recovery",
            std::io::Error::other(e),
        )
    })?;
    // The stage holds the run's lock too: if codewhale is SIGKILLed, the
    // run stays "live" (no other command checks against its baseline)
    // until the stage has killed and reaped every process of the tree.
    let stage = stage.with_held_fd(guard.lock_fd());
    let sup = supervise::run_raw(|ends| stage.spawn(ends), req, life_write);
    // Our copies: the stage had its own from the moment it ran.
    drop((write_end, life_read));
    let opener_items = opener.finish();
    let status = read_stage_status(read_end);
    // The stage (subreaper of the command's tree) killed every descendant
    // before it exited, and supervision waited for it: nothing writes now.
    // Renamed back while this run still holds its lock (a crash recovery
    // started meanwhile cannot race it), then the list is dropped.
    let moved_back = landlock::renamed::restore(&watched);
    if let Some(p) = persisted {
        let _ = std::fs::remove_file(p);
    }
    let unguarded = guard.unguarded.clone();
    let mut reverts = guard.recovered.clone();
    reverts.extend(guard.leave());
    if masked {
        if let StageStatus::Failed { step, error } = &status {
            if step == Step::Mask.what() {
                return Err(Attempt::MaskFailed(error.clone()));
            }
        }
    }
    let sup = match (sup, &status) {
        (Ok(s), _) => s,
        (Err(e), StageStatus::Failed { step, error }) => {
            return Err(Attempt::Host(unavailable(format!(
                "{step}: {error} (the command did not run; spawn: {e})"
            ))))
        }
        (Err(HostError::Io { context, source }), _) => {
            return Err(Attempt::Host(unavailable(format!(
                "{context}: {source} (starting the sandbox stage failed)"
            ))))
        }
        (Err(other), _) => return Err(Attempt::Host(other)),
    };
    // The ruleset was applied (a command that is not found or not
    // executable says nothing against it): keep it for the next run.
    let applied = matches!(status, StageStatus::Applied | StageStatus::ExecFailed(_));
    let outcome = stage_outcome(status, &sup, program, &path);
    let result = outcome.map(|()| {
        // The stage checked no_new_privs, the empty capability sets and
        // the seccomp filter before the command ran.
        let seccomp = SeccompReport {
            installed: true,
            denied: denied_names(&seccomp),
        };
        enforcement(policy, &entry.plan, report, seccomp, env.removed().to_vec())
    });
    if applied {
        landlock_cache::give_back(entry);
    }
    let mut enforcement = result?;
    after_run(
        &mut enforcement,
        AfterRun {
            egress,
            targets: &targets,
            unguarded: &unguarded,
            reverts,
            moved_back,
            opener_items,
            note,
        },
    );
    Ok(sup.into_outcome(enforcement))
}

/// The ruleset options of one run: the planned ones, without the mask
/// (and its private network) once the mask failed to set up in this
/// process or this run, and the egress proxy's port as the only TCP
/// connect allowed.
fn run_options(
    policy: &ResolvedPolicy,
    mask_failed: Option<String>,
    egress_port: Option<u16>,
) -> LandlockOptions {
    let mut opts = options(policy, None);
    let mask_failed = mask_failed.or_else(|| opts.mask.and(MASK_FAILED.get().cloned()));
    if let Some(why) = mask_failed {
        opts.mask = None;
        opts.mask_fallback = Some(format!("the mask failed when the run was set up: {why}"));
        if opts.private_net.take().is_some() {
            opts.private_net_fallback = Some(format!(
                "the namespace step failed when the run was set up: {why}"
            ));
        }
    }
    if let Some(port) = egress_port {
        opts.connect_ports = vec![port];
    }
    opts
}

/// What the stage's status line says about the run: the command ran
/// under every protection, or why it did not (a set-up step that failed
/// is the tier unavailable; an exec that failed is the shell's answer).
fn stage_outcome(
    status: StageStatus,
    sup: &supervise::Supervised,
    program: &str,
    path: &Path,
) -> Result<(), HostError> {
    match status {
        StageStatus::Applied => Ok(()),
        StageStatus::Failed { step, error } => Err(unavailable(format!("{step}: {error}"))),
        // Every protection was in force and exec failed: shell semantics.
        StageStatus::ExecFailed(libc::ENOENT) => Err(HostError::NotFound(program.to_string())),
        StageStatus::ExecFailed(errno) => Err(HostError::NotExecutable {
            path: path.to_path_buf(),
            reason: std::io::Error::from_raw_os_error(errno).to_string(),
        }),
        StageStatus::Silent if sup.timed_out => Err(unavailable(
            "timed out before the sandbox was set up".into(),
        )),
        StageStatus::Silent => Err(unavailable(format!(
            "the sandbox stage did not report: {}",
            String::from_utf8_lossy(&sup.stderr.bytes).trim()
        ))),
    }
}

/// What happened after the command, for the report.
struct AfterRun<'a> {
    egress: Option<crate::host::egress::EgressRun>,
    targets: &'a [crate::host::integrity::Target],
    unguarded: &'a [(PathBuf, String)],
    reverts: Vec<Revert>,
    moved_back: Vec<Revert>,
    opener_items: Vec<PartialItem>,
    note: Option<String>,
}

/// The report's after-run part: the egress proxy's account, the
/// integrity check's reverts, renamed deny-read files put back, the
/// opener's items and a fallback's note.
fn after_run(e: &mut Enforcement, a: AfterRun<'_>) {
    if let Some(run) = a.egress {
        let port = run.tcp_port().unwrap_or(0);
        let report = run.finish();
        e.network_enforced_by
            .push(crate::host::enforcement::NetworkEnforcer::EgressProxy);
        e.partial.push(crate::host::enforcement::PartialItem::new(
            crate::host::enforcement::Shortfall::Network,
            format!(
                "Landlock's TCP rules are per port, not per address: connect to port {port} \
                 is allowed on every address, so a server listening on that port elsewhere is \
                 reachable directly (the bwrap tier has no such gap)"
            ),
        ));
        e.partial
            .extend(crate::host::egress::partial_lines(&report));
        e.level = EnforcementLevel::Partial;
        e.egress = Some(report);
    }
    e.partial.extend(crate::host::integrity::report_items(
        a.targets,
        a.unguarded,
        &a.reverts,
        "Landlock cannot keep single paths read-only inside a writable root without \
             forbidding new files in their directories, so the command can write them",
    ));
    if !a.reverts.is_empty() {
        e.level = EnforcementLevel::Partial;
    }
    for m in &a.moved_back {
        e.partial.push(PartialItem::at(
            Shortfall::DenyRead,
            m.path.clone(),
            format!(
                "carve+opener: renamed during the run (its content stayed unreadable), put back after it: {}",
                m.line()
            ),
        ));
        e.level = EnforcementLevel::Partial;
    }
    e.reverted = a.reverts;
    e.reverted.extend(a.moved_back);
    e.partial.extend(a.opener_items);
    if let Some(n) = a.note {
        e.partial
            .insert(0, PartialItem::new(Shortfall::Fallback, n));
    }
}

/// The opener of one run (see `opener`).
enum OpenerRun {
    /// Nothing is carved inside a writable root.
    NotNeeded,
    /// Needed but not set up (the reason goes into the report).
    Off { roots: Vec<PathBuf>, why: String },
    Running {
        roots: Vec<PathBuf>,
        supervisor: opener::Supervisor,
        /// The command's end of the socketpair (the stage has its own
        /// copy once spawned).
        command_end: OwnedFd,
    },
}

fn start_opener(policy: &ResolvedPolicy, plan: &LandlockPlan) -> Result<OpenerRun, HostError> {
    let spec = match opener::Spec::build(policy, plan) {
        Ok(None) => return Ok(OpenerRun::NotNeeded),
        Ok(Some(spec)) => spec,
        Err(why) => {
            return Ok(OpenerRun::Off {
                roots: plan.opener_dirs.clone(),
                why,
            })
        }
    };
    let roots: Vec<PathBuf> = spec.root_paths().iter().map(|p| p.to_path_buf()).collect();
    let (ours, theirs) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| HostError::io("creating the opener's socketpair", e.into()))?;
    let supervisor = opener::Supervisor::start(spec, ours)
        .map_err(|e| HostError::io("starting the opener thread", e))?;
    Ok(OpenerRun::Running {
        roots,
        supervisor,
        command_end: theirs,
    })
}

impl OpenerRun {
    /// Stop the supervisor (the command's tree is gone) and say in the
    /// report what the opener did.
    fn finish(self) -> Vec<PartialItem> {
        let (roots, stats) = match self {
            OpenerRun::NotNeeded => return Vec::new(),
            OpenerRun::Off { roots, why } => (
                roots,
                opener::Stats {
                    inactive_reason: Some(why),
                    ..Default::default()
                },
            ),
            OpenerRun::Running {
                roots,
                supervisor,
                command_end,
            } => {
                drop(command_end);
                (roots, supervisor.finish())
            }
        };
        let dirs = roots
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let text = if stats.active {
            format!(
                "carve+opener: opener active in {dirs}: reads of entries the command created there are opened \
                 by codewhale outside the sandbox after checking they are not a deny-read item \
                 (inode, name and path; {} served, {} refused); those entries still cannot be \
                 executed (Landlock's execute right cannot be added to a running domain)",
                stats.served, stats.refused
            )
        } else {
            format!(
                "carve+opener: opener not active ({}): entries the command created in {dirs} are not readable \
                 or executable in this run",
                stats
                    .inactive_reason
                    .unwrap_or_else(|| "no reason given".into())
            )
        };
        vec![PartialItem::new(Shortfall::OverRestricted, text)]
    }
}

/// Whether the helper (same credentials as this process, no user
/// namespace) can clear its capability bounding set.
fn bounding_set_clearable() -> bool {
    ::caps::has_cap(
        None,
        ::caps::CapSet::Effective,
        ::caps::Capability::CAP_SETPCAP,
    )
    .unwrap_or(false)
}

/// Paths of the plan's `not-enforced` items.
fn not_enforced(plan: &LandlockPlan) -> Vec<&Path> {
    plan.partial
        .iter()
        .filter(|p| p.kind == PartialKind::NotEnforced)
        .filter_map(|p| p.path.as_deref())
        .collect()
}

/// The report of a landlock-tier run.
pub fn enforcement(
    policy: &ResolvedPolicy,
    plan: &LandlockPlan,
    landlock: LandlockReport,
    seccomp: SeccompReport,
    env_removed: Vec<String>,
) -> Enforcement {
    let skipped = not_enforced(plan);
    let mut network_enforced_by = Vec::new();
    if !policy.network {
        if plan.private_net.is_some() {
            network_enforced_by.push(NetworkEnforcer::Netns);
        }
        network_enforced_by.push(NetworkEnforcer::Seccomp);
        if !plan.handled_net.is_empty() && landlock.abi >= 4 {
            network_enforced_by.push(NetworkEnforcer::LandlockNet);
        }
    }
    let mut partial = plan.partial_report();
    partial.extend(
        landlock
            .dropped
            .iter()
            .filter(|d| !plan.dropped.contains(d))
            .map(|d| PartialItem::new(Shortfall::LandlockRight, format!("dropped: {d}"))),
    );
    // Resolution's notes (a cache directory that does not exist, so is not
    // made writable) are not enforcement gaps: `sandbox explain` shows them.
    // Deny-read paths resolution could not establish (a .env not masked).
    partial.extend(
        policy
            .unmasked
            .iter()
            .map(|n| PartialItem::new(Shortfall::DenyRead, n.clone())),
    );
    // In the mask's user namespace the command's half holds CAP_SETPCAP
    // there and clears the bounding set before it drops everything.
    let ns_via = plan.mask_via.or(match plan.private_net {
        Some(PrivateNet::Stage(via)) => Some(via),
        _ => None,
    });
    if !bounding_set_clearable() && ns_via != Some(mask::MaskVia::UserNs) {
        partial.push(PartialItem::new(
            Shortfall::CapabilityBoundingSet,
            "the bounding set is not cleared (no CAP_SETPCAP and no user namespace); \
             effective, permitted, inheritable and ambient are empty and no_new_privs keeps \
             setuid binaries and file capabilities from raising privileges",
        ));
    }
    let level = if partial.is_empty() && landlock.status == LandlockStatus::Fully {
        EnforcementLevel::Full
    } else {
        EnforcementLevel::Partial
    };
    // The label travels to stream-json, the session log and receipts: it
    // names how deny-read items inside writable roots were held when there
    // were any (`mask`: a private mount namespace; `carve+opener`: the
    // fallback, whose new entries cannot be executed).
    let label = match plan.deny_read_strategy {
        mask::DenyReadStrategy::None => String::from("sandboxed: landlock+seccomp"),
        s => format!("sandboxed: landlock+seccomp, deny-read by {}", s.as_str()),
    };
    // The mask is the only namespace change: the mount namespace, and the
    // user namespace it needs without CAP_SYS_ADMIN.
    let mut namespaces = match ns_via {
        Some(mask::MaskVia::MountNs) => vec![Namespace::Mount],
        Some(mask::MaskVia::UserNs) => vec![Namespace::User, Namespace::Mount],
        None => Vec::new(),
    };
    if ns_via.is_some() && plan.private_net.is_some() {
        namespaces.push(Namespace::Net);
    }
    Enforcement {
        level,
        namespaces,
        network_allowed: policy.network,
        network_enforced_by,
        // The stage checked no_new_privs and the empty capability sets
        // before the command ran (see `stage`).
        no_new_privs: true,
        capabilities_dropped: true,
        seccomp: Some(seccomp),
        landlock: Some(landlock),
        masked_paths: policy
            .existing_deny_read()
            .map(|e| e.path.clone())
            .filter(|p| !skipped.contains(&p.as_path()))
            .collect(),
        protected_paths: policy
            .protected
            .iter()
            .map(|e| e.path.clone())
            .filter(|p| !skipped.contains(&p.as_path()))
            .collect(),
        env_removed,
        partial,
        deny_read_strategy: Some(plan.deny_read_strategy),
        ..Enforcement::base(BackendKind::Landlock, policy.mode, label)
    }
}
