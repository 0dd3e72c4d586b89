//! MCP: codewhale's tools served to other agents (`codewhale serve
//! --mcp`, [`server`]). Every call passes the same nine gates and runs
//! through the same host as the agent loop's.

pub mod server;
pub mod server_tools;
