//! Shared helpers for the authz integration tests.
#![allow(dead_code)]

use codewhale::authz::rules::{parse_rules, Layer};
use codewhale::authz::{
    authorize, Admission, Approval, Context, FloorContext, HookAnswer, Mode, Posture, RuleSet,
    SessionGrants, ToolCall, ToolRegistry, Verdict,
};
use std::path::Path;

pub const WS: &str = "/work/project";

pub fn floor() -> FloorContext {
    FloorContext {
        homes: vec!["/home/user".into()],
        extra_deny_read: vec![],
    }
}

pub fn rules(user_toml: &str) -> RuleSet {
    let mut r = RuleSet::builtin();
    r.extend(
        parse_rules(
            Path::new("/home/user/.codewhale/permissions.toml"),
            user_toml,
            Layer::User,
            None,
        )
        .expect("test rules parse"),
    );
    r
}

pub fn verdict_with(
    cmd: &str,
    posture: &Posture,
    rules: &RuleSet,
    hooks: &[HookAnswer],
    grants: &SessionGrants,
) -> Verdict {
    let registry = ToolRegistry::builtin();
    let admission = Admission::default();
    let floor = floor();
    let ctx = Context {
        rules,
        hooks,
        grants,
        registry: &registry,
        admission: &admission,
        workspace: Path::new(WS),
        floor: &floor,
        // What the sandbox context gives this posture with no setting
        // narrowing it.
        sandbox: posture.implied_sandbox(),
    };
    authorize(&ToolCall::shell(cmd, WS), posture, &ctx)
}

pub fn verdict(cmd: &str, mode: Mode, approval: Approval) -> Verdict {
    verdict_with(
        cmd,
        &Posture::new(mode, approval),
        &RuleSet::builtin(),
        &[],
        &SessionGrants::default(),
    )
}
