//! Server access logs (PutBucketLogging): one line per request to a bucket
//! that has logging on, in the format AWS documents for S3 server access
//! logs, written in batches as objects of the target bucket
//! (doc/s3-compatibility.md, "Server access logs").
//!
//! The access check finds the bucket row; when it has a logging target it
//! fills the request's [`LogSlot`]; once the answer's head is ready the
//! endpoint turns the slot, the request and the answer into a line
//! ([`Line::format`]) and hands it to [`AccessLogs`], which keeps lines in
//! memory, bounded, spools them to a file ([`crate::access_log_spool`]),
//! and writes each target's lines as one object every flush interval and
//! when the node stops. A process that dies loses no line it recorded: the
//! next start writes them (at least once). Lines past the memory bound are
//! dropped (and counted) rather than held, and so are the lines of a
//! target that cannot be written (a deleted bucket).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hangar_model::bucket::{BucketLogging, PartitionDate};
use hangar_model::object::ObjectRow;
use hangar_table::Lww;
use http::HeaderMap;

use crate::S3Api;
use crate::access_log_spool::{Entry, Spool};
use crate::ops_put::BodySource;
use hangar_model::garbage::UploadOf;
use hangar_util::worker::{WorkerHandle, WorkerState};

/// Most bytes of lines held in memory waiting for their flush; more are
/// dropped (counted in [`AccessLogs::dropped`]).
pub const MAX_PENDING_BYTES: usize = 8 << 20;

/// What the access check learned of a logged request: set once, read when
/// the answer is ready.
#[derive(Clone, Default)]
pub(crate) struct LogSlot(Arc<OnceLock<Logged>>);

impl LogSlot {
    pub(crate) fn set(&self, logged: Logged) {
        let _ = self.0.set(logged);
    }

    pub(crate) fn get(&self) -> Option<&Logged> {
        self.0.get()
    }
}

/// A request to a bucket with logging on.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub bucket: String,
    /// The bucket owner's id, as its ACL shows it.
    pub owner: String,
    pub target: BucketLogging,
    /// The signing key's id; `None` for an anonymous request.
    pub requester: Option<String>,
    pub key: Option<String>,
    /// The request's side of its line, taken by the access check only for
    /// logged buckets: other requests pay nothing for logging.
    pub asked: Asked,
}

/// The request side of a line.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub method: String,
    pub uri: String,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
    pub host: Option<String>,
    pub signature: Option<&'static str>,
    pub auth_type: Option<&'static str>,
    pub remote_ip: String,
    pub start: SystemTime,
}

impl Asked {
    /// What a line says of a request with this head, arrived now from
    /// `remote_ip`.
    pub(crate) fn of(
        method: &http::Method,
        uri: &http::Uri,
        h: &HeaderMap,
        remote_ip: String,
    ) -> Asked {
        let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let query = uri.query().unwrap_or("");
        let in_query = |p: &str| query.split('&').any(|kv| kv.starts_with(p));
        let auth = text("authorization");
        let (signature, auth_type) = match auth.as_deref() {
            Some(a) if a.starts_with("AWS4-") => (Some("SigV4"), Some("AuthHeader")),
            Some(a) if a.starts_with("AWS ") => (Some("SigV2"), Some("AuthHeader")),
            _ if in_query("X-Amz-Signature=") => (Some("SigV4"), Some("QueryString")),
            _ if in_query("Signature=") => (Some("SigV2"), Some("QueryString")),
            _ => (None, None),
        };
        Asked {
            method: method.as_str().to_owned(),
            uri: uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            referer: text("referer"),
            user_agent: text("user-agent"),
            host: text("host"),
            signature,
            auth_type,
            remote_ip,
            start: SystemTime::now(),
        }
    }
}

/// The answer side of a line.
pub(crate) struct Answered<'a> {
    pub op: &'a str,
    pub status: u16,
    pub headers: &'a HeaderMap,
    /// The body, when the whole of it is in memory (errors, small XML).
    pub body: Option<&'a [u8]>,
    pub received: u64,
    pub head: bool,
    pub elapsed: Duration,
}

/// One log line's fields, in AWS's order.
pub(crate) struct Line<'a> {
    pub logged: &'a Logged,
    pub answered: Answered<'a>,
}

