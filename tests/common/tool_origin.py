# A loopback origin for real package tools (git, pip, npm), run by
# tests/common/tool_origin.rs as its own process:
#   python3 tool_origin.py ROOT LOG
# writes the PEP 503 index (with one wheel) and the npm packument under ROOT
# (the git repository is put there by the caller), then serves the files
# under ROOT over HTTP/1.0 on 127.0.0.1 (a free port,
# printed on stdout) with the standard library's http.server, and appends
# one line per request to LOG:
#   <peer ip>:<peer port> <METHOD> <path> host=<Host header>
# so a test can check on the server's side which requests arrived, from
# which socket, and under which name.
#
# What is served is plain files; the shapes come from each protocol's spec:
# - git's "dumb" HTTP protocol (gitprotocol-http(5)): a bare repository
#   after `git update-server-info`, fetched as static files (info/refs,
#   objects/info/packs, objects/...). A static server answers
#   info/refs?service=git-upload-pack with the plain file (not
#   application/x-git-upload-pack-advertisement), which is how git tells a
#   dumb server from a smart one.
# - PEP 503 (simple repository API): /simple/<normalized name>/ is an
#   HTML page with one anchor per file, href with a #sha256= fragment; a URL
#   without its trailing slash is redirected (http.server does that for
#   directories). PEP 691 keeps text/html as the legacy form of
#   application/vnd.pypi.simple.v1+html, which is what this answers.
# - npm's registry API (npm/registry docs/responses/package-metadata.md):
#   GET /<package> answers the package document (packument) as JSON; files
#   under npm/ are served as application/json.
import base64
import hashlib
import http.server
import json
import os
import sys
import zipfile

ROOT, LOG = sys.argv[1], sys.argv[2]

# The wheel (PEP 427 / the binary distribution format spec): a zip whose
# .dist-info holds METADATA (name and version: all pip needs to resolve
# with --no-deps), WHEEL and a RECORD of urlsafe-base64 sha256 digests.
WHEEL = "demo_pkg-1.0-py3-none-any.whl"


def write_wheel(path):
    files = {
        "demo_pkg/__init__.py": "VALUE = 1\n",
        "demo_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        "demo_pkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: codewhale-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(text)))
    record.append("demo_pkg-1.0.dist-info/RECORD,,")
    files["demo_pkg-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def build_pypi():
    os.makedirs(os.path.join(ROOT, "simple", "demo-pkg"), exist_ok=True)
    os.makedirs(os.path.join(ROOT, "files"), exist_ok=True)
    wheel = os.path.join(ROOT, "files", WHEEL)
    write_wheel(wheel)
    with open(wheel, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(ROOT, "simple", "index.html"), "w") as f:
        f.write('<!DOCTYPE html>\n<html><body><a href="demo-pkg/">demo-pkg</a></body></html>\n')
    with open(os.path.join(ROOT, "simple", "demo-pkg", "index.html"), "w") as f:
        f.write('<!DOCTYPE html>\n<html><body><a href="../../files/%s#sha256=%s">%s</a></body></html>\n' % (WHEEL, sha, WHEEL))


def build_npm():
    # The full packument (npm view asks for it: the fields it prints are
    # not all in the abbreviated install-v1 form).
    version = {
        "name": "demo-pkg",
        "version": "1.0.0",
        "description": "served on loopback",
        "dist": {
            "tarball": "http://npm.test/npm/demo-pkg/-/demo-pkg-1.0.0.tgz",
            "shasum": "0" * 40,
        },
    }
    doc = {
        "_id": "demo-pkg",
        "name": "demo-pkg",
        "description": "served on loopback",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": version},
        "time": {
            "created": "2026-01-01T00:00:00.000Z",
            "modified": "2026-01-01T00:00:00.000Z",
            "1.0.0": "2026-01-01T00:00:00.000Z",
        },
    }
    os.makedirs(os.path.join(ROOT, "npm"), exist_ok=True)
    with open(os.path.join(ROOT, "npm", "demo-pkg"), "w") as f:
        json.dump(doc, f)


build_pypi()
build_npm()


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=ROOT, **kwargs)

    def guess_type(self, path):
        rel = path[len(ROOT):].lstrip("/")
        if rel.startswith("npm/"):
            return "application/json"
        return super().guess_type(path)

    def parse_request(self):
        ok = super().parse_request()
        if ok:
            peer = "%s:%d" % self.client_address[:2]
            with open(LOG, "a") as f:
                f.write("%s %s %s host=%s\n" % (peer, self.command, self.path, self.headers.get("Host", "")))
        return ok

    def log_message(self, fmt, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
