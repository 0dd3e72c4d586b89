//! `GET /v1/sessions`, `GET/DELETE /v1/sessions/{id}` and
//! `POST /v1/sessions/{id}/resume-thread` as plain typed functions over
//! the session files in `<codewhale home>/sessions` (docs/EXEC.md's
//! format); the front ends only register them (docs/RUNTIME_API.md).
//!
//! An id is a session file's name without `.jsonl` (letters, digits, `-`,
//! `_`): never a path. A session a live run is writing cannot be deleted.

use super::error::ApiError;
use crate::runtime::{
    ItemKind, ItemStatus, NewThread, Runtime, ThreadMode, ThreadRecord, TurnStatus,
};
use crate::session::{is_live, read_records, sessions_dir, Event, Record};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Characters of the first prompt shown in a listing.
pub const PREVIEW_CHARS: usize = 200;

/// `GET /v1/sessions` query.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSessions {
    pub limit: Option<usize>,
    /// Case-insensitive substring of the id, first prompt or workspace.
    pub search: Option<String>,
}

/// One session as listed.
#[derive(Clone, Debug, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The approval posture it ran under (`headless`, `auto`, `… (interactive)`).
    pub approval: Option<String>,
    pub started_at: Option<String>,
    pub updated_at: Option<String>,
    pub turns: u32,
    /// `completed`, `max_turns`, `interrupted`, `error`, or `open`.
    pub status: String,
    /// A run is writing it now.
    pub live: bool,
    pub preview: Option<String>,
}

/// `GET /v1/sessions`.
#[derive(Clone, Debug, Serialize)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

/// `GET /v1/sessions/{id}`: the summary and every committed record.
#[derive(Clone, Debug, Serialize)]
pub struct SessionDetail {
    pub session: SessionSummary,
    pub records: Vec<Record>,
}

fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            "id",
            format!("`{id}` is not a session id (letters, digits, `-`, `_`)"),
        ))
    }
}

fn file_of(home: &Path, id: &str) -> Result<PathBuf, ApiError> {
    check_id(id)?;
    let p = sessions_dir(home).join(format!("{id}.jsonl"));
    if p.is_file() {
        Ok(p)
    } else {
        Err(ApiError::not_found("session", id))
    }
}

fn read(path: &Path) -> Result<Vec<Record>, ApiError> {
    read_records(path).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "session_unreadable",
            e.to_string(),
        )
    })
}

fn summarize(id: &str, path: &Path, records: &[Record]) -> SessionSummary {
    let mut s = SessionSummary {
        id: id.to_string(),
        path: path.to_path_buf(),
        workspace: None,
        provider: None,
        model: None,
        approval: None,
        started_at: records.first().map(|r| r.ts.clone()),
        updated_at: records.last().map(|r| r.ts.clone()),
        turns: 0,
        status: "open".into(),
        live: is_live(path),
        preview: None,
    };
    for r in records {
        s.turns = s.turns.max(r.turn);
        match &r.event {
            Event::ThreadStarted {
                cwd,
                provider,
                model,
                approval,
                ..
            } => {
                s.workspace = Some(cwd.clone());
                s.provider = Some(provider.clone());
                s.model = Some(model.clone());
                s.approval = Some(approval.clone());
            }
            Event::UserMessage { text } if s.preview.is_none() => {
                s.preview = Some(text.chars().take(PREVIEW_CHARS).collect());
            }
            Event::ThreadCompleted { status } => s.status = status.clone(),
            _ => {}
        }
    }
    s
}

/// `GET /v1/sessions`: newest first (by id, which starts with its UTC
/// start time), at most `limit` (1–500, default 50).
pub fn list(home: &Path, q: &ListSessions) -> Result<SessionList, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad("limit", "must be between 1 and 500"));
    }
    let needle = q.search.as_deref().map(str::to_lowercase);
    let mut ids: Vec<String> = std::fs::read_dir(sessions_dir(home))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .map(str::to_string)
        })
        .filter(|id| check_id(id).is_ok())
        .collect();
    ids.sort_by(|a, b| b.cmp(a));
    let mut out = Vec::new();
    for id in ids {
        if out.len() >= limit {
            break;
        }
        let path = sessions_dir(home).join(format!("{id}.jsonl"));
        // A file that does not parse is skipped in the listing (GET on its
        // id says why).
        let Ok(records) = read_records(&path) else {
            continue;
        };
        let s = summarize(&id, &path, &records);
        let hit = needle.as_ref().is_none_or(|n| {
            s.id.to_lowercase().contains(n)
                || s.preview
                    .as_deref()
                    .is_some_and(|p| p.to_lowercase().contains(n))
                || s.workspace
                    .as_ref()
                    .is_some_and(|w| w.to_string_lossy().to_lowercase().contains(n))
        });
        if hit {
            out.push(s);
        }
    }
    Ok(SessionList { sessions: out })
}