impl Line<'_> {
    /// The line, without its newline: AWS's fields, `-` for what there is
    /// none of (S3 user guide, "Amazon S3 server access log format").
    pub(crate) fn format(&self) -> String {
        let (l, q, a) = (self.logged, &self.logged.asked, &self.answered);
        let dash = |v: Option<&str>| v.filter(|s| !s.is_empty()).unwrap_or("-").to_owned();
        let quoted = |v: Option<&str>| format!("\"{}\"", v.unwrap_or("-").replace('"', "\\\""));
        let header = |n: &str| a.headers.get(n).and_then(|v| v.to_str().ok());
        let length = header("content-length").and_then(|v| v.parse::<u64>().ok());
        let sent = if a.head {
            None
        } else {
            length.filter(|n| *n > 0)
        };
        let object_size = match q.method.as_str() {
            "PUT" | "POST" if a.received > 0 => Some(a.received),
            "GET" | "HEAD" if l.key.is_some() && a.status < 300 => length,
            _ => None,
        };
        let ms = a.elapsed.as_millis().to_string();
        let key = l
            .key
            .as_deref()
            .map(|k| urlencoding::encode(k).into_owned());
        [
            dash(Some(&l.owner)),
            l.bucket.clone(),
            log_time(q.start),
            q.remote_ip.clone(),
            dash(l.requester.as_deref()),
            dash(header("x-amz-request-id")),
            operation(&q.method, a.op, l.key.is_some()),
            dash(key.as_deref()),
            quoted(Some(&format!("{} {} HTTP/1.1", q.method, q.uri))),
            a.status.to_string(),
            dash(a.body.and_then(error_code).as_deref()),
            dash(sent.map(|n| n.to_string()).as_deref()),
            dash(object_size.map(|n| n.to_string()).as_deref()),
            ms.clone(),
            ms,
            quoted(q.referer.as_deref()),
            quoted(q.user_agent.as_deref()),
            dash(header("x-amz-version-id")),
            "-".to_owned(),
            dash(q.signature),
            "-".to_owned(),
            dash(q.auth_type),
            dash(q.host.as_deref()),
            "-".to_owned(),
            "-".to_owned(),
            "-".to_owned(),
        ]
        .join(" ")
    }
}

/// `[06/Feb/2019:00:00:38 +0000]`.
fn log_time(t: SystemTime) -> String {
    let f = time::macros::format_description!(
        "[[[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000]"
    );
    time::OffsetDateTime::from(t)
        .format(f)
        .unwrap_or_else(|_| "[-]".to_owned())
}

/// The `<Code>` of an S3 XML error body.
fn error_code(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let from = text.find("<Code>")? + "<Code>".len();
    let to = from + text[from..].find("</Code>")?;
    Some(text[from..to].to_owned())
}

/// AWS's name of an operation in the log: `REST.<METHOD>.<RESOURCE>`.
fn operation(method: &str, op: &str, object: bool) -> String {
    let resource = match op {
        "ListObjects" | "ListObjectsV2" | "CreateBucket" | "DeleteBucket" | "HeadBucket" => {
            "BUCKET"
        }
        "ListObjectVersions" => "BUCKET_VERSIONS",
        "CreateMultipartUpload" | "ListMultipartUploads" => "UPLOADS",
        "UploadPart" => "PART",
        "UploadPartCopy" => "PART_COPY",
        "CompleteMultipartUpload" | "AbortMultipartUpload" | "ListParts" => "UPLOAD",
        "CopyObject" => return "REST.COPY.OBJECT".to_owned(),
        "DeleteObjects" => "MULTI_OBJECT_DELETE",
        "GetObjectAcl" | "PutObjectAcl" => "ACL",
        "GetBucketAcl" | "PutBucketAcl" => "ACL",
        "GetObjectTagging" | "PutObjectTagging" | "DeleteObjectTagging" => "OBJECT_TAGGING",
        "GetBucketTagging" | "PutBucketTagging" | "DeleteBucketTagging" => "TAGGING",
        "GetBucketVersioning" | "PutBucketVersioning" => "VERSIONING",
        "GetBucketLogging" | "PutBucketLogging" => "LOGGING_STATUS",
        "GetBucketEncryption" | "PutBucketEncryption" | "DeleteBucketEncryption" => "ENCRYPTION",
        "GetBucketPolicy" | "PutBucketPolicy" | "DeleteBucketPolicy" => "BUCKETPOLICY",
        "GetBucketCors" | "PutBucketCors" | "DeleteBucketCors" => "CORS",
        "GetBucketLifecycleConfiguration"
        | "PutBucketLifecycleConfiguration"
        | "DeleteBucketLifecycle" => "LIFECYCLE",
        "GetBucketLocation" => "LOCATION",
        "PostObject" => "OBJECT",
        _ if object => "OBJECT",
        _ => "BUCKET",
    };
    format!("REST.{method}.{resource}")
}

