/* The element types of the executor's KV cache and the one place that writes rows into it.
 *
 *   OW_KV_F32   4 bytes per value.
 *   OW_KV_F16   IEEE binary16, rounded to nearest even (numpy astype(float16)); the default, as llama.cpp's.
 *   OW_KV_Q8_0  ggml's Q8_0 blocks along head_dim (34 bytes per 32 values: fp16 d, 32 int8), quantized as
 *               ggml's x86 quantize_row_q8_0 does (q = rint(x * 127/amax)); head_dim must be a multiple of 32.
 * A cache holds rows of n_kv = n_head_kv * head_dim values per position; a value index that is a multiple of
 * head_dim is a byte offset ow_kv_bytes(type, index), so rows and heads are addressed alike for every type.
 * The numpy twins are in onewell/runtime/kv_cache.py (round_trip, to_bytes).
 */
#ifndef ONEWELL_KV_CACHE_H
#define ONEWELL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matvec.h"
#include "ops.h"

#define OW_KV_Q8_0_BLOCK 32
#define OW_KV_Q8_0_BLOCK_BYTES 34

/* 1 if t is a KV type and head_dim suits it (q8_0: a multiple of 32). */
int ow_kv_type_ok(int t, int64_t head_dim);
/* Bytes of n values of type t (q8_0: n a multiple of 32). */
size_t ow_kv_bytes(ow_kv_type t, int64_t n);
/* Writes n values (whole heads) of src as type t at dst, which is at a value index multiple of head_dim.
 * path picks the quantizer's kernels (every path writes the same bytes). */
void ow_kv_store(ow_kv_type t, void *dst, const float *src, int64_t n, ow_kpath path);

/* Bytes of n values of type t for sizes that come from Python: -1 when n < 0, t is no KV type, q8_0's n is not
 * whole blocks, or the byte count overflows int64 (the bindings' convention, bind_sizes.h). */
static inline int64_t ow_kv_bytes_checked(int t, int64_t n) {
    int64_t r;
    if (n < 0) return -1;
    switch (t) {
    case OW_KV_F32: return __builtin_mul_overflow(n, (int64_t)4, &r) ? -1 : r;
    case OW_KV_F16: return __builtin_mul_overflow(n, (int64_t)2, &r) ? -1 : r;
    case OW_KV_Q8_0:
        if (n % OW_KV_Q8_0_BLOCK) return -1;
        return __builtin_mul_overflow(n / OW_KV_Q8_0_BLOCK, (int64_t)OW_KV_Q8_0_BLOCK_BYTES, &r) ? -1 : r;
    default: return -1;
    }
}

#endif
