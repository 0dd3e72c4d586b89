use super::*;

fn f() -> PathBuf {
    PathBuf::from("/h/.codewhale/mcp.json")
}

#[test]
fn parses_the_common_shape_with_defaults() {
    let doc = parse(
        &f(),
        r#"{"mcpServers": {"everything": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"}}}}"#,
    )
    .unwrap();
    let e = &doc.mcp_servers["everything"];
    assert_eq!(e.command, "npx");
    assert_eq!(e.args, vec!["-y", "pkg"]);
    assert!(e.enabled && !e.network);
    assert_eq!(e.sandbox(), ServerSandbox::WorkspaceWrite);
    assert_eq!(e.startup_timeout(), Duration::from_secs(30));
    assert_eq!(e.tool_timeout(), Duration::from_secs(120));
    assert_eq!(parse(&f(), "{}").unwrap(), McpFile::default());
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let text = "{\n  \"mcpServers\": {\n    \"gh\": {\n      \"command\": \"x\",\n      \"comand\": \"y\"\n    }\n  }\n}\n";
    let e = parse(&f(), text).unwrap_err().to_string();
    assert!(e.starts_with("/h/.codewhale/mcp.json:5:"), "{e}");
    assert!(e.contains("unknown field `comand`"), "{e}");
}

#[test]
fn wrong_type_and_bad_json_name_the_line() {
    let text = "{\"mcpServers\": {\n \"gh\": {\"command\": \"x\",\n \"args\": \"notalist\"}}}";
    let e = parse(&f(), text).unwrap_err().to_string();
    assert!(e.contains(":3:"), "{e}");
    let e = parse(&f(), "{\n\"mcpServers\": {,}}")
        .unwrap_err()
        .to_string();
    assert!(e.contains(":2:"), "{e}");
}

#[test]
fn invalid_values_name_server_key_and_line() {
    let text = "{\"mcpServers\": {\n \"a\": {\"command\": \"x\"},\n \"gh\": {\"command\": \"x\",\n   \"toolTimeoutSec\": 5000}}}";
    let e = parse(&f(), text).unwrap_err().to_string();
    assert_eq!(
        e,
        "/h/.codewhale/mcp.json:4: mcpServers.gh.toolTimeoutSec: 5000 s is above the hard maximum of 900 s"
    );
    let e = parse(&f(), r#"{"mcpServers": {"a__b": {"command": "x"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.a__b: the server name may not contain `__`"),
        "{e}"
    );
    let e = parse(&f(), r#"{"mcpServers": {"a": {"command": " "}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.a.command: the command is empty"),
        "{e}"
    );
    let e = parse(
        &f(),
        r#"{"mcpServers": {"a": {"type": "http", "command": "x"}}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("mcpServers.a.type: only \"stdio\""), "{e}");
    let e = parse(
        &f(),
        r#"{"mcpServers": {"a": {"command": "x", "startupTimeoutSec": 0}}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("startupTimeoutSec: must be at least 1"), "{e}");
    let e = parse(
        &f(),
        r#"{"mcpServers": {"a": {"command": "x", "sandbox": "danger-full-access"}}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown variant `danger-full-access`"), "{e}");
}

#[test]
fn save_round_trips_and_missing_file_is_empty() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("sub").join(FILE_NAME);
    assert_eq!(load(&p).unwrap(), McpFile::default());
    let mut doc = McpFile::default();
    let mut e = ServerEntry::new("node", vec!["s.js".into()]);
    e.network = true;
    e.tool_timeout_sec = Some(10);
    doc.mcp_servers.insert("one".into(), e);
    save(&p, &doc).unwrap();
    assert_eq!(load(&p).unwrap(), doc);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("\"toolTimeoutSec\": 10"), "{text}");
    // A name that does not check is refused before anything is written.
    doc.mcp_servers
        .insert("bad name".into(), ServerEntry::new("x", vec![]));
    assert!(save(&p, &doc).is_err());
    assert!(!std::fs::read_to_string(&p).unwrap().contains("bad name"));
}

#[test]
fn project_mcp_json_gets_a_note() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    assert!(project_note(d.path()).is_none());
    std::fs::write(d.path().join(".mcp.json"), "{}").unwrap();
    let n = project_note(d.path()).unwrap();
    assert!(n.contains(".mcp.json ignored"), "{n}");
}
