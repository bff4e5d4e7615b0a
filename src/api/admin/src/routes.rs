//! The HTTP routes of the admin API, one per [`Request`] kind (two for
//! bucket permissions: allow and deny), and the one mapping between a
//! route's fields and the typed request, used by the server to decode and
//! by the CLI's HTTP client to encode. doc/admin-api.yaml describes each
//! route; a test checks that the two list the same routes.
//!
//! `GET` routes only read (a read-only token may call them) and take their
//! fields, all strings, in the query string; `POST` routes take a JSON
//! object body (empty: no fields).

use serde_json::{Map, Value};

use crate::proto::{AdminError, Request};

/// How a route is called, and what token scope it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Reads only; fields in the query string.
    Get,
    /// May change something; fields in a JSON body.
    Post,
}

/// One admin API route.
#[derive(Debug, PartialEq, Eq)]
pub struct Route {
    pub verb: Verb,
    pub path: &'static str,
    /// The [`Request`]'s `op` tag.
    pub op: &'static str,
    /// A boolean field the route itself sets (`AllowBucketKey`: `allow`).
    pub fixed: Option<(&'static str, bool)>,
}

const fn get(path: &'static str, op: &'static str) -> Route {
    Route {
        verb: Verb::Get,
        path,
        op,
        fixed: None,
    }
}

const fn post(path: &'static str, op: &'static str) -> Route {
    Route {
        verb: Verb::Post,
        path,
        op,
        fixed: None,
    }
}

const fn post_with(path: &'static str, op: &'static str, field: &'static str, v: bool) -> Route {
    Route {
        verb: Verb::Post,
        path,
        op,
        fixed: Some((field, v)),
    }
}

/// Every route of the admin API.
pub const ROUTES: &[Route] = &[
    get("/v2/GetClusterStatus", "status"),
    get("/v2/GetClusterHealth", "cluster_health"),
    get("/v2/GetClusterStatistics", "cluster_statistics"),
    get("/v2/GetClusterHistory", "cluster_history"),
    get("/v2/GetBucketHistory", "bucket_history"),
    get("/v2/GetNodeId", "node_id"),
    post("/v2/ConnectClusterNode", "node_connect"),
    get("/v2/GetClusterLayout", "layout_show"),
    get("/v2/GetClusterLayoutHistory", "layout_history"),
    post("/v2/AssignClusterLayoutRoles", "layout_assign"),
    post("/v2/RemoveClusterLayoutRole", "layout_remove"),
    post("/v2/SetClusterLayoutParameters", "layout_config"),
    post("/v2/ApplyClusterLayout", "layout_apply"),
    post("/v2/RevertClusterLayout", "layout_revert"),
    post("/v2/ClusterLayoutSkipDeadNodes", "layout_skip_dead_nodes"),
    get("/v2/ListKeys", "key_list"),
    get("/v2/GetKeyInfo", "key_info"),
    post("/v2/CreateKey", "key_create"),
    post("/v2/ImportKey", "key_import"),
    post("/v2/SetKeyCreateBucket", "key_set_create_bucket"),
    post("/v2/SetKeyExpiry", "key_set_expiry"),
    post("/v2/SetKeyIdentity", "key_set_identity"),
    post("/v2/DeleteKey", "key_delete"),
    get("/v2/ListKmsKeys", "kms_key_list"),
    get("/v2/GetKmsKeyInfo", "kms_key_info"),
    post("/v2/CreateKmsKey", "kms_key_create"),
    post("/v2/UpdateKmsKey", "kms_key_update"),
    get("/v2/ListBuckets", "bucket_list"),
    get("/v2/GetBucketInfo", "bucket_info"),
    post("/v2/CreateBucket", "bucket_create"),
    post("/v2/DeleteBucket", "bucket_delete"),
    post("/v2/AddBucketAlias", "bucket_alias"),
    post("/v2/RemoveBucketAlias", "bucket_unalias"),
    post_with("/v2/AllowBucketKey", "bucket_permission", "allow", true),
    post_with("/v2/DenyBucketKey", "bucket_permission", "allow", false),
    post("/v2/UpdateBucketWebsite", "bucket_website"),
    post("/v2/UpdateBucketQuotas", "bucket_set_quotas"),
    get("/v2/ListWorkers", "worker_list"),
    get("/v2/GetWorkerInfo", "worker_info"),
    post("/v2/SetWorkerVariable", "worker_set"),
    post("/v2/RepairBlocks", "repair_blocks"),
    post("/v2/RepairTables", "repair_tables"),
    post("/v2/ClearResyncQueue", "clear_resync_queue"),
    post("/v2/ScrubCommand", "scrub"),
    get("/v2/ListBlockErrors", "block_list_errors"),
    get("/v2/GetBlockInfo", "block_info"),
    post("/v2/RetryBlockResync", "block_retry_now"),
    get("/v2/GetTableStatus", "table_status"),
    post("/v2/PresignObject", "presign_object"),
    post("/v2/CreateAdminToken", "admin_token_create"),
];

/// The route that carries `req`.
pub fn route_for(req: &Request) -> &'static Route {
    // Exhaustive on purpose: a new request kind does not compile until it
    // has a route.
    let path = match req {
        Request::Status => "/v2/GetClusterStatus",
        Request::ClusterHealth => "/v2/GetClusterHealth",
        Request::ClusterStatistics => "/v2/GetClusterStatistics",
        Request::ClusterHistory { .. } => "/v2/GetClusterHistory",
        Request::BucketHistory { .. } => "/v2/GetBucketHistory",
        Request::NodeId => "/v2/GetNodeId",
        Request::NodeConnect { .. } => "/v2/ConnectClusterNode",
        Request::LayoutShow => "/v2/GetClusterLayout",
        Request::LayoutHistory => "/v2/GetClusterLayoutHistory",
        Request::LayoutAssign { .. } => "/v2/AssignClusterLayoutRoles",
        Request::LayoutRemove { .. } => "/v2/RemoveClusterLayoutRole",
        Request::LayoutConfig { .. } => "/v2/SetClusterLayoutParameters",
        Request::LayoutApply { .. } => "/v2/ApplyClusterLayout",
        Request::LayoutRevert => "/v2/RevertClusterLayout",
        Request::LayoutSkipDeadNodes { .. } => "/v2/ClusterLayoutSkipDeadNodes",
        Request::KeyList => "/v2/ListKeys",
        Request::KeyInfo { .. } => "/v2/GetKeyInfo",
        Request::KeyCreate { .. } => "/v2/CreateKey",
        Request::KeyImport { .. } => "/v2/ImportKey",
        Request::KeySetCreateBucket { .. } => "/v2/SetKeyCreateBucket",
        Request::KeySetExpiry { .. } => "/v2/SetKeyExpiry",
        Request::KeySetIdentity { .. } => "/v2/SetKeyIdentity",
        Request::KeyDelete { .. } => "/v2/DeleteKey",
        Request::KmsKeyList => "/v2/ListKmsKeys",
        Request::KmsKeyInfo { .. } => "/v2/GetKmsKeyInfo",
        Request::KmsKeyCreate { .. } => "/v2/CreateKmsKey",
        Request::KmsKeyUpdate { .. } => "/v2/UpdateKmsKey",
        Request::BucketList => "/v2/ListBuckets",
        Request::BucketInfo { .. } => "/v2/GetBucketInfo",
        Request::BucketCreate { .. } => "/v2/CreateBucket",
        Request::BucketDelete { .. } => "/v2/DeleteBucket",
        Request::BucketAlias(_) => "/v2/AddBucketAlias",
        Request::BucketUnalias(_) => "/v2/RemoveBucketAlias",
        Request::BucketPermission { allow: true, .. } => "/v2/AllowBucketKey",
        Request::BucketPermission { allow: false, .. } => "/v2/DenyBucketKey",
        Request::BucketWebsite { .. } => "/v2/UpdateBucketWebsite",
        Request::BucketSetQuotas { .. } => "/v2/UpdateBucketQuotas",
        Request::WorkerList => "/v2/ListWorkers",
        Request::WorkerInfo { .. } => "/v2/GetWorkerInfo",
        Request::WorkerSet { .. } => "/v2/SetWorkerVariable",
        Request::RepairBlocks => "/v2/RepairBlocks",
        Request::RepairTables => "/v2/RepairTables",
        Request::ClearResyncQueue => "/v2/ClearResyncQueue",
        Request::Scrub { .. } => "/v2/ScrubCommand",
        Request::BlockListErrors => "/v2/ListBlockErrors",
        Request::BlockInfo { .. } => "/v2/GetBlockInfo",
        Request::BlockRetryNow { .. } => "/v2/RetryBlockResync",
        Request::TableStatus => "/v2/GetTableStatus",
        Request::PresignObject { .. } => "/v2/PresignObject",
        Request::AdminTokenCreate { .. } => "/v2/CreateAdminToken",
    };
    ROUTES
        .iter()
        .find(|r| r.path == path)
        .expect("every request kind's path is in ROUTES")
}

