//! Parser for execd's command event stream (`POST /command`).
//!
//! The spec calls it SSE, but execd really writes each event as one raw JSON
//! object on its own line followed by a blank line; some deployments (and
//! proxies) add the SSE `data:` prefix. This parser accepts both, and also
//! JSON split over several lines: lines are accumulated until they form a
//! complete JSON object. SSE comment (`:`) and `event:`/`id:`/`retry:`
//! lines are skipped.
//!
//! Pure and incremental: feed bytes as they arrive, get events out.

use serde::Deserialize;

/// One decoded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// The command started; `text` is the command id used by `DELETE /command?id=`.
    Init { id: String },
    /// One line of standard output (execd strips the newline).
    Stdout(String),
    /// One line of standard error.
    Stderr(String),
    /// Keep-alive; carries nothing.
    Ping,
    /// Terminal: the command exited 0.
    Complete,
    /// Terminal: the command failed; for commands `evalue` is the exit code as text.
    Error {
        ename: String,
        evalue: String,
        traceback: Vec<String>,
    },
    /// Any other event type (`status`, `result`, `execution_count`, …).
    Other(String),
    /// A block that was not valid JSON (kept for the report, never fatal).
    Malformed(String),
}

impl StreamEvent {
    /// Whether the stream is over after this event.
    pub fn is_terminal(&self) -> bool {
        matches!(self, StreamEvent::Complete | StreamEvent::Error { .. })
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    error: Option<RawError>,
}

#[derive(Deserialize, Default)]
struct RawError {
    #[serde(default)]
    ename: String,
    #[serde(default)]
    evalue: String,
    #[serde(default)]
    traceback: Vec<String>,
}

/// Incremental decoder.
#[derive(Debug, Default)]
pub struct EventParser {
    /// Bytes of a line not yet terminated by `\n`.
    partial: Vec<u8>,
    /// Lines of the event being assembled.
    block: String,
}

impl EventParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        self.partial.extend_from_slice(chunk);
        while let Some(pos) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            self.line(line.trim_end_matches('\r'), &mut out);
        }
        out
    }

    /// End of stream: decode whatever is left (a last event without its blank line).
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            let line = String::from_utf8_lossy(&rest).into_owned();
            self.line(line.trim_end_matches('\r'), &mut out);
        }
        self.flush(&mut out);
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<StreamEvent>) {
        if line.trim().is_empty() {
            self.flush(out);
            return;
        }
        if line.starts_with(':')
            || ["event:", "id:", "retry:"]
                .iter()
                .any(|p| line.starts_with(p))
        {
            return;
        }
        let data = match line.strip_prefix("data:") {
            Some(rest) => rest.strip_prefix(' ').unwrap_or(rest),
            None => line,
        };
        if !self.block.is_empty() {
            self.block.push('\n');
        }
        self.block.push_str(data);
        // Dispatch as soon as the block is a complete object, so a stream
        // that omits the blank separator still yields events promptly.
        if let Ok(raw) = serde_json::from_str::<Raw>(&self.block) {
            self.block.clear();
            out.push(decode(raw));
        }
    }

    fn flush(&mut self, out: &mut Vec<StreamEvent>) {
        if self.block.trim().is_empty() {
            self.block.clear();
            return;
        }
        let block = std::mem::take(&mut self.block);
        match serde_json::from_str::<Raw>(&block) {
            Ok(raw) => out.push(decode(raw)),
            Err(_) => out.push(StreamEvent::Malformed(block.chars().take(200).collect())),
        }
    }
}

fn decode(raw: Raw) -> StreamEvent {
    let text = raw.text.unwrap_or_default();
    match raw.kind.as_str() {
        "init" => StreamEvent::Init { id: text },
        "stdout" => StreamEvent::Stdout(text),
        "stderr" => StreamEvent::Stderr(text),
        "ping" => StreamEvent::Ping,
        "execution_complete" => StreamEvent::Complete,
        "error" => {
            let e = raw.error.unwrap_or_default();
            StreamEvent::Error {
                ename: e.ename,
                evalue: e.evalue,
                traceback: e.traceback,
            }
        }
        other => StreamEvent::Other(other.to_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn all(p: &mut EventParser, chunks: &[&[u8]]) -> Vec<StreamEvent> {
        let mut v: Vec<StreamEvent> = chunks.iter().flat_map(|c| p.push(c)).collect();
        v.extend(p.finish());
        v
    }

    #[test]
    fn raw_json_with_blank_lines_split_anywhere() {
        let stream = b"{\"type\":\"init\",\"text\":\"cmd-1\",\"timestamp\":1}\n\n{\"type\":\"stdout\",\"text\":\"hi\"}\n\n{\"type\":\"ping\"}\n\n{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\",\"traceback\":[\"exit status 3\"]}}\n\n";
        for cut in 0..stream.len() {
            let mut p = EventParser::new();
            let ev = all(&mut p, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(
                ev,
                vec![
                    StreamEvent::Init { id: "cmd-1".into() },
                    StreamEvent::Stdout("hi".into()),
                    StreamEvent::Ping,
                    StreamEvent::Error {
                        ename: "CommandExecError".into(),
                        evalue: "3".into(),
                        traceback: vec!["exit status 3".into()]
                    }
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn data_prefix_comments_and_crlf() {
        let mut p = EventParser::new();
        let ev = all(
            &mut p,
            &[b": keepalive\r\nevent: x\r\ndata: {\"type\":\"stdout\",\"text\":\"a\"}\r\n\r\ndata:{\"type\":\"execution_complete\",\"execution_time\":5}\r\n\r\n"],
        );
        assert_eq!(
            ev,
            vec![StreamEvent::Stdout("a".into()), StreamEvent::Complete]
        );
    }

    #[test]
    fn json_over_several_lines_and_missing_final_blank() {
        let mut p = EventParser::new();
        let ev = all(
            &mut p,
            &[b"{\"type\":\n\"stderr\",\n\"text\":\"e\"}\n{\"type\":\"execution_complete\"}"],
        );
        assert_eq!(
            ev,
            vec![StreamEvent::Stderr("e".into()), StreamEvent::Complete]
        );
    }

    #[test]
    fn garbage_is_reported_not_fatal() {
        let mut p = EventParser::new();
        let ev = all(
            &mut p,
            &[b"not json\n\n{\"type\":\"status\",\"text\":\"x\"}\n\n"],
        );
        assert_eq!(
            ev,
            vec![
                StreamEvent::Malformed("not json".into()),
                StreamEvent::Other("status".into())
            ]
        );
        assert!(!ev[1].is_terminal());
    }
}
