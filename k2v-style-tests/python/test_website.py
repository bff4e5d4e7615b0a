"""Static website hosting: Put/Get/DeleteBucketWebsite through S3 (boto3),
and the website endpoint (`[s3_web]`) answering plain HTTP: index
documents, the error document with its status, redirects, routing rules,
CORS, and buckets that are no website refused. On one node, and on three
(configured through node 1, served by node 3); a website under its bucket
aliases, served by every node."""

from __future__ import annotations

import http.client

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, bucket_name, error_code, free_port, http_status, s3_client, signed_request
from admin_api_lib import call as admin_call, ok as admin_ok, with_tokens
from cluster_testlib import key_of, laid_out_cluster

WEB_DOMAIN = "web.localhost"


def with_web(n: Node) -> Node:
    n.web_port = free_port()
    n.config.write_text(
        n.config.read_text()
        + f'\n[s3_web]\nbind_addr = "127.0.0.1:{n.web_port}"\nroot_domain = ".{WEB_DOMAIN}"\n'
    )
    return n


def fetch(n: Node, bucket: str, path: str, method: str = "GET", headers: dict | None = None,
          host: str | None = None):
    c = http.client.HTTPConnection("127.0.0.1", n.web_port, timeout=30)
    h = {"Host": host or f"{bucket}.{WEB_DOMAIN}"}
    h.update(headers or {})
    c.request(method, path, headers=h)
    r = c.getresponse()
    body = r.read()
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, body)
    c.close()
    return out


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    n = with_web(with_tokens(Node(tmp_path_factory.mktemp("web1"))))
    n.start()
    key = n.create_key("web", create_bucket=True)
    yield [n], s3_client(n, key), key
    n.stop()


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "webc", configure=with_web)
    first = nodes[0]
    key = key_of(first.cli_json("key", "create", "web"), "web")
    first.cli("key", "allow", key.id, "--create-bucket")
    yield nodes, s3_client(first, key), key
    for n in nodes:
        n.stop()


SITE = {
    "IndexDocument": {"Suffix": "index.html"},
    "ErrorDocument": {"Key": "error.html"},
    "RoutingRules": [
        {"Condition": {"KeyPrefixEquals": "old/"},
         "Redirect": {"ReplaceKeyPrefixWith": "new/", "HttpRedirectCode": "302"}},
        {"Condition": {"HttpErrorCodeReturnedEquals": "404", "KeyPrefixEquals": "gone/"},
         "Redirect": {"HostName": "elsewhere.example", "Protocol": "https", "ReplaceKeyWith": "moved.html"}},
    ],
}