/// The lines of one log object: its target, and for a partitioned prefix
/// the source bucket and owner its name carries and, for `EventTime`, the
/// day of its requests (an object holds one day's lines).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Batch {
    target: BucketLogging,
    source: Option<Source>,
    day: Option<time::Date>,
}

/// The logged bucket a partitioned log object's name carries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Source {
    bucket: String,
    owner: String,
}

impl Batch {
    /// The spool entry of `line`, which goes into this batch's object.
    fn entry(&self, line: &str) -> Entry {
        Entry {
            target: self.target.clone(),
            source: self
                .source
                .as_ref()
                .map(|s| (s.bucket.clone(), s.owner.clone())),
            day: self.day.map(|d| d.to_julian_day()),
            line: line.to_owned(),
        }
    }

    /// The batch of a spooled entry.
    fn of_entry(e: &Entry) -> Batch {
        Batch {
            target: e.target.clone(),
            source: e
                .source
                .clone()
                .map(|(bucket, owner)| Source { bucket, owner }),
            day: e.day.and_then(|d| time::Date::from_julian_day(d).ok()),
        }
    }

    /// The object `logged`'s line goes into.
    fn of(logged: &Logged) -> Batch {
        let target = logged.target.clone();
        let (source, day) = match target.partitioned {
            None => (None, None),
            Some(p) => (
                Some(Source {
                    bucket: logged.bucket.clone(),
                    owner: logged.owner.clone(),
                }),
                (p == PartitionDate::EventTime)
                    .then(|| time::OffsetDateTime::from(logged.asked.start).date()),
            ),
        };
        Batch {
            target,
            source,
            day,
        }
    }

    /// The name of the batch's object, written at `now` in region
    /// `region`, made unique by `unique`: `<prefix><time>-<unique>`, or
    /// with a partitioned prefix
    /// `<prefix><owner>/<region>/<bucket>/<YYYY>/<MM>/<DD>/<time>-<unique>`,
    /// where the date is the requests' day at 00:00:00 (`EventTime`) or
    /// `now` (`DeliveryTime`).
    fn object_name(&self, region: &str, now: SystemTime, unique: [u8; 8]) -> String {
        let unique = hex::encode_upper(unique);
        let prefix = &self.target.target_prefix;
        let now = time::OffsetDateTime::from(now);
        let Some(source) = &self.source else {
            return format!("{prefix}{}-{unique}", object_time(now));
        };
        let at = match self.day {
            Some(day) => day.midnight().assume_utc(),
            None => now,
        };
        format!(
            "{prefix}{}/{region}/{}/{:04}/{:02}/{:02}/{}-{unique}",
            source.owner,
            source.bucket,
            at.year(),
            u8::from(at.month()),
            at.day(),
            object_time(at)
        )
    }
}

/// The lines waiting for their flush, by the object they go into, and
/// their spool.
#[derive(Default)]
struct Pending {
    bytes: usize,
    lines: BTreeMap<Batch, Vec<String>>,
    spool: Option<Spool>,
}

impl Pending {
    /// Keeps `line` of `batch` unless the memory bound is reached; `false`
    /// when it is dropped.
    fn keep(&mut self, batch: Batch, line: String) -> bool {
        if self.bytes + line.len() > MAX_PENDING_BYTES {
            return false;
        }
        self.bytes += line.len() + 1;
        self.lines.entry(batch).or_default().push(line);
        true
    }
}

