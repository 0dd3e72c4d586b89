//! The reviewer's answer is checked by typed serde plus explicit bounds
//! (src/review/answer.rs); the model is shown docs/review-answer.schema.json.
//! Both must accept and reject the same answers: checked here with a
//! JSON-Schema validator on answers at and across every bound.

use codewhale::review::answer::parse_answer;
use serde_json::{json, Value};

fn finding(over: Value) -> Value {
    let mut f =
        json!({"path": "src/a.rs", "line": 1, "severity": "low", "title": "t", "body": "b"});
    for (k, v) in over.as_object().unwrap() {
        if v.is_null() {
            f.as_object_mut().unwrap().remove(k);
        } else {
            f[k] = v.clone();
        }
    }
    f
}

#[test]
fn the_schema_and_the_parser_agree() {
    let schema: Value = serde_json::from_str(codewhale::review::answer::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let long = |n: usize| "x".repeat(n);
    let mut cases = vec![
        json!({"summary": "s", "findings": []}),
        json!({"summary": "", "findings": []}),
        json!({"summary": long(8000), "findings": []}),
        json!({"summary": long(8001), "findings": []}),
        json!({"summary": "s"}),
        json!({"findings": []}),
        json!({"summary": "s", "findings": [], "verdict": "ok"}),
        json!({"summary": "s", "findings": (0..200).map(|_| finding(json!({}))).collect::<Vec<_>>()}),
        json!({"summary": "s", "findings": (0..201).map(|_| finding(json!({}))).collect::<Vec<_>>()}),
    ];
    for over in [
        json!({}),
        json!({"line": 0}),
        json!({"line": -1}),
        json!({"line": 1.5}),
        json!({"line": "3"}),
        json!({"line": 4294967295u64}),
        json!({"line": 4294967296u64}),
        json!({"severity": "urgent"}),
        json!({"severity": "critical"}),
        json!({"severity": "info"}),
        json!({"path": ""}),
        json!({"path": "/etc/passwd"}),
        json!({"path": long(4096)}),
        json!({"path": long(4097)}),
        json!({"title": ""}),
        json!({"title": "two\nlines"}),
        json!({"title": long(200)}),
        json!({"title": long(201)}),
        json!({"body": ""}),
        json!({"body": long(8001)}),
        json!({"body": null}),
        json!({"extra": 1}),
    ] {
        cases.push(json!({"summary": "s", "findings": [finding(over)]}));
    }
    for c in cases {
        let by_schema = validator.is_valid(&c);
        let by_parser = parse_answer(&c.to_string()).is_ok();
        let short: String = c.to_string().chars().take(160).collect();
        assert_eq!(
            by_schema, by_parser,
            "schema {by_schema}, parser {by_parser}: {short}"
        );
    }
}
