#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench may panic
//! The landlock tier's opener (src/host/backends/landlock/opener/): what it
//! costs, measured in one process, interleaved, medians and ranges.
//!
//! Cases, each a `codewhale sandbox run --backend landlock` of a Python
//! loop that opens, reads and closes one file N times:
//! - `no-carve`: a workspace without `.env` (no opener: the baseline);
//! - `carve-old`: with `.env`, an entry that existed before the run (every
//!   open is notified and handed back to the kernel);
//! - `carve-new`: with `.env`, a file the command created (every open is
//!   served by the supervisor).
//!
//! And `cargo build` of a tiny crate in the workspace root, with and
//! without `.env` (the build's reads of `target/` go through the opener).
//! Run: `cargo bench --bench landlock_opener`. Reported, never asserted.

#[cfg(target_os = "linux")]
fn main() {
    imp::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("landlock_opener: Linux only");
}

#[cfg(target_os = "linux")]
mod imp {
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::Instant;

    const OPENS: usize = 20_000;
    const ROUNDS: usize = 5;

    const LOOP: &str = "import os, sys, time\n\
p = sys.argv[1]; n = int(sys.argv[2])\n\
if not os.path.exists(p):\n    open(p, 'w').write('x')\n\
t = time.perf_counter()\n\
for _ in range(n):\n    fd = os.open(p, os.O_RDONLY); os.read(fd, 1); os.close(fd)\n\
print(n / (time.perf_counter() - t))\n";

    fn ws(env: bool) -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("loop.py"), LOOP).unwrap();
        std::fs::write(ws.join("old.txt"), "x").unwrap();
        if env {
            std::fs::write(ws.join(".env"), "SECRET=1").unwrap();
        }
        (t, ws)
    }

    fn run(bin: &str, ws: &Path, argv: &[&str]) -> (bool, String, f64) {
        let t = Instant::now();
        let out = Command::new(bin)
            .args([
                "sandbox",
                "run",
                "--sandbox",
                "workspace-write",
                "--backend",
                "landlock",
                "-C",
            ])
            .arg(ws)
            .arg("--")
            .args(argv)
            .current_dir(ws)
            .env("HOME", ws.parent().unwrap().join("home"))
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            t.elapsed().as_secs_f64(),
        )
    }

    fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[0], v[v.len() - 1])
    }

    fn load() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub fn main() {
        let bin = std::env::var("CODEWHALE_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_codewhale").to_string());
        println!("landlock_opener: load before: {}", load());
        let cases: [(&str, bool, &str); 3] = [
            ("no-carve", false, "old.txt"),
            ("carve-old", true, "old.txt"),
            ("carve-new", true, "new.txt"),
        ];
        let n = OPENS.to_string();
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        for _ in 0..ROUNDS {
            for (i, (name, env, file)) in cases.iter().enumerate() {
                let (_t, ws) = ws(*env);
                let (ok, out, _) = run(&bin, &ws, &["python3", "loop.py", file, &n]);
                assert!(ok, "{name}: {out}");
                rates[i].push(out.trim().parse().unwrap());
            }
        }
        let base = stats(rates[0].clone()).0;
        for (i, (name, ..)) in cases.iter().enumerate() {
            let (med, lo, hi) = stats(rates[i].clone());
            println!(
                "opens/s {name:10} median {med:9.0}  range {lo:9.0}..{hi:9.0}  ratio vs no-carve {:.2}",
                med / base
            );
        }
        // cargo build of a tiny crate in the root, with and without .env.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let cargo_dir = Path::new(&cargo).parent().map(Path::to_path_buf);
        let path = match &cargo_dir {
            Some(d) if !d.as_os_str().is_empty() => format!("{}:/usr/bin:/bin", d.display()),
            _ => "/usr/bin:/bin".into(),
        };
        let script = format!(
            "export PATH='{path}' CARGO_HOME=$PWD/.cargo-home CARGO_TARGET_DIR=$PWD/target; \
             unset RUSTC_WRAPPER; cargo build --offline -q"
        );
        let mut secs: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..3 {
            for (i, env) in [false, true].into_iter().enumerate() {
                let (_t, ws) = ws(env);
                std::fs::write(
                    ws.join("Cargo.toml"),
                    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
                )
                .unwrap();
                std::fs::create_dir_all(ws.join("src")).unwrap();
                std::fs::write(ws.join("src/main.rs"), "fn main() { println!(\"hi\"); }\n")
                    .unwrap();
                let (ok, out, s) = run(&bin, &ws, &["sh", "-c", &script]);
                assert!(ok, "cargo build (env={env}): {out}");
                secs[i].push(s);
            }
        }
        let (b, blo, bhi) = stats(secs[0].clone());
        let (c, clo, chi) = stats(secs[1].clone());
        println!("cargo build  no-carve  median {b:.2}s range {blo:.2}..{bhi:.2}");
        println!(
            "cargo build  carve     median {c:.2}s range {clo:.2}..{chi:.2}  ratio {:.2}",
            c / b
        );
        println!("landlock_opener: load after: {}", load());
    }
}
