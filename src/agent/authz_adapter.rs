//! The production [`Authorizer`]: the agent loop's seam over the nine gates
//! of `crate::authz`.
//!
//! Per call: the user's `tool_call_before` hooks run first (gate 3's I/O,
//! asynchronously), then the pure [`authz::authorize`] with the run's
//! posture, the rules, the session grants, the tool registry and the floor
//! facts. The posture is headless, so the pipeline's gate 8 answers every
//! question itself — `--auto` (`Posture::auto_approve`) approves ordinary
//! and rule questions, never a hold, never a deny; without it nobody
//! answers — and records the question in [`authz::Verdict::question`].
//! The verdict goes to the loop as it is.
//!
//! The posture for `exec` is built by [`exec_posture`]: `--auto` never
//! removes the sandbox; only `--auto` with an explicit unsandboxed
//! `--sandbox` is Full Access.

use super::authorizer::{AuthFuture, Authorizer, ToolCallRequest, TurnContext};
use crate::authz::{
    self, hooks, Admission, Context, FloorContext, HooksConfig, Posture, RuleSet, SessionGrants,
    ToolCall, ToolRegistry, Verdict,
};
use crate::config::{SandboxContext, Settings};
use crate::policy::SandboxMode;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The posture of a headless `exec` run, the sandbox context narrowed to
/// it, and notes on settings it did not apply (to be shown to the user).
///
/// - Mode: Work. `headless = true` (nobody can answer); `auto_approve` is
///   `--auto` (gate 8 approves ordinary and rule questions, never holds).
/// - Approval: the settings' (user config, tightened by the project), except
///   that `full-access` is only honoured as `--auto` plus an explicit
///   unsandboxed `--sandbox` (`danger-full-access` / `external-sandbox`);
///   a configured `approval_policy = "full-access"` alone becomes `ask`,
///   because `exec` promises that only the flag removes the sandbox.
/// - Sandbox: [`SandboxContext::for_posture`]: the posture's implied mode
///   narrowed by the context's (which already holds `--sandbox` and the
///   project's tightening), so without Full Access it is at least
///   `workspace-write`.
///
/// The rules themselves are [`SandboxContext::for_turn`]'s (the one
/// function every front end calls); this is `exec`'s ask.
pub fn exec_posture(
    ctx: SandboxContext,
    auto: bool,
    flag: Option<SandboxMode>,
) -> (Posture, SandboxContext, Vec<String>) {
    ctx.for_turn(&crate::config::TurnAsk::exec(auto, flag))
}

/// The agent's tools as the pipeline's registry knows them: the
/// catalogue's built-ins, which include the agent's own (`search` too).
pub fn exec_registry() -> ToolRegistry {
    ToolRegistry::builtin()
}

/// The nine gates for the agent loop.
#[derive(Clone)]
pub struct PipelineAuthorizer {
    posture: Posture,
    rules: RuleSet,
    hooks: HooksConfig,
    registry: ToolRegistry,
    admission: Admission,
    floor: FloorContext,
    workspace: PathBuf,
    /// The sandbox context's mode, handed to the gates (gate 9 names it).
    sandbox: SandboxMode,
    /// "Always for this kind" answers (none in a headless `exec` run; a
    /// runtime thread's `remember` adds them, shared with its approver).
    grants: Arc<Mutex<SessionGrants>>,
    /// The run's MCP servers: their current tools are registered as
    /// `ToolKind::Mcp` (asked about like any MCP call; annotations such as
    /// `readOnlyHint` are not consulted).
    mcp: Option<std::sync::Arc<crate::mcp::McpManager>>,
}

impl PipelineAuthorizer {
    /// Everything the gates consult, taken once from the resolved settings;
    /// `sandbox` is the mode of the run's policy.
    pub fn new(settings: &Settings, posture: Posture, sandbox: SandboxMode) -> Self {
        PipelineAuthorizer {
            posture,
            sandbox,
            rules: settings.rules.clone(),
            hooks: settings.user.hooks.clone(),
            registry: exec_registry(),
            admission: settings.user.tools.clone(),
            floor: settings.floor_context(),
            workspace: settings.workspace.clone(),
            grants: Arc::new(Mutex::new(SessionGrants::default())),
            mcp: None,
        }
    }

    /// Register the tools of `mcp` (as they are at each call).
    pub fn with_mcp(mut self, mcp: std::sync::Arc<crate::mcp::McpManager>) -> Self {
        self.set_mcp(mcp);
        self
    }

    /// [`Self::with_mcp`] in place.
    pub fn set_mcp(&mut self, mcp: std::sync::Arc<crate::mcp::McpManager>) {
        self.mcp = Some(mcp);
    }

    /// Consult (and share) these session grants instead of a fresh set.
    pub fn with_grants(mut self, grants: Arc<Mutex<SessionGrants>>) -> Self {
        self.grants = grants;
        self
    }

    /// Register a tool the run offers beyond the built-ins (the runtime's
    /// `ask_user` and client-executed tools), so gate 2 knows it.
    pub fn register_tool(&mut self, spec: authz::ToolSpec) {
        self.registry.register(spec);
    }

    pub fn posture(&self) -> &Posture {
        &self.posture
    }

    fn tool_call(&self, req: &ToolCallRequest) -> ToolCall {
        let mut call = ToolCall::new(req.tool.clone(), req.args.clone(), &self.workspace);
        if req.tool == authz::SHELL_TOOL {
            call.command = req.command.clone();
        }
        call
    }

    /// The pure part: the gates with the hooks' answers already in hand.
    pub fn decide(&self, call: &ToolCall, answers: &[authz::HookAnswer]) -> Verdict {
        let grants = self
            .grants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        // An MCP tool exists for the gates while its server offers it.
        let with_mcp;
        let registry = match &self.mcp {
            Some(m)
                if crate::mcp::client_names::is_mcp(&call.tool)
                    && m.tools().iter().any(|t| t.name == call.tool) =>
            {
                let mut r = self.registry.clone();
                r.register(authz::ToolSpec {
                    name: call.tool.clone(),
                    kind: authz::ToolKind::Mcp,
                    executable: true,
                });
                with_mcp = r;
                &with_mcp
            }
            _ => &self.registry,
        };
        authz::authorize(
            call,
            &self.posture,
            &Context {
                rules: &self.rules,
                hooks: answers,
                grants: &grants,
                registry,
                admission: &self.admission,
                workspace: &self.workspace,
                floor: &self.floor,
                sandbox: self.sandbox,
            },
        )
    }
}

impl Authorizer for PipelineAuthorizer {
    fn authorize<'a>(&'a self, req: &'a ToolCallRequest, _ctx: &'a TurnContext) -> AuthFuture<'a> {
        Box::pin(async move {
            let call = self.tool_call(req);
            let answers = hooks::run_before(&self.hooks, &call).await;
            self.decide(&call, &answers)
        })
    }

    fn posture(&self) -> Option<Posture> {
        Some(self.posture)
    }

    /// Everything the parent's gates consult, the session grants shared
    /// (an `a` answer covers the whole tree), under the child's posture.
    fn for_child(&self, posture: Posture, sandbox: SandboxMode) -> Option<Box<dyn Authorizer>> {
        let mut child = self.clone();
        child.posture = posture;
        child.sandbox = sandbox;
        Some(Box::new(child))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "authz_adapter_tests.rs"]
mod tests;
