"""Virtual-host-style addressing: Host: <bucket>.s3.localhost:<port> (root_domain)."""

import boto3
from botocore.config import Config

from hangar_testlib import ROOT_DOMAIN, REGION, signed_request, strip_ns


def _vhost(node, bucket):
    return f"{bucket}{ROOT_DOMAIN}:{node.s3_port}"


def test_raw_vhost_put_get_list(node, admin_key, s3, bucket):
    host = _vhost(node, bucket)
    r = signed_request(node, admin_key, "PUT", host=host, path="/dir/v%20key", body=b"vhost body")
    assert r.status == 200, (r.status, r.body)
    assert s3.get_object(Bucket=bucket, Key="dir/v key")["Body"].read() == b"vhost body"
    r = signed_request(node, admin_key, "GET", host=host, path="/dir/v%20key")
    assert r.status == 200 and r.body == b"vhost body"
    r = signed_request(node, admin_key, "GET", host=host, path="/", query=[("list-type", "2")])
    assert r.status == 200, r.body
    import xml.etree.ElementTree as ET

    keys = [e.text for e in ET.fromstring(r.body).iter() if strip_ns(e.tag) == "Key"]
    assert keys == ["dir/v key"]
    r = signed_request(node, admin_key, "HEAD", host=host, path="/")
    assert r.status == 200
    r = signed_request(node, admin_key, "DELETE", host=host, path="/dir/v%20key")
    assert r.status == 204
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_raw_vhost_unknown_bucket(node, admin_key):
    r = signed_request(node, admin_key, "GET", host=_vhost(node, "no-such-vhost-bucket"), path="/k")
    assert r.status == 404 and r.code == "NoSuchBucket", r.body


def test_boto3_virtual_addressing(node, admin_key, s3, bucket):
    """boto3 with addressing_style=virtual against http://s3.localhost:<port>.
    *.s3.localhost does not resolve here, so the connection goes to 127.0.0.1
    while the request keeps (and is signed with) the virtual Host."""
    c = boto3.client(
        "s3",
        endpoint_url=f"http://{ROOT_DOMAIN.lstrip('.')}:{node.s3_port}",
        region_name=REGION,
        aws_access_key_id=admin_key.id,
        aws_secret_access_key=admin_key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}),
    )
    seen_hosts = []

    def to_loopback(request, **kwargs):
        from urllib.parse import urlsplit, urlunsplit

        u = urlsplit(request.url)
        seen_hosts.append(u.netloc)
        request.headers["Host"] = u.netloc
        request.url = urlunsplit((u.scheme, f"127.0.0.1:{node.s3_port}", u.path, u.query, u.fragment))

    c.meta.events.register_first("before-send.s3", to_loopback)
    c.put_object(Bucket=bucket, Key="v/obj", Body=b"through vhost", Metadata={"m": "1"})
    got = c.get_object(Bucket=bucket, Key="v/obj")
    assert got["Body"].read() == b"through vhost" and got["Metadata"] == {"m": "1"}
    assert [o["Key"] for o in c.list_objects_v2(Bucket=bucket)["Contents"]] == ["v/obj"]
    c.copy_object(Bucket=bucket, Key="v/copy", CopySource={"Bucket": bucket, "Key": "v/obj"})
    c.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "v/obj"}, {"Key": "v/copy"}]})
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    assert seen_hosts and all(h.startswith(f"{bucket}.") for h in seen_hosts), seen_hosts