/// `GET /v1/sessions/{id}`.
pub fn get(home: &Path, id: &str) -> Result<SessionDetail, ApiError> {
    let path = file_of(home, id)?;
    let records = read(&path)?;
    Ok(SessionDetail {
        session: summarize(id, &path, &records),
        records,
    })
}

/// `DELETE /v1/sessions/{id}` answer.
#[derive(Clone, Debug, Serialize)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

/// `DELETE /v1/sessions/{id}`: remove the file (409 while a run writes it).
pub fn delete(home: &Path, id: &str) -> Result<Deleted, ApiError> {
    let path = file_of(home, id)?;
    if is_live(&path) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_live",
            format!("session `{id}` is being written by a running turn"),
        ));
    }
    std::fs::remove_file(&path).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "io",
            format!("{}: {e}", path.display()),
        )
    })?;
    Ok(Deleted {
        id: id.to_string(),
        deleted: true,
    })
}

/// `POST /v1/sessions/{id}/resume-thread` answer.
#[derive(Clone, Debug, Serialize)]
pub struct Resumed {
    pub thread: ThreadRecord,
    pub source_session_id: String,
    /// False when the runtime already had the thread (an `exec` run
    /// records itself as a thread of the same id).
    pub created: bool,
}

/// `POST /v1/sessions/{id}/resume-thread`: the runtime thread of a stored
/// session. `exec` runs are recorded as a thread whose id is the session
/// id; one that is missing (an older session, a lost event log) is created
/// with one completed turn pointing at the session file, so the next turn
/// is sent the whole conversation (docs/RUNTIME_API.md).
pub fn resume_thread(rt: &Runtime, home: &Path, id: &str) -> Result<Resumed, ApiError> {
    let path = file_of(home, id)?;
    // Another process (`exec`) may have written the thread since we read.
    rt.refresh()?;
    if let Ok(t) = rt.thread(id) {
        return Ok(Resumed {
            thread: t,
            source_session_id: id.to_string(),
            created: false,
        });
    }
    if is_live(&path) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_live",
            format!("session `{id}` is being written by a running turn"),
        ));
    }
    let records = read(&path)?;
    let s = summarize(id, &path, &records);
    let (Some(workspace), Some(model)) = (s.workspace.clone(), s.model.clone()) else {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "session_incomplete",
            format!("session `{id}` has no thread_started record"),
        ));
    };
    let answer = records.iter().rev().find_map(|r| match &r.event {
        Event::AssistantMessage { text } if !text.is_empty() => Some(text.clone()),
        _ => None,
    });
    let t = rt.create_thread(NewThread {
        id: Some(id.to_string()),
        model: model.clone(),
        provider: s.provider.clone(),
        workspace,
        mode: ThreadMode::Agent,
        title: s.preview.as_ref().map(|p| p.chars().take(80).collect()),
        ..Default::default()
    })?;
    let turn = rt.start_turn(&t.id, s.provider.as_deref(), Some(&model), Some(id))?;
    if let Some(prompt) = records.iter().find_map(|r| match &r.event {
        Event::UserMessage { text } => Some(text.clone()),
        _ => None,
    }) {
        let item = rt.start_item(&turn, ItemKind::UserMessage, json!({ "text": prompt }))?;
        rt.finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
    }
    if let Some(text) = answer {
        let item = rt.start_item(&turn, ItemKind::AgentMessage, json!({ "text": text }))?;
        rt.finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
    }
    let status = match s.status.as_str() {
        "completed" => TurnStatus::Completed,
        "error" => TurnStatus::Failed,
        _ => TurnStatus::Interrupted,
    };
    let error = (status != TurnStatus::Completed)
        .then(|| format!("the stored session ended `{}`", s.status));
    rt.finish_turn(&turn.id, status, error)?;
    Ok(Resumed {
        thread: rt.thread(id)?,
        source_session_id: id.to_string(),
        created: true,
    })
}
