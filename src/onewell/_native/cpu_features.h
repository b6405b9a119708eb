/* Which SIMD paths this CPU (and OS) can run; probed once with cpuid/xgetbv. */
#ifndef ONEWELL_CPU_FEATURES_H
#define ONEWELL_CPU_FEATURES_H

typedef enum { OW_ISA_GENERIC = 0, OW_ISA_AVX2 = 1, OW_ISA_AVX512 = 2 } ow_isa;

typedef struct {
    int avx2, fma, f16c, avx_vnni;                   /* AVX2 family */
    int avx512f, avx512bw, avx512vl, avx512_vnni;    /* AVX-512 family */
} ow_cpu_features;

const ow_cpu_features *ow_cpu(void);
/* Best ISA the CPU supports, capped by the environment variable ONEWELL_ISA (generic|avx2|avx512). */
ow_isa ow_isa_best(void);
const char *ow_isa_name(ow_isa isa);

#endif
