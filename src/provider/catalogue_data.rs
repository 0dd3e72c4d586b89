//! The catalogue rows. Each row names the page its base URL and key
//! variable were checked against (read through the project's document
//! search on 2026-12-01); rows marked "not re-checked" carry the value the
//! provider has long documented but were not confirmed from a stored page
//! in this change. Prices are only filled in where a page stated them; the
//! price search of 2026-12-01 is summarised in docs/PROVIDERS.md.

use super::catalogue::{Entry, KnownModel, ListPrice};
use super::effort::{ModelReasoning, ReasoningControl};
use super::registry::WireFormat::{self, Anthropic, AzureOpenAi, OpenAiCompatible as Oai};

const NO_MODELS: &[KnownModel] = &[];

const fn m(id: &'static str, context_window: Option<u32>) -> KnownModel {
    KnownModel {
        id,
        context_window,
        price: None,
        reasoning: None,
        wire: None,
    }
}

const fn mp(id: &'static str, context_window: Option<u32>, price: ListPrice) -> KnownModel {
    KnownModel {
        id,
        context_window,
        price: Some(price),
        reasoning: None,
        wire: None,
    }
}

/// `model` with its reasoning control.
const fn reasons(model: KnownModel, reasoning: ModelReasoning) -> KnownModel {
    KnownModel {
        reasoning: Some(reasoning),
        ..model
    }
}

#[allow(clippy::too_many_arguments)]
const fn hosted(
    id: &'static str,
    name: &'static str,
    wire: WireFormat,
    base_url: &'static str,
    default_model: &'static str,
    key_env: &'static str,
    models: &'static [KnownModel],
    source: &'static str,
) -> Entry {
    Entry {
        id,
        name,
        wire,
        base_url,
        base_url_env: None,
        needs_base_url: false,
        default_model,
        key_env: Some(key_env),
        local: false,
        stream_usage: true,
        models,
        source,
    }
}

const fn local(
    id: &'static str,
    name: &'static str,
    base_url: &'static str,
    source: &'static str,
) -> Entry {
    Entry {
        id,
        name,
        wire: Oai,
        base_url,
        base_url_env: None,
        needs_base_url: false,
        default_model: "",
        key_env: None,
        local: true,
        stream_usage: true,
        models: NO_MODELS,
        source,
    }
}

/// Anthropic's Sonnet 5.5 model page (read 2026-12-01; the page carries no
/// date). `claude-sonnet-4-5` was listed here until this change: its own
/// model page marks it deprecated and retiring on 2026-11-30, so it is no
/// longer a model to price.
const ANTHROPIC_MODELS: &[KnownModel] = &[reasons(mp(
    "claude-sonnet-5-5",
    Some(1_000_000),
    ListPrice {
        input: 2.00,
        // The model page lists $0.20 cache reads; release notes of several
        // cost trackers (secondary) report a cut to $0.10 from 2026-10-07
        // on the pricing page. The two disagree: left unknown.
        cached_input: None,
        // "5m cache write $2.50 / MTok" on the same model page (read
        // 2026-12-02): the write price of the `ephemeral` breakpoints
        // codewhale sets (5-minute TTL by default).
        cache_write: Some(2.50),
        output: 10.00,
        up_to_prompt_tokens: None,
        date: "2026-12-01",
        source: "https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview (page undated, read 2026-12-01; the pt-BR and it copies of the page state the same $2 / $10 and 1M context window)",
    },
),
    ModelReasoning {
        control: ReasoningControl::AnthropicAdaptive,
        date: "2026-12-02",
        source: "https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5 (adaptive thinking on by default, effort low/medium/high/xhigh/max, default high; thinking.type \"disabled\" answers 400, \"between_tools\" is the lowest setting)",
    },
)];

