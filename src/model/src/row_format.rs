//! The model's row formats: the format byte each row is written with
//! (doc/table-rows.md), and what each format adds to format 2
//! (`hangar_table::ROW_FORMAT`). A row is written with the oldest format
//! that holds every field it carries ([`hangar_table::Schema::format_of`]
//! of each table), so a node of an older binary keeps reading the rows
//! that carry nothing new, and refuses those that do instead of losing
//! those fields on its next merge. Each table of the model reads formats
//! 2 to [`NEWEST`].

/// Format 2 plus tags and CORS rules (doc/table-rows.md, "Format 3"):
/// fields that a format-2 reader would drop without noticing (MessagePack
/// maps ignore unknown names), so a row that carries them says so and such
/// a reader refuses it instead of losing them on its next merge. Written
/// only for the rows that carry one: every other row stays format 2, byte
/// for byte, and a node of the previous binary keeps reading it.
pub const TAGS_CORS_ROW_FORMAT: u8 = 3;

/// Format 3 plus what bucket versioning adds (the bucket's versioning
/// register, the delete-marker kind of object data): a reader of format 3
/// would drop the register on its next merge, or fail on the unknown
/// variant, so such rows say so. Written only for the rows that carry one.
pub const VERSIONING_ROW_FORMAT: u8 = 4;

/// Format 4 plus an access key's expiry (`KeyRow::expires_msec`): a reader
/// of format 4 would drop the expiry on its next merge, and the key would
/// work again, so such a key row says so. Written only for key rows that
/// carry one.
pub const KEY_EXPIRY_ROW_FORMAT: u8 = 5;

/// Format 5 plus the creating access key of a bucket (`created_by`): a
/// reader of format 5 would drop it on its next merge, so such rows say so.
/// Written only for the bucket rows that carry one.
pub const CREATOR_ROW_FORMAT: u8 = 6;

/// Format 6 plus a bucket's website configuration (`website`): a reader
/// of format 6 would drop it on its next merge, so such rows say so.
/// Written only for the bucket rows that carry one.
pub const WEBSITE_ROW_FORMAT: u8 = 7;
/// Format 7 plus S3 Object Lock: a bucket's lock configuration register,
/// a version's retention and legal hold registers. A reader of an older
/// format would drop them on its next merge (and the version would become
/// deletable), so such rows say so. Written only for rows that carry one.
/// A row that also carries a field of format 9 is format 9.
pub const OBJECT_LOCK_ROW_FORMAT: u8 = 8;
/// Format 8 plus a bucket's lifecycle rules (`BucketRow::lifecycle`): a
/// reader of format 8 would drop them on its next merge, so such rows say
/// so. Written only for the bucket rows that carry them. A bucket row with both
/// lifecycle rules and a lock configuration is format 9, which includes 8.
pub const LIFECYCLE_ROW_FORMAT: u8 = 9;
/// Format 9 plus access control: a bucket's policy document, public access
/// block and canned ACL registers, an object version's canned ACL
/// register. A reader of format 9 would drop them on its next merge (and a
/// Deny statement or a private ACL would be lost), so such rows say so.
/// Written only for the rows that carry one; a row with a field of format
/// 10 is format 10, which includes 3 to 9.
pub const ACCESS_ROW_FORMAT: u8 = 10;

/// Format 10 plus SSE-C: an object version's or a multipart upload's
/// `sse_c` record (the algorithm and the salted check of the customer's
/// key). A reader of an older format would drop it on its next merge and
/// then serve the sealed bytes as if they were the object, so such rows
/// say so. Written only for the rows that carry one; an object row with an
/// Object Lock or ACL field as well is format 11, which includes 3 to 10.
pub const SSE_C_ROW_FORMAT: u8 = 11;

/// Format 11 plus a bucket's quotas (`BucketRow::quotas`): a reader of
/// an older format would drop them on its next merge (and stop enforcing
/// them), so such rows say so. Written only for the bucket rows that carry
/// them; a bucket row with quotas is format 12 whatever else it carries
/// (12 includes 3 to 11).
pub const QUOTA_ROW_FORMAT: u8 = 12;

