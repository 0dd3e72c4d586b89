//! External MCP servers as tools (the client: `client*`, `config*`), a
//! tool source below the agent loop. The other direction, codewhale's
//! tools served to other agents (`codewhale serve --mcp`), is a front end
//! of its own: [`crate::mcp_server`].

pub mod client;
pub mod client_names;
pub mod client_pool;
pub mod client_transport;
pub mod config;
pub mod env_expand;

pub use client::{ManagerSpec, McpManager, McpTool, ServerStatus};
