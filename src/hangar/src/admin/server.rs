//! The node's admin operations: [`AdminState`] runs each
//! [`Request`] on the node's model, cluster and workers, for both the
//! local socket and the admin HTTP API (`hangar_api_admin`), so the CLI
//! and the API answer the same.

use hangar_api_admin::answers::{
    AdminToken, BucketCreated, BucketDeleted, BucketInfo, BucketKey, BucketQuotas, BucketSummary,
    BucketWebsite, KeyAlias, KeyDeleted, KeyGrant, KeyInfo, KeySummary, NodeAddr, NodeConnected,
    Quotas, TableStatus, Website,
};
use hangar_api_admin::auth::Scope;
use hangar_api_admin::ops::{AdminOps, Health};
use hangar_api_admin::proto::{AdminError, AliasChange, Request};
use hangar_model::bucket::BucketRow;
use hangar_model::key::KeyRow;
use hangar_model::{Model, ModelError, PermissionChange};
use hangar_net::PeerAddr;
use serde_json::Value;

use crate::admin::block;
use crate::admin::error::model_error;
use crate::admin::layout::{self, AssignArgs};
use crate::admin::presign::{self, PresignArgs};
use crate::admin::state::AdminState;

/// A typed answer as the transports carry it.
fn answer(a: impl serde::Serialize) -> Value {
    serde_json::to_value(a).expect("admin answers serialize")
}

/// An SSE-KMS key as `hangar kms info --json` prints it.
fn kms_json(k: &hangar_model::kms::KmsKeyRow) -> Value {
    answer(hangar_api_admin::answers::KmsKey {
        id: k.id.clone(),
        description: k.description.value.clone(),
        enabled: k.is_enabled(),
        created_msec: k.created_msec,
        versions: k.versions.len(),
        current_version_msec: k.current().map_or(0, |v| v.created_msec),
    })
}

/// A key as `hangar key info --json` prints it.
pub fn key_json(k: &KeyRow) -> Value {
    answer(KeyInfo {
        name: k.name.value.clone(),
        access_key_id: k.access_key_id.clone(),
        secret_access_key: Some(k.secret.value.clone()),
        allow_create_bucket: k.allow_create_bucket.value,
        expires_msec: k.expires_msec.value,
        expires: k.expires_msec.value.map(hangar_util::time::rfc3339),
        expired: k.is_expired(hangar_util::time::now_msec()),
        canonical_id: k.canonical_id(),
        display_name: k.display_name.value.clone(),
        buckets: k
            .granted()
            .map(|(b, p)| KeyGrant {
                bucket: b.to_owned(),
                read: p.read,
                write: p.write,
                owner: p.owner,
            })
            .collect(),
    })
}

/// A bucket's quotas as the admin API shows them (`None`: no limit).
fn quotas(q: hangar_model::bucket::BucketQuotas) -> Quotas {
    Quotas {
        max_size: q.max_size,
        max_objects: q.max_objects,
    }
}

/// What `bucket info` shows of bucket `b`: usage, quotas, website, the
/// keys allowed on it and its aliases.
async fn bucket_info(model: &Model, b: &BucketRow) -> Result<Value, AdminError> {
    let e = model_error;
    let usage = model.objects().bucket_usage(b).await.map_err(e)?;
    let keys = model
        .keys()
        .list()
        .await
        .map_err(e)?
        .iter()
        .filter_map(|k| {
            let p = k.permission(&b.name);
            p.any().then(|| BucketKey {
                access_key_id: k.access_key_id.clone(),
                name: k.name.value.clone(),
                read: p.read,
                write: p.write,
                owner: p.owner,
            })
        })
        .collect();
    let website = b.website().map(|w| Website {
        index_document: w.index_suffix.clone(),
        error_document: w.error_key.clone(),
        redirect_all: w.redirect_all.as_ref().map(|r| r.host_name.clone()),
        routing_rules: w.routing_rules.len(),
    });
    let local_aliases = model
        .buckets()
        .bucket_local_aliases(b)
        .await
        .map_err(e)?
        .into_iter()
        .map(|(access_key_id, alias)| KeyAlias {
            access_key_id,
            alias,
        })
        .collect();
    Ok(answer(BucketInfo {
        name: b.name.clone(),
        id: b.id.clone(),
        created: b.created_msec,
        objects: usage.objects,
        bytes: usage.bytes,
        keys,
        website,
        quotas: quotas(b.quotas()),
        aliases: model.buckets().bucket_aliases(b).await.map_err(e)?,
        local_aliases,
    }))
}

