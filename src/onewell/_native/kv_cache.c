/* Rows into the KV cache in its element type (kv_cache.h). Not a hot loop: one row per token and layer. */
#include "kv_cache.h"

#include <string.h>

int ow_kv_type_ok(int t, int64_t head_dim) {
    if (t == OW_KV_F32 || t == OW_KV_F16) return head_dim > 0;
    if (t == OW_KV_Q8_0) return head_dim > 0 && head_dim % OW_KV_Q8_0_BLOCK == 0;
    return 0;
}

size_t ow_kv_bytes(ow_kv_type t, int64_t n) {
    switch (t) {
    case OW_KV_F16: return (size_t)n * 2;
    case OW_KV_Q8_0: return (size_t)(n / OW_KV_Q8_0_BLOCK) * OW_KV_Q8_0_BLOCK_BYTES;
    default: return (size_t)n * 4;
    }
}

void ow_kv_store(ow_kv_type t, void *dst, const float *src, int64_t n, ow_kpath path) {
    switch (t) {
    case OW_KV_F16: ow_f32_to_f16(dst, src, n); break;
    /* the activation quantizer is exactly this format (ggml's x86 quantize_row_q8_0), on every path alike */
    case OW_KV_Q8_0: ow_quantize_act_path(OW_TYPE_Q8_0, src, dst, n, path); break;
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}