/// The access logs of one node: lines waiting in memory (and in their
/// spool), and the objects they become.
pub struct AccessLogs {
    api: S3Api,
    pending: Mutex<Pending>,
    dropped: AtomicU64,
    written: AtomicU64,
}

impl AccessLogs {
    /// The access logs of `api`'s node, with the lines its spool kept from
    /// before a restart waiting for the first flush. A spool that cannot be
    /// opened is logged, and the lines are kept in memory only.
    pub fn new(api: S3Api) -> AccessLogs {
        let logs = AccessLogs {
            api,
            pending: Mutex::new(Pending::default()),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        };
        if let Some(dir) = logs.api.settings.access_log_spool.clone() {
            match Spool::open(&dir) {
                Ok((spool, entries)) => {
                    let mut p = logs.pending.lock().expect("access log lock");
                    let n = entries.len();
                    for e in entries {
                        if !p.keep(Batch::of_entry(&e), e.line) {
                            logs.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    p.spool = Some(spool);
                    if n > 0 {
                        tracing::info!("{n} access log lines kept from before the restart");
                    }
                }
                Err(e) => tracing::error!(
                    "the access log spool {dir:?} cannot be opened ({e}): a process that dies will lose the lines of its last flush interval"
                ),
            }
        }
        logs
    }

    /// Lines dropped because [`MAX_PENDING_BYTES`] were waiting, or their
    /// target could not be written.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Lines written into target buckets.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Bytes of lines waiting for the next flush.
    pub fn waiting_bytes(&self) -> u64 {
        self.pending.lock().expect("access log lock").bytes as u64
    }

    /// Queues `line`, the line of `logged`, for its target and spools it,
    /// or drops it when the memory bound is reached.
    pub(crate) fn record(&self, logged: &Logged, line: String) {
        self.record_in(Batch::of(logged), line);
    }

    /// [`Self::record`], the line's batch known.
    fn record_in(&self, batch: Batch, line: String) {
        let mut p = self.pending.lock().expect("access log lock");
        // One unbuffered append of a few hundred bytes, under the lock so
        // that a flush's rotation splits the spool exactly where it splits
        // the lines.
        let entry = p.spool.is_some().then(|| batch.entry(&line));
        if !p.keep(batch, line) {
            drop(p);
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "access log lines dropped: more than {MAX_PENDING_BYTES} bytes wait for their flush"
                );
            }
            return;
        }
        if let (Some(spool), Some(entry)) = (p.spool.as_mut(), entry)
            && let Err(e) = spool.append(&entry)
        {
            tracing::warn!("an access log line is kept in memory only: the spool refused it ({e})");
        }
    }

    /// Writes the waiting lines, one object per target (and per source
    /// bucket and day, for a partitioned prefix); returns how many lines
    /// were written.
    pub async fn flush(&self) -> u64 {
        let (lines, sealed) = {
            let mut p = self.pending.lock().expect("access log lock");
            let sealed = match p.spool.as_mut().map(Spool::rotate) {
                Some(Ok(files)) => files,
                Some(Err(e)) => {
                    tracing::warn!("the access log spool cannot be rotated: {e}");
                    Vec::new()
                }
                None => Vec::new(),
            };
            p.bytes = 0;
            (std::mem::take(&mut p.lines), sealed)
        };
        let mut written = 0;
        for (batch, lines) in lines {
            let n = lines.len() as u64;
            match self.write(&batch, lines.clone()).await {
                Ok(()) => written += n,
                // The target is gone: its lines have nowhere to go.
                Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchBucket => {
                    self.dropped.fetch_add(n, Ordering::Relaxed);
                    tracing::warn!(
                        "{n} access log lines for bucket {} lost: {e}",
                        batch.target.target_bucket
                    );
                }
                // Anything else (too few nodes, overload) may pass: the
                // lines wait for the next flush, spooled again.
                Err(e) => {
                    tracing::warn!(
                        "{n} access log lines for bucket {} wait for the next flush: {e}",
                        batch.target.target_bucket
                    );
                    for line in lines {
                        self.record_in(batch.clone(), line);
                    }
                }
            }
        }
        self.written.fetch_add(written, Ordering::Relaxed);
        // Every line of the sealed files is written, dropped (and counted),
        // or spooled again.
        crate::access_log_spool::remove(&sealed);
        written
    }

