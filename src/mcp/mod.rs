//! Model Context Protocol: external MCP servers as tools (the client:
//! `client*`, `config*`).

pub mod client;
pub mod client_names;
pub mod client_pool;
pub mod client_transport;
pub mod config;

pub use client::{ManagerSpec, McpManager, McpTool, ServerStatus};
