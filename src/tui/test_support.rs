//! Helpers the TUI's snapshot tests share (render and picker): a rendered
//! buffer as text, and the check that docs/TUI.md shows the snapshots.

use ratatui::buffer::Buffer;

/// The buffer as text, one row per line (trailing spaces kept off).
pub fn buffer_text(b: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..b.area.height {
        let mut row = String::new();
        for x in 0..b.area.width {
            row.push_str(b[(x, y)].symbol());
        }
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

/// docs/TUI.md holds each named insta snapshot of `module` (e.g.
/// `render`) verbatim: the screens there are these tests' output.
pub fn assert_docs_show(module: &str, names: &[&str]) {
    let doc = include_str!("../../docs/TUI.md");
    for name in names {
        let path = format!(
            "{}/src/tui/snapshots/codewhale__tui__{module}__tests__{name}.snap",
            env!("CARGO_MANIFEST_DIR")
        );
        let snap = std::fs::read_to_string(&path).unwrap_or_default();
        let body: String = snap.split('\n').skip(4).collect::<Vec<_>>().join("\n");
        assert!(
            !body.trim().is_empty() && doc.contains(body.trim_end()),
            "docs/TUI.md lacks the {name} snapshot ({path})"
        );
    }
}

/// A served envelope as the runtime writes it (see
/// [`crate::runtime::served::testing::complete`]), as the TUI's event.
pub fn served(env: serde_json::Value) -> super::state::Event {
    super::state::Event::Runtime(crate::runtime::served::testing::complete(env))
}
