use super::*;
use crate::authz::shell::analyze;

fn rules(text: &str) -> RuleSet {
    let mut set = RuleSet::builtin();
    set.extend(parse_rules(Path::new("/h/permissions.toml"), text, Layer::User, None).unwrap());
    set
}

fn shell(set: &RuleSet, cmd: &str) -> RuleOutcome {
    let a = analyze(cmd);
    set.evaluate(&RuleQuery {
        tool: "shell",
        workspace: Path::new("/w"),
        shell: Some(&a),
        paths: &[],
    })
}

#[test]
fn prefix_is_token_wise_and_arity_aware() {
    let s = rules("[[rules]]\ntool='shell'\ncommand='git push'\naction='deny'\n");
    assert_eq!(shell(&s, "git push").decision, Some(Decision::Deny));
    assert_eq!(
        shell(&s, "git -C x push origin").decision,
        Some(Decision::Deny)
    );
    assert_eq!(
        shell(&s, "/usr/bin/git push").decision,
        Some(Decision::Deny)
    );
    assert_eq!(shell(&s, "git pushx").decision, None);
    assert_eq!(shell(&s, "git status").decision, None);
    assert!(shell(&s, "ls && git push").hard);
}

#[test]
fn allow_never_covers_a_chain() {
    let s = rules("[[rules]]\ntool='shell'\ncommand='cargo test'\naction='allow'\n");
    assert_eq!(
        shell(&s, "cargo test --lib").decision,
        Some(Decision::Allow)
    );
    assert_eq!(shell(&s, "cargo test && curl x").decision, None);
    assert_eq!(
        shell(&s, "cargo test && cargo test").decision,
        Some(Decision::Allow)
    );
}

#[test]
fn layers_then_actions() {
    let mut s = rules("[[rules]]\ntool='shell'\ncommand='make'\naction='allow'\n");
    s.extend(
        parse_rules(
            Path::new("agent"),
            "[[rules]]\ntool='shell'\ncommand='make'\naction='deny'\n[[rules]]\ntool='shell'\ncommand='npm'\naction='deny'\n",
            Layer::Agent,
            None,
        )
        .unwrap(),
    );
    // User allow beats agent deny.
    assert_eq!(shell(&s, "make all").decision, Some(Decision::Allow));
    // Agent deny applies where the user is silent, and is not hard.
    let o = shell(&s, "npm i");
    assert_eq!(o.decision, Some(Decision::Deny));
    assert!(!o.hard);
    // Within a layer, deny beats allow.
    let s2 = rules("[[rules]]\ntool='shell'\ncommand='make'\naction='allow'\n[[rules]]\ntool='shell'\ncommand='make'\naction='ask'\n");
    assert_eq!(shell(&s2, "make").decision, Some(Decision::Ask));
}

#[test]
fn builtin_catastrophic_is_hard_even_against_user_allow() {
    let s = rules("[[rules]]\ntool='shell'\ncommand='rm'\naction='allow'\n");
    let o = shell(&s, "echo hi; sudo rm -rf /");
    assert_eq!(o.decision, Some(Decision::Deny));
    assert!(o.hard);
}

#[test]
fn path_rules() {
    let s = rules("[[rules]]\ntool='write_file'\npath='docs/**'\naction='allow'\n[[rules]]\ntool='write_file'\npath='**/*.lock'\naction='deny'\n");
    let q = |p: &str| {
        let paths = vec![p.to_string()];
        s.evaluate(&RuleQuery {
            tool: "write_file",
            workspace: Path::new("/w"),
            shell: None,
            paths: &paths,
        })
        .decision
    };
    assert_eq!(q("docs/a.md"), Some(Decision::Allow));
    assert_eq!(q("/w/docs/a.md"), Some(Decision::Allow));
    assert_eq!(q("Cargo.lock"), Some(Decision::Deny));
    assert_eq!(q("src/x.rs"), None);
}

#[test]
fn errors_name_file_line_and_key() {
    let text =
        "[[rules]]\ntool='shell'\naction='allow'\n\n[[rules]]\ntool='shell'\naction='maybe'\n";
    let e = parse_rules(Path::new("/h/permissions.toml"), text, Layer::User, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/h/permissions.toml"), "{e}");
    assert!(e.contains("line 7"), "{e}");
    assert!(e.contains("rules[1].action"), "{e}");
    let text = "[[rules]]\ntool='shell'\ncommand='x'\npath='y'\naction='deny'\n";
    let e = parse_rules(Path::new("p.toml"), text, Layer::User, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rules[0].command") && e.contains("line 1"),
        "{e}"
    );
    let text = "[[rules]]\ntool='shell'\nactoin='deny'\n";
    let e = parse_rules(Path::new("p.toml"), text, Layer::User, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("actoin") && e.contains("line 3"), "{e}");
}