/// Format 12 plus a bucket's object ownership setting
/// (`BucketRow::ownership`): a reader of an older format would drop it on
/// its next merge (and ACLs disabled by `BucketOwnerEnforced` would grant
/// again), so such rows say so. Written only for the bucket rows that
/// carry one; 13 includes 3 to 12.
pub const OWNERSHIP_ROW_FORMAT: u8 = 13;

/// Format 13 plus a multipart upload's checksum type
/// (`MpuRow::checksum_type`, `COMPOSITE` or `FULL_OBJECT`): a reader of an
/// older format would drop it on its next merge, and the completed object
/// would get the other kind of checksum than the client announced, so
/// such rows say so. Written only for the upload rows that carry one; 14
/// includes 3 to 13.
pub const CHECKSUM_TYPE_ROW_FORMAT: u8 = 14;

/// Format 14 plus SSE-S3 and SSE-KMS: the `managed` key of a version's or
/// an upload's `sse_c` record, and a bucket's default encryption
/// (`BucketRow::encryption`). A reader of an older format would take a
/// managed version for an SSE-C one (and drop the record's `managed` on its
/// next merge, after which nothing could open the data), or drop the
/// bucket's default and store new objects in the clear, so such rows say
/// so. Written only for the rows that carry one; 15 includes 3 to 14.
pub const MANAGED_SSE_ROW_FORMAT: u8 = 15;

/// Format 15 plus a bucket's server access logging
/// (`BucketRow::logging`, PutBucketLogging): a reader of an older format
/// would drop it on its next merge and stop writing the logs, so such rows
/// say so. Written only for the bucket rows that carry it; 16 includes 3
/// to 15.
pub const ACCESS_LOG_ROW_FORMAT: u8 = 16;

/// Format 16 plus a partitioned prefix of a bucket's access logs
/// (`BucketLogging::partitioned`, S3's `PartitionedPrefix`): a reader of
/// format 16 would drop it on its next merge and name the logs with the
/// simple prefix, so such rows say so. Written only for the bucket rows
/// whose logging target has one; 17 includes 3 to 16.
pub const PARTITIONED_LOG_ROW_FORMAT: u8 = 17;

/// Format 17 plus an access key's owner identity (`KeyRow::canonical_id`,
/// `KeyRow::display_name`, set by the operator): a reader of an older
/// format would drop them on its next merge, and the owner that listings,
/// ACLs and `x-amz-expected-bucket-owner` see would change back, so such
/// key rows say so. Written only for the key rows that carry one; 18
/// includes 3 to 17.
pub const OWNER_IDENTITY_ROW_FORMAT: u8 = 18;

/// Format 18 plus ACL grants beyond the canned ACL (`BucketRow::grants`,
/// `ObjectRow::grants`): a reader of an older format would drop them
/// on its next merge (and a grant, or its revocation, would be lost), so
/// such rows say so. Written only for the bucket and object rows that
/// carry them; 19 includes 3 to 18.
pub const GRANTS_ROW_FORMAT: u8 = 19;

/// Format 19 plus the grants of a bucket's access log objects
/// (`BucketLogging::object_acl`, `BucketLogging::object_grants`, S3's
/// `TargetGrants`): a reader of an older format would drop them on its
/// next merge (and the log objects would lose the access they were to
/// give), so such rows say so. Written only for the bucket rows whose
/// logging target has them; 20 includes 3 to 19.
pub const LOG_GRANTS_ROW_FORMAT: u8 = 20;

/// Format 20 plus a bucket's notification rules
/// (`BucketRow::notification`, PutBucketNotificationConfiguration): a
/// reader of an older format would drop them on its next merge and the
/// bucket's events would stop, so such rows say so. Written only for the
/// bucket rows that carry them; 21 includes 3 to 20.
pub const NOTIFY_ROW_FORMAT: u8 = 21;

/// The newest format of the model's rows: every table of the model reads
/// formats 2 to this one.
pub const NEWEST: u8 = NOTIFY_ROW_FORMAT;
