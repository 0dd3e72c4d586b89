//! The fake execd (`execd-api.yaml`): `/ping`, `/command` (POST + DELETE),
//! `/files/upload`, `/files/download`.

use super::{error, State, ROUTE_HEADER};
use axum::body::{Body, Bytes};
use axum::extract::{Multipart, RawQuery, State as AxState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

type S = AxState<Arc<State>>;
type Chunk = Result<Bytes, std::io::Error>;

pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/ping", get(ping))
        .route("/command", post(run).delete(interrupt))
        .route("/files/upload", post(upload))
        .route("/files/download", get(download))
        .with_state(state)
}

/// Auth as a real secured deployment would do it, plus the invariant
/// under test: the lifecycle key never arrives here.
fn check(st: &State, headers: &HeaderMap, route: &str) -> Result<(), Response> {
    if headers.contains_key("OPEN-SANDBOX-API-KEY") {
        st.lock()
            .violations
            .push(format!("lifecycle API key sent to execd {route}"));
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "WRONG_CREDENTIAL",
            "the lifecycle key is not an execd credential",
        ));
    }
    if let Some(tok) = &st.opts.execd_token {
        if headers
            .get("X-EXECD-ACCESS-TOKEN")
            .and_then(|v| v.to_str().ok())
            != Some(tok.as_str())
        {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                "missing or wrong X-EXECD-ACCESS-TOKEN",
            ));
        }
    }
    let route_id = headers
        .get(ROUTE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match st.lock().sandboxes.get(route_id) {
        Some(s) if s.state == "Running" => Ok(()),
        _ => Err(error(
            StatusCode::FORBIDDEN,
            "NO_ROUTE",
            "endpoint headers missing or sandbox gone",
        )),
    }
}

fn inside_root(st: &State, p: &str) -> Option<PathBuf> {
    let p = PathBuf::from(p);
    let ok = p.is_absolute()
        && p.starts_with(&st.opts.fs_root)
        && !p.components().any(|c| c.as_os_str() == "..");
    ok.then_some(p)
}

async fn ping(AxState(st): S, headers: HeaderMap) -> Response {
    st.record("execd", "GET", "/ping", "", &headers, None);
    if let Err(r) = check(&st, &headers, "/ping") {
        return r;
    }
    StatusCode::OK.into_response()
}

