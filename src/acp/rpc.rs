//! Newline-delimited JSON-RPC 2.0 on stdio for the ACP agent: one writer
//! (stdout carries protocol lines only, in the order they were queued) and
//! the table of our own requests to the client (`session/request_permission`)
//! waiting for their responses.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A response to one of our requests: its `result`, or its `error` object.
pub type Reply = Result<Value, Value>;

/// What a line from the client is.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        reply: Reply,
    },
    /// Not JSON (-32700) or not a JSON-RPC 2.0 message (-32600).
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Classify one line.
pub fn parse_line(line: &str) -> Incoming {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                code: -32700,
                message: format!("parse error: {e}"),
            }
        }
    };
    let id = v.get("id").cloned();
    let valid_id = matches!(
        id,
        None | Some(Value::Number(_)) | Some(Value::String(_)) | Some(Value::Null)
    );
    if !v.is_object() || v.get("jsonrpc") != Some(&json!("2.0")) || !valid_id {
        return Incoming::Invalid {
            id: if valid_id {
                id.unwrap_or(Value::Null)
            } else {
                Value::Null
            },
            code: -32600,
            message: "invalid request: needs jsonrpc \"2.0\" and a number or string id".into(),
        };
    }
    let params = v.get("params").cloned().unwrap_or(Value::Null);
    match (v.get("method").and_then(Value::as_str), id) {
        (Some(m), Some(id)) => Incoming::Request {
            id,
            method: m.to_string(),
            params,
        },
        (Some(m), None) => Incoming::Notification {
            method: m.to_string(),
            params,
        },
        (None, Some(id)) => {
            let reply = match (v.get("result"), v.get("error")) {
                (_, Some(e)) => Err(e.clone()),
                (Some(r), None) => Ok(r.clone()),
                (None, None) => {
                    Err(json!({"code": -32600, "message": "response without result or error"}))
                }
            };
            Incoming::Response { id, reply }
        }
        (None, None) => Incoming::Invalid {
            id: Value::Null,
            code: -32600,
            message: "invalid request: no method".into(),
        },
    }
}

/// Our side of the connection (cheap to clone).
#[derive(Clone)]
pub struct Peer {
    tx: mpsc::UnboundedSender<Value>,
    next: Arc<AtomicU64>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Reply>>>>,
}

fn key(id: &Value) -> String {
    id.to_string()
}

impl Peer {
    /// A peer whose lines go to `tx` (the writer task owns stdout).
    pub fn new(tx: mpsc::UnboundedSender<Value>) -> Self {
        Peer {
            tx,
            next: Arc::new(AtomicU64::new(1)),
            waiting: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn notify(&self, method: &str, params: Value) {
        let _ = self
            .tx
            .send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn respond(&self, id: Value, result: Result<Value, (i64, String)>) {
        let msg = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        let _ = self.tx.send(msg);
    }

    /// Send a request; the receiver gets its response (dropped if the
    /// connection closes first).
    pub fn request(&self, method: &str, params: Value) -> oneshot::Receiver<Reply> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = json!(format!("cw-{n}"));
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key(&id), tx);
        let _ = self
            .tx
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx
    }

    /// Route a response to its request; `false` when we sent no such id.
    pub fn deliver(&self, id: &Value, reply: Reply) -> bool {
        let tx = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(id));
        match tx {
            Some(tx) => {
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified() {
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            parse_line(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#),
            Incoming::Notification { .. }
        ));
        assert_eq!(
            parse_line(r#"{"jsonrpc":"2.0","id":"cw-1","result":{"a":1}}"#),
            Incoming::Response {
                id: json!("cw-1"),
                reply: Ok(json!({"a": 1}))
            }
        );
        assert!(matches!(
            parse_line("nope"),
            Incoming::Invalid { code: -32700, .. }
        ));
        assert!(matches!(
            parse_line(r#"{"id":1,"method":"x"}"#),
            Incoming::Invalid { code: -32600, .. }
        ));
    }

    #[tokio::test]
    async fn a_response_reaches_its_request_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let p = Peer::new(tx);
        let waiting = p.request("session/request_permission", json!({}));
        let sent = rx.recv().await.unwrap();
        assert!(p.deliver(
            &sent["id"],
            Ok(json!({"outcome": {"outcome": "cancelled"}}))
        ));
        assert!(!p.deliver(&sent["id"], Ok(json!({}))));
        assert_eq!(
            waiting.await.unwrap().unwrap()["outcome"]["outcome"],
            "cancelled"
        );
    }
}
