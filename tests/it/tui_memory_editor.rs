#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `/memory` in the TUI opens `$VISUAL`/`$EDITOR` on the memory file, in
//! a real pseudo-terminal (tests/common/pty.rs): the editor gets the
//! terminal and the file's path, the UI takes the terminal back and shows
//! what the file holds now, and keys reach the UI again afterwards.
#![cfg(unix)]

use crate::common;

use common::pty::{provider_config, FreshHome, Pty};
use common::scripted_model::{ScriptedModel, Wire};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");
const T: Duration = Duration::from_secs(20);

#[test]
fn memory_opens_the_editor_and_the_ui_comes_back() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![]);
    let mut home = FreshHome::new(&provider_config(model.kind(), &model.base_url()));
    // The "editor": appends a line to the file it is given, and says on
    // the terminal that it ran (the UI's screen is gone while it runs).
    let editor = home.root.join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\necho \"editor got $1\"\necho '- edited-by-the-editor' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.env
        .push(("EDITOR".into(), editor.display().to_string()));
    let pty = Pty::spawn(home.command(Path::new(BIN)), 30, 120);
    pty.wait_for("Ask codewhale", T);
    pty.type_text("/memory");
    pty.send(b"\r");
    pty.wait_for("edited-by-the-editor", T);
    let memory = home.cw_home.join("memory.md");
    let s = pty.wait_for("edited ", T);
    assert!(s.contains("Ask codewhale"), "the UI is back:\n{s}");
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "- edited-by-the-editor\n"
    );
    // Keys reach the UI again.
    pty.type_text("/memory add second line");
    pty.send(b"\r");
    pty.wait_for("added:", T);
    assert!(std::fs::read_to_string(&memory)
        .unwrap()
        .contains("second line"));
    assert!(model.requests().is_empty());
    pty.send(b"\x04");
}
