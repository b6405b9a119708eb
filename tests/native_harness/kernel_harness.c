/* C-level test of the matvec kernels without Python: runs on any CPU the core builds for (aarch64 under
 * qemu-user included) against vectors the numpy twins made (make_vectors.py has the file format).
 *
 *   kernel_harness VECTORS.bin [--expect-paths generic,neon,neon-dotprod]
 *
 * For every case and every kernel path this CPU can run: the activation quantizer must give the twin's bytes
 * exactly, the matmul (fed the twin's activation) must be within 1e-5 * M of the twin's float64 product, and
 * within 2e-5 * M of the generic path (M = |W| @ |x_hat|; the tolerances of tests/test_native_kernels.py).
 * --expect-paths fails the run unless exactly those paths are available (so a run meant to exercise a
 * fallback, or the dotprod kernels, cannot silently test something else). Exit status 0 only if all passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matvec.h"
#include "kernels/type_traits.h"

#define EXACT_RTOL 1e-5
#define PATH_RTOL 2e-5

typedef struct {
    int32_t wt, at;
    int64_t rows, cols;
    int32_t n_vec;
    uint64_t row_bytes, act_bytes;
    uint8_t *w, *act;
    float *x;
    double *exact, *mag;
} test_case;

static int read_exact(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static void *read_array(FILE *f, size_t n, int *ok) {
    void *p = malloc(n ? n : 1);
    if (!p || !read_exact(f, p, n)) *ok = 0;
    return p;
}

static int read_case(FILE *f, test_case *c) {
    int ok = read_exact(f, &c->wt, 4) && read_exact(f, &c->at, 4) && read_exact(f, &c->rows, 8) &&
             read_exact(f, &c->cols, 8) && read_exact(f, &c->n_vec, 4) && read_exact(f, &c->row_bytes, 8) &&
             read_exact(f, &c->act_bytes, 8);
    if (!ok || c->rows <= 0 || c->rows > 4096 || c->cols <= 0 || c->cols > 1 << 20 || c->n_vec <= 0 ||
        c->n_vec > 64 || c->row_bytes > (1u << 24) || c->act_bytes > (1u << 24))
        return 0;
    const size_t nv = (size_t)c->n_vec;
    c->w = read_array(f, (size_t)c->rows * c->row_bytes, &ok);
    c->x = read_array(f, nv * (size_t)c->cols * sizeof(float), &ok);
    c->act = read_array(f, nv * c->act_bytes, &ok);
    c->exact = read_array(f, nv * (size_t)c->rows * sizeof(double), &ok);
    c->mag = read_array(f, nv * (size_t)c->rows * sizeof(double), &ok);
    return ok;
}

static void free_case(test_case *c) { free(c->w); free(c->x); free(c->act); free(c->exact); free(c->mag); }

/* y for every vector on path p, fed the twin's activation bytes */
static void run_matmul(const test_case *c, ow_kpath p, float *y) {
    ow_matmul_rows_path((ow_wtype)c->wt, c->w, c->row_bytes, c->cols, c->act, c->act_bytes, c->n_vec, y, c->rows, 0,
                        c->rows, p);
}

