//! The insta filters: one list of what differs between runs, used both as
//! `insta::Settings` filters around a snapshot assertion and as a plain
//! string normaliser for assertions that are not snapshots.
//!
//! Paths come first (they may contain digits a later pattern would eat),
//! then ids, times and durations in the formats codewhale prints.

use std::path::Path;

/// Patterns for values that change on every run, in application order.
const VOLATILE: &[(&str, &str)] = &[
    // Thread ids: `20261201T125121-0123456789ab`.
    (r"\d{8}T\d{6}-[0-9a-f]{12}", "[THREAD]"),
    // RFC 3339 UTC timestamps, with or without fractional seconds.
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]"),
    // Durations in receipts: ` · 0.3s`.
    (r" · \d+\.\ds", " · [DUR]"),
    // Per-workspace snapshot stores: `codewhale/<16 hex>/<16 hex>`.
    (r"codewhale/[0-9a-f]{16}/[0-9a-f]{16}", "codewhale/[STORE]"),
];

/// A set of replacements: literal paths plus the volatile patterns.
#[derive(Clone, Default)]
pub struct Filters {
    rules: Vec<(String, String)>,
}

impl Filters {
    /// The volatile patterns only.
    pub fn new() -> Self {
        Filters::default()
    }

    /// Replace the literal `path` (e.g. a test's temp root) by `with`.
    pub fn path(mut self, path: impl AsRef<Path>, with: &str) -> Self {
        self.rules.push((
            regex::escape(&path.as_ref().display().to_string()),
            with.into(),
        ));
        self
    }

    /// Replace matches of the regular expression `re` by `with`.
    pub fn pattern(mut self, re: &str, with: &str) -> Self {
        self.rules.push((re.into(), with.into()));
        self
    }

    fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rules
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .chain(VOLATILE.iter().copied())
    }

    /// `text` with every rule applied, in order.
    pub fn apply(&self, text: &str) -> String {
        let mut s = text.to_string();
        for (re, with) in self.all() {
            s = regex::Regex::new(re)
                .unwrap_or_else(|e| panic!("filter {re:?}: {e}"))
                .replace_all(&s, with)
                .into_owned();
        }
        s
    }

    /// Run `f` (an insta assertion) with these rules as insta filters.
    pub fn bind<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut settings = insta::Settings::clone_current();
        for (re, with) in self.all() {
            settings.add_filter(re, with);
        }
        settings.bind(f)
    }
}

/// Replace `root` by `[ROOT]` and every volatile value (the receipts'
/// normalisation).
pub fn normalise(text: &str, root: &Path) -> String {
    Filters::new().path(root, "[ROOT]").apply(text)
}
