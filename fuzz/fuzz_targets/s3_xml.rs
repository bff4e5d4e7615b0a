//! The XML request bodies the S3 endpoint parses, through s3s's own
//! deserializer exactly as its operations call it (`take_xml_body`): the
//! first byte picks the document type, the rest is the body.

#![no_main]

use hangar_fuzz as _;
use libfuzzer_sys::fuzz_target;
use s3s::dto;
use s3s::xml::{Deserialize, Deserializer};

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) {
    let mut d = Deserializer::new(body);
    if T::deserialize(&mut d).is_ok() {
        let _ = d.expect_eof();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 6 {
        // Operations Hangar implements.
        0 => parse::<dto::CompletedMultipartUpload>(body),
        1 => parse::<dto::Delete>(body),
        2 => parse::<dto::CreateBucketConfiguration>(body),
        // Parsed by s3s before the operation answers NotImplemented.
        3 => parse::<dto::Tagging>(body),
        4 => parse::<dto::VersioningConfiguration>(body),
        _ => parse::<dto::AccessControlPolicy>(body),
    }
});
