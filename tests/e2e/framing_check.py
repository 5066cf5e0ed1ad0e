"""framing_check.py - raw-socket checks of eldrd's request framing (RFC 9112,
section 6; tests/e2e/framing.sh runs it against a plain and a proxy eldrd).

Usage: framing_check.py PORT

Each bad request - a malformed Content-Length, and the Transfer-Encoding
and Content-Length mixes - is sent four ways: alone on a fresh
connection, after a valid request on a kept-alive connection (its answer
read first), pipelined behind a valid request in one write, and split
after its request line while another client holds half-sent headers
(which then gets its own answer, not this one's). The bytes
that come back, up to the server's close, must be exactly: the valid
answer (when one was sent), then one answer to the bad request - one
status line with the wanted code, Connection: close, a JSON error whose
length is its Content-Length, naming the header - and then EOF with no
byte more. Valid requests (Content-Length, chunked) are answered by the
handler and the connection stays open for another request.

The two answers libmicrohttpd still writes itself (a malformed chunk,
headers over its memory) must be well framed too.

Prints "ok - NAME" / "not ok - NAME" lines, and last "refused N": the bad
requests that libmicrohttpd refused itself (the Content-Length ones and
those two), for the caller to compare with /metrics."""
import json
import socket
import sys
import time

PORT = int(sys.argv[1])
VALID = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

# (name, header lines, wanted status, param, refused by libmicrohttpd itself)
BAD = [
    ("Content-Length: +5", [b"Content-Length: +5"], 400, "Content-Length", True),
    ("Content-Length: 5x", [b"Content-Length: 5x"], 400, "Content-Length", True),
    ("Content-Length: -1", [b"Content-Length: -1"], 400, "Content-Length", True),
    ("Content-Length: 1 2", [b"Content-Length: 1 2"], 400, "Content-Length", True),
    ("Content-Length: (empty)", [b"Content-Length:"], 400, "Content-Length", True),
    ("Content-Length: 0x5", [b"Content-Length: 0x5"], 400, "Content-Length", True),
    ("Content-Length: 5 (trailing space)", [b"Content-Length: 5 "], 400, "Content-Length", True),
    ("Content-Length: 5, 5", [b"Content-Length: 5, 5"], 400, "Content-Length", True),
    ("Content-Length: Arabic-Indic digit", ["Content-Length: \u0665".encode()], 400,
     "Content-Length", True),
    ("Content-Length: 2^64 and more", [b"Content-Length: 99999999999999999999999"], 413,
     "Content-Length", True),
    ("two Content-Length", [b"Content-Length: 5", b"Content-Length: 20"], 400,
     "Content-Length", False),
    ("Transfer-Encoding and Content-Length", [b"Transfer-Encoding: chunked",
                                              b"Content-Length: 5"], 400, "Transfer-Encoding",
     False),
    ("Transfer-Encoding and a malformed Content-Length", [b"Transfer-Encoding: chunked",
                                                          b"Content-Length: +5"], 400,
     "Transfer-Encoding", False),
    ("Transfer-Encoding: chunked, identity", [b"Transfer-Encoding: chunked, identity"], 400,
     "Transfer-Encoding", False),
    ("Transfer-Encoding: chunked, chunked", [b"Transfer-Encoding: chunked, chunked"], 400,
     "Transfer-Encoding", False),
    ("Transfer-Encoding: gzip, chunked", [b"Transfer-Encoding: gzip, chunked"], 501,
     "Transfer-Encoding", False),
    ("Transfer-Encoding: xchunked", [b"Transfer-Encoding: xchunked"], 501,
     "Transfer-Encoding", False),
]

failures = 0


def ok(name):
    print("ok - " + name)


def notok(name, why):
    global failures
    failures += 1
    print("not ok - %s\n#   %s" % (name, why.replace("\n", "\n#   ")))


def read_all(s, secs=5.0):
    """Everything until the server closes; (bytes, closed)."""
    s.settimeout(secs)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, True
            out += d
    except socket.timeout:
        return out, False
    except ConnectionResetError:
        return out, True


def read_one(s, secs=5.0):
    """The bytes of one whole answer (and any after it already come)."""
    s.settimeout(secs)
    buf = b""
    while True:
        try:
            answer(buf)
            return buf
        except ValueError:
            pass
        d = s.recv(65536)
        if not d:
            return buf
        buf += d


