"""The numpy codecs of onewell.quant against the block layouts of ggml, built here byte by byte from the spec.

Blocks are packed in this file with plain Python (the opposite direction of the decoders under test), so a
layout mistake in a decoder cannot be mirrored by the test. Expected values use exactly representable numbers.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from onewell.errors import UnsupportedError
from onewell.gguf import GGUFReader
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType
from onewell.quant import DEQUANTIZE_TYPES, QUANTIZE_TYPES, dequantize, quantize

T = GGMLType
F32 = np.float32


def f16(value: float) -> bytes:
    return np.float16(value).tobytes()


def u32(value: int) -> bytes:
    return struct.pack("<I", value)


def decode_one(ggml_type: GGMLType, block: bytes) -> np.ndarray:
    layout = BLOCK_LAYOUTS[ggml_type]
    assert len(block) == layout.type_size, "test bug: block built with the wrong size"
    return dequantize(ggml_type, np.frombuffer(block, np.uint8), (layout.block_size,))


# ---------------------------------------------------------------------------------------------------------------
# Hand-built blocks: one per dequantizer

def test_f32_f16_bf16_known_bit_patterns():
    raw = struct.pack("<4f", 1.0, -2.5, 3.0e38, 1e-45)
    assert decode_one(T.F32, raw[:4])[0] == 1.0
    np.testing.assert_array_equal(dequantize(T.F32, np.frombuffer(raw, np.uint8), (4,)),
                                  np.array([1.0, -2.5, 3.0e38, 1e-45], F32))
    f16_bits = struct.pack("<4H", 0x3C00, 0xC000, 0x7BFF, 0x0001)   # 1, -2, 65504, 2**-24 (smallest subnormal)
    np.testing.assert_array_equal(dequantize(T.F16, np.frombuffer(f16_bits, np.uint8), (2, 2)),
                                  np.array([[1.0, -2.0], [65504.0, 2.0**-24]], F32))
    bf16_bits = struct.pack("<4H", 0x3F80, 0xC040, 0x7F80, 0x0001)  # 1, -3, inf, 2**-133
    np.testing.assert_array_equal(dequantize(T.BF16, np.frombuffer(bf16_bits, np.uint8), (4,)),
                                  np.array([1.0, -3.0, np.inf, 2.0**-133], F32))


def test_q8_0_block():
    q = [(9 * i + 100) % 256 - 128 for i in range(32)]
    out = decode_one(T.Q8_0, f16(0.125) + struct.pack("<32b", *q))
    np.testing.assert_array_equal(out, np.array(q, F32) * F32(0.125))
    assert out[0] == 0.125 * -28 and out[15] == 0.125 * 107 and out[20] == 0.125 * -104  # int8 sign kept


def test_q4_0_block_low_nibbles_first_half():
    q = [(7 * i + 3) % 16 for i in range(32)]
    qs = bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    out = decode_one(T.Q4_0, f16(0.5) + qs)
    np.testing.assert_array_equal(out, (np.array(q, F32) - 8) * F32(0.5))
    assert out[0] == (3 - 8) * 0.5 and out[16] == ((7 * 16 + 3) % 16 - 8) * 0.5


def test_q4_1_block():
    q = [(5 * i + 1) % 16 for i in range(32)]
    qs = bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    out = decode_one(T.Q4_1, f16(0.25) + f16(-1.5) + qs)
    np.testing.assert_array_equal(out, np.array(q, F32) * F32(0.25) + F32(-1.5))
    assert out[1] == 6 * 0.25 - 1.5


def five_bit_fields(q: list[int]) -> tuple[bytes, bytes]:
    """qh (bit i = 5th bit of weight i) and qs (byte j = low nibbles of weights j and j+16) of a Q5_0/Q5_1 block."""
    qh = sum(((q[i] >> 4) & 1) << i for i in range(32))
    qs = bytes((q[j] & 15) | ((q[j + 16] & 15) << 4) for j in range(16))
    return u32(qh), qs


def test_q5_0_block_high_bits():
    q = [(11 * i + 5) % 32 for i in range(32)]
    qh, qs = five_bit_fields(q)
    out = decode_one(T.Q5_0, f16(2.0) + qh + qs)
    np.testing.assert_array_equal(out, (np.array(q, F32) - 16) * F32(2.0))
    assert out[1] == (16 - 16) * 2.0 and out[2] == (27 - 16) * 2.0


def test_q5_1_block():
    q = [(13 * i + 7) % 32 for i in range(32)]
    qh, qs = five_bit_fields(q)
    out = decode_one(T.Q5_1, f16(0.5) + f16(3.0) + qh + qs)
    np.testing.assert_array_equal(out, np.array(q, F32) * F32(0.5) + F32(3.0))


# 6-bit scales and mins of the 8 sub-blocks of a K-quant super-block; values >= 16 exercise the split high bits.
K_SCALES = [1, 63, 17, 40, 33, 2, 50, 9]
K_MINS = [0, 5, 63, 31, 48, 16, 7, 60]


def k_scales_field(scales: list[int], mins: list[int]) -> bytes:
    """The 12 packed bytes of Q4_K/Q5_K, from the layout in ggml's block_q4_K comments."""
    first = [(scales[j] & 63) | ((scales[j + 4] >> 4) << 6) for j in range(4)]
    second = [(mins[j] & 63) | ((mins[j + 4] >> 4) << 6) for j in range(4)]
    third = [(scales[j + 4] & 15) | ((mins[j + 4] & 15) << 4) for j in range(4)]
    return bytes(first + second + third)


