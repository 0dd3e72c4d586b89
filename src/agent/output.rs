//! Headless output: `text` (answer on stdout, progress on stderr),
//! `stream-json` (one `codewhale.exec-stream` object per line on stdout) and
//! `json` (one `codewhale.exec-summary` object at the end). The event set
//! and fields are documented in `docs/EXEC.md`; changing them bumps
//! [`SCHEMA_VERSION`].

use super::event::Event;
use serde_json::Value;
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
/// output format, before it is written, as the typed value.
pub trait EventTap: Send {
    /// A streamed piece of the model's answer.
    fn content(&mut self, text: &str);
    /// One step of the run (never [`Event::Content`]: that is `content`).
    fn event(&mut self, ev: &Event);
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
            OutputFormat::StreamJson => self.write_stream(&Event::Content {
                text: text.to_string(),
            }),
            OutputFormat::Json => {}
        }
    }

    /// A message for the human (stderr in every format).
    pub fn note(&mut self, msg: &str) {
        let _ = writeln!(self.err, "codewhale: {msg}");
    }

    /// One step of the run: to the tap, then in the chosen format.
    pub fn emit(&mut self, ev: Event) {
        if let Some(t) = &mut self.tap {
            t.event(&ev);
        }
        match self.format {
            OutputFormat::StreamJson => self.write_stream(&ev),
            OutputFormat::Text => {
                if let Some(line) = ev.progress_line() {
                    let _ = writeln!(self.err, "{line}");
                }
            }
            OutputFormat::Json => {}
        }
    }

    /// One stream-json line: the event's serde form plus the schema.
    fn write_stream(&mut self, ev: &Event) {
        let mut v = serde_json::to_value(ev).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("schema".into(), STREAM_SCHEMA.into());
            o.insert("schema_version".into(), SCHEMA_VERSION.into());
        }
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    /// A writer the test reads back (other modules' tests use it too).
    #[derive(Clone, Default)]
    pub(crate) struct Buf(Arc<Mutex<Vec<u8>>>);
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
        pub(crate) fn text(&self) -> String {
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
        em.emit(Event::Error(crate::agent::event::ErrorEvent {
            message: "boom".into(),
            category: "provider".into(),
            exit_code: 1,
        }));
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
        assert_eq!(lines[1]["type"], "error");
        assert_eq!(lines[1]["message"], "boom");
    }

    #[test]
    fn text_puts_answer_on_stdout_progress_on_stderr() {
        let (o, e) = (Buf::default(), Buf::default());
        let mut em = Emitter::new(OutputFormat::Text, Box::new(o.clone()), Box::new(e.clone()));
        em.emit(Event::ToolUse(crate::agent::event::ToolUse {
            call_id: "c1".into(),
            tool: "read_file".into(),
            args: json!({"path": "a"}),
            mcp: None,
        }));
        em.content("answer");
        em.summary(json!({}));
        assert_eq!(o.text(), "answer\n");
        assert!(e.text().contains("→ read_file"));
    }
}
