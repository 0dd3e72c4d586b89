//! `codewhale app-server`: the runtime served over HTTP/SSE (`--http`) or
//! newline-delimited JSON-RPC 2.0 on stdio (`--stdio`). The server holds no
//! state of its own: threads, turns, items, events and pending requests are
//! the runtime's ([`crate::runtime`]).
//!
//! Invariants: the token is never printed or logged; `--insecure-no-auth`
//! is refused unless the bind address is loopback; `/health` and
//! `/v1/runtime/info` are the only public routes.

pub mod api;
pub mod auth;
pub mod cors;
pub mod error;
pub mod git;
pub mod http;
pub mod introspect;
pub mod sessions;
pub mod snapshots;
pub mod stdio;
pub mod tasks;
pub mod usage;
pub mod web;

use crate::config::ConfigPaths;
use crate::runtime::driver::Driver;
use crate::runtime::Runtime;
use anyhow::Context;
use clap::Args;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct AppServerArgs {
    /// Serve the HTTP/SSE runtime API (`/v1/*`).
    #[arg(long, required_unless_present_any = ["stdio", "mobile"], conflicts_with = "stdio")]
    pub http: bool,
    /// Serve JSON-RPC 2.0 on stdin/stdout (one message per line).
    #[arg(long)]
    pub stdio: bool,
    /// Address to bind (default 127.0.0.1; with --mobile 0.0.0.0).
    #[arg(long)]
    pub host: Option<String>,
    /// Port to bind (0: any free port; the chosen one is printed on stderr).
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// Async worker threads (1–8).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub workers: u8,
    /// HTTP plus the phone page at `/mobile` (docs/WEB.md): binds
    /// 0.0.0.0 unless --host says otherwise and prints each LAN URL.
    /// The page asks for the runtime token and keeps it in memory only.
    #[arg(long, conflicts_with = "stdio")]
    pub mobile: bool,
    /// The runtime token (else CODEWHALE_RUNTIME_TOKEN, else
    /// DEEPSEEK_RUNTIME_TOKEN, else a generated one that is not printed).
    #[arg(long, value_name = "TOKEN")]
    pub auth_token: Option<String>,
    /// No token at all (only with a loopback --host).
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Another allowed browser origin (repeatable; no wildcards).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,
    /// Seconds a question waits for a client before it is denied as
    /// `no response`.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub approval_timeout: u64,
    /// Workspace of threads that name none (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Background tasks run at once (`/v1/tasks`; 1–8).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=8))]
    pub task_workers: u8,
    /// How often the automation scheduler looks for due slots, in
    /// milliseconds (10 ms – 1 day).
    #[arg(long, default_value_t = 15_000, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub scheduler_tick_ms: u64,
    /// Set by `codewhale web` (never a flag here).
    #[arg(skip)]
    pub web: Option<WebMode>,
}

/// `codewhale web`'s part of the server's set-up.
#[derive(Debug, Clone, Copy)]
pub struct WebMode {
    pub no_open: bool,
}

/// `codewhale serve`: `--http` is the app-server under the older flag
/// names; `--acp` is the ACP agent for editors ([`crate::acp`]); `--mcp`
/// is codewhale's tools as an MCP stdio server ([`crate::mcp_server`]).
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["http", "acp", "mcp"])))]
pub struct ServeArgs {
    /// Serve the HTTP/SSE runtime API.
    #[arg(long)]
    pub http: bool,
    /// Be an Agent Client Protocol agent on stdin/stdout (for editors).
    #[arg(long)]
    pub acp: bool,
    /// Serve codewhale's tools as an MCP server on stdin/stdout.
    #[arg(long)]
    pub mcp: bool,
    /// Workspace (`--mcp`: the one every call works in; `--acp`: the
    /// default of sessions; default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// `--acp`: seconds a permission request waits for the editor before
    /// it is denied as `no response`.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub approval_timeout: u64,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub workers: u8,
    #[arg(long, value_name = "TOKEN")]
    pub auth_token: Option<String>,
    /// No token at all (only with a loopback --host).
    #[arg(long)]
    pub insecure: bool,
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,
}

