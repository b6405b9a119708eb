/* A tile slot of the 32-element types on an x86 path (gemm_i8_rows_avx2.c, _vnni.c, _avx512.c): the int8 GEMM with
 * rows in the lanes (gemm_i8_rows.inc) from OW_FLOAT_GEMM_MIN_VECS vectors while float_gemm and the path's
 * rows_gemm are on, else the exact tile (which sends one vector to the decode kernel). ROWS is the GEMM to call (an
 * expression: the AVX-512 path picks its panel width), PATH an OW_ROWS_GEMM_* value. */
#ifndef ONEWELL_GEMM_I8_ROWS_SLOT_H
#define ONEWELL_GEMM_I8_ROWS_SLOT_H

#include "vec_dot.h"

#define GI_SLOT(TARGET, PATH, NAME, ROWS, TILE)                                                                     \
    TARGET void NAME(OW_TILE_ARGS) {                                                                                \
        if (n_vec >= OW_FLOAT_GEMM_MIN_VECS && ow_float_gemm() && ow_rows_gemm(PATH))                               \
            (ROWS)(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);                                       \
        else                                                                                                        \
            TILE(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);                                         \
    }

/* ... for a type without a tile on the path: below the GEMM, DOT (its decode kernel) once per vector */
#define GI_DECODE_SLOT(TARGET, PATH, NAME, ROWS, DOT)                                                               \
    static TARGET void NAME##_by_decode(OW_TILE_ARGS) {                                                             \
        ta_by_decode_kernel(DOT, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);                         \
    }                                                                                                               \
    GI_SLOT(TARGET, PATH, NAME, ROWS, NAME##_by_decode)

#endif
