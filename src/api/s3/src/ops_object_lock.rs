//! S3 Object Lock: Put/GetObjectLockConfiguration, Put/GetObjectRetention,
//! Put/GetObjectLegalHold, and what the writes and reads of objects share
//! (the lock of a new version, the lock headers of GET/HEAD). The rules
//! are the model's (`hangar_model::object_lock`).

use hangar_model::bucket::BucketRow;
use hangar_model::object::ObjectRow;
use hangar_model::object_lock::{
    DefaultRetention, ObjectLockConfig, Retention, RetentionMode, RetentionPeriod,
};
use s3s::dto::{
    DefaultRetention as S3DefaultRetention, GetObjectLegalHoldInput, GetObjectLegalHoldOutput,
    GetObjectLockConfigurationInput, GetObjectLockConfigurationOutput, GetObjectRetentionInput,
    GetObjectRetentionOutput, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockLegalHold,
    ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode,
    ObjectLockRule, PutObjectLegalHoldInput, PutObjectLegalHoldOutput,
    PutObjectLockConfigurationInput, PutObjectLockConfigurationOutput, PutObjectRetentionInput,
    PutObjectRetentionOutput, Timestamp,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::ops_versioning::parse_version_id;
use crate::time::timestamp;

/// The lock a new version gets: its own from the request, else the
/// bucket's default retention; `(retention, legal hold)`, each `None` when
/// not set.
pub(crate) struct NewLock {
    pub retention: Option<Retention>,
    pub legal_hold: Option<bool>,
}

fn mode_of(s: &str) -> S3Result<RetentionMode> {
    match s {
        ObjectLockMode::GOVERNANCE => Ok(RetentionMode::Governance),
        ObjectLockMode::COMPLIANCE => Ok(RetentionMode::Compliance),
        _ => Err(s3_error!(InvalidArgument, "Unknown wormMode directive.")),
    }
}

fn mode_name(m: RetentionMode) -> &'static str {
    match m {
        RetentionMode::Governance => ObjectLockMode::GOVERNANCE,
        RetentionMode::Compliance => ObjectLockMode::COMPLIANCE,
    }
}

fn msec_of(t: &Timestamp) -> i128 {
    let odt: time::OffsetDateTime = t.clone().into();
    odt.unix_timestamp_nanos() / 1_000_000
}

fn hold_of(s: &str) -> S3Result<bool> {
    match s {
        ObjectLockLegalHoldStatus::ON => Ok(true),
        ObjectLockLegalHoldStatus::OFF => Ok(false),
        _ => Err(s3_error!(
            InvalidArgument,
            "Legal Hold must be either of 'ON' or 'OFF'"
        )),
    }
}

fn no_lock_configuration() -> s3s::S3Error {
    s3_error!(
        InvalidRequest,
        "Bucket is missing Object Lock Configuration"
    )
}

/// A retention asked for: a mode and a date in the future.
fn retention_of(mode: &str, until: &Timestamp) -> S3Result<Retention> {
    let mode = mode_of(mode)?;
    let ms = msec_of(until);
    if ms <= hangar_util::time::now_msec() as i128 {
        return Err(s3_error!(
            InvalidArgument,
            "The retain until date must be in the future!"
        ));
    }
    Ok(Retention {
        mode,
        until_msec: ms as u64,
    })
}

