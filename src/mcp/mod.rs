//! MCP in both directions: codewhale's tools served to other agents
//! (`codewhale serve --mcp`, [`server`]; every call passes the same nine
//! gates and runs through the same host as the agent loop's), and external
//! MCP servers as tools (the client: `client*`, `config*`).

pub mod client;
pub mod client_names;
pub mod client_pool;
pub mod client_transport;
pub mod config;
pub mod server;
pub mod server_tools;

pub use client::{ManagerSpec, McpManager, McpTool, ServerStatus};
