//! doc/admin-api.yaml lists exactly the routes the admin endpoint serves:
//! every entry of `routes::ROUTES` with its method, plus `GET /metrics`
//! and `GET /health`, and nothing else. (That each documented route
//! answers on a live node is k2v-style-tests/python/test_admin_api.py's.)
//!
//! The document is read by its layout, which it keeps: a path is a line
//! `  /path:` under `paths:`, its methods lines `    get:` / `    post:`.
//! A route written in another form is not found, and the test fails.

use std::collections::BTreeSet;

use hangar_api_admin::routes::{ROUTES, Verb};

fn documented() -> BTreeSet<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../doc/admin-api.yaml");
    let text = std::fs::read_to_string(path).expect("doc/admin-api.yaml is readable");
    let mut in_paths = false;
    let mut current: Option<String> = None;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() && !line.starts_with('#') {
            in_paths = line == "paths:";
            current = None;
            continue;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line.strip_prefix("  /") {
            let p = p.strip_suffix(':').expect("a path line ends with ':'");
            current = Some(format!("/{p}"));
        } else if let Some(m) = line.strip_prefix("    ")
            && !m.starts_with(' ')
            && let Some(m) = m.strip_suffix(':')
            && ["get", "post", "put", "delete", "patch", "head"].contains(&m)
        {
            let p = current.clone().expect("a method under a path");
            assert!(out.insert((m.to_uppercase(), p.clone())), "{m} {p} twice");
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_routes_served() {
    let mut served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| {
            let m = match r.verb {
                Verb::Get => "GET",
                Verb::Post => "POST",
            };
            (m.to_owned(), r.path.to_owned())
        })
        .collect();
    served.insert(("GET".into(), "/metrics".into()));
    served.insert(("GET".into(), "/health".into()));
    let doc = documented();
    let missing: Vec<_> = served.difference(&doc).collect();
    let extra: Vec<_> = doc.difference(&served).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but not served: {extra:?}");
    assert_eq!(doc.len(), ROUTES.len() + 2);
}
