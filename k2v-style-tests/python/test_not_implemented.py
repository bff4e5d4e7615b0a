"""Operations outside the implemented set answer 501 NotImplemented with S3's
XML error body, and change nothing. When a later issue implements one of
these, move it out of the list (and give it real tests)."""

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import error_code, http_status, signed_request

NOT_YET = {
    "GetBucketAnalyticsConfiguration": lambda s3, b: s3.get_bucket_analytics_configuration(Bucket=b, Id="a"),
    "GetBucketAccelerateConfiguration": lambda s3, b: s3.get_bucket_accelerate_configuration(Bucket=b),
    "RestoreObject": lambda s3, b: s3.restore_object(Bucket=b, Key="o", RestoreRequest={"Days": 1}),
}


@pytest.mark.parametrize("op", list(NOT_YET))
def test_not_implemented(s3, bucket, op):
    s3.put_object(Bucket=bucket, Key="o", Body=b"unchanged")
    with pytest.raises(ClientError) as e:
        NOT_YET[op](s3, bucket)
    assert http_status(e.value) == 501, e.value.response
    assert error_code(e.value) == "NotImplemented"
    got = s3.get_object(Bucket=bucket, Key="o")
    assert got["Body"].read() == b"unchanged"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["o"]


def test_not_implemented_xml_body(node, admin_key, s3, bucket):
    r = signed_request(node, admin_key, "GET", bucket, query=[("accelerate", "")])
    assert r.status == 501
    assert r.header("content-type") in ("application/xml", "application/xml; charset=utf-8")
    assert r.code == "NotImplemented" and r.message, r.body