def answer(buf):
    """One answer off the front of buf: (status, headers dict lower-case
    -> list, body, rest), or raise ValueError."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no end of head in %r" % buf[:200])
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or parts[0] != "HTTP/1.1" or not parts[1].isdigit():
        raise ValueError("not a status line: %r" % lines[0])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        if ln.startswith("HTTP/"):
            raise ValueError("a second status line inside the head: %r" % ln)
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    if len(headers.get("content-length", [])) != 1:
        raise ValueError("Content-Length: %r" % headers.get("content-length"))
    n = int(headers["content-length"][0])
    if len(rest) < n:
        raise ValueError("body %d bytes, Content-Length %d" % (len(rest), n))
    return int(parts[1]), headers, rest[:n], rest[n:]


def request(lines):
    body = b"2\r\n{}\r\n0\r\n\r\n" if any(b"chunked" in ln for ln in lines) else b"{\"a\":"
    return b"POST /v1/finish HTTP/1.1\r\nHost: x\r\n" + b"\r\n".join(lines) + b"\r\n\r\n" + body


def check_valid_answer(name, buf):
    status, headers, _, rest = answer(buf)
    if "close" in [v.lower() for v in headers.get("connection", [])]:
        raise ValueError("the valid request's answer closes the connection")
    return rest


def check_bad(name, raw, want, param, valid_first):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    try:
        if valid_first == "kept":
            s.sendall(VALID)
            if check_valid_answer(name, read_one(s)):
                raise ValueError("bytes after the valid request's answer")
            s.sendall(raw)
        elif valid_first == "pipelined":
            s.sendall(VALID + raw)
        elif valid_first == "split":
            # the request line first, the rest later, while another client
            # holds its own headers half sent: the answer must go to this one
            other = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            other.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
            cut = raw.index(b"\r\n") + 2
            s.sendall(raw[:cut])
            time.sleep(0.05)
            s.sendall(raw[cut:])
            out, closed = read_all(s)
            other.sendall(b"\r\n")
            try:
                st, hd, _, rest = answer(read_one(other))
            finally:
                other.close()
            if st != 200 or rest:
                raise ValueError("the other client got %d (%d bytes more)" % (st, len(rest)))
        else:
            s.sendall(raw)
        if valid_first != "split":
            out, closed = read_all(s)
    finally:
        s.close()
    if not closed:
        raise ValueError("the connection stayed open after the answer")
    if valid_first == "pipelined":
        out = check_valid_answer(name, out)
    if out.count(b"HTTP/1.1 ") != 1:
        raise ValueError("%d status lines in the answer:\n%s" % (out.count(b"HTTP/1.1 "),
                                                                out.decode("latin-1")))
    status, headers, body, rest = answer(out)
    if status != want:
        raise ValueError("status %d, wanted %d" % (status, want))
    if [v.lower() for v in headers.get("connection", [])] != ["close"]:
        raise ValueError("Connection: %r" % headers.get("connection"))
    if rest:
        raise ValueError("%d bytes after the answer: %r" % (len(rest), rest[:100]))
    err = json.loads(body)["error"]
    if err["code"] != want or err["param"] != param or not err["message"]:
        raise ValueError("error object %r" % err)


refused = 0
for name, lines, want, param, by_mhd in BAD:
    for how in ("fresh", "kept", "pipelined", "split"):
        n = "%s (%s connection): one %d answer, Connection: close, EOF" % (name, how, want)
        try:
            check_bad(n, request(lines), want, param, how)
            ok(n)
        except (ValueError, OSError, KeyError, TypeError) as e:
            notok(n, str(e))
        refused += by_mhd

# the two answers libmicrohttpd still writes itself (docs/http-api.md,
# "Framing"): its HTML page, well framed too, first or after a kept request
OWN = [("a malformed chunk", b"POST /v1/finish HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
       ("headers over 32 KiB", b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 +
        b"\r\n\r\n", 431)]
for name, raw, want in OWN:
    for how in ("fresh", "pipelined"):
        n = "libmicrohttpd's own answer to %s (%s connection): one %d, Connection: close, EOF" % (
            name, how, want)
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            s.sendall(VALID + raw if how == "pipelined" else raw)
            out, closed = read_all(s)
            s.close()
            if how == "pipelined":
                out = check_valid_answer(n, out)
            st, hd, _, rest = answer(out)
            assert closed and st == want and not rest, (closed, st, rest[:100])
            assert [v.lower() for v in hd.get("connection", [])] == ["close"], hd
            ok(n)
        except (ValueError, OSError, AssertionError) as e:
            notok(n, repr(e))
        refused += 1

# valid requests: read by the handler (a 404 naming the request id: the body
# was read whole), and the connection kept for the next one
s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
body = b'{"request_id": "nope"}'
chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
s.sendall(b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body +
          b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked +
          b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nContent-Length:  5\r\n\r\n{\"a\":" + VALID)
s.settimeout(5)
buf = b""
got = []
try:
    while len(got) < 4:
        d = s.recv(65536)
        if not d:
            break
        buf += d
        while True:
            try:
                st, hd, bd, rest = answer(buf)
            except ValueError:
                break
            got.append((st, hd, bd))
            buf = rest
except socket.timeout:
    pass
s.close()
codes = [g[0] for g in got]
print("# valid requests on one connection: %s" % codes)
if len(got) == 4 and all("close" not in [v.lower() for v in g[1].get("connection", [])]
                         for g in got):
    ok("four requests on one kept-alive connection, none closing it")
else:
    notok("four requests on one kept-alive connection, none closing it", repr(got))
for i, how in enumerate(("Content-Length", "chunked")):
    name = "a %s body is read whole by the handler" % how
    try:
        e = json.loads(got[i][2])["error"]
        assert got[i][0] in (401, 404) and ("nope" in e["message"] or e["param"] == "authorization")
        ok(name)
    except (IndexError, AssertionError, ValueError, KeyError, TypeError):
        notok(name, repr(got[i] if i < len(got) else got))
try:
    assert got[2][0] in (400, 401, 404) and got[3][0] in (200, 503)
    ok("Content-Length with a leading space is read (the body then parsed), and the next request")
except (IndexError, AssertionError):
    notok("Content-Length with a leading space is read (the body then parsed), and the next request",
          repr(got))
print("refused %d" % refused)
sys.exit(0)
