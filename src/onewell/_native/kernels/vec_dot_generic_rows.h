/* The generic path's row tile, shared by the files of generic kernels: it computes its nr rows one after the
 * other with the file's own dot_row_<name>(w_row, x, n_blocks). */
#ifndef OW_VEC_DOT_GENERIC_ROWS_H
#define OW_VEC_DOT_GENERIC_ROWS_H

#include "vec_dot.h"

#define OW_GENERIC_DOT(name, wblock, xblock, per_block)                                                  \
    void vec_dot_##name##_generic(OW_DOT_ARGS) {                                                         \
        for (int r = 0; r < nr; r++)                                                                     \
            s[r] = dot_row_##name((const wblock *)(w + (size_t)r * w_stride), (const xblock *)x,         \
                                  n_cols / (per_block));                                                 \
    }

#endif
