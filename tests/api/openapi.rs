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