/// The bucket, the alias and for a local alias its key (the access key
/// id) of an AddBucketAlias or RemoveBucketAlias: the bucket by
/// `bucket_id` (its id, or a name as Garage's CLI sends) or by `bucket`,
/// exactly one; `global_alias` or `local_alias`, exactly one. For a local
/// alias the bucket is named as that key names it (its local aliases
/// first).
async fn alias_request(
    model: &Model,
    change: AliasChange,
) -> Result<(BucketRow, String, Option<String>), AdminError> {
    let AliasChange {
        bucket_id,
        bucket,
        global_alias,
        local_alias,
    } = change;
    let which = match (bucket_id, bucket) {
        (Some(b), None) | (None, Some(b)) => b,
        _ => {
            return Err(AdminError::bad(
                "give the bucket: bucketId or bucket, one of them",
            ));
        }
    };
    let (alias, key) = match (global_alias, local_alias) {
        (Some(a), None) => (a, None),
        (None, Some(l)) => {
            let k = model
                .keys()
                .find(&l.access_key_id)
                .await
                .map_err(model_error)?;
            (l.alias, Some(k.access_key_id))
        }
        _ => {
            return Err(AdminError::bad(
                "give the alias: globalAlias or localAlias, one of them",
            ));
        }
    };
    let b = match model
        .buckets()
        .get_bucket_as(&which, key.as_deref())
        .await
        .map_err(model_error)?
    {
        Some(b) => b,
        None => model
            .buckets()
            .find_bucket(&which)
            .await
            .map_err(model_error)?,
    };
    Ok((b, alias, key))
}

impl AdminOps for AdminState {
    async fn call(&self, req: Request) -> Result<Value, AdminError> {
        handle(self, req).await
    }

    async fn health(&self) -> Health {
        crate::admin::health::check(&self.cluster, &self.mesh)
    }
}

