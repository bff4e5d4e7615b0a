"""The suite's own SigV4 signer and aws-chunked encoder, checked against the
worked example of the AWS S3 API reference ("Signature Calculations for the
Authorization Header: Transferring Payload in Multiple Chunks"), so that a
signature failure in the other tests is the server's, not the harness's."""

import datetime as dt
import re

from hangar_testlib import Key, checksum_b64, crc32c, crc64nvme, sign_v4, signed_chunked_body


def test_chunked_signatures_match_aws_example():
    key = Key("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    s = sign_v4(
        "PUT",
        "s3.amazonaws.com",
        "/examplebucket/chunkObject.txt",
        [],
        {
            "content-encoding": "aws-chunked",
            "content-length": "66824",
            "x-amz-decoded-content-length": "66560",
            "x-amz-storage-class": "REDUCED_REDUNDANCY",
        },
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        key,
        now=dt.datetime(2013, 5, 24, tzinfo=dt.timezone.utc),
        region="us-east-1",
    )
    assert s.signature == "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    body = signed_chunked_body(b"a" * 66560, 65536, s)
    assert len(body) == 66824
    assert re.findall(rb"chunk-signature=([0-9a-f]+)", body) == [
        b"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        b"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        b"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ]


def test_checksum_check_values():
    # the standard CRC check input "123456789"
    assert crc32c(b"123456789") == 0xE3069283
    assert crc64nvme(b"123456789") == 0xAE8B14860A799888
    assert checksum_b64("crc32", b"123456789") == "y/Q5Jg=="
