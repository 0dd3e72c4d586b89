//! Building one streamed request for each wire format: the URL, the
//! authentication header and the body. Parsing the stream is in
//! [`super::openai`] (also used for Azure) and [`super::anthropic`].

use super::{anthropic, openai, responses, ChatRequest, ProviderSettings, WireFormat};

/// `anthropic-version` header value (the Messages API's stable version).
pub(super) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The URL a request for `s` goes to.
pub fn url(s: &ProviderSettings) -> String {
    let base = s.base_url.trim_end_matches('/');
    match s.wire {
        WireFormat::OpenAiCompatible => format!("{base}/chat/completions"),
        WireFormat::Anthropic => format!("{base}/v1/messages"),
        WireFormat::AzureOpenAi => azure_url(base, &s.model, s.api_version.as_deref()),
        WireFormat::OpenAiResponses => format!("{base}/responses"),
    }
}

/// `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=V`,
/// with the deployment percent-encoded as one path segment.
fn azure_url(base: &str, deployment: &str, version: Option<&str>) -> String {
    let version = version.unwrap_or(super::registry::AZURE_API_VERSION);
    match reqwest::Url::parse(base) {
        Ok(mut u) => {
            if let Ok(mut seg) = u.path_segments_mut() {
                seg.pop_if_empty().extend([
                    "openai",
                    "deployments",
                    deployment,
                    "chat",
                    "completions",
                ]);
            }
            u.query_pairs_mut().append_pair("api-version", version);
            u.to_string()
        }
        // The base URL was checked at selection; keep a readable fallback.
        Err(_) => {
            format!("{base}/openai/deployments/{deployment}/chat/completions?api-version={version}")
        }
    }
}

/// The request for one attempt (not sent).
pub fn request(
    http: &reqwest::Client,
    s: &ProviderSettings,
    req: ChatRequest<'_>,
) -> reqwest::RequestBuilder {
    let key = s.api_key.as_ref().map(|k| k.expose());
    match s.wire {
        WireFormat::OpenAiCompatible => {
            let mut b = http.post(url(s)).json(&openai::body(
                &s.model,
                req,
                s.stream_usage,
                s.wire_reasoning(),
            ));
            if let Some(k) = key {
                b = b.bearer_auth(k);
            }
            b
        }
        WireFormat::AzureOpenAi => {
            // The deployment in the URL selects the model; the body's
            // `model` is ignored by Azure but harmless.
            let mut b = http.post(url(s)).json(&openai::body(
                &s.model,
                req,
                s.stream_usage,
                s.wire_reasoning(),
            ));
            if let Some(k) = key {
                b = b.header("api-key", k);
            }
            b
        }
        WireFormat::OpenAiResponses => {
            let mut b = http
                .post(url(s))
                .json(&responses::body(&s.model, req, s.wire_reasoning()));
            if let Some(k) = key {
                b = b.bearer_auth(k);
            }
            b
        }
        WireFormat::Anthropic => {
            let mut b = http
                .post(url(s))
                .header("anthropic-version", ANTHROPIC_VERSION)
                .json(&anthropic::body(&s.model, req, s.wire_reasoning()));
            if let Some(k) = key {
                b = b.header("x-api-key", k);
            }
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_uses_deployment_url_and_api_version() {
        let mut s = ProviderSettings::openai_compatible(
            "azure-openai",
            "https://res.openai.azure.com/",
            "my deploy",
        );
        s.wire = WireFormat::AzureOpenAi;
        s.api_version = Some("2024-10-21".into());
        assert_eq!(
            url(&s),
            "https://res.openai.azure.com/openai/deployments/my%20deploy/chat/completions?api-version=2024-10-21"
        );
    }

    #[test]
    fn openai_and_anthropic_paths() {
        let mut s = ProviderSettings::openai_compatible("x", "http://127.0.0.1:1/v1/", "m");
        assert_eq!(url(&s), "http://127.0.0.1:1/v1/chat/completions");
        s.wire = WireFormat::Anthropic;
        s.base_url = "https://api.anthropic.com".into();
        assert_eq!(url(&s), "https://api.anthropic.com/v1/messages");
    }
}
