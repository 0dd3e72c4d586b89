//! Shared setup of the OpenSandbox tests: a temp dir holding the local
//! workspace, a fake home, and the fake sandbox's filesystem; a fake
//! server; a config pointing at it.
#![allow(dead_code)]

use super::fake_opensandbox::{FakeOptions, FakeServer, API_KEY, EXECD_TOKEN};
use codewhale::host::opensandbox::OpenSandboxConfig;
use codewhale::policy::{resolve, HostFacts, ResolvedPolicy, SandboxMode, SandboxPolicy};
use std::path::PathBuf;

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub ws: PathBuf,
    pub remote_ws: PathBuf,
    pub fake: FakeServer,
    pub cfg: OpenSandboxConfig,
}

impl Env {
    pub async fn start(tweak: impl FnOnce(&mut FakeOptions)) -> Env {
        Self::start_with(tweak, "").await
    }

    /// `extra` is appended to the `[opensandbox]` table text.
    pub async fn start_with(tweak: impl FnOnce(&mut FakeOptions), extra: &str) -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        let remote = tmp.path().join("remote");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(remote.join("tmp")).unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let remote = std::fs::canonicalize(&remote).unwrap();
        let mut opts = FakeOptions::new(remote.clone());
        tweak(&mut opts);
        let fake = FakeServer::start(opts).await;
        let text = format!(
            "url = \"{}\"\napi_key = \"{API_KEY}\"\nexecd_access_token = \"{EXECD_TOKEN}\"\nremote_workdir = \"{}\"\nremote_tmp = \"{}\"\npoll_interval_ms = 20\nready_timeout_s = 20\n{extra}",
            fake.lifecycle_url,
            remote.join("workspace").display(),
            remote.join("tmp").display(),
        );
        let cfg = config_from(&tmp, &text);
        Env {
            remote_ws: remote.join("workspace"),
            tmp,
            ws,
            fake,
            cfg,
        }
    }

    pub fn resolved(&self, mode: SandboxMode) -> ResolvedPolicy {
        let facts = HostFacts {
            homes: vec![self.tmp.path().join("home")],
            cargo_home: None,
            xdg_cache_home: None,
        };
        resolve(&SandboxPolicy::new(mode, &self.ws), &facts).expect("resolve")
    }
}

pub fn config_from(tmp: &tempfile::TempDir, table_text: &str) -> OpenSandboxConfig {
    let file = tmp.path().join("config.toml");
    let full = format!("[opensandbox]\n{table_text}");
    std::fs::write(&file, &full).unwrap();
    let doc: toml::Table = toml::from_str(&full).unwrap();
    let table = doc["opensandbox"].as_table().unwrap().clone();
    OpenSandboxConfig::from_table_with_env(&table, &file, |_| None).expect("config")
}

pub fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}
