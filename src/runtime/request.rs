//! Requests every front end of the runtime shapes the same way: the body
//! of "create a thread" (HTTP `POST /v1/threads`, stdio `thread/start`,
//! ACP `session/new`) and the model a thread gets when it names none.

use std::path::{Path, PathBuf};

/// The model a thread gets when it names none: the configured provider's.
pub fn default_model(workspace: &Path, home: &Path) -> String {
    let settings = crate::config::load(&crate::config::LoadOptions::new(workspace)).ok();
    let cfg = settings
        .as_ref()
        .and_then(|s| crate::provider::config::ExecConfig::from_settings(s).ok());
    let store = crate::provider::auth::AuthStore::new(home);
    let env = |n: &str| std::env::var(n).ok();
    cfg.and_then(|c| crate::provider::registry::select(None, None, &c, &store, &env).ok())
        .map(|s| s.model)
        .unwrap_or_default()
}

/// The body of "create a thread", the same for HTTP (`POST /v1/threads`)
/// and stdio (`thread/start`); unknown fields are refused by name.
#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct CreateThread {
    pub model: Option<String>,
    pub workspace: Option<PathBuf>,
    pub mode: Option<String>,
    pub title: Option<String>,
    pub system_prompt: Option<String>,
    pub allow_shell: Option<bool>,
    pub trust_mode: Option<bool>,
    pub auto_approve: Option<bool>,
    /// Tools this client executes itself (see docs/RUNTIME_API.md).
    pub client_tools: Option<Vec<super::model::ClientTool>>,
    /// A provider id for the thread's turns (checked like PATCH's); `""`
    /// or absent: the configured one.
    pub provider: Option<String>,
}

impl CreateThread {
    /// The runtime's record for it: in its `workspace`, else the server's
    /// `default_ws` (checked by [`super::Runtime::create_thread`], like the
    /// rest); `mode` checked here, naming the field.
    pub fn into_new_thread(
        self,
        default_ws: &std::path::Path,
        default_model: &str,
    ) -> Result<super::NewThread, super::RuntimeError> {
        let mode = match self.mode.as_deref() {
            Some(m) => super::ThreadMode::parse("mode", m)?,
            None => super::ThreadMode::Agent,
        };
        let ws = self.workspace.unwrap_or_else(|| default_ws.to_path_buf());
        let provider = self.provider.filter(|p| !p.is_empty());
        // The server's default model belongs to the configured provider:
        // with another provider and no model, that provider's default.
        let default_model = if provider.is_some() {
            ""
        } else {
            default_model
        };
        Ok(super::NewThread {
            id: None,
            model: self
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| default_model.to_string()),
            provider,
            workspace: ws,
            mode,
            system_prompt: self.system_prompt,
            title: self.title,
            allow_shell: self.allow_shell.unwrap_or(true),
            trust_mode: self.trust_mode.unwrap_or(false),
            auto_approve: self.auto_approve.unwrap_or(false),
            client_tools: self.client_tools.unwrap_or_default(),
            task_id: None,
        })
    }
}
