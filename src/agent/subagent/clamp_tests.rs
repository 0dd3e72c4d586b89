use super::*;
use crate::agent::subagent::role::ROLES;
use crate::agent::subagent::Role;
use proptest::prelude::*;

const TOOL_POOL: [&str; 8] = [
    "read_file",
    "list_dir",
    "search",
    "write_file",
    "edit_file",
    "apply_patch",
    "shell",
    "agent",
];
const ROOTS: [&str; 3] = ["/data/a", "/data/b", "/cache"];
const NAMES: [&str; 3] = ["crates.io", "pypi.org", "github.com"];
const DENY: [&str; 3] = ["~/.aws", "secrets/", "~/.ssh"];
/// Paths of a workspace, nested and disjoint (`""` is the whole of it).
const SCOPES: [&str; 7] = [
    "",
    "src",
    "src/a",
    "src/a/x.rs",
    "src/b",
    "docs",
    "./docs/guide",
];

/// No scope (the whole workspace) or a random set of [`SCOPES`].
fn scope() -> impl Strategy<Value = Option<BTreeSet<PathBuf>>> {
    prop_oneof![
        Just(None),
        subset(&SCOPES).prop_map(|s| Some(s.into_iter().map(PathBuf::from).collect())),
    ]
}

/// Whether workspace path `p` is writable under `scope`.
fn covers(scope: &Option<BTreeSet<PathBuf>>, p: &str) -> bool {
    let p = scope_path(std::path::Path::new(p)).unwrap();
    scope
        .as_ref()
        .is_none_or(|s| s.iter().any(|x| p.starts_with(scope_path(x).unwrap())))
}

fn subset(pool: &'static [&'static str]) -> impl Strategy<Value = BTreeSet<String>> {
    proptest::collection::vec(any::<bool>(), pool.len()).prop_map(move |bits| {
        pool.iter()
            .zip(bits)
            .filter(|(_, b)| *b)
            .map(|(s, _)| s.to_string())
            .collect()
    })
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Plan), Just(Mode::Work), Just(Mode::Operate)]
}

fn approval() -> impl Strategy<Value = Approval> {
    prop_oneof![
        Just(Approval::FullAccess),
        Just(Approval::AutoReview),
        Just(Approval::Ask),
        Just(Approval::NeverRun)
    ]
}

fn sandbox() -> impl Strategy<Value = SandboxMode> {
    prop_oneof![
        Just(SandboxMode::ReadOnly),
        Just(SandboxMode::WorkspaceWrite),
        Just(SandboxMode::DangerFullAccess),
        Just(SandboxMode::ExternalSandbox)
    ]
}

fn network() -> impl Strategy<Value = Network> {
    prop_oneof![
        Just(Network::Off),
        Just(Network::On),
        subset(&NAMES).prop_map(Network::AllowList)
    ]
}

prop_compose! {
    fn parent()(
        mode in mode(), approval in approval(), headless in any::<bool>(),
        auto in any::<bool>(), background in any::<bool>(), no_shell in any::<bool>(),
        sandbox in sandbox(), roots in subset(&ROOTS), network in network(),
        deny in subset(&DENY), protect in subset(&DENY), tools in subset(&TOOL_POOL),
        write_scope in scope(),
    ) -> EffectivePosture {
        EffectivePosture {
            mode, approval, headless, auto_approve: auto, background,
            shell_disabled: no_shell, sandbox,
            writable_roots: Some(roots.into_iter().map(PathBuf::from).collect()),
            write_scope,
            network, deny_read: deny, protect_write: protect,
            tools: Tools::Only(tools),
        }.normalized()
    }
}

