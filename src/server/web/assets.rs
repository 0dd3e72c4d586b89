//! The browser client, embedded: HTML, CSS and JavaScript with no build
//! step and nothing fetched from elsewhere at run time.

pub const INDEX_HTML: &str = include_str!("assets/index.html");
pub const APP_JS: &str = include_str!("assets/app.js");
pub const APP_CSS: &str = include_str!("assets/app.css");
/// `app-server --mobile`'s phone page (the same app.js and app.css).
pub const MOBILE_HTML: &str = include_str!("assets/mobile.html");
pub const MOBILE_CSS: &str = include_str!("assets/mobile.css");
/// What `/` answers without a session.
pub const LOCKED_HTML: &str = include_str!("assets/locked.html");

/// The hard budget for everything the page loads.
pub const BUDGET_BYTES: usize = 200 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assets_fit_the_budget_and_load_nothing_from_elsewhere() {
        // Everything embedded, both pages: the budget is for all of it.
        let total = INDEX_HTML.len()
            + APP_JS.len()
            + APP_CSS.len()
            + MOBILE_HTML.len()
            + MOBILE_CSS.len()
            + LOCKED_HTML.len();
        assert!(total <= BUDGET_BYTES, "{total} bytes");
        for (name, text) in [
            ("index", INDEX_HTML),
            ("js", APP_JS),
            ("css", APP_CSS),
            ("mobile", MOBILE_HTML),
            ("mobile css", MOBILE_CSS),
        ] {
            for bad in [
                "http://",
                "https://",
                "//cdn",
                "localStorage",
                "sessionStorage",
                "document.cookie",
            ] {
                assert!(!text.contains(bad), "{name} mentions {bad}");
            }
        }
        // No inline script or style: the CSP allows neither.
        for html in [INDEX_HTML, MOBILE_HTML] {
            assert!(!html.contains("<script>") && !html.contains("style="));
        }
    }
}
