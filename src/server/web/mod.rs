//! `codewhale web`: the runtime API on loopback with a browser client.
//! The page's assets are embedded ([`assets`]); the browser is admitted by
//! a single-use link exchanged for an `HttpOnly; SameSite=Strict` cookie
//! ([`session`]); every request passes the `Host` and origin checks
//! ([`guard`]). The runtime token stays with the terminal: bearer clients
//! use it unchanged, the browser never sees it.

pub mod assets;
pub mod guard;
pub mod lan;
pub mod mobile;
pub mod open;
pub mod routes;
pub mod session;

use clap::Args;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct WebArgs {
    /// Port on 127.0.0.1 (0: any free port). The server never binds
    /// another host.
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// Print the link without opening a browser.
    #[arg(long)]
    pub no_open: bool,
    /// Ask the server already running on --port for a fresh link (needs
    /// its token: --auth-token or CODEWHALE_RUNTIME_TOKEN) and print it.
    #[arg(long)]
    pub new_link: bool,
    /// The runtime token (else CODEWHALE_RUNTIME_TOKEN, else a generated
    /// one that is not printed).
    #[arg(long, value_name = "TOKEN")]
    pub auth_token: Option<String>,
    /// Seconds a question waits for an answer before it is denied as
    /// `no response`.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub approval_timeout: u64,
    /// Workspace of new threads (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// What the HTTP server needs to serve the browser client.
pub struct WebState {
    pub port: u16,
    pub sessions: Mutex<WebSessions>,
    /// The `0600` file the browser was opened with (deleted at the first
    /// exchange, or after [`session::CAPABILITY_TTL`]).
    pub redirect_file: Mutex<Option<PathBuf>>,
    pub no_open: bool,
}

pub use session::WebSessions;

impl WebState {
    pub fn new(port: u16, no_open: bool) -> Self {
        WebState {
            port,
            sessions: Mutex::new(WebSessions::default()),
            redirect_file: Mutex::new(None),
            no_open,
        }
    }

    pub fn mint_link(&self) -> String {
        let cap = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mint(Instant::now());
        format!("http://127.0.0.1:{}/bootstrap/{cap}", self.port)
    }

    pub fn session_valid(&self, cookie: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .valid(cookie, Instant::now())
    }
}

/// `codewhale web`.
pub fn run(args: WebArgs) -> i32 {
    if args.new_link {
        return match open::new_link(args.port, args.auth_token.as_deref()) {
            Ok(url) => {
                println!("{url}");
                crate::exit::OK
            }
            Err(e) => {
                crate::exit::report_error(&e);
                crate::exit::FAILURE
            }
        };
    }
    let server = super::AppServerArgs {
        http: true,
        stdio: false,
        host: Some("127.0.0.1".into()),
        port: args.port,
        mobile: false,
        workers: 2,
        auth_token: args.auth_token,
        insecure_no_auth: false,
        cors_origin: Vec::new(),
        approval_timeout: args.approval_timeout,
        workspace: args.workspace,
        task_workers: 2,
        scheduler_tick_ms: 15_000,
        web: Some(super::WebMode {
            no_open: args.no_open,
        }),
    };
    super::run(server)
}