fn frame(st: &State, v: Value) -> Bytes {
    let prefix = if st.opts.data_prefix { "data: " } else { "" };
    Bytes::from(format!("{prefix}{v}\n\n"))
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

async fn run(AxState(st): S, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    st.record(
        "execd",
        "POST",
        "/command",
        "",
        &headers,
        Some(body.clone()),
    );
    if let Err(r) = check(&st, &headers, "/command") {
        return r;
    }
    let Some(command) = body
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST_BODY",
            "command is required",
        );
    };
    let cwd = body
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    let envs: Vec<(String, String)> = body
        .get("envs")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let timeout_ms = body.get("timeout").and_then(Value::as_u64);
    let mut child = match tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(&cwd)
        .envs(envs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "RUNTIME_ERROR",
                &format!("spawn in {cwd}: {e}"),
            )
        }
    };
    let id = {
        let mut sh = st.lock();
        sh.next_id += 1;
        let id = format!("cmd-{}", sh.next_id);
        if let Some(pid) = child.id() {
            sh.running.insert(id.clone(), pid as i32);
        }
        id
    };
    let (tx, rx) = mpsc::channel::<Chunk>(256);
    let st2 = st.clone();
    tokio::spawn(async move {
        let st = st2;
        let _ = tx
            .send(Ok(frame(
                &st,
                json!({"type": "init", "text": id, "timestamp": now_ms()}),
            )))
            .await;
        let mut readers = Vec::new();
        for (kind, pipe) in [
            (
                "stdout",
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
            (
                "stderr",
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
        ] {
            let (tx, st) = (tx.clone(), st.clone());
            readers.push(tokio::spawn(async move {
                let Some(mut pipe) = pipe else { return };
                // execd's `readFromPos` (components/execd/pkg/runtime/
                // command_common.go): `\n` and `\r` both end a line (a
                // `\r\n` pair once), the text goes without its terminator,
                // a blank line is sent as "\n", and the unterminated rest
                // is flushed when the command ends.
                let mut split = LineSplit::default();
                let mut buf = [0u8; 4096];
                loop {
                    let n = match pipe.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    for text in split.feed(&buf[..n]) {
                        let ev = json!({"type": kind, "text": text, "timestamp": now_ms()});
                        if tx.send(Ok(frame(&st, ev))).await.is_err() {
                            return;
                        }
                    }
                }
                if let Some(text) = split.finish() {
                    let ev = json!({"type": kind, "text": text, "timestamp": now_ms()});
                    let _ = tx.send(Ok(frame(&st, ev))).await;
                }
            }));
        }
        let pinger = {
            let (tx, st) = (tx.clone(), st.clone());
            tokio::spawn(async move {
                let mut t = tokio::time::interval(st.opts.ping_every);
                t.tick().await;
                loop {
                    t.tick().await;
                    if tx
                        .send(Ok(frame(
                            &st,
                            json!({"type": "ping", "text": "pong", "timestamp": now_ms()}),
                        )))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            })
        };
        let started = std::time::Instant::now();
        let status = match timeout_ms {
            Some(ms) => {
                match tokio::time::timeout(std::time::Duration::from_millis(ms), child.wait()).await
                {
                    Ok(s) => s.ok(),
                    Err(_) => {
                        let _ = child.start_kill();
                        child.wait().await.ok()
                    }
                }
            }
            None => child.wait().await.ok(),
        };
        for r in readers {
            let _ = r.await;
        }
        pinger.abort();
        st.lock().running.remove(&id);
        let code = status.and_then(|s| s.code()).unwrap_or(-1);
        let ev = if code == 0 {
            json!({"type": "execution_complete", "execution_time": started.elapsed().as_millis() as u64, "timestamp": now_ms()})
        } else {
            json!({"type": "error", "timestamp": now_ms(), "error": {
                "ename": "CommandExecError", "evalue": code.to_string(),
                "traceback": [format!("exit status {code}")]}})
        };
        let _ = tx.send(Ok(frame(&st, ev))).await;
        // execd keeps the connection open for a while after the last event.
        tokio::time::sleep(st.opts.close_delay).await;
        if st.opts.drop_final_chunk {
            // An error in the body stream makes hyper abort the connection
            // without the terminating zero-length chunk.
            let _ = tx
                .send(Err(std::io::Error::other("connection dropped")))
                .await;
        }
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn interrupt(AxState(st): S, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    st.record(
        "execd",
        "DELETE",
        "/command",
        q.as_deref().unwrap_or(""),
        &headers,
        None,
    );
    if let Err(r) = check(&st, &headers, "DELETE /command") {
        return r;
    }
    let id = url::form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "id")
        .map(|(_, v)| v.into_owned());
    let Some(id) = id else {
        return error(StatusCode::BAD_REQUEST, "MISSING_QUERY", "id is required");
    };
    let pgid = st.lock().running.get(&id).copied();
    st.lock().interrupted.push(id.clone());
    match pgid {
        Some(pg) => {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pg),
                nix::sys::signal::Signal::SIGKILL,
            );
            StatusCode::OK.into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            "COMMAND_NOT_FOUND",
            "no running command with that id",
        ),
    }
}

/// `POST /files/upload` as execd's `UploadFile`
/// (`components/execd/pkg/web/controller/filesystem_upload.go`): the form
/// is parsed as Go's `mime/multipart` does (`Reader.ReadForm`): a part
/// with a `filename` in its Content-Disposition is a *file*, one without is
/// a *value*. execd reads only `form.File["metadata"]` and
/// `form.File["file"]`, so a metadata part sent without a filename is
/// invisible to it: `400 INVALID_FILE_METADATA "metadata file is missing"`.
/// Metadata and file parts are paired by index and must be equally many.
async fn upload(AxState(st): S, headers: HeaderMap, mut mp: Multipart) -> Response {
    st.record("execd", "POST", "/files/upload", "", &headers, None);
    if let Err(r) = check(&st, &headers, "/files/upload") {
        return r;
    }
    // form.File[name], in order; values (no filename) are kept apart and
    // never read, as execd never reads form.Value.
    let mut metadata_files: Vec<Bytes> = Vec::new();
    let mut file_files: Vec<Bytes> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                // c.ctx.MultipartForm() failed.
                return error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_FILE",
                    &format!("multipart form is empty ({e})"),
                );
            }
        };
        let name = field.name().unwrap_or("").to_string();
        let is_file = field.file_name().is_some();
        let bytes = field.bytes().await.unwrap_or_default();
        match (is_file, name.as_str()) {
            (true, "metadata") => metadata_files.push(bytes),
            (true, "file") => file_files.push(bytes),
            (true, _) => {}
            (false, _) => values.push(name),
        }
    }
    if !values.is_empty() {
        st.lock().upload_value_parts.extend(values);
    }
    if metadata_files.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_FILE_METADATA",
            "metadata file is missing",
        );
    }
    if file_files.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_FILE_CONTENT",
            "file is missing",
        );
    }
    if metadata_files.len() != file_files.len() {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_FILE",
            &format!(
                "metadata and file count mismatch: {} vs {}",
                metadata_files.len(),
                file_files.len()
            ),
        );
    }
    for (meta, bytes) in metadata_files.iter().zip(&file_files) {
        let m: Value = match serde_json::from_slice(meta) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_FILE_METADATA",
                    &format!("invalid metadata format. {e}"),
                )
            }
        };
        st.lock().upload_metadata.push(m.clone());
        let Some(raw) = m
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            return error(
                StatusCode::BAD_REQUEST,
                "INVALID_FILE_METADATA",
                "metadata path is empty",
            );
        };
        let Some(path) = inside_root(&st, raw) else {
            return error(
                StatusCode::BAD_REQUEST,
                "INVALID_PATH",
                "path outside the fake's sandbox root",
            );
        };
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&path, bytes) {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "RUNTIME_ERROR",
                &e.to_string(),
            );
        }
        if let Some(mode) = m.get("mode").and_then(Value::as_u64) {
            set_mode(&path, &mode.to_string());
        }
    }
    StatusCode::OK.into_response()
}

