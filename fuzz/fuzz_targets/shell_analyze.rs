//! Fuzz the shell analyser and the pipeline on arbitrary command lines:
//! no panic, bounded work, and a failed analysis never yields an allow
//! outside Full Access.
#![no_main]

use codewhale::authz::{
    authorize, shell, Admission, Approval, Context, Decision, FloorContext, Mode, Posture,
    RuleSet, SessionGrants, ToolCall, ToolRegistry,
};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(cmd) = std::str::from_utf8(data) else {
        return;
    };
    let analysis = shell::analyze(cmd);
    for p in &analysis.pieces {
        let _ = p.display();
    }
    let rules = RuleSet::builtin();
    let registry = ToolRegistry::builtin();
    let admission = Admission::default();
    let floor = FloorContext {
        homes: vec!["/home/u".into()],
        extra_deny_read: vec![],
    };
    let grants = SessionGrants::default();
    let ctx = Context {
        rules: &rules,
        hooks: &[],
        grants: &grants,
        registry: &registry,
        admission: &admission,
        workspace: Path::new("/w"),
        floor: &floor,
        sandbox: codewhale::policy::SandboxMode::WorkspaceWrite,
    };
    let v = authorize(&ToolCall::shell(cmd, "/w"), &Posture::new(Mode::Work, Approval::Ask), &ctx);
    if analysis.failure.is_some() {
        assert_ne!(v.decision, Decision::Allow, "unparseable command allowed: {cmd:?}");
    }
});