static int check_case(const test_case *c, const int *paths, int n_paths, long *checks) {
    const ow_type_traits_t *tt = ow_type_traits(c->wt);
    const char *type = tt ? tt->name : "?";
    const size_t n_out = (size_t)c->n_vec * (size_t)c->rows;
    float *y = malloc(n_out * sizeof(float)), *y_generic = malloc(n_out * sizeof(float));
    uint8_t *act = malloc((size_t)c->n_vec * c->act_bytes + 1);
    int failures = 0;
    if (!y || !y_generic || !act || ow_act_row_bytes((ow_atype)c->at, c->cols) != c->act_bytes) {
        fprintf(stderr, "FAIL %s %lldx%lld: activation size %llu, the core says %zu\n", type, (long long)c->rows,
                (long long)c->cols, (unsigned long long)c->act_bytes, ow_act_row_bytes((ow_atype)c->at, c->cols));
        free(y); free(y_generic); free(act);
        return 1;
    }
    run_matmul(c, OW_KPATH_GENERIC, y_generic);
    for (int i = 0; i < n_paths; i++) {
        const ow_kpath p = (ow_kpath)paths[i];
        ow_tile_slot tile;
        ow_dot_slot dot;
        ow_type_kernel(tt, p, &tile, &dot);
        const char *kernel = tile.fn ? tile.name : dot.name;
        /* activation quantization: bit-exact */
        for (int v = 0; v < c->n_vec; v++)
            ow_quantize_act_path((ow_atype)c->at, c->x + (size_t)v * c->cols, act + (size_t)v * c->act_bytes,
                                 c->cols, p);
        (*checks)++;
        if (memcmp(act, c->act, (size_t)c->n_vec * c->act_bytes)) {
            fprintf(stderr, "FAIL %s %lldx%lld on %s: activation bytes differ from the twin\n", type,
                    (long long)c->rows, (long long)c->cols, ow_kpath_name(p));
            failures++;
        }
        run_matmul(c, p, y);
        for (size_t k = 0; k < n_out; k++) {
            const double err = fabs((double)y[k] - c->exact[k]), tol = EXACT_RTOL * c->mag[k] + 1e-30;
            const double diff = fabs((double)y[k] - (double)y_generic[k]), tol_path = PATH_RTOL * c->mag[k] + 1e-30;
            (*checks) += 2;
            if (!(err <= tol) || !(diff <= tol_path)) {
                fprintf(stderr, "FAIL %s %lldx%lld on %s (%s) out %zu: %.9g, twin %.9g (tol %.3g), generic %.9g\n",
                        type, (long long)c->rows, (long long)c->cols, ow_kpath_name(p), kernel ? kernel : "-", k,
                        (double)y[k], c->exact[k], tol, (double)y_generic[k]);
                failures++;
                break;
            }
        }
    }
    free(y); free(y_generic); free(act);
    return failures;
}

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--expect-paths"))) {
        fprintf(stderr, "usage: %s VECTORS.bin [--expect-paths a,b,c]\n", argv[0]);
        return 2;
    }
    int paths[OW_KPATH_COUNT], n_paths = 0;
    char names[256] = "";
    for (int p = 0; p < OW_KPATH_COUNT; p++) {
        if (!ow_kpath_available((ow_kpath)p)) continue;
        paths[n_paths++] = p;
        if (names[0]) strcat(names, ",");
        strcat(names, ow_kpath_name((ow_kpath)p));
    }
    const ow_cpu_features *f = ow_cpu();
    printf("harness: cpu neon=%d dotprod=%d i8mm=%d avx2=%d avx512f=%d; isa %s; paths %s\n", f->neon, f->dotprod,
           f->i8mm, f->avx2, f->avx512f, ow_isa_name(ow_isa_best()), names);
    if (argc == 4 && strcmp(argv[3], names)) {
        fprintf(stderr, "FAIL: expected the paths %s, this CPU has %s\n", argv[3], names);
        return 1;
    }
    FILE *fp = fopen(argv[1], "rb");
    char magic[4];
    uint32_t version, n_cases;
    if (!fp || !read_exact(fp, magic, 4) || memcmp(magic, "OWKV", 4) || !read_exact(fp, &version, 4) ||
        version != 1 || !read_exact(fp, &n_cases, 4)) {
        fprintf(stderr, "FAIL: %s is not a version-1 vectors file (make_vectors.py)\n", argv[1]);
        return 2;
    }
    int failures = 0;
    long checks = 0;
    for (uint32_t i = 0; i < n_cases; i++) {
        test_case c;
        memset(&c, 0, sizeof c);
        if (!read_case(fp, &c)) {
            fprintf(stderr, "FAIL: case %u of %s is truncated or malformed\n", i, argv[1]);
            free_case(&c);
            fclose(fp);
            return 2;
        }
        failures += check_case(&c, paths, n_paths, &checks);
        free_case(&c);
    }
    fclose(fp);
    /* which kernel each path runs, per type: shows the fallbacks that were exercised */
    for (uint32_t t = 0; t < 40; t++) {
        const ow_type_traits_t *tt = ow_type_traits((int)t);
        if (!tt || tt->act_type < 0) continue;
        printf("harness: %-5s", tt->name);
        for (int i = 0; i < n_paths; i++) {
            ow_tile_slot tile;
            ow_dot_slot dot;
            ow_type_kernel(tt, (ow_kpath)paths[i], &tile, &dot);
            printf("  %s=%s", ow_kpath_name((ow_kpath)paths[i]), tile.fn ? tile.name : dot.name ? dot.name : "-");
        }
        printf("\n");
    }
    printf("harness: %u cases x %d paths, %ld checks, %d failures\n", n_cases, n_paths, checks, failures);
    return failures ? 1 : 0;
}
