//! Opening the browser without putting the link in the process list, and
//! `--new-link` against a running server.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A `0600` HTML file that sends the browser on to `url`: the browser's
/// argv names the file, not the capability.
pub fn redirect_file(dir: &Path, url: &str) -> std::io::Result<PathBuf> {
    use std::fs::OpenOptions;
    let path = dir.join(format!(
        "codewhale-web-{}.html",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(&path)?;
    write!(
        f,
        "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>\
<meta http-equiv=refresh content=\"0;url={url}\"><title>codewhale</title>"
    )?;
    Ok(path)
}

/// Where the redirect file goes: `$XDG_RUNTIME_DIR`, else the temp dir.
pub fn redirect_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

/// `$BROWSER`, else the platform's opener.
pub fn opener() -> Option<String> {
    if let Some(b) = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        return Some(b);
    }
    let name = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    which::which(name).ok().map(|p| p.display().to_string())
}

/// Start the browser on `file` (not waited for).
pub fn launch(file: &Path) -> anyhow::Result<()> {
    let cmd = opener().context("no browser opener ($BROWSER, xdg-open or open)")?;
    std::process::Command::new(&cmd)
        .arg(file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd}"))?;
    Ok(())
}

/// Ask the server running on `port` for a fresh link.
pub fn new_link(port: u16, flag: Option<&str>) -> anyhow::Result<String> {
    let token = flag
        .map(str::to_string)
        .or_else(|| std::env::var("CODEWHALE_RUNTIME_TOKEN").ok())
        .filter(|t| !t.is_empty())
        .context(
            "--new-link needs the running server's token: --auth-token or CODEWHALE_RUNTIME_TOKEN \
             (a generated token is never printed; start `codewhale web` with one to use --new-link)",
        )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let url = format!("http://127.0.0.1:{port}/v1/web/link");
        let res = reqwest::Client::new()
            .post(&url)
            .bearer_auth(token)
            .send()
            .await
            .with_context(|| format!("no codewhale web server on 127.0.0.1:{port}"))?;
        let status = res.status();
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        if !status.is_success() {
            anyhow::bail!(
                "the server on port {port} refused: {status} {}",
                body["error"]["message"].as_str().unwrap_or("")
            );
        }
        body["url"]
            .as_str()
            .map(str::to_string)
            .context("the server's answer has no `url`")
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_redirect_file_is_private_and_redirects() {
        let d = tempfile::tempdir().unwrap();
        let p = redirect_file(d.path(), "http://127.0.0.1:1/bootstrap/cwcap_x").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("url=http://127.0.0.1:1/bootstrap/cwcap_x"),
            "{text}"
        );
    }
}