/// `mode` is octal digits written as a decimal integer (644 → 0o644).
fn set_mode(path: &Path, digits: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = u32::from_str_radix(digits, 8) {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(m));
    }
}

async fn download(AxState(st): S, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    st.record(
        "execd",
        "GET",
        "/files/download",
        q.as_deref().unwrap_or(""),
        &headers,
        None,
    );
    if let Err(r) = check(&st, &headers, "/files/download") {
        return r;
    }
    let path = url::form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "path")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let Some(p) = inside_root(&st, &path) else {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_PATH",
            "path outside the sandbox root",
        );
    };
    match std::fs::read(&p) {
        Ok(b) => (
            StatusCode::OK,
            [("content-type", "application/octet-stream")],
            b,
        )
            .into_response(),
        Err(_) => error(StatusCode::NOT_FOUND, "FILE_NOT_FOUND", "file not found"),
    }
}

/// Line splitting as execd's `readFromPos` does it.
#[derive(Default)]
struct LineSplit {
    buf: Vec<u8>,
    last_cr: bool,
}

impl LineSplit {
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                if !self.buf.is_empty() {
                    out.push(String::from_utf8_lossy(&self.buf).into_owned());
                    self.buf.clear();
                } else if !(b == b'\n' && self.last_cr) {
                    out.push("\n".to_string());
                }
                self.last_cr = b == b'\r';
                continue;
            }
            self.last_cr = false;
            self.buf.push(b);
        }
        out
    }

    fn finish(&mut self) -> Option<String> {
        (!self.buf.is_empty())
            .then(|| String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned())
    }
}
