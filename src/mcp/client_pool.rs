//! MCP servers for a long-lived process (the runtime behind `app-server`):
//! one [`McpManager`] per workspace, started the first time a turn in that
//! workspace needs it and kept for the process's life, on a small runtime
//! of its own — each runtime turn runs on its own short-lived async
//! runtime, which must not take the servers' tasks down with it.
//!
//! Starting never blocks: the manager starts its servers in the
//! background, so the server keeps answering (`/health` included) while
//! they come up.

use super::client::{ManagerSpec, McpManager, ServerStatus};
use crate::host::HostSettings;
use crate::policy::SandboxPolicy;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Managers by workspace, and the runtime their tasks run on.
#[derive(Default)]
pub struct McpPool {
    inner: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    runtime: Option<tokio::runtime::Runtime>,
    managers: HashMap<PathBuf, Arc<McpManager>>,
}

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpPool").finish_non_exhaustive()
    }
}

impl McpPool {
    /// The manager for `workspace` (started now if it is not running);
    /// `Ok(None)` when `mcp.json` has no enabled server.
    pub fn get(
        &self,
        codewhale_home: &Path,
        workspace: &Path,
        policy: &SandboxPolicy,
        host: &HostSettings,
    ) -> Result<Option<Arc<McpManager>>, String> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = st.managers.get(workspace) {
            return Ok(Some(m.clone()));
        }
        let spec = ManagerSpec::new(codewhale_home, policy.clone(), host.clone());
        let doc = super::config::load(&spec.config_file).map_err(|e| e.to_string())?;
        if !doc.mcp_servers.values().any(|e| e.enabled) {
            return Ok(None);
        }
        if st.runtime.is_none() {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("codewhale-mcp")
                .enable_all()
                .build()
                .map_err(|e| format!("starting the MCP runtime: {e}"))?;
            st.runtime = Some(rt);
        }
        let handle = match &st.runtime {
            Some(rt) => rt.handle().clone(),
            None => return Err("no MCP runtime".into()),
        };
        let m = McpManager::start_on(spec, handle).map_err(|e| e.to_string())?;
        st.managers.insert(workspace.to_path_buf(), m.clone());
        Ok(Some(m))
    }
}

impl McpPool {
    /// Re-read `mcp.json` and restart the servers of `workspace`'s manager
    /// (the TUI's `/mcp reload`); `None` when no manager runs there yet —
    /// the next turn then starts the servers from the file as it is.
    pub fn reload(&self, workspace: &Path) -> Option<Result<Vec<ServerStatus>, String>> {
        let m = {
            let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            st.managers.get(workspace).cloned()
        }?;
        Some(m.reload().map_err(|e| e.to_string()))
    }

    /// The status of `workspace`'s servers, if a manager runs there.
    pub fn status(&self, workspace: &Path) -> Option<Vec<ServerStatus>> {
        let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.managers.get(workspace).map(|m| m.status())
    }
}

impl Drop for McpPool {
    fn drop(&mut self) {
        let st = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        for m in st.managers.values() {
            m.stop_all();
        }
        st.managers.clear();
        if let Some(rt) = st.runtime.take() {
            rt.shutdown_background();
        }
    }
}