impl Route {
    /// The typed request from the route's `fields` (the query's pairs, or
    /// the body's object).
    pub fn decode(&self, mut fields: Map<String, Value>) -> Result<Request, AdminError> {
        if let Some((name, v)) = self.fixed {
            if fields.contains_key(name) {
                return Err(AdminError::bad(format!(
                    "{name} is set by the route {}, not by the request",
                    self.path
                )));
            }
            fields.insert(name.into(), Value::Bool(v));
        }
        if fields.contains_key("op") {
            return Err(AdminError::bad("unknown field `op`"));
        }
        fields.insert("op".into(), Value::String(self.op.into()));
        serde_json::from_value(Value::Object(fields))
            .map_err(|e| AdminError::bad(format!("{}: {e}", self.path)))
    }

    /// Decodes a `GET` route's query pairs; a field given twice is refused.
    pub fn decode_query(&self, pairs: Vec<(String, String)>) -> Result<Request, AdminError> {
        let mut fields = Map::new();
        for (k, v) in pairs {
            if fields.insert(k.clone(), Value::String(v)).is_some() {
                return Err(AdminError::bad(format!("query field {k} is given twice")));
            }
        }
        self.decode(fields)
    }

    /// Decodes a `POST` route's body: a JSON object, or nothing.
    pub fn decode_body(&self, body: &[u8]) -> Result<Request, AdminError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return self.decode(Map::new());
        }
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => self.decode(m),
            Ok(_) => Err(AdminError::bad(format!(
                "{}: the body must be a JSON object",
                self.path
            ))),
            Err(e) => Err(AdminError::bad(format!(
                "{}: body is not JSON: {e}",
                self.path
            ))),
        }
    }
}