    /// Syncs the active spool file, so that a power cut loses at most the
    /// lines since.
    async fn sync_spool(&self) {
        let file = self
            .pending
            .lock()
            .expect("access log lock")
            .spool
            .as_ref()
            .map(Spool::active);
        if let Some(Ok(f)) = file
            && let Ok(Err(e)) = tokio::task::spawn_blocking(move || f.sync_data()).await
        {
            tracing::warn!("the access log spool cannot be synced: {e}");
        }
    }

    /// Flushes every `every` until the process ends, reporting to
    /// `worker` (`hangar worker list`: lines written, dropped, waiting).
    pub async fn run(self: Arc<Self>, every: Duration, worker: WorkerHandle) {
        let mut next_flush = tokio::time::Instant::now() + every;
        loop {
            // The spool is synced every second between flushes.
            tokio::time::sleep(Duration::from_secs(1).min(every)).await;
            if tokio::time::Instant::now() < next_flush {
                self.sync_spool().await;
                continue;
            }
            next_flush = tokio::time::Instant::now() + every;
            worker.set_state(WorkerState::Busy);
            let n = self.flush().await;
            worker.add_processed(n);
            let waiting = self.pending.lock().expect("access log lock").bytes;
            worker.set_progress(
                format!(
                    "{} lines written, {} dropped, {waiting} bytes waiting",
                    self.written(),
                    self.dropped()
                ),
                None,
            );
            worker.set_state(WorkerState::Idle);
        }
    }

    /// One object of `batch`'s target holding `lines`.
    async fn write(&self, batch: &Batch, lines: Vec<String>) -> s3s::S3Result<()> {
        let api = &self.api;
        let bucket = api.bucket(None, &batch.target.target_bucket).await?;
        let mut text = lines.join("\n");
        text.push('\n');
        let name = batch.object_name(
            &api.settings.region,
            SystemTime::now(),
            rand::random::<[u8; 8]>(),
        );
        let version = hangar_model::new_version_id();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        let body = s3s::dto::StreamingBlob::from(s3s::Body::from(Bytes::from(text)));
        let stored = api
            .store_body(
                version,
                BodySource {
                    body: Some(body),
                    headers: &HeaderMap::new(),
                    content_md5: None,
                    trailers: None,
                    inline_allowed: true,
                    upload_of: UploadOf::object(&bucket.id_bytes(), &name),
                    sealing: None,
                },
            )
            .await?;
        let mut row = ObjectRow {
            version,
            timestamp_msec: hangar_util::time::now_msec(),
            size: stored.size,
            etag: stored.md5_hex,
            headers: crate::ops_put::system_headers(&headers),
            user_meta: Default::default(),
            checksum: None,
            data: stored.data,
            tags: Lww::default(),
            retention: Lww::default(),
            legal_hold: Lww::default(),
            sse_c: None,
            acl: Lww::default(),
            grants: Lww::default(),
        };
        // TargetGrants: the log object's own ACL.
        if batch.target.has_grants() {
            let acl = crate::ops_acl::AskedAcl {
                canned: batch.target.object_acl.unwrap_or_default(),
                grants: batch.target.object_grants.clone(),
            };
            (row.acl, row.grants) = crate::ops_acl::AskedAcl::upload_registers(Some(&acl));
        }
        if let Err(e) = api.model.objects().publish(&bucket, &name, row).await {
            let _ = api.model.objects().abort_upload(version).await;
            return Err(crate::error::model_error(e));
        }
        Ok(())
    }
}

