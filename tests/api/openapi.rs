//! The committed OpenAPI document is the one the code generates.

use std::path::PathBuf;

use serde_json::Value;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")
}

#[test]
fn committed_openapi_matches_the_code() {
    let generated = sagents::http::openapi_document()
        .to_pretty_json()
        .expect("the document renders")
        + "\n";
    let path = committed_path();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date with the code; regenerate it with \
         `UPDATE_OPENAPI=1 cargo test --test all openapi` (or `sagents openapi > openapi/openapi.json`) \
         and commit the result"
    );
}

#[test]
fn every_operation_documents_its_problems_params_and_security() {
    let doc: Value =
        serde_json::from_str(&sagents::http::openapi_document().to_json().unwrap()).unwrap();
    let open = ["/healthz", "/readyz"];
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 18, "every route is documented");
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            let responses = op["responses"].as_object().unwrap();
            assert!(
                responses.keys().any(|s| s.starts_with('2')),
                "{name}: a success response"
            );
            for (status, res) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        res["content"]["application/problem+json"]["schema"]["$ref"]
                            == "#/components/schemas/Problem",
                        "{name} {status}: a problem body"
                    );
                }
            }
            if open.contains(&path.as_str()) {
                assert!(op.get("security").is_none(), "{name} is open");
            } else {
                // Each requirement names the one role it admits (OpenAPI 3.1 role names).
                let requirements = op["security"].as_array().expect("security");
                assert!(!requirements.is_empty(), "{name}");
                for req in requirements {
                    let roles = req["bearer"].as_array().expect("bearer");
                    assert_eq!(roles.len(), 1, "{name}");
                    assert!(
                        ["admin", "runtime", "frontend", "metrics"]
                            .contains(&roles[0].as_str().unwrap()),
                        "{name}"
                    );
                }
                for status in ["401", "403"] {
                    assert!(responses.contains_key(status), "{name}: {status}");
                }
            }
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            for segment in path.split('/').filter(|s| s.starts_with('{')) {
                let param = segment.trim_matches(|c| c == '{' || c == '}');
                assert!(
                    params
                        .iter()
                        .any(|p| p["name"] == param && p["in"] == "path"),
                    "{name}: path parameter {param}"
                );
            }
            if method == "post" {
                assert!(
                    params
                        .iter()
                        .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"),
                    "{name}: Idempotency-Key"
                );
            }
            if op.get("requestBody").is_some() {
                for status in ["400", "413", "415", "422"] {
                    assert!(responses.contains_key(status), "{name}: {status}");
                }
            }
        }
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

fn provider_document() -> String {
    sagents_local_provider::openapi::document()
        .to_pretty_json()
        .expect("the provider document renders")
        + "\n"
}

#[test]
fn committed_provider_openapi_matches_the_code() {
    let generated = provider_document();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi/provider-v3.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/provider-v3.json is out of date with the code; regenerate it with \
         `UPDATE_OPENAPI=1 cargo test --test all openapi` and commit the result"
    );
}

/// Every documented provider operation is routed, with the security it documents.
#[tokio::test]
async fn the_provider_document_names_routed_operations() {
    let doc: Value = serde_json::from_str(&provider_document()).unwrap();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert!(schemes.contains_key("grant") && schemes.contains_key("service_token"));
    let h = crate::provider::Harness::with(|c| {
        c.token = Some("provider-token-of-the-openapi-test-0123".into())
    })
    .await;
    let http = reqwest::Client::new();
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 9);
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            let security = op["security"][0].as_object().unwrap();
            let scheme = security.keys().next().unwrap().as_str();
            assert_eq!(scheme == "grant", path.ends_with("/exec"), "{name}");
            for (status, res) in op["responses"].as_object().unwrap() {
                if !status.starts_with('2') {
                    let schema = &res["content"]["application/json"]["schema"]["$ref"];
                    assert_eq!(
                        schema, "#/components/schemas/ProviderError",
                        "{name} {status}"
                    );
                }
            }
            let url = format!("{}{}", h.base_url(), path.replace(['{', '}'], ""));
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = http
                .request(method, url)
                .bearer_auth("t")
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or_default();
            assert!(
                status != 405 && body["code"] != "route.not_found",
                "{name} is not routed: {status} {body}"
            );
        }
    }
}
