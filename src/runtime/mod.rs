//! The runtime: durable threads, turns, items and pending requests over one
//! append-only event log. Every client (exec, app-server) is a client of
//! this; none of them writes records itself.

pub mod coalesce;
pub mod error;
pub mod event;
pub mod log;
pub mod model;
mod owner;
pub mod pending;
pub mod preview;
pub mod projection;
pub mod request;
pub mod store;

pub use event::{LogRecord, NewEvent, EVENT_NAMES};
pub use model::{
    ItemKind, ItemStatus, ThreadMode, ThreadRecord, TurnItemRecord, TurnRecord, TurnStatus,
    TurnUsage, RESTART_ERROR,
};
pub use pending::{Answer, RequestKind, SettleError, Settlement};
pub use store::{
    runtime_dir, NewThread, OpenReport, Runtime, RuntimeError, Subscription, ThreadPatch,
};
pub mod approver;
pub mod client_tools;
pub mod driver;
pub mod exec_client;
pub mod history;
pub mod item_meta;
pub mod served;
pub mod tap;