async fn handle(st: &AdminState, req: Request) -> Result<Value, AdminError> {
    let model = st.model.as_ref();
    let e = model_error;
    Ok(match req {
        Request::KeyCreate { name, expires_msec } => key_json(
            &model
                .keys()
                .create_expiring(&name, expires_msec)
                .await
                .map_err(e)?,
        ),
        Request::KeySetExpiry { key, expires_msec } => {
            let k = model.keys().find(&key).await.map_err(e)?;
            key_json(
                &model
                    .keys()
                    .set_expiry(&k.access_key_id, expires_msec)
                    .await
                    .map_err(e)?,
            )
        }
        Request::KeySetIdentity {
            key,
            canonical_id,
            display_name,
        } => {
            let k = model.keys().find(&key).await.map_err(e)?;
            // Empty: cleared.
            let given = |v: Option<String>| v.map(|v| Some(v).filter(|v| !v.is_empty()));
            key_json(
                &model
                    .keys()
                    .set_identity(&k.access_key_id, given(canonical_id), given(display_name))
                    .await
                    .map_err(e)?,
            )
        }
        Request::KeyImport { id, secret, name } => {
            key_json(&model.keys().import(&id, &secret, &name).await.map_err(e)?)
        }
        Request::KeyList => answer(
            model
                .keys()
                .list()
                .await
                .map_err(e)?
                .iter()
                .map(|k| KeySummary {
                    access_key_id: k.access_key_id.clone(),
                    name: k.name.value.clone(),
                    expires_msec: k.expires_msec.value,
                    expired: k.is_expired(hangar_util::time::now_msec()),
                })
                .collect::<Vec<_>>(),
        ),
        Request::KeyInfo { key } => key_json(&model.keys().find(&key).await.map_err(e)?),
        Request::KeyDelete { key } => {
            let k = model.keys().find(&key).await.map_err(e)?;
            model.keys().delete(&k.access_key_id).await.map_err(e)?;
            answer(KeyDeleted {
                deleted: k.access_key_id,
            })
        }
        Request::KeySetCreateBucket { key, allow } => {
            let k = model.keys().find(&key).await.map_err(e)?;
            key_json(
                &model
                    .keys()
                    .set_create_bucket(&k.access_key_id, allow)
                    .await
                    .map_err(e)?,
            )
        }
        Request::KmsKeyCreate { description } => {
            kms_json(&model.kms_keys().create(&description).await.map_err(e)?)
        }
        Request::KmsKeyList => Value::Array(
            model
                .kms_keys()
                .list()
                .await
                .map_err(e)?
                .iter()
                .map(kms_json)
                .collect(),
        ),
        Request::KmsKeyInfo { key } => kms_json(&model.kms_keys().find(&key).await.map_err(e)?),
        Request::KmsKeyUpdate {
            key,
            rotate,
            enabled,
        } => {
            let kms = model.kms_keys();
            let mut k = kms.find(&key).await.map_err(e)?;
            if rotate {
                k = kms.rotate(&k.id).await.map_err(e)?;
            }
            if let Some(on) = enabled {
                k = kms.set_enabled(&k.id, on).await.map_err(e)?;
            }
            kms_json(&k)
        }
        Request::BucketCreate { name } => {
            let b = model
                .buckets()
                .create_bucket(&name, None)
                .await
                .map_err(e)?;
            answer(BucketCreated {
                name: b.name,
                id: b.id,
            })
        }
        Request::BucketList => {
            let mut aliases: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for (alias, b) in model.buckets().list_aliases().await.map_err(e)? {
                aliases.entry(b.id).or_default().push(alias);
            }
            answer(
                model
                    .buckets()
                    .list_buckets()
                    .await
                    .map_err(e)?
                    .into_iter()
                    .map(|b| BucketSummary {
                        aliases: aliases.get(&b.id).cloned().unwrap_or_default(),
                        name: b.name,
                        id: b.id,
                        created: b.created_msec,
                    })
                    .collect::<Vec<_>>(),
            )
        }
        Request::BucketInfo { name } => {
            let b = model
                .buckets()
                .get_bucket(&name)
                .await
                .map_err(e)?
                .ok_or_else(|| model_error(ModelError::NoSuchBucket(name.clone())))?;
            bucket_info(model, &b).await?
        }
        Request::BucketAlias(change) => {
            let (b, alias, key) = alias_request(model, change).await?;
            let b = match key {
                Some(k) => {
                    model
                        .buckets()
                        .add_local_bucket_alias(&k, &b.name, &alias)
                        .await
                }
                None => model.buckets().add_bucket_alias(&b.name, &alias).await,
            }
            .map_err(e)?;
            bucket_info(model, &b).await?
        }
        Request::BucketUnalias(change) => {
            let (b, alias, key) = alias_request(model, change).await?;
            let b = match key {
                Some(k) => {
                    model
                        .buckets()
                        .remove_local_bucket_alias(&k, &b.name, &alias)
                        .await
                }
                None => model.buckets().remove_bucket_alias(&b.name, &alias).await,
            }
            .map_err(e)?;
            bucket_info(model, &b).await?
        }
        Request::BucketSetQuotas {
            bucket,
            max_size,
            max_objects,
        } => {
            let q = hangar_model::bucket::BucketQuotas {
                max_size,
                max_objects,
            };
            let b = model
                .buckets()
                .set_bucket_quotas(&bucket, q)
                .await
                .map_err(e)?;
            answer(BucketQuotas {
                quotas: quotas(b.quotas()),
                name: b.name,
            })
        }
        Request::BucketWebsite {
            bucket,
            allow,
            index_document,
            error_document,
        } => {
            let website = if allow {
                let index = index_document.unwrap_or_else(|| "index.html".to_owned());
                if index.is_empty() || index.contains('/') {
                    return Err(model_error(ModelError::Invalid(format!(
                        "index document {index:?}: a suffix, not empty and without '/'"
                    ))));
                }
                if error_document.as_deref() == Some("") {
                    return Err(model_error(ModelError::Invalid(
                        "the error document must not be empty".into(),
                    )));
                }
                Some(hangar_model::website::WebsiteConfig {
                    index_suffix: Some(index),
                    error_key: error_document,
                    ..Default::default()
                })
            } else {
                None
            };
            let b = model
                .buckets()
                .set_bucket_website(&bucket, website)
                .await
                .map_err(e)?;
            answer(BucketWebsite {
                website: b.website().is_some(),
                name: b.name,
            })
        }
        Request::AdminTokenCreate {
            scope,
            expires_msec,
        } => {
            let sc = Scope::parse(&scope).ok_or_else(|| {
                AdminError::bad(format!("no token scope {scope:?}: read or full"))
            })?;
            let signer = st.token_signer.as_ref().ok_or_else(|| {
                AdminError::bad(
                    "this node has no admin_token to sign with: set [admin] admin_token (the same on every node)",
                )
            })?;
            if expires_msec.is_some_and(|t| t <= hangar_util::time::now_msec()) {
                return Err(AdminError::bad("the expiry is in the past"));
            }
            // The token is the answer, never logged.
            tracing::info!(scope = sc.name(), expires_msec, "admin token created");
            answer(AdminToken {
                token: signer.mint(sc, expires_msec),
                scope: sc.name().to_owned(),
                expires_msec,
                expires: expires_msec.map(hangar_util::time::rfc3339),
            })
        }
        Request::BucketDelete { name } => {
            model.delete_bucket(&name).await.map_err(e)?;
            answer(BucketDeleted { deleted: name })
        }
        Request::BucketPermission {
            bucket,
            key,
            read,
            write,
            owner,
            allow,
        } => {
            if !(read || write || owner) {
                return Err(AdminError::bad(
                    "give at least one of read, write, owner (--read, --write, --owner)",
                ));
            }
            let k = model.keys().find(&key).await.map_err(e)?;
            let flag = |set: bool| set.then_some(allow);
            let change = PermissionChange {
                read: flag(read),
                write: flag(write),
                owner: flag(owner),
            };
            key_json(
                &model
                    .buckets()
                    .set_permission(&bucket, &k.access_key_id, change)
                    .await
                    .map_err(e)?,
            )
        }
        Request::TableStatus => answer(
            model
                .tables()
                .table_status()
                .await
                .map_err(e)?
                .into_iter()
                .map(|(table, rows, digest)| TableStatus {
                    table: table.to_owned(),
                    rows,
                    digest: hex::encode(digest),
                })
                .collect::<Vec<_>>(),
        ),
        Request::WorkerList => {
            serde_json::to_value(st.workers.list()).map_err(AdminError::internal)?
        }
        Request::WorkerInfo { name } => {
            answer(block::worker_info(&st.workers, &st.resync, &st.scrub, &name).await?)
        }
        Request::WorkerSet { setting, value } => {
            answer(block::worker_set(&st.resync, &st.scrub, &setting, &value)?)
        }
        Request::Scrub { command } => answer(block::scrub(&st.scrub, &command).await?),
        Request::RepairBlocks => answer(block::repair_blocks(&st.resync).await?),
        Request::RepairTables => answer(block::repair_tables(&st.cluster, model).await?),
        Request::ClearResyncQueue => answer(block::clear_resync_queue(&st.blocks).await?),
        Request::BlockListErrors => answer(block::list_errors(&st.blocks).await?),
        Request::BlockRetryNow { hash } => {
            answer(block::retry_now(&st.blocks, &st.resync, hash).await?)
        }
        Request::BlockInfo { hash } => answer(block::info(&st.blocks, &st.cluster, &hash).await?),
        Request::NodeId => answer(NodeAddr {
            node: st.mesh.peer_addr().to_string(),
        }),
        Request::Status => crate::admin::cluster::status(st).await?,
        Request::ClusterStatistics => crate::admin::cluster::statistics(st).await?,
        Request::ClusterHistory { window_secs } => {
            answer(crate::admin::history::cluster(st, window_secs).await?)
        }
        Request::BucketHistory { name, window_secs } => {
            answer(crate::admin::history::bucket(st, &name, window_secs).await?)
        }
        Request::ClusterHealth => {
            let h = st.cluster.layout().snapshot().await;
            let up = st.mesh.up_nodes().into_iter().collect();
            answer(layout::health(&h, &up, st.cluster.consistency_mode()))
        }
        Request::NodeConnect { peer } => {
            let addr: PeerAddr = peer.parse().map_err(|e| {
                AdminError::bad(format!("{peer:?} is not <node id>@<host:port>: {e}"))
            })?;
            st.mesh
                .connect(&addr)
                .await
                .map_err(|e| AdminError::unavailable(format!("cannot connect to {peer}: {e}")))?;
            answer(NodeConnected {
                connected: addr.to_string(),
            })
        }
        Request::LayoutAssign {
            nodes,
            zone,
            capacity,
            gateway,
            tags,
        } => {
            let args = AssignArgs {
                nodes,
                zone,
                capacity,
                gateway,
                tags,
            };
            answer(layout::assign(st.cluster.layout(), &st.mesh, args).await?)
        }
        Request::LayoutRemove { node } => {
            answer(layout::remove(st.cluster.layout(), &st.mesh, &node).await?)
        }
        Request::LayoutConfig { zone_redundancy } => {
            answer(layout::config(st.cluster.layout(), &zone_redundancy).await?)
        }
        Request::LayoutShow => answer(layout::show(st.cluster.layout()).await),
        Request::LayoutApply { version } => {
            answer(layout::apply(st.cluster.layout(), version).await?)
        }
        Request::LayoutRevert => answer(layout::revert(st.cluster.layout()).await?),
        Request::LayoutHistory => answer(layout::history(st.cluster.layout()).await),
        Request::LayoutSkipDeadNodes {
            version,
            allow_missing_data,
        } => answer(
            layout::skip_dead_nodes(st.cluster.layout(), &st.mesh, version, allow_missing_data)
                .await?,
        ),
        Request::PresignObject {
            bucket,
            key,
            action,
            object,
            prefix,
            delimiter,
            continuation_token,
            download,
            expires_secs,
            endpoint,
        } => {
            let args = PresignArgs {
                bucket,
                key,
                action,
                object,
                prefix,
                delimiter,
                continuation_token,
                download,
                expires_secs,
                endpoint,
            };
            answer(presign::presign_object(model, &st.presign, args, e).await?)
        }
    })
}