/// `2026-12-06-18-30-05`, the time part of a log object's name.
fn object_time(t: time::OffsetDateTime) -> String {
    let f = time::macros::format_description!("[year]-[month]-[day]-[hour]-[minute]-[second]");
    t.format(f)
        .unwrap_or_else(|_| "0000-00-00-00-00-00".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_fields_aws_documents_in_their_order() {
        let asked = Asked {
            method: "GET".into(),
            uri: "/photos/a%20b.jpg".into(),
            referer: None,
            user_agent: Some("curl/8 \"x\"".into()),
            host: Some("localhost:3900".into()),
            signature: Some("SigV4"),
            auth_type: Some("AuthHeader"),
            remote_ip: "127.0.0.1".into(),
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_549_411_238),
        };
        let logged = Logged {
            bucket: "photos".into(),
            owner: "GK1".into(),
            target: BucketLogging {
                target_bucket: "logs".into(),
                target_prefix: "p/".into(),
                partitioned: None,
                object_acl: None,
                object_grants: Vec::new(),
            },
            requester: Some("GK2".into()),
            key: Some("a b.jpg".into()),
            asked,
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-amz-request-id", "ABC".parse().unwrap());
        headers.insert("content-length", "42".parse().unwrap());
        let line = Line {
            logged: &logged,
            answered: Answered {
                op: "GetObject",
                status: 200,
                headers: &headers,
                body: None,
                received: 0,
                head: false,
                elapsed: Duration::from_millis(7),
            },
        }
        .format();
        assert_eq!(
            line,
            "GK1 photos [06/Feb/2019:00:00:38 +0000] 127.0.0.1 GK2 ABC REST.GET.OBJECT a%20b.jpg \
             \"GET /photos/a%20b.jpg HTTP/1.1\" 200 - 42 42 7 7 \"-\" \"curl/8 \\\"x\\\"\" - - SigV4 - \
             AuthHeader localhost:3900 - - -"
        );
    }

    #[test]
    fn error_codes_and_operations_are_named_as_aws_names_them() {
        assert_eq!(
            error_code(b"<Error><Code>NoSuchKey</Code></Error>").as_deref(),
            Some("NoSuchKey")
        );
        assert_eq!(error_code(b"<ListBucketResult/>"), None);
        assert_eq!(operation("PUT", "PutObject", true), "REST.PUT.OBJECT");
        assert_eq!(operation("GET", "ListObjectsV2", false), "REST.GET.BUCKET");
        assert_eq!(
            operation("POST", "CreateMultipartUpload", true),
            "REST.POST.UPLOADS"
        );
        assert_eq!(operation("PUT", "CopyObject", true), "REST.COPY.OBJECT");
    }

    #[test]
    fn log_objects_are_named_by_simple_or_partitioned_prefix() {
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        // 2026-12-06 18:30:05 UTC, and the request's time 2026-12-05 23:59:59.
        let (now, asked) = (at(1_796_581_805), at(1_796_515_199));
        let logged = |partitioned| Logged {
            bucket: "photos".into(),
            owner: "GK1".into(),
            target: BucketLogging {
                target_bucket: "logs".into(),
                target_prefix: "p/".into(),
                partitioned,
                object_acl: None,
                object_grants: Vec::new(),
            },
            requester: None,
            key: None,
            asked: Asked {
                method: "GET".into(),
                uri: "/".into(),
                referer: None,
                user_agent: None,
                host: None,
                signature: None,
                auth_type: None,
                remote_ip: "127.0.0.1".into(),
                start: asked,
            },
        };
        let unique = [0xab; 8];
        let name = |p| Batch::of(&logged(p)).object_name("garage", now, unique);
        assert_eq!(name(None), "p/2026-12-06-18-30-05-ABABABABABABABAB");
        assert_eq!(
            name(Some(PartitionDate::DeliveryTime)),
            "p/GK1/garage/photos/2026/12/06/2026-12-06-18-30-05-ABABABABABABABAB"
        );
        assert_eq!(
            name(Some(PartitionDate::EventTime)),
            "p/GK1/garage/photos/2026/12/05/2026-12-05-00-00-00-ABABABABABABABAB"
        );
        // Lines of two days, or of two source buckets, go into two objects;
        // with the simple prefix every source shares the target's object.
        let mut other_day = logged(Some(PartitionDate::EventTime));
        other_day.asked.start = now;
        assert_ne!(
            Batch::of(&other_day),
            Batch::of(&logged(Some(PartitionDate::EventTime)))
        );
        let mut other_bucket = logged(None);
        other_bucket.bucket = "videos".into();
        assert_eq!(Batch::of(&other_bucket), Batch::of(&logged(None)));
    }
}
