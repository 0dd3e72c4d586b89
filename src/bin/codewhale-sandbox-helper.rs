//! The in-sandbox helper stage as its own small executable.
//!
//! Every sandboxed spawn executes the helper once inside bwrap. The full
//! `codewhale` binary links the TLS stack (rustls on Linux) and the whole
//! CLI; this entry point links neither (the linker drops what it never
//! calls), which makes the per-spawn cost smaller. It takes exactly the argv of the
//! hidden subcommand: `__sandbox-helper --spec JSON -- CMD [ARGS…]`, and
//! `__egress-connect HOST PORT` (the ssh `ProxyCommand` of an allow-list
//! sandbox, `net::connect`).
//! `host::backends::bwrap::spawn` uses it when it sits next to the running `codewhale`, and
//! falls back to `codewhale __sandbox-helper` otherwise.

fn main() {
    std::process::exit(run());
}

#[cfg(target_os = "linux")]
fn run() -> i32 {
    use codewhale::host::backends::bwrap::helper;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [sub, host, port] if sub == codewhale::net::connect::SUBCOMMAND => {
            match (host.to_str(), port.to_str()) {
                (Some(h), Some(p)) => codewhale::net::connect::main(h, p),
                _ => usage("__egress-connect HOST PORT: not UTF-8"),
            }
        }
        [sub, flag, spec, dashes, command @ ..]
            if sub == helper::SUBCOMMAND && flag == "--spec" && dashes == "--" =>
        {
            match spec.to_str() {
                Some(spec) => helper::main(spec, command),
                None => usage("--spec is not UTF-8"),
            }
        }
        _ => usage("expected: __sandbox-helper --spec JSON -- CMD [ARGS…]"),
    }
}

#[cfg(target_os = "linux")]
fn usage(why: &str) -> i32 {
    eprintln!(
        "codewhale-sandbox-helper: {why} (this program is started by codewhale inside bwrap)"
    );
    codewhale::exit::SANDBOX_SETUP
}

#[cfg(not(target_os = "linux"))]
fn run() -> i32 {
    eprintln!("codewhale-sandbox-helper: the sandbox helper runs only on Linux");
    codewhale::exit::SANDBOX_SETUP
}