impl From<ServeArgs> for AppServerArgs {
    fn from(s: ServeArgs) -> Self {
        AppServerArgs {
            http: s.http,
            stdio: false,
            host: Some(s.host),
            port: s.port,
            mobile: false,
            workers: s.workers,
            auth_token: s.auth_token,
            insecure_no_auth: s.insecure,
            cors_origin: s.cors_origin,
            approval_timeout: s.approval_timeout,
            workspace: s.workspace,
            task_workers: 2,
            scheduler_tick_ms: 15_000,
            web: None,
        }
    }
}

pub fn run(args: AppServerArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            crate::exit::report_error(&e);
            crate::exit::FAILURE
        }
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl AppServerArgs {
    /// The address to bind: `--host`, else 0.0.0.0 with `--mobile` (a
    /// phone reaches it over the LAN), else 127.0.0.1.
    pub fn bind_host(&self) -> &str {
        match &self.host {
            Some(h) => h,
            None if self.mobile => "0.0.0.0",
            None => "127.0.0.1",
        }
    }
}

fn run_inner(args: AppServerArgs) -> anyhow::Result<i32> {
    if args.insecure_no_auth && !is_loopback(args.bind_host()) {
        eprintln!(
            "codewhale: --insecure-no-auth needs a loopback --host (127.0.0.1, ::1, localhost), not `{}`",
            args.bind_host()
        );
        return Ok(crate::exit::USAGE);
    }
    let paths = ConfigPaths::from_env();
    let home = paths.codewhale_home.clone();
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("current directory")?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let origins = match cors::from_config(&home).and_then(|cfg| {
        cors::allow_list(
            &args.cors_origin,
            std::env::var("DEEPSEEK_CORS_ORIGINS").ok(),
            cfg,
        )
    }) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("codewhale: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let env = |n: &str| std::env::var(n).ok();
    let auth = auth::Auth::resolve(args.auth_token.as_deref(), &env, args.insecure_no_auth);
    // The phone page asks for the token: a generated one is never shown,
    // so nobody could unlock it.
    if args.mobile && auth.source == auth::TokenSource::Generated {
        eprintln!(
            "codewhale: --mobile needs a token you can type into the phone page: set CODEWHALE_RUNTIME_TOKEN (or --auth-token, visible in the process list)"
        );
        return Ok(crate::exit::USAGE);
    }
    let (rt, report) = Runtime::open(&home)?;
    if let Some(t) = &report.torn {
        eprintln!(
            "codewhale: runtime event log: removed {} uncommitted byte(s) (seq {} skipped)",
            t.truncated_bytes, t.skipped_seq
        );
    }
    for t in &report.interrupted_turns {
        eprintln!("codewhale: runtime: turn {t} marked interrupted (its process ended mid-turn)");
    }
    // The session files of turns a dead process left open are closed the
    // same way `exec` closes them (receipts read them).
    match crate::session::recover_all(&crate::session::sessions_dir(&home)) {
        Ok(reports) => {
            for r in reports {
                eprintln!(
                    "codewhale: recovered session {}: removed {} uncommitted byte(s){}",
                    r.path.display(),
                    r.truncated_bytes,
                    r.interrupted_turn
                        .map(|t| format!(", turn {t} marked interrupted"))
                        .unwrap_or_default()
                );
            }
        }
        Err(e) => eprintln!("codewhale: session recovery: {e}"),
    }
    let driver = Driver::new(rt, &home, Duration::from_secs(args.approval_timeout));
    let default_model = crate::runtime::request::default_model(&workspace, &home);
    let hub = tasks::Hub::open(
        &home,
        driver.clone(),
        tasks::HubOptions {
            workers: args.task_workers as usize,
            tick: Duration::from_millis(args.scheduler_tick_ms),
            defaults: tasks::queue::Defaults {
                workspace: workspace.clone(),
                model: default_model.clone(),
            },
        },
    )
    .map_err(|e| anyhow::anyhow!("tasks and automations: {e}"))?;
    let hub = Arc::new(hub);
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers as usize)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    if args.stdio {
        let s = stdio::Stdio {
            api: api::Api {
                driver,
                workspace,
                default_model,
                hub,
            },
        };
        let code = tokio_rt.block_on(stdio::serve(s));
        // Do not wait for a blocked stdin read or running turns.
        tokio_rt.shutdown_background();
        return Ok(code);
    }
    tokio_rt.block_on(serve_http(
        args,
        driver,
        auth,
        workspace,
        default_model,
        origins,
        hub,
    ))
}

