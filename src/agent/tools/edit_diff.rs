//! The unified diff of a file edit, made from the file's text before and
//! after the tool changed it (with three lines of context), so the TUI
//! cell and ACP's diff content show the file's real change, never the
//! tool's argument strings.

/// A unified diff of `path` from `old` to `new` (`None`: the file did not
/// exist before / does not exist after), headed `--- a/PATH` / `+++ b/PATH`
/// (or `/dev/null`), as `git diff` heads it.
pub fn file_diff(path: &str, old: Option<&str>, new: Option<&str>) -> String {
    let patch = diffy::create_patch(old.unwrap_or(""), new.unwrap_or(""));
    let text = patch.to_string();
    // diffy heads its patch `--- original` / `+++ modified`: name the file.
    let body: String = text
        .split_inclusive('\n')
        .skip_while(|l| l.starts_with("---") || l.starts_with("+++"))
        .collect();
    let a = old.map_or_else(|| "/dev/null".to_string(), |_| format!("a/{path}"));
    let b = new.map_or_else(|| "/dev/null".to_string(), |_| format!("b/{path}"));
    format!("--- {a}\n+++ {b}\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_is_the_changed_line_with_context() {
        let d = file_diff(
            "notes.txt",
            Some("TODO: say hello\n"),
            Some("DONE: say hello\n"),
        );
        assert_eq!(
            d,
            "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-TODO: say hello\n+DONE: say hello\n"
        );
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let d = file_diff("n", Some(old), Some(new));
        assert!(
            d.contains("@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"),
            "{d}"
        );
    }

    #[test]
    fn created_and_deleted_files_name_dev_null() {
        let d = file_diff("new.txt", None, Some("hi\n"));
        assert!(
            d.starts_with("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n"),
            "{d}"
        );
        let d = file_diff("old.txt", Some("bye\n"), None);
        assert!(d.starts_with("--- a/old.txt\n+++ /dev/null\n"), "{d}");
    }
}
