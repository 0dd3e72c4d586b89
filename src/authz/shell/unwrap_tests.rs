use crate::authz::shell::analyze;

fn programs(cmd: &str) -> Vec<String> {
    let a = analyze(cmd);
    assert!(a.failure.is_none(), "{cmd}: {:?}", a.failure);
    a.pieces.iter().map(|p| p.display()).collect()
}

#[test]
fn chains_and_pipes_split() {
    assert_eq!(
        programs("a x && b || c; d | e & f\ng"),
        vec!["a x", "b", "c", "d", "e", "f", "g"]
    );
}

#[test]
fn wrappers_are_peeled() {
    assert_eq!(
        programs("sudo -u root env A=1 timeout -s KILL 5 nice -n 3 nohup /bin/rm -rf /"),
        vec!["rm -rf /"]
    );
    assert_eq!(
        programs("stdbuf -oL -e 0 time -p command rm x"),
        vec!["rm x"]
    );
    assert_eq!(programs("xargs -I{} -n1 rm -rf"), vec!["rm -rf"]);
    assert_eq!(programs("exec -a foo git push"), vec!["git push"]);
    assert_eq!(programs("FOO=1 BAR=2 git push"), vec!["git push"]);
}

#[test]
fn payloads_are_reparsed() {
    assert_eq!(
        programs("bash -lc 'echo hi; sh -c \"git push\"'"),
        vec!["echo hi", "git push"]
    );
    assert_eq!(programs("eval 'rm -rf /' "), vec!["rm -rf /"]);
    assert_eq!(programs("env -S 'rm -rf /'"), vec!["rm -rf /"]);
    assert_eq!(
        programs("find . -name x -exec rm -rf {} +"),
        vec!["rm -rf {}", "find . -name x -exec rm -rf {} +"]
    );
}

#[test]
fn substitutions_are_pieces() {
    assert_eq!(
        programs("echo $(cat /etc/passwd) `id` <(ls) \"$(whoami)\""),
        vec![
            "cat /etc/passwd",
            "id",
            "ls",
            "whoami",
            "echo $(…) `…` <(…) $(…)"
        ]
    );
}

#[test]
fn quoting_is_removed() {
    assert_eq!(programs(r#"'r'"m" -\rf $'\x2f'"#), vec!["rm -rf /"]);
    assert_eq!(programs(r"\rm -rf /"), vec!["rm -rf /"]);
}

#[test]
fn groups_subshells_and_compounds() {
    assert_eq!(
        programs("(cd x && make) ; { git push; } ; if true; then ls; fi"),
        vec!["cd x", "make", "git push", "true", "ls"]
    );
}

#[test]
fn heredoc_bodies_are_scanned() {
    assert_eq!(
        programs("cat <<EOF > out\n$(git push)\nEOF\nls"),
        vec!["cat <<EOF >out", "git push", "ls"]
    );
    assert_eq!(
        programs("cat <<'EOF'\n$(git push)\nEOF\n"),
        vec!["cat <<EOF"]
    );
}

#[test]
fn failures_are_reported_not_guessed() {
    for bad in [
        "echo 'unterminated",
        "echo \"x",
        "a && ",
        "f() { rm -rf /; }",
        "case x in a) rm;; esac",
        "echo )",
        "sh -c",
    ] {
        let a = analyze(bad);
        assert!(a.failure.is_some(), "{bad} should fail: {:?}", a.pieces);
    }
    let deep = "$(".repeat(40) + &")".repeat(40);
    assert!(analyze(&format!("echo {deep}")).failure.is_some());
    assert!(analyze(&"a;".repeat(2000)).failure.is_some());
}

#[test]
fn dynamic_programs_are_uncertain() {
    let a = analyze("$(echo rm) -rf /");
    assert!(a.pieces.iter().any(|p| p.uncertain.is_some()));
    let b = analyze("sh -c \"$CMD\"");
    assert!(!b.is_certain());
}

#[test]
fn background_marks_pieces() {
    let a = analyze("rm -rf build & ls");
    assert!(a.pieces[0].background);
    assert!(!a.pieces[1].background);
    let b = analyze("ls &> /dev/null");
    assert!(!b.pieces[0].background);
}

#[test]
fn more_operators_and_quoting() {
    assert_eq!(programs("a |& b"), vec!["a", "b"]);
    assert_eq!(
        programs("a &>> log; b 2>&1 >/dev/null"),
        vec!["a &>>log", "b 2>&1 >/dev/null"]
    );
    assert_eq!(
        programs("tee >(gzip > x.gz) < in"),
        vec!["gzip >x.gz", "tee <(…) <in"]
    );
    assert_eq!(programs(r"echo $'\162\155' $'\u0072m'"), vec!["echo rm rm"]);
    assert_eq!(
        programs("cat <<-EOF\n\t$(id)\n\tEOF\nls"),
        vec!["cat <<-EOF", "id", "ls"]
    );
    assert_eq!(programs("echo a\\\nb"), vec!["echo ab"]);
    assert_eq!(programs("# only a comment"), Vec::<String>::new());
    assert_eq!(programs("ls # trailing comment; rm -rf /"), vec!["ls"]);
    assert_eq!(
        programs("echo \"a # not a comment\""),
        vec!["echo a # not a comment"]
    );
    assert_eq!(programs("! grep -q x f"), vec!["grep -q x f"]);
}

#[test]
fn large_inputs_are_bounded() {
    let big = "echo x; ".repeat(9000); // > 64 KiB
    let a = analyze(&big);
    assert!(a.failure.is_some());
    let many = "true\n".repeat(600);
    let a = analyze(&many);
    assert!(
        a.failure.as_deref().is_some_and(|f| f.contains("commands")),
        "{:?}",
        a.failure
    );
}
