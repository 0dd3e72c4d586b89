//! The runtime: durable threads, turns, items and pending requests over one
//! append-only event log. Every client (exec, app-server) is a client of
//! this; none of them writes records itself.

pub mod coalesce;
pub mod event;
pub mod log;
pub mod model;
pub mod pending;
pub mod projection;
