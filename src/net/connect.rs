//! `__egress-connect HOST PORT`: an ssh `ProxyCommand` for sandboxed
//! commands. It runs inside the sandbox, opens a SOCKS5 `CONNECT` by
//! *name* (the `fast-socks5` client) through the egress proxy named in
//! `ALL_PROXY`, and relays stdin/stdout over it, so `git` over ssh is
//! decided by the same allow-list as everything else. A refusal is one
//! clear line on stderr and exit status 1 (ssh then reports that the
//! connection closed).

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;

/// The proxy address from `ALL_PROXY` / `all_proxy` (`socks5h://ADDR`).
pub fn socks_proxy_from_env() -> Option<SocketAddr> {
    std::env::var("ALL_PROXY")
        .or_else(|_| std::env::var("all_proxy"))
        .ok()
        .and_then(|u| {
            u.strip_prefix("socks5h://")
                .and_then(|a| a.trim_end_matches('/').parse().ok())
        })
}

/// Relay stdin/stdout to `host:port` through the proxy; the exit status.
pub fn main(host: &str, port: &str) -> i32 {
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("codewhale egress: bad port {port:?}");
        return 2;
    };
    let Some(proxy) = socks_proxy_from_env() else {
        eprintln!("codewhale egress: ALL_PROXY names no socks5h:// proxy (not running under network = \"allowlist\"?)");
        return 2;
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("codewhale egress: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async move {
        let stream = match fast_socks5::client::Socks5Stream::connect(
            proxy,
            host.to_string(),
            port,
            fast_socks5::client::Config::default(),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "codewhale egress proxy: {host}:{port} refused or unreachable ({e}); see the network line of the enforcement report"
                );
                return 1;
            }
        };
        let (mut r, mut w) = tokio::io::split(stream);
        let mut stdin = tokio::io::stdin();
        let mut stdout = tokio::io::stdout();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut stdin, &mut w).await;
            let _ = w.shutdown().await;
        });
        // The session is over when the server side closes; the stdin
        // reader (a blocking thread) is not waited for.
        let _ = tokio::io::copy(&mut r, &mut stdout).await;
        let _ = stdout.flush().await;
        0
    });
    rt.shutdown_background();
    code
}

/// The subcommand both binaries accept.
pub const SUBCOMMAND: &str = "__egress-connect";

/// `GIT_SSH_COMMAND` routing git's ssh through `exe __egress-connect`;
/// `None` when the path cannot be quoted safely for ssh's shell.
pub fn git_ssh_command(exe: &std::path::Path) -> Option<String> {
    let p = exe.to_str()?;
    let safe = !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c));
    safe.then(|| format!("ssh -o 'ProxyCommand={p} {SUBCOMMAND} %h %p'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_ssh_command_quotes_only_plain_paths() {
        assert_eq!(
            git_ssh_command(std::path::Path::new("/usr/bin/codewhale")).as_deref(),
            Some("ssh -o 'ProxyCommand=/usr/bin/codewhale __egress-connect %h %p'")
        );
        assert_eq!(
            git_ssh_command(std::path::Path::new("/a b/codewhale")),
            None
        );
        assert_eq!(git_ssh_command(std::path::Path::new("/a'b")), None);
    }
}
