/* The type-traits table: every fact about a weight or activation type in one row (ggml-cpu's type_traits style).
 *
 * Block geometry, the activation type a weight type pairs with, its row dequantizer, its activation quantizer,
 * its dot / tile kernel per kernel path, and whether the executor takes it are read from here by the matmul
 * dispatch (matvec.c), the embedding gather, the executor's checks and the Python bindings; Python derives its
 * supported sets from _core.type_traits(). The table itself is in type_traits.c; docs/kernels.md says how to add
 * a type or a kernel. */
#ifndef ONEWELL_TYPE_TRAITS_H
#define ONEWELL_TYPE_TRAITS_H

#include <stddef.h>
#include <stdint.h>

#include "matvec.h"

/* s[r] = dot(W row r, x) for nr (1..OW_ROW_TILE) rows at w, w + w_stride, ... and one activation vector x */
typedef void (*ow_vec_dot_fn)(int64_t n_cols, const uint8_t *w, size_t w_stride, int nr, const void *x, float *s);
/* the same for n_vec activation vectors at once (x + v*x_stride), writing y[v*y_stride + r]: it can reuse each
 * piece of the weights it loads from memory for every vector while it is in L1 */
typedef void (*ow_tile_fn)(int64_t n_cols, const uint8_t *w, size_t w_stride, int nr, const void *x,
                           size_t x_stride, int n_vec, float *y, int64_t y_stride);
/* n_cols floats -> one activation vector of the type */
typedef void (*ow_act_quant_fn)(const float *x, void *xq, int64_t n_cols);
/* one row of n_cols elements -> float32, bit-identical to onewell.quant.dequantize */
typedef void (*ow_dequant_row_fn)(const uint8_t *row, float *out, int64_t n_cols);
/* rows x n_cols of the type -> a repacked layout (matvec.h: ow_repack_q8_0_r16 ...); 0 or -1 */
typedef int (*ow_repack_fn)(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                            size_t dst_stride);

/* A kernel slot: the function and its name (the name is for _core.type_traits() and tests). */
typedef struct { ow_vec_dot_fn fn; const char *name; } ow_dot_slot;
/* any_rows: the tile takes every row of a matmul chunk in one call (nr up to OW_TILE_MAX_ROWS, not only
 * OW_ROW_TILE), so per-call work on the activations (the AVX2 decode kernels' scale conversion) is done
 * once per chunk instead of once per 4 rows.
 * float_gemm: 0, or the batch size from which the tile dequantizes both sides to f32 and multiplies in floats, so
 * each result equals the decode kernel's to float rounding instead of bit for bit (every other tile, and smaller
 * batches: batched = one vector at a time exactly); it still does not depend on the other vectors of the batch. */
typedef struct { ow_tile_fn fn; const char *name; int any_rows; int float_gemm; } ow_tile_slot;
#define OW_TILE_MAX_ROWS 65536
typedef struct { ow_act_quant_fn fn; const char *name; } ow_act_quant_slot;

typedef struct {
    const char *name;            /* ggml's name ("q4_K"), or onewell's for its own layouts ("q8_0_r16") */
    int64_t block_size;          /* elements per block (1 for F32/F16) */
    size_t block_bytes;          /* bytes per block; repacked layouts: per 32 elements, padding excluded */
    int act_type;                /* activation type weights of this type pair with; -1: no matmul kernel */
    int repack_to;               /* onewell layout the plan may repack this type into at load; -1: none */
    int executor_weight;         /* 1: a file tensor of this type may be an executor matrix (matmul + gather) */
    int repacked;                /* 1: onewell's own load-time layout (rows may be padded to any stride) */
    ow_dequant_row_fn to_float;  /* row dequantizer (the embedding gather); NULL: none */
    ow_repack_fn repack;         /* converts rows of this type to repack_to; NULL when repack_to is -1. On an own
                                  * layout's row (repacked): builds it from repack_from, a layout the plan makes
                                  * only when asked for it by name (Q8_0 R8 on the CPUs it was measured on) */
    int repack_from;             /* with repack on an own layout's row: the ggml type it is built from */
    /* Per kernel path (ow_kpath). An empty slot falls back along ow_kpath_fallback() to generic; at each path
     * a tile kernel wins over a dot kernel. from_float is set for activation types only. */
    ow_act_quant_slot from_float[OW_KPATH_COUNT];
    ow_dot_slot vec_dot[OW_KPATH_COUNT];
    ow_tile_slot tile[OW_KPATH_COUNT];
} ow_type_traits_t;

/* The row of type id t, NULL for an id without one. A table lookup: cheap enough for every matmul call. */
const ow_type_traits_t *ow_type_traits(int t);

/* The path an empty slot of path p falls back to (AVX-512 -> AVX2, since AVX-512 VNNI CPUs need not have
 * AVX-VNNI; AVX2-VNNI -> AVX2; AVX2 -> generic; NEON-dotprod -> NEON -> generic); -1 for generic. */
int ow_kpath_fallback(ow_kpath p);

/* The kernel weights of type t run at path p after fallback: *tile or *dot is set (the other NULL); both NULL
 * when t has no kernel. */
void ow_type_kernel(const ow_type_traits_t *t, ow_kpath p, ow_tile_slot *tile, ow_dot_slot *dot);
/* The activation quantizer of type t at path p after fallback ({NULL, NULL} if t is no activation type). */
ow_act_quant_slot ow_type_act_quant(const ow_type_traits_t *t, ow_kpath p);

/* Ids to visit every row: [0, OW_GGML_TYPE_SLOTS) and [OW_OWN_TYPE_BASE, + OW_OWN_TYPE_SLOTS) */
#define OW_GGML_TYPE_SLOTS 40
#define OW_OWN_TYPE_BASE 1008
#define OW_OWN_TYPE_SLOTS 12

/* One row of a weight table to float32 (the embedding gather). Returns 0, or -1 for a type without a row
 * dequantizer. Bit-identical to onewell.quant.dequantize. */
int ow_dequantize_row(int type, const uint8_t *row, float *out, int64_t n_cols);

#endif