def k_low_nibbles(q: list[int]) -> bytes:
    """128 bytes: group g holds weights 64g..64g+31 in low nibbles and 64g+32..64g+63 in high nibbles."""
    return bytes((q[64 * g + l] & 15) | ((q[64 * g + 32 + l] & 15) << 4) for g in range(4) for l in range(32))


def test_q4_k_block():
    q = [(5 * i + i // 32) % 16 for i in range(256)]
    block = f16(0.5) + f16(0.25) + k_scales_field(K_SCALES, K_MINS) + k_low_nibbles(q)
    out = decode_one(T.Q4_K, block)
    expected = [0.5 * K_SCALES[i // 32] * q[i] - 0.25 * K_MINS[i // 32] for i in range(256)]
    np.testing.assert_array_equal(out, np.array(expected, F32))
    # weight 100: sub-block 3 (scale 40, min 31), q = (500 + 3) % 16 = 7
    assert out[100] == 0.5 * 40 * 7 - 0.25 * 31
    # weight 200: sub-block 6 (scale 50, min 7; both packed across bytes 2, 6 and 10), q = (1000 + 6) % 16 = 14
    assert out[200] == 0.5 * 50 * 14 - 0.25 * 7


def test_q5_k_block():
    q = [(7 * i + 3 * (i // 32)) % 32 for i in range(256)]
    qh = bytes(sum(((q[32 * s + l] >> 4) & 1) << s for s in range(8)) for l in range(32))
    block = f16(0.25) + f16(0.5) + k_scales_field(K_SCALES, K_MINS) + qh + k_low_nibbles(q)
    out = decode_one(T.Q5_K, block)
    expected = [0.25 * K_SCALES[i // 32] * q[i] - 0.5 * K_MINS[i // 32] for i in range(256)]
    np.testing.assert_array_equal(out, np.array(expected, F32))
    assert out[255] == 0.25 * 9 * ((7 * 255 + 21) % 32) - 0.5 * 60


def test_q6_k_block():
    q = [(3 * i + i // 16) % 64 for i in range(256)]           # unsigned 6-bit, weight = (q - 32) * scale * d
    scales = [-128, 127, -1, 5, 0, 64, -33, 2, 100, -7, 11, -90, 1, 3, -2, 50]
    ql, qh = bytearray(128), bytearray(64)
    for h in range(2):
        w = q[128 * h:128 * h + 128]
        for l in range(32):
            ql[64 * h + l] = (w[l] & 15) | ((w[l + 64] & 15) << 4)
            ql[64 * h + l + 32] = (w[l + 32] & 15) | ((w[l + 96] & 15) << 4)
            qh[32 * h + l] = (w[l] >> 4) | ((w[l + 32] >> 4) << 2) | ((w[l + 64] >> 4) << 4) | ((w[l + 96] >> 4) << 6)
    block = bytes(ql) + bytes(qh) + struct.pack("<16b", *scales) + f16(0.0625)
    out = decode_one(T.Q6_K, block)
    expected = [0.0625 * scales[i // 16] * (q[i] - 32) for i in range(256)]
    np.testing.assert_array_equal(out, np.array(expected, F32))
    assert out[0] == 0.0625 * -128 * (0 - 32)


def test_blocks_follow_rows_in_order():
    """Several blocks: block k of the byte stream is elements [32k, 32k+32) of the row-major array."""
    blocks = b"".join(f16(float(k + 1)) + bytes(range(k, k + 32)) for k in range(6))
    out = dequantize(T.Q8_0, np.frombuffer(blocks, np.uint8), (3, 64))
    for k in range(6):
        np.testing.assert_array_equal(out.reshape(-1)[32 * k:32 * k + 32], np.arange(k, k + 32, dtype=F32) * (k + 1))


def test_q2_k_block():
    # scales byte g: scale g % 8 + 1 (low nibble), min g % 4 (high nibble); every quant byte 0b11100100: within
    # each 32-element run j of a half, the 2-bit quant is j (bits 2j..2j+1 of 0xE4 = 0, 1, 2, 3)
    scales = bytes(((g % 4) << 4) | (g % 8 + 1) for g in range(16))
    block = scales + bytes([0xE4]) * 64 + f16(0.5) + f16(0.25)
    out = decode_one(T.Q2_K, block)
    expected = [F32(0.5 * ((i // 16) % 8 + 1)) * F32((i // 32) % 4) - F32(0.25 * ((i // 16) % 4)) for i in range(256)]
    np.testing.assert_array_equal(out, np.array(expected, F32))


def test_q3_k_block():
    # 6-bit scales s = 32 + (index - 8): low nibbles in bytes 0-7 (scales 0-7 low, 8-15 high), top 2 bits in 8-11
    six = [32 + g - 8 for g in range(16)]
    packed = [(six[k] & 15) | ((six[k + 8] & 15) << 4) for k in range(8)]
    packed += [sum(((six[4 * t + k] >> 4) & 3) << (2 * t) for t in range(4)) for k in range(4)]
    hmask = bytes([0x0F]) * 32   # bit b of hmask[l] for element 32 b + l: set for the first half only
    block = hmask + bytes([0xE4]) * 64 + bytes(packed) + f16(0.125)
    out = decode_one(T.Q3_K, block)
    expected = []
    for i in range(256):
        q = (i // 32) % 4 - (0 if i < 128 else 4)
        expected.append(F32(0.125 * (i // 16 - 8)) * F32(q))
    np.testing.assert_array_equal(out, np.array(expected, F32))


KVALUES = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]   # ggml's kvalues_iq4nl


def test_iq4_nl_block():
    qs = bytes(j | ((15 - j) << 4) for j in range(16))   # element j: index j, element j + 16: index 15 - j
    out = decode_one(T.IQ4_NL, f16(0.5) + qs)
    np.testing.assert_array_equal(out, np.array([0.5 * KVALUES[j] for j in range(16)]
                                                + [0.5 * KVALUES[15 - j] for j in range(16)], F32))


def test_iq4_xs_block():
    six = [32 + 3 * s - 10 for s in range(8)]   # scale s - 32 = 3 s - 10
    scales_h = sum((six[s] >> 4) << (2 * s) for s in range(8))
    scales_l = bytes((six[2 * k] & 15) | ((six[2 * k + 1] & 15) << 4) for k in range(4))
    qs = b"".join(bytes(((s + j) % 16) | (((s + j + 1) % 16) << 4) for j in range(16)) for s in range(8))
    out = decode_one(T.IQ4_XS, f16(0.25) + struct.pack("<H", scales_h) + scales_l + qs)
    expected = []
    for s in range(8):
        dl = F32(0.25 * (3 * s - 10))
        expected += [dl * F32(KVALUES[(s + j) % 16]) for j in range(16)]
        expected += [dl * F32(KVALUES[(s + j + 1) % 16]) for j in range(16)]
    np.testing.assert_array_equal(out, np.array(expected, F32))


# ---------------------------------------------------------------------------------------------------------------
# float32 arithmetic order: compare with a scalar emulation of ggml's loops on random bytes

def random_blocks(ggml_type: GGMLType, n: int, fp16_offsets: list[int], seed: int) -> np.ndarray:
    layout = BLOCK_LAYOUTS[ggml_type]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(n, layout.type_size), dtype=np.uint8)
    for off in fp16_offsets:   # scales must be finite: draw them from a wide, awkward range
        values = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 2, n)).astype(np.float16)
        blocks[:, off:off + 2] = values.reshape(-1, 1).view(np.uint8)
    return blocks


def scalar_scale_min(j: int, s: np.ndarray) -> tuple[int, int]:
    if j < 4:
        return int(s[j]) & 63, int(s[j + 4]) & 63
    return (int(s[j + 4]) & 15) | ((int(s[j - 4]) >> 6) << 4), (int(s[j + 4]) >> 4) | ((int(s[j]) >> 6) << 4)


def scalar_k_reference(block: np.ndarray, five_bits: bool) -> np.ndarray:
    """ggml's dequantize_row_q4_K / q5_K for one block, one float32 operation at a time."""
    d = F32(block[0:2].view(np.float16)[0])
    dmin = F32(block[2:4].view(np.float16)[0])
    qs = block[48:176] if five_bits else block[16:144]
    qh = block[16:48]
    out = np.empty(256, F32)
    for i in range(256):
        s, l = i // 32, i % 32
        byte = int(qs[32 * (s // 2) + l])
        q = (byte & 15) if s % 2 == 0 else (byte >> 4)
        if five_bits and (int(qh[l]) >> s) & 1:
            q += 16
        sc, m = scalar_scale_min(s, block[4:16])
        out[i] = (d * F32(sc)) * F32(q) - (dmin * F32(m))
    return out


@pytest.mark.parametrize("ggml_type,five_bits", [(T.Q4_K, False), (T.Q5_K, True)])
def test_k_quants_match_scalar_float32_reference(ggml_type, five_bits):
    blocks = random_blocks(ggml_type, 4, [0, 2], seed=1)
    out = dequantize(ggml_type, blocks, (4 * 256,)).reshape(4, 256)
    for b in range(4):
        np.testing.assert_array_equal(out[b], scalar_k_reference(blocks[b], five_bits))


def test_q6_k_matches_scalar_float32_reference():
    blocks = random_blocks(T.Q6_K, 4, [208], seed=2)
    out = dequantize(T.Q6_K, blocks, (4, 256))
    for b, block in enumerate(blocks):
        d = F32(block[208:210].view(np.float16)[0])
        sc = block[192:208].view(np.int8)
        expected = np.empty(256, F32)
        for i in range(256):
            h, r = divmod(i, 128)
            quarter, l = divmod(r, 32)
            ql = int(block[64 * h + l + (32 if quarter in (1, 3) else 0)])
            low = (ql & 15) if quarter < 2 else (ql >> 4)
            top = (int(block[128 + 32 * h + l]) >> (2 * quarter)) & 3
            expected[i] = (d * F32(sc[i // 16])) * F32((low | (top << 4)) - 32)
        np.testing.assert_array_equal(out[b], expected)


@pytest.mark.parametrize("ggml_type", [T.Q4_1, T.Q5_1])
def test_offset_formats_match_scalar_float32_reference(ggml_type):
    blocks = random_blocks(ggml_type, 8, [0, 2], seed=3)
    out = dequantize(ggml_type, blocks, (8, 32))
    for b, block in enumerate(blocks):
        d, m = F32(block[0:2].view(np.float16)[0]), F32(block[2:4].view(np.float16)[0])
        qs = block[8:24] if ggml_type == T.Q5_1 else block[4:20]
        qh = int.from_bytes(bytes(block[4:8]), "little")
        for i in range(32):
            q = (int(qs[i % 16]) & 15) if i < 16 else (int(qs[i % 16]) >> 4)
            if ggml_type == T.Q5_1:
                q |= ((qh >> i) & 1) << 4
            assert out[b, i] == F32(q) * d + m


# ---------------------------------------------------------------------------------------------------------------
# Quantizers: ggml's rounding rules and round-trip error bounds

def fp16_of(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(F32)


def test_q8_0_rounds_half_away_from_zero():
    x = np.zeros(32, F32)
    x[:6] = [127.0, 0.5, -0.5, 1.5, 2.5, -2.5]          # amax 127 → d = 1, so x / d is exact
    raw = quantize(T.Q8_0, x)
    assert raw[:2].tobytes() == f16(1.0)
    assert list(raw[2:8].view(np.int8)) == [127, 1, -1, 2, 3, -3]   # numpy's rint would give 0, -0, 2, 2, -2


def test_q8_0_all_zero_block():
    raw = quantize(T.Q8_0, np.zeros((1, 32), F32))
    assert raw.tobytes() == bytes(34)


def test_q4_0_scale_from_signed_largest_magnitude():
    x = np.zeros(32, F32)
    x[0], x[5], x[9] = -4.0, 4.0, 3.0          # tie on |x|: the first one (-4) sets d = -4 / -8 = 0.5
    raw = quantize(T.Q4_0, x)
    assert raw[:2].tobytes() == f16(0.5)
    y = dequantize(T.Q4_0, raw, (32,))
    assert y[0] == -4.0 and y[9] == 3.0
    assert y[5] == 3.5                           # x/d + 8.5 = 16.5 → 16, clamped to 15 → (15 - 8) * 0.5


def test_q4_0_positive_largest_gives_negative_scale():
    x = np.linspace(-1, 2, 32, dtype=F32)
    raw = quantize(T.Q4_0, x)
    assert np.frombuffer(raw[:2].tobytes(), np.float16)[0] == np.float16(2.0 / -8)
    assert dequantize(T.Q4_0, raw, (32,))[-1] == 2.0


def test_q4_0_all_zero_block_stores_negative_zero():
    # ggml divides max = +0.0 by -8: the fp16 scale is -0.0 (0x8000), the quants are all 8
    raw = quantize(T.Q4_0, np.zeros(32, F32))
    assert raw.tobytes() == b"\x00\x80" + bytes([0x88] * 16)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_q8_0_round_trip_error_at_most_half_a_step(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((16, 256)) * 10.0 ** rng.integers(-4, 3, (16, 1))).astype(F32)
    y = dequantize(T.Q8_0, quantize(T.Q8_0, x), x.shape)
    blocks_x, blocks_y = x.reshape(-1, 32), y.reshape(-1, 32)
    d = np.abs(blocks_x).max(axis=1, keepdims=True) / F32(127)
    # half a step, plus the stored scale's fp16 rounding carried by up to 127 steps
    bound = 0.5 * d * (1 + 1e-5) + 127 * np.abs(d - fp16_of(d))
    assert (np.abs(blocks_x - blocks_y) <= bound).all()
    assert (np.abs(blocks_x - blocks_y) > 0.25 * d).any(), "suspiciously exact: is quantize a no-op?"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_q4_0_round_trip_error_bounds(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((8, 128)) * 10.0 ** rng.integers(-3, 3, (8, 1))).astype(F32)
    y = dequantize(T.Q4_0, quantize(T.Q4_0, x), x.shape)
    bx, by = x.reshape(-1, 32), y.reshape(-1, 32)
    largest = np.take_along_axis(bx, np.abs(bx).argmax(axis=1)[:, None], axis=1)
    d = largest / F32(-8)
    fp16_slack = 8 * np.abs(d - fp16_of(d))
    err = np.abs(bx - by)
    # the step is |d|; only values near -largest fall off the top of 0..15 and may be off by one full step
    clamped = bx / d + 8.5 >= 16
    assert ((err <= 0.5 * np.abs(d) * (1 + 1e-5) + fp16_slack) | clamped).all()
    assert clamped.any(), "test data should reach the clamp"
    assert (err <= np.abs(d) * (1 + 1e-5) + fp16_slack).all()
    # the largest-magnitude weight is q = 0 exactly: only the fp16 scale rounding remains
    assert (np.abs(largest - np.take_along_axis(by, np.abs(bx).argmax(axis=1)[:, None], axis=1))
            <= fp16_slack).all()


@pytest.mark.parametrize("ggml_type", [T.Q8_0, T.Q4_0])
def test_requantizing_dequantized_data_is_exact(ggml_type):
    x = np.random.default_rng(7).standard_normal((4, 512)).astype(F32)
    raw = quantize(ggml_type, x)
    again = quantize(ggml_type, dequantize(ggml_type, raw, x.shape))
    np.testing.assert_array_equal(again, raw)


def test_f16_matches_numpy_and_round_trips():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal(1000) * 1e-3, rng.standard_normal(1000) * 1e3,
                        [7e4, -7e4, 1e-8, 0.0, -0.0]]).astype(F32)
    raw = quantize(T.F16, x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(raw, x.astype("<f2").view(np.uint8))
    y = dequantize(T.F16, raw, x.shape)
    normal = (np.abs(x) >= 2.0**-14) & (np.abs(x) <= 65504)
    assert (np.abs(y - x)[normal] <= np.abs(x)[normal] * 2.0**-11).all()
    assert np.isinf(y[2000]) and np.isinf(y[2001])


def bf16_nearest_even(x: np.ndarray) -> np.ndarray:
    """Independent bf16 rounding for finite normal values: round the float64 significand to 8 bits, ties to even."""
    mantissa, exponent = np.frexp(x.astype(np.float64))      # x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    return (np.round(mantissa * 256) / 256 * 2.0**exponent).astype(F32)   # np.round: ties to even


def test_bf16_rounds_to_nearest_even_and_quiets_nan():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(4000) * 10.0 ** rng.integers(-20, 20, 4000)).astype(F32)
    ties = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-8)], F32)   # exactly halfway between bf16 values
    x = np.concatenate([x, ties])
    y = dequantize(T.BF16, quantize(T.BF16, x), x.shape)
    np.testing.assert_array_equal(y, bf16_nearest_even(x))
    np.testing.assert_array_equal(y[-3:], [1.0, 1 + 2.0**-6, -1.0])
    nan = np.frombuffer(struct.pack("<I", 0x7F800001), F32)              # a signalling NaN
    assert quantize(T.BF16, nan).view("<u2")[0] == 0x7FC0


# ---------------------------------------------------------------------------------------------------------------
# Bad input

def test_supported_type_sets():
    assert DEQUANTIZE_TYPES == {T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K,
                                T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS}
    assert QUANTIZE_TYPES == {T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K}


@pytest.mark.parametrize("ggml_type", [T.IQ2_XXS, T.IQ3_S, T.Q8_K])
def test_unsupported_type_names_the_type(ggml_type):
    with pytest.raises(UnsupportedError, match=ggml_type.name):
        dequantize(ggml_type, np.zeros(BLOCK_LAYOUTS[ggml_type].type_size, np.uint8), (256,))
    with pytest.raises(UnsupportedError, match=ggml_type.name):
        quantize(ggml_type, np.zeros(256, F32))
    with pytest.raises(UnsupportedError, match="Q2_K"):   # decoded, not encoded
        quantize(T.Q2_K, np.zeros(256, F32))


def test_unknown_type_id():
    with pytest.raises(UnsupportedError, match="unknown tensor type id 99"):
        dequantize(99, np.zeros(4, np.uint8), (1,))


def test_f32_result_is_a_writable_copy():
    raw = np.frombuffer(struct.pack("<2f", 1.0, 2.0), np.uint8)   # read-only, like a file mapping
    out = dequantize(T.F32, raw, (2,))
    out[0] = 5.0
    assert struct.unpack("<2f", raw.tobytes()) == (1.0, 2.0)


def test_wrong_byte_count_names_expected_size():
    with pytest.raises(ValueError, match="needs 68 bytes, got 67"):
        dequantize(T.Q8_0, np.zeros(67, np.uint8), (2, 32))
    with pytest.raises(ValueError, match="needs 288 bytes"):
        dequantize(T.Q4_K, np.zeros(144, np.uint8), (512,))


def test_shape_and_dtype_errors():
    with pytest.raises(ValueError, match="multiple of the block size 32"):
        dequantize(T.Q8_0, np.zeros(34, np.uint8), (2, 16))
    with pytest.raises(ValueError, match="multiple of the block size 32"):
        quantize(T.Q4_0, np.zeros((2, 48), F32))
    with pytest.raises(ValueError, match="uint8"):
        dequantize(T.F32, np.zeros(4, np.int32), (4,))
    with pytest.raises(ValueError, match="floating-point"):
        quantize(T.Q8_0, np.zeros(32, np.int32))
    x = np.zeros((2, 32), F32)
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite values \\(block 1\\)"):
        quantize(T.Q8_0, x)


def test_accepts_bytes_and_returns_requested_shape():
    out = dequantize(T.F16, f16(1.0) * 6, (1, 2, 3))
    assert out.shape == (1, 2, 3) and out.dtype == F32 and (out == 1.0).all()


# ---------------------------------------------------------------------------------------------------------------
# Real tensors of both default models

def dequantize_all(path) -> dict[str, set]:
    """Dequantize every tensor; check values, and the F16/BF16 encoders on a slice of each real weight."""
    seen: dict[str, set] = {}
    with GGUFReader(path) as reader:
        for name, info in reader.tensors.items():
            raw = reader.tensor_data(name)
            x = dequantize(info.ggml_type, raw, info.shape)
            assert x.shape == info.shape and x.dtype == F32
            assert np.isfinite(x).all(), name
            assert np.abs(x).max() > 0, name
            seen.setdefault(info.ggml_type.name, set()).add(name)
            if info.ggml_type == T.Q8_0 and x.size <= 30_000_000:
                # a ggml-made Q8_0 block has a quant of ±127, so requantizing reproduces it bit for bit
                np.testing.assert_array_equal(quantize(T.Q8_0, x), raw, err_msg=name)
            if info.ggml_type != T.F32:
                part = x.reshape(-1)[:1 << 16]
                half = quantize(T.F16, part)
                np.testing.assert_array_equal(half, part.astype("<f2").view(np.uint8))
                np.testing.assert_array_equal(dequantize(T.F16, half, part.shape), part.astype(np.float16))
                np.testing.assert_array_equal(dequantize(T.BF16, quantize(T.BF16, part), part.shape),
                                              bf16_nearest_even(part))
    return seen


@pytest.mark.model
def test_every_tensor_of_qwen_dequantizes(qwen_q4km_path):
    seen = dequantize_all(qwen_q4km_path)
    assert set(seen) == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
    assert sum(map(len, seen.values())) == 291


@pytest.mark.model
def test_every_tensor_of_smollm_dequantizes(smollm_path):
    seen = dequantize_all(smollm_path)
    assert set(seen) == {"F32", "Q4_1", "Q8_0"}
    assert sum(map(len, seen.values())) == 272
