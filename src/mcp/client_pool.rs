//! MCP servers for a long-lived process (the runtime behind `app-server`):
//! one [`McpManager`] per workspace, started the first time a turn in that
//! workspace needs it and kept for the process's life, on a small runtime
//! of its own — each runtime turn runs on its own short-lived async
//! runtime, which must not take the servers' tasks down with it.
//!
//! Starting never blocks: the manager starts its servers in the
//! background, so the server keeps answering (`/health` included) while
//! they come up.
//!
//! A changed `mcp.json` is noticed at the next turn: [`McpPool::get`]
//! compares the file's bytes with the ones its manager started from and
//! restarts the servers when they differ ([`McpManager::reload_if_changed`]),
//! so neither the app-server nor `serve --acp` needs a restart.
//!
//! A thread can have servers of its own besides `mcp.json`'s (the ones an
//! ACP editor passes in `session/new`): [`McpPool::get_thread`] keeps one
//! manager per such thread, offered in that thread only.

use super::client::{ManagerSpec, McpManager, ServerStatus};
use super::config::ServerEntry;
use crate::host::HostSettings;
use crate::policy::SandboxPolicy;
use std::collections::BTreeMap;
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
    /// Thread id → its own servers and the manager running them (plus
    /// `mcp.json`'s).
    threads: HashMap<String, (BTreeMap<String, ServerEntry>, Arc<McpManager>)>,
}

impl PoolState {
    fn handle(&mut self) -> Result<tokio::runtime::Handle, String> {
        if self.runtime.is_none() {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("codewhale-mcp")
                .enable_all()
                .build()
                .map_err(|e| format!("starting the MCP runtime: {e}"))?;
            self.runtime = Some(rt);
        }
        match &self.runtime {
            Some(rt) => Ok(rt.handle().clone()),
            None => Err("no MCP runtime".into()),
        }
    }
}

/// Restart `m`'s servers if `mcp.json` changed since they started; a bad
/// file keeps them running and is reported once.
fn refresh(m: &McpManager) {
    if let Some(Err(e)) = m.reload_if_changed() {
        eprintln!("codewhale: mcp.json changed but was not applied: {e}");
    }
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
        if let Some(m) = st.managers.get(workspace).cloned() {
            drop(st);
            refresh(&m);
            return Ok(Some(m));
        }
        let spec = ManagerSpec::new(codewhale_home, policy.clone(), host.clone());
        let doc = super::config::load(&spec.config_file).map_err(|e| e.to_string())?;
        if !doc.mcp_servers.values().any(|e| e.enabled) {
            return Ok(None);
        }
        let handle = st.handle()?;
        let m = McpManager::start_on(spec, handle).map_err(|e| e.to_string())?;
        st.managers.insert(workspace.to_path_buf(), m.clone());
        Ok(Some(m))
    }

    /// The manager of thread `thread_id`, which runs `servers` besides
    /// `mcp.json`'s (started now if it is not running, or restarted when
    /// `servers` differ from the ones it runs). The note says why
    /// `mcp.json` was not used, if it was not.
    pub fn get_thread(
        &self,
        thread_id: &str,
        servers: &BTreeMap<String, ServerEntry>,
        codewhale_home: &Path,
        policy: &SandboxPolicy,
        host: &HostSettings,
    ) -> Result<(Arc<McpManager>, Option<String>), String> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((s, m)) = st.threads.get(thread_id) {
            if s == servers {
                let m = m.clone();
                drop(st);
                refresh(&m);
                return Ok((m, None));
            }
        }
        if let Some((_, old)) = st.threads.remove(thread_id) {
            old.stop_all();
        }
        let spec = ManagerSpec::new(codewhale_home, policy.clone(), host.clone());
        let handle = st.handle()?;
        let (m, note) = McpManager::start_with(spec, handle, servers.clone());
        st.threads
            .insert(thread_id.to_string(), (servers.clone(), m.clone()));
        Ok((m, note))
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

    /// The tools of `workspace`'s ready servers, if a manager runs there.
    pub fn tools(&self, workspace: &Path) -> Option<Vec<super::client::McpTool>> {
        let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.managers.get(workspace).map(|m| m.tools())
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
        for (_, m) in st.threads.values() {
            m.stop_all();
        }
        st.managers.clear();
        st.threads.clear();
        if let Some(rt) = st.runtime.take() {
            rt.shutdown_background();
        }
    }
}
