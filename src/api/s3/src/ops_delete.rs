//! DeleteObject and DeleteObjects. In a bucket never versioned a delete
//! makes the object a tombstone; in a versioned one it writes a delete
//! marker, or with a `versionId` removes that version for good
//! (`hangar_model::Objects::delete_version`).

use hangar_model::version_ops::Deleted;
use s3s::dto::{
    DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject,
    Error as DeleteError,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::ops_versioning::parse_version_id;

/// Most keys in one DeleteObjects request, as in S3.
const MAX_KEYS: usize = 1000;

impl S3Api {
    pub(crate) async fn do_delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let bucket = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let v = parse_version_id(req.input.version_id.as_deref())?;
        let bypass = req.input.bypass_governance_retention == Some(true)
            && self.may_bypass_governance(&req, &req.input.bucket).await?;
        let d: Deleted = self
            .model
            .objects()
            .delete_version_as(&bucket, &req.input.key, v, bypass)
            .await
            .or_s3()?;
        let mut resp = S3Response::new(DeleteObjectOutput {
            delete_marker: d.delete_marker.then_some(true),
            version_id: d.id.map(|i| i.to_string()),
            ..Default::default()
        });
        resp.status = Some(http::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub(crate) async fn do_delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bucket = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let bypass = req.input.bypass_governance_retention == Some(true)
            && self.may_bypass_governance(&req, &req.input.bucket).await?;
        let objects = req.input.delete.objects;
        if objects.len() > MAX_KEYS {
            return Err(s3_error!(
                MalformedXML,
                "A DeleteObjects request may name at most {MAX_KEYS} keys"
            ));
        }
        // Each key as its own DeleteObject under the bucket policy: a key
        // the caller may not delete is reported, the others are deleted.
        let mut denied = Vec::new();
        let objects = match bucket.policy() {
            None => objects,
            Some(_) => {
                let caller = req
                    .extensions
                    .get::<crate::access::Caller>()
                    .cloned()
                    .unwrap_or_default();
                let (may, may_not): (Vec<_>, Vec<_>) = objects.into_iter().partition(|o| {
                    let action = crate::access::iam_action("DeleteObject", o.version_id.is_some());
                    caller.may(&bucket, crate::access::Need::Write, &action, Some(&o.key))
                });
                denied = may_not
                    .into_iter()
                    .map(|o| DeleteError {
                        code: Some("AccessDenied".into()),
                        key: Some(o.key),
                        message: Some("Access Denied".into()),
                        version_id: o.version_id,
                    })
                    .collect();
                may
            }
        };
        let quiet = req.input.delete.quiet.unwrap_or(false);
        let versioned = objects.iter().any(|o| o.version_id.is_some())
            || bucket.versioning() != hangar_model::bucket::Versioning::Off;
        if !versioned {
            // One batch of tombstones.
            let keys: Vec<String> = objects.into_iter().map(|o| o.key).collect();
            self.model
                .objects()
                .delete_many(&bucket, keys.clone())
                .await
                .or_s3()?;
            // S3 reports a key that did not exist as deleted too.
            let deleted = if quiet {
                Vec::new()
            } else {
                keys.into_iter()
                    .map(|k| DeletedObject {
                        key: Some(k),
                        ..Default::default()
                    })
                    .collect()
            };
            return Ok(S3Response::new(DeleteObjectsOutput {
                deleted: Some(deleted),
                errors: (!denied.is_empty()).then_some(denied),
                request_charged: None,
            }));
        }
        let (mut deleted, mut errors) = (Vec::new(), denied);
        for o in objects {
            let v = match parse_version_id(o.version_id.as_deref()) {
                Ok(v) => v,
                Err(_) => {
                    errors.push(DeleteError {
                        code: Some("NoSuchVersion".into()),
                        key: Some(o.key),
                        message: Some("The specified version does not exist.".into()),
                        version_id: o.version_id,
                    });
                    continue;
                }
            };
            let d = match self
                .model
                .objects()
                .delete_version_as(&bucket, &o.key, v, bypass)
                .await
            {
                Ok(d) => d,
                Err(hangar_model::ModelError::ObjectLocked) => {
                    errors.push(DeleteError {
                        code: Some("AccessDenied".into()),
                        key: Some(o.key),
                        message: Some(
                            "Access Denied because object protected by object lock.".into(),
                        ),
                        version_id: o.version_id,
                    });
                    continue;
                }
                Err(e) => return Err(crate::error::model_error(e)),
            };
            if quiet {
                continue;
            }
            // S3: a delete marker written gets DeleteMarkerVersionId; a
            // version removed by id is echoed as VersionId, with
            // DeleteMarker when it was a marker.
            let id = d.id.map(|i| i.to_string());
            deleted.push(match v {
                None => DeletedObject {
                    key: Some(o.key),
                    delete_marker: d.delete_marker.then_some(true),
                    delete_marker_version_id: id.filter(|_| d.delete_marker),
                    version_id: None,
                },
                Some(_) => DeletedObject {
                    key: Some(o.key),
                    delete_marker: d.delete_marker.then_some(true),
                    delete_marker_version_id: id.clone().filter(|_| d.delete_marker),
                    version_id: id,
                },
            });
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            request_charged: None,
        }))
    }
}