const OPENAI_MODELS: &[KnownModel] = &[
    // developers.openai.com/api/docs/models/gpt-5.6-sol (the `gpt-5.6`
    // alias routes to Sol): 1,050,000-token context. Its price is a
    // promotion the page guarantees only "at least until" 2026-11-21, and
    // prompts over 272K tokens cost more; what applies after the promotion
    // is not stated, so the price stays unknown.
    //
    // Reasoning: the reasoning guide names gpt-5.6 for reasoning
    // workloads, controlled by `reasoning.effort` (Responses) /
    // `reasoning_effort` (Chat Completions).
    KnownModel {
        wire: Some(WireFormat::OpenAiResponses),
        ..reasons(
        m("gpt-5.6", Some(1_050_000)),
        ModelReasoning {
            control: ReasoningControl::OpenAiEffort,
            date: "2026-12-02",
            source: "https://developers.openai.com/api/docs/guides/reasoning (\"Start with gpt-5.6 for most reasoning workloads\")",
        },
    )
    },
    mp(
        "gpt-4o-mini",
        Some(128_000),
        ListPrice {
            input: 0.15,
            cached_input: Some(0.075),
            cache_write: None,
            output: 0.60,
            up_to_prompt_tokens: None,
            date: "2026-05-27",
            source: "https://github.com/CommitBrief/commitbrief/wiki/Provider-OpenAI (secondary: a wiki page quoting openai.com/api/pricing, edited 2026-05-27; no OpenAI page for this model is in the document store)",
        },
    ),
    mp(
        "gpt-4o",
        Some(128_000),
        ListPrice {
            input: 2.50,
            cached_input: Some(1.25),
            cache_write: None,
            output: 10.00,
            up_to_prompt_tokens: None,
            date: "2026-05-27",
            source: "https://github.com/CommitBrief/commitbrief/wiki/Provider-OpenAI (secondary: a wiki page quoting openai.com/api/pricing, edited 2026-05-27; no OpenAI page for this model is in the document store)",
        },
    ),
];

const DEEPSEEK_MODELS: &[KnownModel] = &[
    // https://api-docs.deepseek.com/quick_start/pricing: "Use deepseek-flash
    // as the model name", context length 1M. Priced by time of day (peak
    // 01:00-04:00 and 06:00-10:00 UTC, off-peak at half): one list price
    // does not describe it, so it stays unknown. `deepseek-chat`, listed
    // here before, is one of the legacy names retired on 2026-07-24.
    //
    // Reasoning: thinking mode is on by default (effort high); the
    // `thinking` switch and `reasoning_effort` low/high/max control it.
    reasons(
        m("deepseek-flash", Some(1_000_000)),
        ModelReasoning {
            control: ReasoningControl::DeepSeek,
            date: "2026-12-02",
            source: "https://api-docs.deepseek.com/guides/thinking_mode (\"Thinking Mode Toggle and Effort Control\")",
        },
    ),
];

/// docs.x.ai's Grok 4.6 page states input and output prices but no cached
/// rate. Secondary sources (gateway price sheets, LiteLLM's notes on the
/// same-priced Grok 4.7) report the rates doubling for prompts past about
/// 200K tokens, which the official page as stored does not show; the price
/// is therefore held only up to 200,000 prompt tokens.
const XAI_MODELS: &[KnownModel] = &[mp(
    "grok-4.6",
    Some(500_000),
    ListPrice {
        input: 2.00,
        cached_input: None,
        cache_write: None,
        output: 6.00,
        up_to_prompt_tokens: Some(200_000),
        date: "2026-12-01",
        source: "https://docs.x.ai/developers/grok-4-6 (page undated, read 2026-12-01)",
    },
)];

/// Z.AI's pricing page (USD; the page is undated). Cached-input storage is
/// listed as "limited-time free", so only the cache-read rate matters here.
/// The China endpoint (`zhipu`) bills in CNY and gets no price.
const ZAI_MODELS: &[KnownModel] = &[mp(
    "glm-4.6",
    None,
    ListPrice {
        input: 0.60,
        cached_input: Some(0.11),
        cache_write: None,
        output: 2.20,
        up_to_prompt_tokens: None,
        date: "2026-12-01",
        source: "https://docs.z.ai/guides/overview/pricing (page undated, read 2026-12-01)",
    },
)];

/// Cerebras's model page for gpt-oss-120b. Its context depends on the
/// account tier (65k free, 131k paid), so none is recorded; no cached rate
/// is stated.
const CEREBRAS_MODELS: &[KnownModel] = &[mp(
    "gpt-oss-120b",
    None,
    ListPrice {
        input: 0.35,
        cached_input: None,
        cache_write: None,
        output: 0.75,
        up_to_prompt_tokens: None,
        date: "2026-12-01",
        source:
            "https://inference-docs.cerebras.ai/models/openai-oss (page undated, read 2026-12-01)",
    },
)];

const MINIMAX_MODELS: &[KnownModel] = &[
    m("MiniMax-M2.7", Some(204_800)),
    m("MiniMax-M2.5", Some(204_800)),
];