async fn serve_http(
    args: AppServerArgs,
    driver: Driver,
    auth: auth::Auth,
    workspace: PathBuf,
    default_model: String,
    origins: Vec<String>,
    hub: Arc<tasks::Hub>,
) -> anyhow::Result<i32> {
    let host_arg = args.bind_host().to_string();
    let host: IpAddr = if host_arg == "localhost" {
        IpAddr::from([127, 0, 0, 1])
    } else {
        host_arg
            .parse()
            .with_context(|| format!("--host `{host_arg}` is not an IP address"))?
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(host, args.port))
        .await
        .with_context(|| format!("binding {host_arg}:{}", args.port))?;
    let addr = listener.local_addr()?;
    // Records other processes (exec runs) commit reach subscribers here.
    let rt = driver.runtime().clone();
    tokio::spawn(async move {
        let mut iv = tokio::time::interval(Duration::from_millis(250));
        loop {
            iv.tick().await;
            let r = rt.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || r.refresh()).await {
                eprintln!("codewhale: runtime event log: {e}");
            }
        }
    });
    let auth_note = match auth.source {
        auth::TokenSource::Disabled => "auth disabled (--insecure-no-auth)".to_string(),
        s => format!("token from {}", s.as_str()),
    };
    let web = args
        .web
        .map(|m| Arc::new(web::WebState::new(addr.port(), m.no_open)));
    let state = Arc::new(http::AppState {
        api: api::Api {
            driver,
            workspace,
            default_model,
            hub,
        },
        auth,
        web: web.clone(),
        mobile: args.mobile.then_some(addr.port()),
    });
    let app = http::router(state, cors::layer(&origins));
    eprintln!("codewhale app-server: listening on http://{addr} ({auth_note})");
    if let Some(w) = &web {
        welcome(w);
    }
    if args.mobile {
        web::lan::announce(addr);
    }
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await
    .context("serving")?;
    Ok(crate::exit::OK)
}

/// `codewhale web`: print the link (always: `--no-open` and failed
/// openers need it) and open the browser through a `0600` redirect file,
/// deleted at the first exchange or after ten minutes.
fn welcome(w: &Arc<web::WebState>) {
    let url = w.mint_link();
    println!("codewhale web: {url}");
    println!("(the link works once, for 10 minutes; `codewhale web --new-link` makes another)");
    if w.no_open {
        return;
    }
    let file = match web::open::redirect_file(&web::open::redirect_dir(), &url) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "codewhale web: could not write the redirect file ({e}); open the link above"
            );
            return;
        }
    };
    if let Err(e) = web::open::launch(&file) {
        eprintln!("codewhale web: {e:#}; open the link above");
    }
    *w.redirect_file.lock().unwrap_or_else(|e| e.into_inner()) = Some(file.clone());
    let w2 = w.clone();
    tokio::spawn(async move {
        tokio::time::sleep(web::session::CAPABILITY_TTL).await;
        if let Some(f) = w2
            .redirect_file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = std::fs::remove_file(f);
        }
    });
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        match term {
            Ok(mut t) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = t.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
