"""XXH3-64 and the format's block checksum, as the header's >>format
section's: xxHash's XXH3_64bits (seed 0, the default secret) in pure
Python, the C library's for long inputs where TRITON_BUNDLE_LIB names it,
and bundle_checksum (format 2's: XXH3-64 of the blocks' XXH3-64 values).
It imports nothing of the package."""

import os
import struct

_M = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261
_PR32_1, _PR32_2, _PR32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_MX1, _MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_S64 = [int.from_bytes(_SECRET[i:i + 8], "little") for i in range(185)]
_S32 = [int.from_bytes(_SECRET[i:i + 4], "little") for i in range(189)]


def _fold(a, b):
    p = a * b
    return (p ^ (p >> 64)) & _M


def _aval64(h):
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _aval3(h):
    h ^= h >> 37
    h = (h * _MX1) & _M
    return h ^ (h >> 32)


def _rd64(p, o):
    return int.from_bytes(p[o:o + 8], "little")


def _mix16(p, o, so):
    return _fold(_rd64(p, o) ^ _S64[so], _rd64(p, o + 8) ^ _S64[so + 8])


def _xxh3_short(p):
    n = len(p)
    if n == 0:
        return _aval64(_S64[56] ^ _S64[64])
    if n <= 3:
        c = (p[0] << 16) | (p[n >> 1] << 24) | p[n - 1] | (n << 8)
        return _aval64(c ^ (_S32[0] ^ _S32[4]))
    if n <= 8:
        in64 = int.from_bytes(p[n - 4:n], "little") + (int.from_bytes(p[0:4], "little") << 32)
        h = in64 ^ (_S64[8] ^ _S64[16])
        h ^= ((h << 49) | (h >> 15)) & _M ^ ((h << 24) | (h >> 40)) & _M
        h = (h * _MX2) & _M
        h ^= (h >> 35) + n
        h = (h * _MX2) & _M
        return h ^ (h >> 28)
    if n <= 16:
        lo = _rd64(p, 0) ^ (_S64[24] ^ _S64[32])
        hi = _rd64(p, n - 8) ^ (_S64[40] ^ _S64[48])
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _aval3((n + swapped + hi + _fold(lo, hi)) & _M)
    acc = (n * _P1) & _M
    if n <= 128:
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(p, 48, 96) + _mix16(p, n - 64, 112)
                acc += _mix16(p, 32, 64) + _mix16(p, n - 48, 80)
            acc += _mix16(p, 16, 32) + _mix16(p, n - 32, 48)
        acc += _mix16(p, 0, 0) + _mix16(p, n - 16, 16)
        return _aval3(acc & _M)
    for i in range(8):
        acc += _mix16(p, 16 * i, 16 * i)
    acc = _aval3(acc & _M)
    for i in range(8, n // 16):
        acc += _mix16(p, 16 * i, 16 * (i - 8) + 3)
    acc += _mix16(p, n - 16, 136 - 17)
    return _aval3(acc & _M)


_STRIPE = struct.Struct("<8Q")


def _accumulate(acc, p, off, so):
    d = _STRIPE.unpack_from(p, off)
    for i in range(8):
        di = d[i]
        dk = di ^ _S64[so + 8 * i]
        acc[i ^ 1] = (acc[i ^ 1] + di) & _M
        acc[i] = (acc[i] + (dk & 0xFFFFFFFF) * (dk >> 32)) & _M


def _scramble(acc):
    for i in range(8):
        a = acc[i]
        a ^= a >> 47
        a ^= _S64[128 + 8 * i]
        acc[i] = (a * _PR32_1) & _M


_NATIVE_XXH3 = None


def _native_xxh3():
    """The C library's tb_xxh3_64 when TRITON_BUNDLE_LIB names it (an
    explicit opt-in: this pure Python hashes about 10 MB/s, too slow for a
    model's hundreds of MB of weights), else None."""
    global _NATIVE_XXH3
    if _NATIVE_XXH3 is None:
        _NATIVE_XXH3 = False
        path = os.environ.get("TRITON_BUNDLE_LIB")
        if path:
            try:
                import ctypes
                lib = ctypes.CDLL(path)
                lib.tb_xxh3_64.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
                lib.tb_xxh3_64.restype = ctypes.c_uint64
                _NATIVE_XXH3 = lib.tb_xxh3_64
            except (OSError, AttributeError):
                _NATIVE_XXH3 = False
    return _NATIVE_XXH3 or None


def xxh3_64(data, native=True):
    """XXH3-64 (seed 0, the default secret): xxHash's XXH3_64bits. Long
    inputs go to the C library's when TRITON_BUNDLE_LIB names it (native)."""
    p = bytes(data)
    n = len(p)
    if n > 4096 and native and _native_xxh3():
        return _native_xxh3()(p, n)
    if n <= 240:
        return _xxh3_short(p)
    acc = [_PR32_3, _P1, _P2, _P3, _P4, _PR32_2, _P5, _PR32_1]
    blocks = (n - 1) // 1024
    for b in range(blocks):
        for s in range(16):
            _accumulate(acc, p, b * 1024 + 64 * s, 8 * s)
        _scramble(acc)
    stripes = ((n - 1) - 1024 * blocks) // 64
    for s in range(stripes):
        _accumulate(acc, p, blocks * 1024 + 64 * s, 8 * s)
    _accumulate(acc, p, n - 64, 192 - 64 - 7)
    r = (n * _P1) & _M
    for i in range(4):
        r += _fold(acc[2 * i] ^ _S64[11 + 16 * i], acc[2 * i + 1] ^ _S64[11 + 16 * i + 8])
    return _aval3(r & _M)


def bundle_checksum(data):
    """Format 2's checksum: XXH3-64 of the little-endian XXH3-64 values of
    each 1 MiB block (the last may be shorter; empty data is one block)."""
    n = len(data)
    view = memoryview(data)
    values = b"".join(struct.pack("<Q", xxh3_64(view[i:i + (1 << 20)])) for i in range(0, max(n, 1), 1 << 20))
    return xxh3_64(values)