const STEPFUN_MODELS: &[KnownModel] = &[m("step-3.5-flash", Some(262_144))];

const AZURE: Entry = Entry {
    id: "azure-openai",
    name: "Azure OpenAI (deployment URLs, api-version)",
    wire: AzureOpenAi,
    base_url: "https://YOUR-RESOURCE.openai.azure.com",
    base_url_env: Some("AZURE_OPENAI_ENDPOINT"),
    needs_base_url: true,
    // The deployment name; Azure routes by deployment, not model.
    default_model: "gpt-4o-mini",
    key_env: Some("AZURE_OPENAI_API_KEY"),
    local: false,
    stream_usage: true,
    models: NO_MODELS,
    source: "https://learn.microsoft.com/en-us/azure/ai-services/openai/reference ({endpoint}/openai/deployments/{deployment}/chat/completions?api-version=; data-plane inference GA 2024-10-21; api-key header)",
};

const COHERE: Entry = Entry {
    // The compatibility API rejects `stream_options`, so no usage chunk is
    // requested; its turns report `usage_reported: false`.
    stream_usage: false,
    ..hosted(
        "cohere",
        "Cohere (Compatibility API)",
        Oai,
        "https://api.cohere.ai/compatibility/v1",
        "command-a-03-2025",
        "COHERE_API_KEY",
        &[m("command-a-03-2025", None)],
        "https://docs.cohere.com/docs/compatibility-api; stream_options rejection: https://strandsagents.com/docs/user-guide/concepts/model-providers/cohere/",
    )
};