/// The lock of a version written now by a PutObject, CopyObject or
/// CreateMultipartUpload with these `x-amz-object-lock-*` headers. Lock
/// headers on a bucket without Object Lock are `400 InvalidRequest`.
pub(crate) fn new_lock(
    bucket: &BucketRow,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<NewLock> {
    let config = bucket.object_lock();
    if config.is_none() && (mode.is_some() || until.is_some() || hold.is_some()) {
        return Err(no_lock_configuration());
    }
    let retention = match (mode, until) {
        (Some(m), Some(u)) => Some(retention_of(m.as_str(), u)?),
        (None, None) => config
            .and_then(|c| c.default_retention)
            .map(|d| d.retention_from(hangar_util::time::now_msec())),
        _ => {
            return Err(s3_error!(
                InvalidArgument,
                "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"
            ));
        }
    };
    let legal_hold = hold.map(|h| hold_of(h.as_str())).transpose()?;
    Ok(NewLock {
        retention,
        legal_hold,
    })
}

impl NewLock {
    /// Sets the lock on a new version's row (registers of timestamp 0,
    /// like tags given at upload).
    pub(crate) fn apply(&self, row: &mut ObjectRow) {
        if let Some(r) = self.retention {
            row.retention = hangar_table::Lww::new(0, Some(r));
        }
        if let Some(h) = self.legal_hold {
            row.legal_hold = hangar_table::Lww::new(0, h);
        }
    }
}

/// The lock headers of a version, for GET and HEAD (`x-amz-object-lock-*`).
pub(crate) fn lock_headers(
    row: &ObjectRow,
) -> (
    Option<ObjectLockMode>,
    Option<Timestamp>,
    Option<ObjectLockLegalHoldStatus>,
) {
    let r = row.retention();
    let hold = (!row.legal_hold.is_unset()).then(|| {
        ObjectLockLegalHoldStatus::from_static(if row.legal_hold() {
            ObjectLockLegalHoldStatus::ON
        } else {
            ObjectLockLegalHoldStatus::OFF
        })
    });
    (
        r.map(|r| ObjectLockMode::from_static(mode_name(r.mode))),
        r.map(|r| timestamp(r.until_msec)),
        hold,
    )
}

impl S3Api {
    /// Whether the requester may bypass GOVERNANCE retention in `bucket`
    /// (S3's s3:BypassGovernanceRetention): the bucket's owners may.
    pub(crate) async fn may_bypass_governance<T>(
        &self,
        req: &S3Request<T>,
        bucket: &str,
    ) -> S3Result<bool> {
        let Some(c) = req.credentials.as_ref() else {
            return Ok(false);
        };
        let key = self.model.keys().signing_key(&c.access_key).await.or_s3()?;
        // Permissions name the bucket by its own name, not by an alias.
        let name = self.bucket(signer(&req.credentials), bucket).await?.name;
        Ok(key.is_some_and(|k| k.permission(&name).owner))
    }

    /// A bypass asked for (`x-amz-bypass-governance-retention: true`) by a
    /// key that may not is `403 AccessDenied`.
    async fn bypass<T>(
        &self,
        req: &S3Request<T>,
        asked: Option<bool>,
        bucket: &str,
    ) -> S3Result<bool> {
        if asked != Some(true) {
            return Ok(false);
        }
        if self.may_bypass_governance(req, bucket).await? {
            Ok(true)
        } else {
            Err(s3_error!(AccessDenied, "Access Denied"))
        }
    }

    pub(crate) async fn do_put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let c = input
            .object_lock_configuration
            .ok_or_else(crate::error::malformed_xml)?;
        if c.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
            return Err(crate::error::malformed_xml());
        }
        let default_retention = match c.rule.and_then(|r| r.default_retention) {
            None => None,
            Some(d) => {
                let mode = mode_of(
                    d.mode
                        .as_ref()
                        .map(|m| m.as_str())
                        .ok_or_else(crate::error::malformed_xml)?,
                )?;
                let period = match (d.days, d.years) {
                    (Some(n), None) if n > 0 => RetentionPeriod::Days(n as u32),
                    (None, Some(n)) if n > 0 => RetentionPeriod::Years(n as u32),
                    (Some(_), None) | (None, Some(_)) => {
                        return Err(s3_error!(
                            InvalidArgument,
                            "Default retention period must be a positive integer value"
                        ));
                    }
                    _ => return Err(crate::error::malformed_xml()),
                };
                Some(DefaultRetention { mode, period })
            }
        };
        self.model
            .buckets()
            .set_bucket_object_lock(&b.name, ObjectLockConfig { default_retention }, false)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(crate) async fn do_get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let Some(c) = b.object_lock() else {
            return Err(s3_error!(
                ObjectLockConfigurationNotFoundError,
                "Object Lock configuration does not exist for this bucket"
            ));
        };
        let rule = c.default_retention.map(|d| ObjectLockRule {
            default_retention: Some(S3DefaultRetention {
                mode: Some(ObjectLockRetentionMode::from_static(mode_name(d.mode))),
                days: match d.period {
                    RetentionPeriod::Days(n) => Some(n as i32),
                    RetentionPeriod::Years(_) => None,
                },
                years: match d.period {
                    RetentionPeriod::Years(n) => Some(n as i32),
                    RetentionPeriod::Days(_) => None,
                },
            }),
        });
        Ok(S3Response::new(GetObjectLockConfigurationOutput {
            object_lock_configuration: Some(ObjectLockConfiguration {
                object_lock_enabled: Some(ObjectLockEnabled::from_static(
                    ObjectLockEnabled::ENABLED,
                )),
                rule,
            }),
        }))
    }

    /// The version a retention or legal-hold request names, in a bucket
    /// with Object Lock.
    async fn locked_version(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<(BucketRow, hangar_model::version_ops::FoundVersion)> {
        let b = self.bucket(signer, bucket).await?;
        if b.object_lock().is_none() {
            return Err(no_lock_configuration());
        }
        let v = parse_version_id(version_id)?;
        let found = self
            .model
            .objects()
            .find_version(&b, key, v)
            .await
            .or_s3()?
            .filter(|f| !f.row.is_delete_marker() || v.is_some())
            .ok_or_else(|| match v {
                Some(_) => crate::error::no_such_version(),
                None => s3_error!(NoSuchKey, "The specified key does not exist."),
            })?;
        if found.row.is_delete_marker() {
            return Err(s3_error!(
                MethodNotAllowed,
                "The specified method is not allowed against this resource."
            ));
        }
        Ok((b, found))
    }

    pub(crate) async fn do_put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let input = &req.input;
        let (b, found) = self
            .locked_version(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let new = match input.retention.as_ref() {
            None => return Err(crate::error::malformed_xml()),
            Some(ObjectLockRetention {
                mode: None,
                retain_until_date: None,
            }) => None,
            Some(ObjectLockRetention {
                mode: Some(m),
                retain_until_date: Some(u),
            }) => Some(retention_of(m.as_str(), u)?),
            Some(_) => return Err(crate::error::malformed_xml()),
        };
        let bypass = self
            .bypass(&req, input.bypass_governance_retention, &input.bucket)
            .await?;
        self.model
            .objects()
            .set_version_retention(&b, &found, new, bypass)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(crate) async fn do_get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let input = &req.input;
        let (_, found) = self
            .locked_version(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let r = found.row.retention().ok_or_else(|| {
            s3_error!(
                NoSuchObjectLockConfiguration,
                "The specified object does not have a ObjectLock configuration"
            )
        })?;
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: Some(ObjectLockRetentionMode::from_static(mode_name(r.mode))),
                retain_until_date: Some(timestamp(r.until_msec)),
            }),
        }))
    }

    pub(crate) async fn do_put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let input = &req.input;
        let (b, found) = self
            .locked_version(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let on = hold_of(
            input
                .legal_hold
                .as_ref()
                .and_then(|h| h.status.as_ref())
                .map(|s| s.as_str())
                .ok_or_else(crate::error::malformed_xml)?,
        )?;
        self.model
            .objects()
            .set_version_legal_hold(&b, &found, on)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub(crate) async fn do_get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let input = &req.input;
        let (_, found) = self
            .locked_version(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        if found.row.legal_hold.is_unset() {
            return Err(s3_error!(
                NoSuchObjectLockConfiguration,
                "The specified object does not have a ObjectLock configuration"
            ));
        }
        let status = if found.row.legal_hold() {
            ObjectLockLegalHoldStatus::ON
        } else {
            ObjectLockLegalHoldStatus::OFF
        };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(ObjectLockLegalHoldStatus::from_static(status)),
            }),
        }))
    }
}
