"""What the checks of every section share: a name or string as its bytes
(_enc) and its checks (valid_name, _check_string), an integer of a width
(_is_int), the malformed refusal (_bad), and any buffer as a flat view of
its bytes (_byte_view). It imports only spec."""

from .spec import MAX_NAME_LENGTH, U64_MAX, BundleError


def _enc(s):
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)


def valid_name(s):
    b = _enc(s)
    return 0 < len(b) <= MAX_NAME_LENGTH and b not in (b".", b"..") and not any(c in b for c in b"\0/\\")


def _check_string(s, limit, what):
    b = _enc(s)
    if not b:
        raise BundleError("bad_name", "%s is empty" % what)
    if len(b) > limit:
        raise BundleError("limit", "%s is %d bytes long, limit %d" % (what, len(b), limit))
    if b"\0" in b:
        raise BundleError("malformed", "%s holds a zero byte" % what)


def _is_int(v, lo=0, hi=U64_MAX):
    return isinstance(v, int) and lo <= v <= hi


def _bad(what, why):
    raise BundleError("malformed", "%s: %s" % (what, why))


def _byte_view(data, what):
    """data (bytes, bytearray, memoryview or any C-contiguous buffer) as a
    flat memoryview of bytes, without a copy."""
    try:
        mv = memoryview(data)
    except TypeError:
        raise BundleError("invalid_argument", "%s: data of type %s is not bytes-like" % (what, type(data).__name__))
    if not mv.c_contiguous:
        raise BundleError("invalid_argument", "%s: data is not contiguous" % what)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv
