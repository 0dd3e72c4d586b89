//! Headless output: `text` (answer on stdout, progress on stderr),
//! `stream-json` (one `codewhale.exec-stream` object per line on stdout) and
//! `json` (one `codewhale.exec-summary` object at the end). The event set
//! and fields are documented in `docs/EXEC.md`; changing them bumps
//! [`SCHEMA_VERSION`].

use serde_json::{json, Value};
use std::io::Write;

pub const STREAM_SCHEMA: &str = "codewhale.exec-stream";
pub const SUMMARY_SCHEMA: &str = "codewhale.exec-summary";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
#[clap(rename_all = "kebab-case")]
pub enum OutputFormat {
    #[default]
    Text,
    StreamJson,
    /// Set by `--json`.
    #[clap(skip)]
    Json,
}

/// A second reader of everything the loop reports (the runtime records
/// each event as thread/turn/item events). It sees every event in every
/// output format, before it is written.
pub trait EventTap: Send {
    /// A streamed piece of the model's answer.
    fn content(&mut self, text: &str);
    /// One stream event (the `type` and its fields, as in `stream-json`).
    fn event(&mut self, ty: &str, fields: &Value);
}

/// Writes events in the chosen format. Output errors (a closed pipe) are
/// ignored here: the session file is the durable record.
pub struct Emitter {
    format: OutputFormat,
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
    /// Text mode: whether stdout ends with a newline.
    at_line_start: bool,
    tap: Option<Box<dyn EventTap>>,
}

impl Emitter {
    pub fn new(
        format: OutputFormat,
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
    ) -> Self {
        Emitter {
            format,
            out,
            err,
            at_line_start: true,
            tap: None,
        }
    }

    /// Also hand every event to `tap`.
    pub fn with_tap(mut self, tap: Box<dyn EventTap>) -> Self {
        self.tap = Some(tap);
        self
    }

    pub fn stdio(format: OutputFormat) -> Self {
        Emitter::new(
            format,
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        )
    }

    pub fn format(&self) -> OutputFormat {
        self.format
    }

    /// A streamed piece of the model's answer.
    pub fn content(&mut self, text: &str) {
        if let Some(t) = &mut self.tap {
            t.content(text);
        }
        match self.format {
            OutputFormat::Text => {
                let _ = self.out.write_all(text.as_bytes());
                let _ = self.out.flush();
                if let Some(last) = text.chars().last() {
                    self.at_line_start = last == '\n';
                }
            }
            OutputFormat::StreamJson => self.event("content", json!({"text": text})),
            OutputFormat::Json => {}
        }
    }

    /// A message for the human (stderr in every format).
    pub fn note(&mut self, msg: &str) {
        let _ = writeln!(self.err, "codewhale: {msg}");
    }

    /// One stream event. `fields` must be an object.
    pub fn event(&mut self, ty: &str, fields: Value) {
        if let Some(t) = &mut self.tap {
            t.event(ty, &fields);
        }
        match self.format {
            OutputFormat::StreamJson => {
                let mut v =
                    json!({"type": ty, "schema": STREAM_SCHEMA, "schema_version": SCHEMA_VERSION});
                if let (Some(dst), Value::Object(src)) = (v.as_object_mut(), fields) {
                    dst.extend(src);
                }
                let _ = writeln!(self.out, "{v}");
                let _ = self.out.flush();
            }
            OutputFormat::Text => self.progress(ty, &fields),
            OutputFormat::Json => {}
        }
    }

    /// The end-of-run summary (`--json` only).
    pub fn summary(&mut self, mut v: Value) {
        if self.format == OutputFormat::Json {
            if let Some(o) = v.as_object_mut() {
                o.insert("schema".into(), SUMMARY_SCHEMA.into());
                o.insert("schema_version".into(), SCHEMA_VERSION.into());
            }
            let _ = writeln!(self.out, "{v}");
            let _ = self.out.flush();
        }
        if self.format == OutputFormat::Text && !self.at_line_start {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
            self.at_line_start = true;
        }
    }

    fn progress(&mut self, ty: &str, f: &Value) {
        let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let line = match ty {
            "metadata" => format!(
                "provider {} · model {} · approval {} · sandbox {}",
                s("provider"),
                s("model"),
                s("approval"),
                s("sandbox")
            ),
            "tool_use" => {
                let args = f.get("args").map(Value::to_string).unwrap_or_default();
                let short: String = args.chars().take(160).collect();
                format!("→ {} {short}", s("tool"))
            }
            "approval" if s("outcome") != "allow" => {
                format!(
                    "  ✗ not run ({}, by {}): {}",
                    s("outcome"),
                    s("decided_by"),
                    s("reason")
                )
            }
            "tool_result" => {
                let exit = f.get("exit_code").and_then(Value::as_i64);
                let ms = f.get("duration_ms").and_then(Value::as_u64).unwrap_or(0);
                match exit {
                    Some(c) => format!("  ← {} (exit {c}, {ms} ms)", s("status")),
                    None => format!("  ← {} ({ms} ms)", s("status")),
                }
            }
            "sandbox_denied" => format!("  sandbox denied: {}", s("reason")),
            "compaction" => format!(
                "context compacted ({}): ~{} → ~{} tokens of a {}-token window",
                s("reason"),
                f["tokens_before"],
                f["tokens_after"],
                f["window"]
            ),
            "turn_usage" => format!(
                "  tokens in {} (cached {}) / out {} (reasoning {}) · cost {}",
                f["input_tokens"],
                f["cached_input_tokens"],
                f["output_tokens"],
                match &f["reasoning_tokens"] {
                    Value::Null => "not reported".to_string(),
                    v => v.to_string(),
                },
                s("cost")
            ),
            "model_choice" => {
                let mut line = format!("model {}/{} ({})", s("provider"), s("model"), s("reason"));
                if s("used_provider") != s("provider") || s("used_model") != s("model") {
                    line.push_str(&format!(
                        " → fell back to {}/{}",
                        s("used_provider"),
                        s("used_model")
                    ));
                }
                line
            }
            "done" => format!(
                "done: {} · {} turn(s) · tokens in {} (cached {}) / out {} · cost {}",
                s("status"),
                f["turns"],
                f["input_tokens"],
                f["cached_input_tokens"],
                f["output_tokens"],
                s("cost")
            ),
            "error" => format!("error: {}", s("message")),
            _ => return,
        };
        let _ = writeln!(self.err, "{line}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn stream_json_lines_carry_schema() {
        let (o, e) = (Buf::default(), Buf::default());
        let mut em = Emitter::new(
            OutputFormat::StreamJson,
            Box::new(o.clone()),
            Box::new(e.clone()),
        );
        em.content("hi");
        em.event("done", json!({"status": "completed"}));
        let lines: Vec<Value> = o
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        for l in &lines {
            assert_eq!(l["schema"], STREAM_SCHEMA);
            assert_eq!(l["schema_version"], SCHEMA_VERSION);
        }
        assert_eq!(lines[0]["type"], "content");
        assert_eq!(lines[1]["status"], "completed");
    }

    #[test]
    fn text_puts_answer_on_stdout_progress_on_stderr() {
        let (o, e) = (Buf::default(), Buf::default());
        let mut em = Emitter::new(OutputFormat::Text, Box::new(o.clone()), Box::new(e.clone()));
        em.event(
            "tool_use",
            json!({"tool": "read_file", "args": {"path": "a"}}),
        );
        em.content("answer");
        em.summary(json!({}));
        assert_eq!(o.text(), "answer\n");
        assert!(e.text().contains("→ read_file"));
    }
}