def test_put_get_delete_website(one):
    _, s3, _ = one
    b = bucket_name("website-cfg")
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_website(Bucket=b)
    assert http_status(e.value) == 404 and error_code(e.value) == "NoSuchWebsiteConfiguration"
    s3.put_bucket_website(Bucket=b, WebsiteConfiguration=SITE)
    got = s3.get_bucket_website(Bucket=b)
    assert got["IndexDocument"] == {"Suffix": "index.html"}
    assert got["ErrorDocument"] == {"Key": "error.html"}
    assert got["RoutingRules"] == SITE["RoutingRules"]
    s3.put_bucket_website(Bucket=b, WebsiteConfiguration={
        "RedirectAllRequestsTo": {"HostName": "example.com", "Protocol": "https"}})
    got = s3.get_bucket_website(Bucket=b)
    assert got["RedirectAllRequestsTo"] == {"HostName": "example.com", "Protocol": "https"}
    assert "IndexDocument" not in got
    s3.delete_bucket_website(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_website(Bucket=b)
    assert error_code(e.value) == "NoSuchWebsiteConfiguration"
    s3.delete_bucket_website(Bucket=b)  # none: still 204


@pytest.mark.parametrize("cfg", [
    {"ErrorDocument": {"Key": "e.html"}},
    {"IndexDocument": {"Suffix": ""}},
    {"IndexDocument": {"Suffix": "a/index.html"}},
    {"IndexDocument": {"Suffix": "index.html"}, "RedirectAllRequestsTo": {"HostName": "x.example"}},
    {"RedirectAllRequestsTo": {"HostName": "x.example", "Protocol": "ftp"}},
    {"IndexDocument": {"Suffix": "index.html"},
     "RoutingRules": [{"Redirect": {"HttpRedirectCode": "200"}}]},
    {"IndexDocument": {"Suffix": "index.html"},
     "RoutingRules": [{"Condition": {"HttpErrorCodeReturnedEquals": "200"}, "Redirect": {"HostName": "h"}}]},
    {"IndexDocument": {"Suffix": "index.html"},
     "RoutingRules": [{"Redirect": {"ReplaceKeyWith": "a", "ReplaceKeyPrefixWith": "b"}}]},
])
def test_invalid_configurations_are_refused(one, cfg):
    _, s3, _ = one
    b = bucket_name("website-bad")
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.put_bucket_website(Bucket=b, WebsiteConfiguration=cfg)
    assert http_status(e.value) == 400 and error_code(e.value) == "InvalidArgument", e.value.response
    with pytest.raises(ClientError) as e:
        s3.get_bucket_website(Bucket=b)
    assert error_code(e.value) == "NoSuchWebsiteConfiguration"


def test_malformed_xml_and_missing_bucket(one):
    nodes, s3, key = one
    b = bucket_name("website-xml")
    s3.create_bucket(Bucket=b)

    r = signed_request(nodes[0], key, "PUT", b, query=[("website", "")],
                       body=b"<WebsiteConfiguration><IndexDocument>")
    assert (r.status, r.code) == (400, "MalformedXML"), r.body
    with pytest.raises(ClientError) as e:
        s3.get_bucket_website(Bucket=bucket_name("website-none"))
    assert error_code(e.value) == "NoSuchBucket"


def website_story(nodes, s3, served_by):
    b = bucket_name("website")
    s3.create_bucket(Bucket=b)
    for key, body in [("index.html", b"<h1>home</h1>"), ("docs/index.html", b"<h1>docs</h1>"),
                      ("error.html", b"<h1>oops</h1>"), ("new/page.html", b"new page"),
                      ("style.css", b"body{}")]:
        ctype = "text/css" if key.endswith(".css") else "text/html"
        s3.put_object(Bucket=b, Key=key, Body=body, ContentType=ctype)
    n = served_by
    # Not a website yet: refused, naming the problem.
    status, _, body = fetch(n, b, "/")
    assert status == 404 and b"NoSuchWebsiteConfiguration" in body
    status, _, body = fetch(n, bucket_name("website-missing"), "/")
    assert status == 404 and b"NoSuchBucket" in body
    s3.put_bucket_website(Bucket=b, WebsiteConfiguration=SITE)
    s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET"]}]})
    status, h, body = fetch(n, b, "/")
    assert (status, body) == (200, b"<h1>home</h1>") and h["content-type"] == "text/html"
    assert h["etag"].startswith('"')
    status, _, body = fetch(n, b, "/docs/")
    assert (status, body) == (200, b"<h1>docs</h1>")
    status, h, _ = fetch(n, b, "/docs")
    assert status == 302 and h["location"] == "/docs/"
    status, h, body = fetch(n, b, "/style.css", host=f"{b}.{WEB_DOMAIN}:80")
    assert (status, body, h["content-type"]) == (200, b"body{}", "text/css")
    status, h, body = fetch(n, b, "/style.css", method="HEAD")
    assert status == 200 and body == b"" and h["content-length"] == "6"
    # A host equal to the bucket's name.
    status, _, body = fetch(n, b, "/", host=b)
    assert (status, body) == (200, b"<h1>home</h1>")
    # The error document, with the error's status.
    status, _, body = fetch(n, b, "/nope.html")
    assert (status, body) == (404, b"<h1>oops</h1>")
    # Routing rules: by prefix, and on a 404 under a prefix.
    status, h, _ = fetch(n, b, "/old/page.html")
    assert status == 302 and h["location"] == f"http://{b}.{WEB_DOMAIN}/new/page.html"
    status, h, _ = fetch(n, b, "/gone/x.html")
    assert status == 301 and h["location"] == "https://elsewhere.example/moved.html"
    # Writes are not served.
    status, h, _ = fetch(n, b, "/index.html", method="PUT")
    assert status == 405
    # CORS from the bucket's rules.
    status, h, _ = fetch(n, b, "/", headers={"Origin": "https://app.example"})
    assert status == 200 and h["access-control-allow-origin"] == "https://app.example"
    status, h, _ = fetch(n, b, "/", headers={"Origin": "https://evil.example"})
    assert status == 200 and "access-control-allow-origin" not in h
    # Redirect all.
    s3.put_bucket_website(Bucket=b, WebsiteConfiguration={
        "RedirectAllRequestsTo": {"HostName": "www.example.com", "Protocol": "https"}})
    status, h, _ = fetch(n, b, "/a/b.html")
    assert status == 301 and h["location"] == "https://www.example.com/a/b.html"
    # No longer a website.
    s3.delete_bucket_website(Bucket=b)
    status, _, body = fetch(n, b, "/")
    assert status == 404 and b"NoSuchWebsiteConfiguration" in body


def test_website_story_one_node(one):
    nodes, s3, _ = one
    website_story(nodes, s3, nodes[0])


def test_website_story_three_nodes_served_by_another(three):
    nodes, s3, _ = three
    website_story(nodes, s3, nodes[2])


def test_operator_allows_and_denies_a_website(one):
    nodes, s3, _ = one
    n = nodes[0]
    b = bucket_name("website-cli")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="home.html", Body=b"home", ContentType="text/html")
    s3.put_object(Bucket=b, Key="err.html", Body=b"err", ContentType="text/html")
    assert "Website: no" in n.cli("bucket", "info", b).stdout
    r = n.cli("bucket", "website", b, "--index-document", "x.html", check=False)
    assert r.returncode == 2, r
    r = n.cli("bucket", "website", b, "--allow", "--deny", check=False)
    assert r.returncode == 2, r
    n.cli("bucket", "website", b, "--allow", "-i", "home.html", "-e", "err.html")
    assert "Website: yes (index home.html, error document err.html)" in n.cli("bucket", "info", b).stdout
    assert s3.get_bucket_website(Bucket=b)["IndexDocument"] == {"Suffix": "home.html"}
    assert fetch(n, b, "/")[::2] == (200, b"home")
    assert fetch(n, b, "/missing")[::2] == (404, b"err")
    # The same operation over the admin HTTP API.
    status, _, body = admin_call(n, "POST", "/v2/UpdateBucketWebsite",
                                 body={"bucket": b, "allow": True, "index_document": "a/b"})
    assert status == 400, body
    status, _, body = admin_call(n, "POST", "/v2/UpdateBucketWebsite",
                                 body={"bucket": bucket_name("website-nobucket"), "allow": True})
    assert status == 404, body
    assert admin_ok(n, "POST", "/v2/UpdateBucketWebsite", body={"bucket": b, "allow": False}) == \
        {"name": b, "website": False}
    assert admin_ok(n, "GET", "/v2/GetBucketInfo", query={"name": b})["website"] is None
    status, _, body = fetch(n, b, "/")
    assert status == 404 and b"NoSuchWebsiteConfiguration" in body
    admin_ok(n, "POST", "/v2/UpdateBucketWebsite", body={"bucket": b, "allow": True})
    info = admin_ok(n, "GET", "/v2/GetBucketInfo", query={"name": b})["website"]
    assert info["index_document"] == "index.html" and info["error_document"] is None
    n.cli("bucket", "website", b, "--deny")
    assert "Website: no" in n.cli("bucket", "info", b).stdout


def test_a_website_is_served_under_its_aliases(three):
    nodes, s3, _ = three
    b, a = bucket_name("website-aliased"), bucket_name("www-alias")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="index.html", Body=b"<h1>aliased</h1>", ContentType="text/html")
    s3.put_bucket_website(Bucket=b, WebsiteConfiguration={"IndexDocument": {"Suffix": "index.html"}})
    nodes[1].cli("bucket", "alias", b, a)
    for n in nodes:
        for host in (f"{a}.{WEB_DOMAIN}", a):
            status, _, body = fetch(n, a, "/", host=host)
            assert (status, body) == (200, b"<h1>aliased</h1>"), (host, status, body)
    nodes[0].cli("bucket", "unalias", b, a)
    status, _, body = fetch(nodes[2], a, "/")
    assert status == 404 and b"NoSuchBucket" in body