fn role() -> impl Strategy<Value = Role> {
    proptest::sample::select(ROLES.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Never wider than the parent, never wider than the role.
    #[test]
    fn never_wider_than_either_input(p in parent(), r in role()) {
        let c = clamp(&p, r);
        prop_assert!(c.within(&p), "{c:?}\n  not within parent {p:?}");
        prop_assert!(c.within(&r.cap()), "{c:?}\n  not within role {r:?}");
    }

    #[test]
    fn idempotent(p in parent(), r in role()) {
        let once = clamp(&p, r);
        prop_assert_eq!(clamp(&once, r), once);
    }

    /// A chain of up to four spawns: each link is within every ancestor,
    /// and the end equals clamping the root once to the narrowest
    /// common cap of the chain's roles.
    #[test]
    fn chain_equals_clamping_to_the_narrowest_ancestor(
        p in parent(), chain in proptest::collection::vec(role(), 1..=4)
    ) {
        let mut cur = p.clone();
        let mut ancestors = vec![p.clone()];
        for r in &chain {
            cur = clamp(&cur, *r);
            for a in &ancestors {
                prop_assert!(cur.within(a));
            }
            ancestors.push(cur.clone());
        }
        let narrowest = chain
            .iter()
            .skip(1)
            .fold(chain[0].cap(), |acc, r| acc.meet(&r.cap()));
        prop_assert_eq!(&cur, &p.meet(&narrowest));
        // Order does not matter either.
        let mut rev = p.clone();
        for r in chain.iter().rev() {
            rev = clamp(&rev, *r);
        }
        prop_assert_eq!(cur, rev);
    }

    /// A scoped writer's scope never widens: every workspace path it may
    /// write, both its parent and its requested scope may write; it is
    /// within both (and within its role); a path both cover stays
    /// writable (the meet is exact, not merely narrower); no extra root
    /// outside the workspace survives; clamping again changes nothing.
    #[test]
    fn a_write_scope_never_widens(
        p in parent(), r in role(), asked in subset(&SCOPES),
        chain in proptest::collection::vec(subset(&SCOPES), 0..=3),
    ) {
        let asked: Vec<PathBuf> = asked.into_iter().map(PathBuf::from).collect();
        let c = clamp_scoped(&p, r, &asked);
        let asked_set = Some(asked.iter().cloned().collect::<BTreeSet<_>>());
        prop_assert!(c.within(&p), "{c:?}\n  not within parent {p:?}");
        prop_assert!(c.within(&r.cap()));
        prop_assert_eq!(c.writable_roots.clone(), Some(BTreeSet::new()));
        for path in SCOPES.iter().chain(["src/a/x.rs/y", "src/c", "docs/guide/z", "README.md"].iter()) {
            let child = covers(&c.write_scope, path);
            let both = covers(&p.write_scope, path) && covers(&asked_set, path);
            prop_assert_eq!(child, both, "{} under {:?}", path, c.write_scope);
        }
        prop_assert_eq!(clamp_scoped(&c, r, &asked), c.clone());
        // Down a chain of scoped writers, each within every ancestor.
        let mut cur = c;
        for s in chain {
            let s: Vec<PathBuf> = s.into_iter().map(PathBuf::from).collect();
            let next = clamp_scoped(&cur, Role::Implement, &s);
            prop_assert!(next.within(&cur) && next.within(&p));
            cur = next;
        }
        // The applied policy carries the scope, and reads back as it.
        let (_, policy) = cur.apply(&SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws"));
        let back = policy.write_scope.map(|v| v.into_iter().collect::<BTreeSet<_>>());
        prop_assert_eq!(back, cur.write_scope);
    }

    /// The applied policy is the clamped value: mode, roots and network
    /// read back as they were clamped.
    #[test]
    fn apply_round_trips(p in parent(), r in role()) {
        let c = clamp(&p, r);
        let mut parent_policy = SandboxPolicy::new(p.sandbox, "/ws");
        parent_policy.writable_roots = p.writable_roots.iter().flatten().cloned().collect();
        match &p.network {
            Network::On => parent_policy.network = true,
            Network::Off => parent_policy.network = false,
            Network::AllowList(n) => {
                parent_policy.network = false;
                parent_policy.egress = Some(crate::net::EgressSpec {
                    allow: n.iter().cloned().collect(),
                    ..Default::default()
                });
            }
        }
        parent_policy.extra_deny_read = p.deny_read.iter().cloned().collect();
        parent_policy.extra_protect_write = p.protect_write.iter().cloned().collect();
        parent_policy.write_scope = p.write_scope.as_ref().map(|s| s.iter().cloned().collect());
        let (posture, policy) = c.apply(&parent_policy);
        let tools: Vec<&str> = TOOL_POOL.iter().copied().filter(|t| c.tools.contains(t)).collect();
        prop_assert_eq!(EffectivePosture::of(&posture, &policy, &tools), c);
    }
}

fn work(approval: Approval, sandbox: SandboxMode) -> EffectivePosture {
    let mut policy = SandboxPolicy::new(sandbox, "/ws");
    policy.writable_roots.push("/data/a".into());
    EffectivePosture::of(&Posture::new(Mode::Work, approval), &policy, &TOOL_POOL)
}

#[test]
fn plan_parent_gives_read_only_children_whatever_the_role() {
    let mut p = work(Approval::Ask, SandboxMode::ReadOnly);
    p.mode = Mode::Plan;
    for r in ROLES {
        let c = clamp(&p, r);
        assert_eq!(c.mode, Mode::Plan, "{r:?}");
        assert_eq!(c.sandbox, SandboxMode::ReadOnly, "{r:?}");
    }
}

#[test]
fn a_test_child_of_full_access_runs_in_a_read_only_sandbox() {
    let p = work(Approval::FullAccess, SandboxMode::DangerFullAccess);
    let c = clamp(&p, Role::Test);
    assert_eq!(c.sandbox, SandboxMode::ReadOnly);
    assert_eq!(c.writable_roots, Some(BTreeSet::new()));
    assert!(c.tools.contains("shell") && !c.tools.contains("write_file"));
    // The general child keeps the parent's sandbox and roots.
    let g = clamp(&p, Role::General);
    assert_eq!(g.sandbox, SandboxMode::DangerFullAccess);
    assert_eq!(g.writable_roots, p.writable_roots);
    // Explorers are Plan (read-only commands at the gates); advisors have no shell.
    assert_eq!(clamp(&p, Role::Explore).mode, Mode::Plan);
    assert!(!clamp(&p, Role::Advisor).tools.contains("shell"));
}

#[test]
fn a_child_never_asks_less_and_an_allow_list_only_shrinks() {
    let mut p = work(Approval::Ask, SandboxMode::WorkspaceWrite);
    p.network = Network::AllowList(["crates.io".to_string()].into());
    let c = clamp(&p, Role::Implement);
    assert_eq!(c.approval, Approval::Ask);
    assert_eq!(c.network, p.network);
    assert_eq!(clamp(&p, Role::Advisor).network, Network::Off);
}
