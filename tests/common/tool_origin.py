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
# - git's "smart" HTTP protocol (gitprotocol-http(5), git-http-backend(1)):
#   under /smart/ every request is handed to `git http-backend` as a CGI
#   program (GIT_PROJECT_ROOT=ROOT, GIT_HTTP_EXPORT_ALL, PATH_INFO,
#   QUERY_STRING, REQUEST_METHOD, CONTENT_TYPE, CONTENT_LENGTH, and the
#   request's Content-Encoding / Git-Protocol as HTTP_CONTENT_ENCODING /
#   GIT_PROTOCOL, as the man page's Apache examples pass them); its CGI
#   answer (a `Status:` header when not 200, headers, blank line, body) is
#   sent back as the HTTP response.
# - cargo's sparse registry protocol (the Cargo Book, "Registry Index",
#   doc.rust-lang.org/cargo/reference/registry-index.html): under
#   /cargo/index/, config.json names `dl` (the download URL; without
#   markers cargo appends /{crate}/{version}/download) and `api`; the
#   index file of a crate of 4+ characters is at
#   {first two}/{next two}/{name}, one JSON line per version (name, vers,
#   deps, cksum = sha256 of the .crate, features, yanked); the .crate is a
#   gzipped tarball of {name}-{version}/ with the package's Cargo.toml.
#   config.json is answered per request with the `Host` the client used, so
#   `dl` names the same host the index was reached by.
import base64
import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
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


# The crate behind the sparse index.
CRATE, CRATE_VERS = "demo-crate", "1.0.0"


def build_cargo():
    files = {
        "Cargo.toml": '[package]\nname = "%s"\nversion = "%s"\nedition = "2021"\n' % (CRATE, CRATE_VERS),
        "src/lib.rs": "pub const VALUE: u32 = 1;\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("%s-%s/%s" % (CRATE, CRATE_VERS, name))
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    crate = buf.getvalue()
    dl = os.path.join(ROOT, "cargo", "dl", CRATE, CRATE_VERS)
    os.makedirs(dl, exist_ok=True)
    with open(os.path.join(dl, "download"), "wb") as f:
        f.write(crate)
    index = os.path.join(ROOT, "cargo", "index", CRATE[0:2], CRATE[2:4])
    os.makedirs(index, exist_ok=True)
    entry = {
        "name": CRATE,
        "vers": CRATE_VERS,
        "deps": [],
        "cksum": hashlib.sha256(crate).hexdigest(),
        "features": {},
        "yanked": False,
    }
    with open(os.path.join(index, CRATE), "w") as f:
        f.write(json.dumps(entry) + "\n")


build_pypi()
build_npm()
build_cargo()


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

    def do_GET(self):
        if self.path.startswith("/smart/"):
            return self.git_backend()
        if self.path == "/cargo/index/config.json":
            host = self.headers.get("Host", "")
            body = json.dumps({"dl": "http://%s/cargo/dl" % host, "api": "http://%s/cargo" % host}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        return super().do_GET()

    def do_POST(self):
        if self.path.startswith("/smart/"):
            return self.git_backend()
        self.send_error(405)

    def git_backend(self):
        path, _, query = self.path[len("/smart"):].partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": ROOT,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, stdout=subprocess.PIPE).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