pub const ENTRIES: &[Entry] = &[
    hosted("deepseek", "DeepSeek", Oai, "https://api.deepseek.com/v1", "deepseek-flash", "DEEPSEEK_API_KEY", DEEPSEEK_MODELS,
        "https://api-docs.deepseek.com (base URL not re-checked; default model per the upstream defaults table and the models-and-pricing page https://api-docs.deepseek.com/quick_start/pricing, which names deepseek-flash)"),
    hosted("openai", "OpenAI", Oai, "https://api.openai.com/v1", "gpt-5.6", "OPENAI_API_KEY", OPENAI_MODELS,
        "https://developers.openai.com/api/docs (Chat Completions; base URL not re-checked; gpt-5.6 from https://developers.openai.com/api/docs/models/gpt-5.6-sol)"),
    hosted("anthropic", "Anthropic", Anthropic, "https://api.anthropic.com", "claude-sonnet-5-5", "ANTHROPIC_API_KEY", ANTHROPIC_MODELS,
        "https://platform.claude.com/docs (Messages API; base URL not re-checked; prices from the model page)"),
    hosted("google", "Google Gemini (OpenAI compatibility)", Oai, "https://generativelanguage.googleapis.com/v1beta/openai", "gemini-3.1-pro-preview", "GEMINI_API_KEY",
        // Input token limit 1,048,576 per ai.google.dev's model page; no
        // Google pricing page is in the document store: price unknown.
        &[m("gemini-3.1-pro-preview", Some(1_048_576))],
        "https://ai.google.dev/gemini-api/docs/openai (base https://generativelanguage.googleapis.com/v1beta/openai/)"),
    hosted("xai", "xAI", Oai, "https://api.x.ai/v1", "grok-4.6", "XAI_API_KEY", XAI_MODELS,
        "https://docs.x.ai (OpenAI-compatible; base URL not re-checked; grok-4.6 from https://docs.x.ai/developers/grok-4-6)"),
    hosted("openrouter", "OpenRouter", Oai, "https://openrouter.ai/api/v1", "openrouter/auto", "OPENROUTER_API_KEY", NO_MODELS,
        "https://openrouter.ai/docs (not re-checked)"),
    hosted("mistral", "Mistral", Oai, "https://api.mistral.ai/v1", "mistral-small-latest", "MISTRAL_API_KEY", NO_MODELS,
        "https://docs.mistral.ai (not re-checked)"),
    hosted("moonshot", "Moonshot (Kimi)", Oai, "https://api.moonshot.ai/v1", "kimi-k2-0711-preview", "MOONSHOT_API_KEY", NO_MODELS,
        "https://platform.moonshot.ai/docs (not re-checked)"),
    hosted("groq", "Groq", Oai, "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", "GROQ_API_KEY", NO_MODELS,
        "https://console.groq.com/docs/openai"),
    hosted("together", "Together AI", Oai, "https://api.together.xyz/v1", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "TOGETHER_API_KEY", NO_MODELS,
        "https://docs.together.ai (not re-checked)"),
    hosted("fireworks", "Fireworks AI", Oai, "https://api.fireworks.ai/inference/v1", "accounts/fireworks/models/llama-v3p1-70b-instruct", "FIREWORKS_API_KEY", NO_MODELS,
        "https://docs.pipecat.ai/server/services/llm/fireworks (base_url default); https://fireworks.ai/docs"),
    hosted("deepinfra", "DeepInfra", Oai, "https://api.deepinfra.com/v1/openai", "meta-llama/Meta-Llama-3.1-8B-Instruct", "DEEPINFRA_API_KEY", NO_MODELS,
        "https://deepinfra.com/docs (OpenAI API under /v1/openai, not /v1)"),
    hosted("cerebras", "Cerebras", Oai, "https://api.cerebras.ai/v1", "gpt-oss-120b", "CEREBRAS_API_KEY", CEREBRAS_MODELS,
        "https://inference-docs.cerebras.ai"),
    hosted("perplexity", "Perplexity", Oai, "https://api.perplexity.ai", "sonar", "PERPLEXITY_API_KEY", NO_MODELS,
        "https://docs.perplexity.ai (not re-checked)"),
    COHERE,
    hosted("zai", "Z.ai (GLM, global)", Oai, "https://api.z.ai/api/paas/v4", "glm-4.6", "ZAI_API_KEY", ZAI_MODELS,
        "https://docs.z.ai; endpoints as listed at https://docs.jambonz.org/guides/features/bring-your-own-llm/z-ai-glm"),
    hosted("zhipu", "Zhipu BigModel (GLM, China)", Oai, "https://open.bigmodel.cn/api/paas/v4", "glm-4.6", "ZHIPUAI_API_KEY", NO_MODELS,
        "https://open.bigmodel.cn/dev/api; endpoint as listed at https://docs.jambonz.org/guides/features/bring-your-own-llm/z-ai-glm"),
    hosted("qwen", "Qwen (DashScope compatible mode, Singapore)", Oai, "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "qwen-plus", "DASHSCOPE_API_KEY", NO_MODELS,
        "https://www.alibabacloud.com/help/en/model-studio/compatibility-of-openai-with-dashscope"),
    hosted("qwen-cn", "Qwen (DashScope compatible mode, Beijing)", Oai, "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus", "DASHSCOPE_API_KEY", NO_MODELS,
        "https://www.alibabacloud.com/help/en/model-studio/compatibility-of-openai-with-dashscope"),
    hosted("baichuan", "Baichuan", Oai, "https://api.baichuan-ai.com/v1", "Baichuan4-Turbo", "BAICHUAN_API_KEY", NO_MODELS,
        "https://platform.baichuan-ai.com/docs/api (endpoint /v1/chat/completions as used by langchain_community)"),
    hosted("minimax", "MiniMax (global)", Oai, "https://api.minimax.io/v1", "MiniMax-M2.7", "MINIMAX_API_KEY", MINIMAX_MODELS,
        "https://platform.minimax.io/docs/api-reference/text-openai-api (context windows from the China page of the same doc)"),
    hosted("minimax-cn", "MiniMax (China)", Oai, "https://api.minimaxi.com/v1", "MiniMax-M2.7", "MINIMAX_API_KEY", MINIMAX_MODELS,
        "https://platform.minimaxi.com/docs/api-reference/text-openai-api"),
    hosted("minimax-anthropic", "MiniMax (Anthropic-compatible)", Anthropic, "https://api.minimax.io/anthropic", "MiniMax-M2.7", "MINIMAX_API_KEY", MINIMAX_MODELS,
        "https://platform.minimax.io/docs (Anthropic-compatible base https://api.minimax.io/anthropic, per https://www.developersdigest.tech/reference/api-compatibility/minimax)"),
    hosted("stepfun", "StepFun", Oai, "https://api.stepfun.com/v1", "step-3.5-flash", "STEPFUN_API_KEY", STEPFUN_MODELS,
        "https://platform.stepfun.com/docs/api-reference/models/retrieve (context window per docs.openclaw.ai/providers/stepfun)"),
    hosted("siliconflow", "SiliconFlow (global)", Oai, "https://api.siliconflow.com/v1", "deepseek-ai/DeepSeek-V3", "SILICONFLOW_API_KEY", NO_MODELS,
        "https://docs.siliconflow.com/en/api-reference/chat-completions/chat-completions"),
    hosted("siliconflow-cn", "SiliconFlow (China)", Oai, "https://api.siliconflow.cn/v1", "deepseek-ai/DeepSeek-V3", "SILICONFLOW_API_KEY", NO_MODELS,
        "https://docs.siliconflow.cn/docs/userguide/quickstart"),
    hosted("novita", "Novita AI", Oai, "https://api.novita.ai/openai", "deepseek/deepseek-v3-0324", "NOVITA_API_KEY", NO_MODELS,
        "https://novita.ai/docs (base as used by https://docs.pipecat.ai/server/services/llm/novita)"),
    hosted("hyperbolic", "Hyperbolic", Oai, "https://api.hyperbolic.xyz/v1", "meta-llama/Llama-3.3-70B-Instruct", "HYPERBOLIC_API_KEY", NO_MODELS,
        "https://docs.hyperbolic.xyz (not re-checked)"),
    hosted("nebius", "Nebius Token Factory", Oai, "https://api.tokenfactory.nebius.com/v1", "meta-llama/Meta-Llama-3.1-70B-Instruct", "NEBIUS_API_KEY", NO_MODELS,
        "https://docs.tokenfactory.nebius.com/api-reference/introduction"),
    hosted("sambanova", "SambaNova Cloud", Oai, "https://api.sambanova.ai/v1", "Meta-Llama-3.3-70B-Instruct", "SAMBANOVA_API_KEY", NO_MODELS,
        "https://docs.sambanova.ai (not re-checked)"),
    hosted("lambda", "Lambda Inference", Oai, "https://api.lambda.ai/v1", "llama3.3-70b-instruct-fp8", "LAMBDA_API_KEY", NO_MODELS,
        "https://docs.lambda.ai (not re-checked; the service may have been retired)"),
    hosted("github-models", "GitHub Models", Oai, "https://models.github.ai/inference", "openai/gpt-4.1", "GITHUB_TOKEN", NO_MODELS,
        "https://docs.github.com/en/github-models/quickstart (POST /inference/chat/completions, PAT with models scope)"),
    AZURE,
    hosted("bedrock", "Amazon Bedrock (OpenAI-compatible endpoint, us-east-1)", Oai, "https://bedrock-runtime.us-east-1.amazonaws.com/openai/v1", "openai.gpt-oss-120b-1:0", "AWS_BEARER_TOKEN_BEDROCK", NO_MODELS,
        "https://docs.aws.amazon.com/bedrock/latest/userguide/inference-chat-completions.html (bedrock-runtime.{region}.amazonaws.com/openai/v1; Bedrock API key as bearer); other regions: set base_url"),
    hosted("nvidia-nim", "NVIDIA NIM (API catalog)", Oai, "https://integrate.api.nvidia.com/v1", "meta/llama-3.3-70b-instruct", "NVIDIA_API_KEY", NO_MODELS,
        "https://build.nvidia.com (base https://integrate.api.nvidia.com/v1)"),
    hosted("huggingface", "Hugging Face Inference Providers (router)", Oai, "https://router.huggingface.co/v1", "openai/gpt-oss-120b", "HF_TOKEN", NO_MODELS,
        "https://huggingface.co/docs/inference-providers (router https://router.huggingface.co/v1)"),
    local("ollama", "Ollama", "http://localhost:11434/v1",
        "https://github.com/ollama/ollama/blob/main/docs/api.md (GET /api/tags shape, default port 11434; OpenAI compatibility under /v1)"),
    local("vllm", "vLLM", "http://localhost:8000/v1",
        "https://docs.vllm.ai (OpenAI-compatible server, default port 8000; not re-checked)"),
    local("sglang", "SGLang", "http://localhost:30000/v1",
        "https://docs.sglang.ai (OpenAI-compatible server, default port 30000; not re-checked)"),
    local("lmstudio", "LM Studio", "http://localhost:1234/v1",
        "https://lmstudio.ai/docs (local server, default port 1234; not re-checked)"),
    local("llamacpp-server", "llama.cpp server", "http://localhost:8080/v1",
        "https://github.com/ggml-org/llama.cpp/tree/master/tools/server (default port 8080; not re-checked)"),
    local("localai", "LocalAI", "http://localhost:8080/v1",
        "https://localai.io (default port 8080; not re-checked)"),
    local("jan", "Jan", "http://localhost:1337/v1",
        "https://jan.ai/docs (local API server, default port 1337; not re-checked)"),
];
