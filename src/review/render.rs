//! The review as markdown for a terminal or a file.

use super::answer::ReviewAnswer;

pub fn markdown(a: &ReviewAnswer, target: &str) -> String {
    let mut s = format!("# codewhale review: {target}\n\n{}\n", a.summary.trim());
    if a.findings.is_empty() {
        s.push_str("\nNo findings.\n");
        return s;
    }
    let mut f: Vec<_> = a.findings.iter().collect();
    f.sort_by_key(|f| f.severity);
    s.push_str(&format!("\n## Findings ({})\n", f.len()));
    for f in f {
        s.push_str(&format!(
            "\n### [{}] {}\n\n`{}:{}`\n\n{}\n",
            f.severity.as_str(),
            f.title,
            f.path,
            f.line,
            f.body.trim()
        ));
    }
    s
}
