//! The argv → command line → gate parse round trip: a shell call given as
//! an argv array runs that argv itself (`agent/tools/shell.rs`), while the
//! gates judge the command line `catalogue::shell_command_line` joins from
//! it. So the gates' parse of that line must give back exactly the argv —
//! one plain simple command, every word literal — or the gates would judge
//! something other than what runs. An argv that cannot be joined (a NUL
//! byte) has no command line, and the call is denied.

use super::parse::{parse_into, Collector};
use crate::authz::{
    authorize, Admission, Approval, Context, Decision, FloorContext, Mode, Posture, RuleSet,
    SessionGrants, ToolCall, ToolRegistry,
};
use crate::catalogue::shell_command_line;
use proptest::prelude::*;
use serde_json::json;
use std::path::Path;

/// Words with every character the shell treats specially, spaces, quotes,
/// newlines, `=` (assignment), `~`, `#`, globs, and non-ASCII text.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9_./-]{1,8}",
        "[ -~]{0,10}",
        "[a-zA-Z0-9 _=$*?~#'\"\\\\;&|<>(){}!\\n\\t\\[\\]`-]{0,10}",
        "[a-z]{1,4}=[a-z$]{0,4}",
        "\\PC{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_joined_argv_parses_back_to_itself(argv in prop::collection::vec(word(), 1..6)) {
        let line = shell_command_line(&json!({ "command": argv }))
            .expect("an argv without NUL joins");
        let mut col = Collector::default();
        parse_into(&line, 0, &mut col).map_err(|e| TestCaseError::fail(format!("{line:?}: {e}")))?;
        prop_assert_eq!(col.commands.len(), 1, "{:?}", line);
        let c = &col.commands[0];
        prop_assert!(c.assignments.is_empty(), "{:?}: an assignment", line);
        prop_assert!(c.redirects.is_empty(), "{:?}: a redirection", line);
        prop_assert!(!c.background, "{:?}", line);
        let texts: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
        prop_assert_eq!(&texts, &argv, "{:?}", line);
        prop_assert!(
            c.words.iter().all(|w| !w.dynamic && !w.glob),
            "{:?}: a word the shell would expand", line
        );
    }

    #[test]
    fn an_unjoinable_argv_fails_closed(
        mut argv in prop::collection::vec(word(), 1..4),
        at in any::<prop::sample::Index>(),
    ) {
        let i = at.index(argv.len());
        argv[i].push('\0');
        let args = json!({ "command": argv });
        prop_assert!(shell_command_line(&args).is_none());
        let call = ToolCall::new(crate::catalogue::SHELL, args, "/w");
        prop_assert!(call.command_line().is_none());
        for approval in [Approval::FullAccess, Approval::AutoReview, Approval::Ask] {
            let posture = Posture::new(Mode::Operate, approval);
            let rules = RuleSet::builtin();
            let registry = ToolRegistry::builtin();
            let admission = Admission::default();
            let floor = FloorContext { homes: vec![], extra_deny_read: vec![] };
            let grants = SessionGrants::default();
            let ctx = Context {
                rules: &rules,
                hooks: &[],
                grants: &grants,
                registry: &registry,
                admission: &admission,
                workspace: Path::new("/w"),
                floor: &floor,
                sandbox: posture.implied_sandbox(),
            };
            let v = authorize(&call, &posture, &ctx);
            prop_assert_eq!(v.decision, Decision::Deny, "{:?}", v.reason);
        }
    }
}