/// `req` as its route and fields (what [`Route::decode`] takes back): the
/// `op` tag and the route's fixed field removed, absent options left out.
pub fn encode(req: &Request) -> (&'static Route, Map<String, Value>) {
    let route = route_for(req);
    let Value::Object(mut fields) = serde_json::to_value(req).expect("requests encode") else {
        unreachable!("a tagged enum encodes as an object")
    };
    fields.remove("op");
    if let Some((name, _)) = route.fixed {
        fields.remove(name);
    }
    fields.retain(|_, v| !v.is_null());
    (route, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One request of each kind.
    pub fn samples() -> Vec<Request> {
        use Request::*;
        let s = |x: &str| x.to_string();
        vec![
            KmsKeyCreate {
                description: s("archive"),
            },
            KmsKeyList,
            KmsKeyInfo { key: s("k") },
            KmsKeyUpdate {
                key: s("k"),
                rotate: true,
                enabled: Some(false),
            },
            KeyCreate {
                name: s("k"),
                expires_msec: None,
            },
            KeyCreate {
                name: s("k"),
                expires_msec: Some(1_800_000_000_000),
            },
            KeyImport {
                id: s("GK1"),
                secret: s("ab"),
                name: s(""),
            },
            KeyList,
            KeyInfo { key: s("k") },
            KeyDelete { key: s("k") },
            KeySetCreateBucket {
                key: s("k"),
                allow: false,
            },
            KeySetExpiry {
                key: s("k"),
                expires_msec: Some(5),
            },
            KeySetExpiry {
                key: s("k"),
                expires_msec: None,
            },
            KeySetIdentity {
                key: s("k"),
                canonical_id: Some(s("c")),
                display_name: None,
            },
            KeySetIdentity {
                key: s("k"),
                canonical_id: None,
                display_name: Some(s("")),
            },
            BucketCreate { name: s("b") },
            BucketList,
            BucketInfo { name: s("b") },
            BucketDelete { name: s("b") },
            BucketAlias(crate::proto::AliasChange {
                bucket_id: Some(s("ab")),
                bucket: None,
                global_alias: Some(s("c")),
                local_alias: None,
            }),
            BucketUnalias(crate::proto::AliasChange {
                bucket_id: None,
                bucket: Some(s("b")),
                global_alias: None,
                local_alias: Some(crate::proto::LocalAlias {
                    access_key_id: s("GK1"),
                    alias: s("c"),
                }),
            }),
            BucketPermission {
                bucket: s("b"),
                key: s("k"),
                read: true,
                write: false,
                owner: true,
                allow: true,
            },
            BucketPermission {
                bucket: s("b"),
                key: s("k"),
                read: true,
                write: true,
                owner: false,
                allow: false,
            },
            WorkerList,
            WorkerInfo { name: s("w") },
            WorkerSet {
                setting: s("a"),
                value: s("1"),
            },
            RepairBlocks,
            Scrub {
                command: s("start"),
            },
            RepairTables,
            ClearResyncQueue,
            BlockListErrors,
            BlockRetryNow { hash: None },
            BlockRetryNow {
                hash: Some(s("00")),
            },
            BlockInfo { hash: s("00") },
            TableStatus,
            NodeId,
            Status,
            ClusterHealth,
            ClusterStatistics,
            ClusterHistory { window_secs: None },
            ClusterHistory {
                window_secs: Some(60),
            },
            BucketHistory {
                name: s("b"),
                window_secs: Some(600),
            },
            NodeConnect { peer: s("p") },
            LayoutAssign {
                nodes: vec![s("ab")],
                zone: Some(s("dc1")),
                capacity: Some(1 << 40),
                gateway: false,
                tags: vec![s("t")],
            },
            LayoutRemove { node: s("ab") },
            LayoutConfig {
                zone_redundancy: s("maximum"),
            },
            LayoutShow,
            LayoutApply { version: 2 },
            LayoutRevert,
            LayoutHistory,
            LayoutSkipDeadNodes {
                version: 3,
                allow_missing_data: true,
            },
            BucketWebsite {
                bucket: s("b"),
                allow: true,
                index_document: Some(s("index.html")),
                error_document: None,
            },
            BucketSetQuotas {
                bucket: s("b"),
                max_size: Some(10 << 30),
                max_objects: None,
            },
            AdminTokenCreate {
                scope: s("read"),
                expires_msec: Some(1_800_000_000_000),
            },
            PresignObject {
                bucket: s("b"),
                key: s("k"),
                action: s("list"),
                object: s(""),
                prefix: Some(s("a/")),
                delimiter: Some(s("/")),
                continuation_token: None,
                download: false,
                expires_secs: Some(60),
                endpoint: None,
            },
        ]
    }

    #[test]
    fn every_request_goes_through_its_route_and_back() {
        let mut used = std::collections::BTreeSet::new();
        for req in samples() {
            let (route, fields) = encode(&req);
            assert_eq!(route.op, serde_json::to_value(&req).unwrap()["op"]);
            let back = match route.verb {
                Verb::Post => route.decode_body(&serde_json::to_vec(&fields).unwrap()),
                Verb::Get => {
                    // A query carries a GET's fields as text: strings as
                    // they are, whole numbers in decimal.
                    let pairs = fields
                        .into_iter()
                        .map(|(k, v)| {
                            let text = match &v {
                                serde_json::Value::String(s) => s.clone(),
                                serde_json::Value::Number(n) if n.is_u64() => n.to_string(),
                                other => panic!("a GET field is text or a number: {other}"),
                            };
                            (k, text)
                        })
                        .collect();
                    route.decode_query(pairs)
                }
            };
            assert_eq!(back.unwrap(), req);
            used.insert(route.path);
        }
        assert_eq!(used.len(), ROUTES.len(), "a route has no sample request");
        let mut paths: Vec<_> = ROUTES.iter().map(|r| r.path).collect();
        paths.dedup();
        assert_eq!(paths.len(), ROUTES.len(), "a path is listed twice");
    }

    #[test]
    fn bad_fields_are_refused_as_bad_requests() {
        let r = route_for(&Request::KeyInfo { key: "k".into() });
        assert!(r.decode_query(vec![]).is_err());
        assert!(
            r.decode_query(vec![("key".into(), "a".into()), ("key".into(), "b".into())])
                .is_err()
        );
        assert!(
            r.decode_query(vec![("key".into(), "a".into()), ("x".into(), "b".into())])
                .is_err()
        );
        let allow = ROUTES
            .iter()
            .find(|r| r.path == "/v2/AllowBucketKey")
            .unwrap();
        let e = allow
            .decode_body(br#"{"bucket":"b","key":"k","allow":false}"#)
            .unwrap_err();
        assert!(e.message.contains("set by the route"), "{e}");
        let revert = route_for(&Request::LayoutRevert);
        assert_eq!(revert.decode_body(b"").unwrap(), Request::LayoutRevert);
        assert_eq!(revert.decode_body(b"{}").unwrap(), Request::LayoutRevert);
        assert!(revert.decode_body(b"[1]").is_err());
        assert!(revert.decode_body(br#"{"op":"key_list"}"#).is_err());
        assert!(revert.decode_body(b"{").is_err());
    }
}
